"""Attack on "needs a person" once: the platform's two machines (two homes on one post office)
each announce a thread a partner let stall (docs/threat/attacks-session6.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry

from ..conftest import OPENER
from .test_digest import DAY, FOLLOWER, Clock, clock, mailbox_of  # noqa: F401  (the fixture)
from .test_escalation import followed  # noqa: F401  (the fixture)


def test_two_machines_of_a_platform_announce_a_stalled_thread_once_between_them(
    followed: Registry,  # noqa: F811
    home: Path,
    clock: Clock,  # noqa: F811
) -> None:
    (home / "postoffice").mkdir(exist_ok=True)
    other = home.parent / "home-b"
    other.mkdir()
    shutil.copytree(home / "secrets", other / "secrets")
    (other / "postoffice").symlink_to(home / "postoffice", target_is_directory=True)
    on_a, on_b = AgentMail(followed, Identity("alpha"), home), AgentMail(followed, Identity("alpha"), other)
    beta = AgentMail(followed, Identity("beta"), home)
    on_a.sync(), on_b.sync()
    beta.send("alpha", "Quota 500s", OPENER)
    on_a.sync(), on_b.sync()
    clock.advance(4 * DAY)
    on_a.sync(), on_b.sync()
    assert len(mailbox_of(home, FOLLOWER)) == 1
