"""An answer held for the letter it answers (``awaiting-parent``) is judged again and filed exactly
once (client/recheck.py ``settle``, ``_ready``), exactly: which held letters a call judges, in what
order, with what outcome, and when one has waited its time (tests/MUTATION.md, run 17)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmail import bounds
from agentmail.ages import now_ms
from agentmail.client import recheck
from agentmail.client.facade import AgentMail
from agentmail.client.receiver import Receiver
from agentmail.client.recheck import settle
from agentmail.config.registry import Registry
from agentmail.model import ulid_ms
from agentmail.transport.local import deliver

from ..stages.test_parties import box, three, written_into  # noqa: F401  (the fixture)
from ..stages.test_preemption import ANSWER, _message_id, _opener_and_answer

WAITS = "awaiting-parent"


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Deliver letters to beta one sync each, none judged again by the sync (``settle`` is the
    test's to call); each filed at least a millisecond after the one before. Returns their ids."""

    def hold(beta: AgentMail, *raws: bytes) -> list[str]:
        ids: list[str] = []
        with monkeypatch.context() as m:
            m.setattr(Receiver, "_settle", lambda self: [])
            for raw in raws:
                while ids and now_ms() <= ulid_ms(ids[-1]):
                    pass  # the next letter's id a millisecond later: "late" tells them apart
                known = {q.id for q in beta.quarantined(sync=False)} | {x.id for x in beta.inbox(sync=False)}
                deliver(beta.box.home / "postoffice" / "beta", raw)
                beta.sync()
                (new,) = [q.id for q in beta.quarantined(sync=False) + beta.inbox(sync=False) if q.id not in known]
                ids.append(new)
        return ids

    yield hold


def _outcomes(results: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(r["id"], r["outcome"], r["reason"]) for r in results]


def test_an_answer_is_judged_once_its_letter_is_filed_and_never_before(three: Registry, home: Path, held: Any) -> None:
    opener, answer, thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    (waiting,) = held(beta, answer)
    assert [(q.id, q.reason) for q in beta.quarantined(sync=False)] == [(waiting, WAITS)]
    assert settle(beta.box) == []  # its letter is not here, nor anything of its thread: not judged at all
    (filed,) = held(beta, opener)
    assert [q.id for q in beta.quarantined(sync=False)] == [waiting]
    assert settle(beta.box) == [{"id": waiting, "outcome": "filed", "reason": None, "detail": None, "filed_as": None}]
    assert settle(beta.box) == []  # once
    assert sorted(x.id for x in beta.thread(thread, sync=False)) == sorted([filed, waiting])
    assert beta.quarantined(sync=False) == []


@pytest.mark.parametrize("waited", [0, -1])
def test_an_answer_has_waited_its_time_at_exactly_answer_wait_ms(
    three: Registry, home: Path, held: Any, monkeypatch: pytest.MonkeyPatch, waited: int
) -> None:
    """Its letter never came: at ``ANSWER_WAIT_MS`` to the millisecond it is judged without it (and
    filed, the thread its own); a millisecond before, it is not judged at all."""
    _opener, answer, _thread = _opener_and_answer(three, home)
    beta = box(three, home, "beta")
    (waiting,) = held(beta, answer)
    monkeypatch.setattr(recheck, "now_ms", lambda: ulid_ms(waiting) + bounds.ANSWER_WAIT_MS + waited)
    expected = [(waiting, "filed", None)] if waited == 0 else []
    assert _outcomes(settle(beta.box)) == expected
    assert [x.id for x in beta.inbox(sync=False)] == [x for x, *_ in expected]


def _answers_and_a_squatter(reg: Registry, home: Path) -> tuple[bytes, bytes, bytes, bytes]:
    """alpha's opener to beta, alpha's two answers to it, and gamma's letter into another thread
    of alpha's (bound, its opener never sent here) answering that opener: (opener, first answer,
    gamma's letter, second answer)."""
    opener, first, thread = _opener_and_answer(reg, home)
    parent = ANSWER.replace(message_id=_message_id(opener), thread=thread, in_reply_to=None)
    second = written_into(reg, home, "alpha", "beta", parent, "question")
    _other, _answer, elsewhere = _opener_and_answer(reg, home)
    squatter = written_into(reg, home, "gamma", "beta", parent.replace(thread=elsewhere), "question")
    return opener, first, squatter, second


def test_a_window_of_one_moves_on_in_the_same_call_as_each_answer_leaves(
    three: Registry, home: Path, held: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    opener, first, _squatter, second = _answers_and_a_squatter(three, home)
    beta = box(three, home, "beta")
    one, two = held(beta, first, second)
    held(beta, opener)
    monkeypatch.setattr(bounds, "WAITING", 1)
    assert _outcomes(settle(beta.box)) == [(one, "filed", None), (two, "filed", None)]
    assert beta.quarantined(sync=False) == [] and settle(beta.box) == []


def test_a_letter_judged_that_waits_on_is_passed_over_once_a_call_not_a_stop(
    three: Registry, home: Path, held: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gamma's letter is ready (the letter it answers is filed here) yet waits on, for the opener of
    the thread it writes into. In a window of one a sender, the next pass passes it over (judged
    already this call) and judges alpha's second answer behind it; the next call judges it again."""
    opener, first, squatter, second = _answers_and_a_squatter(three, home)
    beta = box(three, home, "beta")
    one, waits, two = held(beta, first, squatter, second)
    held(beta, opener)
    monkeypatch.setattr(bounds, "WAITING", 1)
    results = settle(beta.box)
    assert _outcomes(results) == [(one, "filed", None), (waits, "quarantined", WAITS), (two, "filed", None)]
    assert str(results[1]["detail"]).startswith("it writes into ") and "whose opener is not filed here yet" in str(
        results[1]["detail"]
    )
    assert _outcomes(settle(beta.box)) == [(waits, "quarantined", WAITS)]
    assert [q.id for q in beta.quarantined(sync=False)] == [waits]
