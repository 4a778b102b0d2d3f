"""Every test gets its own AGENTMAIL_HOME and no inherited identity: hermetic by default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail import bus
from agentmail.client import AgentMail
from agentmail.identity import Identity
from agentmail.registry import Registry

_ENV = (
    "AGENTMAIL_HOME",
    "AGENTMAIL_REGISTRY",
    "AGENTMAIL_PLATFORM",
    "AGENTMAIL_AGENT",
    "AGENTMAIL_DKIM_KEY",
    "AGENTMAIL_USERNAME",
    "AGENTMAIL_PASSWORD",
)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENTMAIL_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    yield home


@pytest.fixture
def registry(home: Path) -> Registry:
    # No hourly new-thread cap here: many tests open dozens of threads (test_approving pins it).
    return bus.init(
        home, home / "registry", ["alpha", "beta"], domain="bus.test", endpoints={"new_threads_per_hour": 0}
    )


@pytest.fixture
def alpha(registry: Registry, home: Path) -> AgentMail:
    return AgentMail(registry, Identity("alpha"), home)


@pytest.fixture
def beta(registry: Registry, home: Path) -> AgentMail:
    return AgentMail(registry, Identity("beta"), home)


OPENER = """\
I am the agent of alpha (billing); we call beta's /quota endpoint for every invoice.
Reproduction: `curl -s https://beta.example/quota?id=7` returns status 500 with the output
"KeyError: 'plan'" since version 2.4.1 (2026-11-28). Expected 200 per the documented contract.
Blast radius: all invoices for users on the free plan. Please fix or tell us the new contract.
"""


def make_signed_letters(sender: AgentMail, to: str, n: int, label: str) -> list[tuple[str, bytes]]:
    """``n`` rendered, DKIM-signed letters (Message-ID, raw), each opening its own thread."""
    from agentmail.compose import Draft, compose
    from agentmail.model import new_thread_id

    recipient = sender.registry.get(to)
    letters = []
    for i in range(n):
        letter, raw = compose(
            sender.registry,
            sender.home,
            sender.me.platform,
            Draft(recipient.name, "question", new_thread_id(), f"{label} letter {i}", f"letter {i} of {n}\n"),
        )
        letters.append((letter.message_id, raw))
    return letters
