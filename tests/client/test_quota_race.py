"""The new-thread quota at its edge (issue 12): two sends racing for the last free thread of the
hour never both pass. Deterministic: the first send is stopped right after it counted, until
the second has either counted too (no lock: both would pass) or is waiting for the lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.client.sender import Sender
from agentmail.config.identity import Identity
from agentmail.errors import Refused
from agentmail.spool import Spool

from ..conftest import OPENER


def test_two_sends_at_the_quota_edge_never_both_pass(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test",
                   endpoints={"new_threads_per_hour": 2})  # fmt: skip
    AgentMail(reg, Identity("alpha"), home).send("beta", "first", OPENER)  # one of two used
    first_counted = threading.Event()
    second_arrived = threading.Event()  # counting, or waiting for the lock: either way, it is there
    counting = Sender._quota
    locking: Callable[[Spool, str], AbstractContextManager[None]] = Spool.platform_locked

    def quota(self: AgentMail) -> tuple[int, int | None, str]:
        found = counting(self)
        if self.me.agent == "one":
            first_counted.set()
            assert second_arrived.wait(60), "the second send never came"
        else:
            second_arrived.set()
        return found

    @contextmanager
    def platform_locked(self: Spool, name: str) -> Iterator[None]:
        if self.root.name == "alpha@two":
            assert first_counted.wait(60), "the first send never counted"
            second_arrived.set()  # about to wait for the lock the first send holds
        with locking(self, name):
            yield

    monkeypatch.setattr(Sender, "_quota", quota)
    monkeypatch.setattr(Spool, "platform_locked", platform_locked)
    outcomes: dict[str, str] = {}

    def send(agent: str) -> None:
        mail = AgentMail(reg, Identity("alpha", agent), home)
        try:
            outcomes[agent] = mail.send("beta", f"from {agent}", OPENER).state
        except Refused as exc:
            outcomes[agent] = f"refused: {exc}"

    workers = [threading.Thread(target=send, args=(agent,)) for agent in ("one", "two")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert outcomes["one"] == "sent"
    assert outcomes["two"].startswith("refused: new-thread quota reached: alpha opened 2 threads"), outcomes
