"""watch on two machines of one platform: one run per letter (the post office's claim)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import TransportError
from agentmail.transport.base import Claimed

from ..cli.test_watch import RECORD, lines
from ..conftest import OPENER
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus
from .test_many_machines import _second_home


def test_two_machines_of_one_platform_run_a_letter_once(home: Path, tmp_path: Path, registry: Registry) -> None:
    """The standby lock is one home's: a second machine of the platform (its own home, one post
    office) ran every letter the first had run. The claim is made where both machines look."""
    out, said = tmp_path / "runs.txt", []
    other = _second_home(home, tmp_path, "machine2", share_postoffice=True)
    with AgentMail(registry, Identity("alpha"), home) as alpha:
        alpha.send("beta", "Quota", OPENER)
    with AgentMail(registry, Identity("beta"), home) as one, AgentMail(registry, Identity("beta"), other) as two:
        assert Watcher(one, RECORD.format(out=out), log=said.append).run(once=True) == 1
        assert Watcher(two, RECORD.format(out=out), log=said.append).run(once=True) == 0
        assert Watcher(two, RECORD.format(out=out), log=said.append).run(once=True) == 0  # a restart: recorded
    assert len(lines(out)) == 1, lines(out)


def test_a_letter_that_cannot_be_claimed_waits_for_the_next_look(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server cannot be asked: the letter is not run (another machine may have it), nor
    marked handled; once the claim can be made, it runs once."""
    out, said = tmp_path / "runs.txt", []
    alpha.send("beta", "Quota", OPENER)

    def down(*_args: object) -> Claimed:
        raise TransportError("connection refused")

    with monkeypatch.context() as m:
        m.setattr(beta.transport, "claim_reply", down)
        assert Watcher(beta, RECORD.format(out=out), log=said.append).run(once=True) == 0
    assert any("could not be claimed on the server (connection refused)" in x for x in said)
    assert Watcher(beta, RECORD.format(out=out), log=said.append).run(once=True) == 1
    assert Watcher(beta, RECORD.format(out=out), log=said.append).run(once=True) == 0
    assert len(lines(out)) == 1


def test_two_machines_on_one_imap_mailbox_run_a_letter_once(home: Path, tmp_path: Path) -> None:
    """The same on smtp+imap: the claim is a keyword on the letter in the shared INBOX."""
    out, said = tmp_path / "runs.txt", []
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as servers:
        reg = make_bus(home, servers, new_threads_per_hour=0)
        with AgentMail(reg, Identity("alpha"), home) as alpha:
            alpha.send("beta", "Quota", OPENER)
        other = _second_home(home, tmp_path, "machine2")
        with AgentMail(reg, Identity("beta"), home) as one, AgentMail(reg, Identity("beta"), other) as two:
            assert Watcher(one, RECORD.format(out=out), log=said.append).run(once=True) == 1
            assert Watcher(two, RECORD.format(out=out), log=said.append).run(once=True) == 0
    assert len(lines(out)) == 1, lines(out)
