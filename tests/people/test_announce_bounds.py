"""What letters may make agentmail say to people is bounded (bounds.py): one sender opening many
threads that all stall never mails a follower many times — at most ANNOUNCE_PER_SENDER threads
with one counterpart a day, at most ANNOUNCE_PER_RUN announcements a run; the rest wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail import bounds
from agentmail.client.facade import AgentMail
from agentmail.config.registry import Registry

from .test_digest import DAY, FOLLOWER, Clock, clock, mailbox_of  # noqa: F401  (the fixture)
from .test_escalation import clients, followed, records  # noqa: F401  (the fixture)

MINUTE = 60


def _stalled_threads(beta: AgentMail, count: int) -> None:
    for n in range(count):
        beta.send("alpha", f"Stall {n}", f"Question {n}: why does the quota endpoint return 500?", type="question")


def test_one_sender_opening_many_stalled_threads_mails_a_follower_a_bounded_number_of_times(
    followed: Registry, home: Path, clock: Clock
) -> None:
    alpha, beta = clients(followed, home)
    _stalled_threads(beta, 10)
    alpha.sync()
    clock.advance(3 * DAY + 3600)
    for _ in range(4):  # a run a minute: the cap holds across runs, not only within one
        alpha.sync()
        clock.advance(2 * MINUTE)
    assert len(mailbox_of(home, FOLLOWER)) == bounds.ANNOUNCE_PER_SENDER
    assert {r["with"] for r in records(home)} == {"beta"} and len(records(home)) == bounds.ANNOUNCE_PER_SENDER
    clock.advance(DAY)  # the window passes: the next few, never all at once
    alpha.sync()
    assert len(mailbox_of(home, FOLLOWER)) == 2 * bounds.ANNOUNCE_PER_SENDER


def test_a_run_announces_at_most_its_bound_and_the_rest_wait_for_the_next(
    followed: Registry, home: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounds, "ANNOUNCE_PER_SENDER", 100)
    alpha, beta = clients(followed, home)
    _stalled_threads(beta, bounds.ANNOUNCE_PER_RUN + 2)
    alpha.sync()
    clock.advance(3 * DAY + 3600)
    alpha.sync()
    assert len(mailbox_of(home, FOLLOWER)) == bounds.ANNOUNCE_PER_RUN
    clock.advance(2 * MINUTE)
    alpha.sync()
    assert len(mailbox_of(home, FOLLOWER)) == bounds.ANNOUNCE_PER_RUN + 2
