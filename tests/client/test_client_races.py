"""The client's answers when another process acts in the middle of a call (issue 15).

test_concurrency.py and test_outbound.py race real processes, so which of them loses a race,
and so which branch runs, depends on the machine's timing. Here each interleaving is forced:
the other process's step runs at the exact point between this call's look and its act (a
wrapper around the spool call that marks the point), so every test takes the losing branch
every time and states exactly what it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.errors import NotFound, Refused, Timeout

from ..conftest import OPENER
from ..helpers.approval_key import operator_key


def _after(obj: object, name: str, step: Callable[[], object], monkeypatch: pytest.MonkeyPatch, nth: int = 1) -> None:
    """``step`` (the other process) runs once, right after the ``nth`` call of ``obj.name``."""
    real = getattr(obj, name)
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == nth:
            step()
        return result

    monkeypatch.setattr(obj, name, wrapped)


def _twin(am: AgentMail) -> AgentMail:
    """Another process of the same mailbox."""
    return AgentMail(am.registry, am.me, am.home)


def test_consume_skips_a_letter_another_consumer_claimed_first(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        alpha.send("beta", f"Letter {n}", OPENER)
    beta.sync()
    first, second, third = beta.spool.read.ids("unread")
    other = _twin(beta)
    _after(beta.spool.read, "letter", lambda: other.done(first), monkeypatch)  # between listing and claiming
    got = beta.inbox(sync=False, consume=True)
    assert [x.id for x in got] == [second, third] and all(x.state == "read" for x in got)
    assert beta.spool.read.ids("unread") == [] and sorted(beta.spool.read.ids("read")) == sorted([first, second, third])


def test_consume_with_a_limit_stops_at_it(alpha: AgentMail, beta: AgentMail) -> None:
    for n in range(3):
        alpha.send("beta", f"Letter {n}", OPENER)
    got = beta.inbox(consume=True, limit=2)
    assert [x.subject for x in got] == ["Letter 0", "Letter 1"] and len(beta.spool.read.ids("unread")) == 1


def test_done_moves_nothing_another_process_marked_first(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha.send("beta", "Letter", OPENER)
    (got,) = beta.inbox()
    other = _twin(beta)
    _after(beta.spool.read, "locate", lambda: other.done(got.id), monkeypatch)  # between the look and the move
    assert beta.done(got.id) == []
    assert beta.spool.read.locate(got.id) == "read"


def test_a_reply_loses_to_a_sibling_that_answered_meanwhile(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    bob = AgentMail(beta.registry, Identity("beta", "bob"), beta.home)
    for agent in (beta, bob):
        agent.sync()  # both read before the letter comes (a new agent starts at the platform's position)
    alpha.send("beta", "Quota 500s", OPENER)
    (bobs,), (got,) = bob.inbox(), beta.inbox()
    answered: list[str] = []

    def bob_answers() -> None:
        reply = bob.reply(bobs, "Reproduced.", type="ack")
        assert reply is not None
        answered.append(reply.id)

    # the guards looked (no answer yet); bob answers before beta claims the letter
    real_claim = beta.spool.home_claims.claim_reply

    def claim(message_id: str, reply_id: str) -> AbstractContextManager[str | None]:
        if not answered:
            bob_answers()
        return real_claim(message_id, reply_id)

    monkeypatch.setattr(beta.spool.home_claims, "claim_reply", claim)
    assert beta.reply(got, "Me too.", type="ack") is None
    why = beta.why_refused(got) or ""
    assert f"already answered (by beta@bob, letter {answered[0]})" in why
    with pytest.raises(Refused, match=f"already answered \\(by beta@bob, letter {answered[0]}\\)"):
        beta.reply(got, "Me too.", type="ack", raise_refused=True)
    assert beta.spool.read.ids("outbox") == [] and beta.sent() == []
    assert beta.spool.read.locate(got.id) == "unread"  # not answered by this mailbox: still to read
    assert [x.in_reply_to for x in alpha.inbox()] == [got.message_id]  # one answer reached alpha


def test_a_follow_up_loses_to_a_sibling_that_followed_up_meanwhile(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    beta.reply(got, "Reproduced.", type="ack")
    bob = AgentMail(beta.registry, Identity("beta", "bob"), beta.home)
    bob.from_start()
    bob.sync()
    other: list[str] = []
    real_claim = beta.spool.home_claims.claim_reply

    def claim(message_id: str, reply_id: str) -> AbstractContextManager[str | None]:
        if not other:
            other.append(bob.follow_up(report.thread, "Fixed in 2.4.2.", type="fix-notice").id)
        return real_claim(message_id, reply_id)

    monkeypatch.setattr(beta.spool.home_claims, "claim_reply", claim)
    with pytest.raises(Refused, match="already answered") as refused:
        beta.follow_up(report.thread, "Fixed too.", type="fix-notice")
    assert f"already answered (by beta@bob, letter {other[0]})" in str(refused.value)
    assert [x.type for x in alpha.inbox()] == ["ack", "fix-notice"]


def test_reject_of_a_letter_approved_meanwhile_is_not_found(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = alpha.send("beta", "Quota 500s", OPENER, hold=True)
    other = _twin(alpha)
    key = operator_key(alpha.home)
    _after(alpha.spool.write, "annotate", lambda: other.approve(held.id, key_file=key), monkeypatch)  # after the look
    with pytest.raises(NotFound, match=f"letter {held.id} is not held"):
        alpha.reject(held.id, "not today")
    assert alpha.spool.read.locate(held.id) == "sent"
    (got,) = beta.inbox()
    assert got.message_id == held.message_id


def test_flush_skips_a_letter_sent_meanwhile(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha.send("beta", "First", OPENER)  # sent at once
    queued = alpha.send("beta", "Second", OPENER, hold=True)
    alpha.spool.write.move(queued.id, "held", "outbox")  # released, not yet flushed
    # listed in the outbox (under the flush lock), sent by another process before this one read it
    _after(alpha.spool.read, "ids", lambda: alpha.spool.write.move(queued.id, "outbox", "sent"), monkeypatch, nth=2)
    assert alpha.flush() == []
    assert [x.subject for x in beta.inbox()] == ["First"]


def test_a_wait_whose_time_is_up_before_it_waits_gives_up(beta: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []
    monkeypatch.setattr(beta.transport, "wait", lambda checkpoint, timeout: asked.append(timeout))
    with pytest.raises(Timeout, match="^no matching letter within 0s$"):
        beta.wait(0)
    assert asked == []  # the transport was never asked to wait


def test_a_wait_whose_transport_wait_ran_out_gives_up(beta: AgentMail, monkeypatch: pytest.MonkeyPatch) -> None:
    """The time runs out inside the transport's wait (a loaded machine: the sync took the rest)."""
    asked: list[float] = []

    def ran_out(checkpoint: str | None, timeout: float) -> None:
        asked.append(timeout)

    monkeypatch.setattr(beta.transport, "wait", ran_out)
    with pytest.raises(Timeout, match="^no matching letter within 600s$"):
        beta.wait(600)
    assert len(asked) == 1 and 0 < asked[0] <= 600
