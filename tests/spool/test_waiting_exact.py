"""The spool's side of answers that wait for their letter (stages/route.py ``awaiting-parent``):
``SpoolViews.waiting`` lists them, ``Filing.quarantine_again`` gives one today's verdict in place.
Exact answers, no client in between."""

from __future__ import annotations

from pathlib import Path

from agentmail.model import Letter
from agentmail.spool import STATES, Spool, ledger

from .test_spool import _file, _letter, _row, _spool


def _quarantined(spool: Spool, n: int, reason: str, detail: str = "") -> Letter:
    letter, raw = _letter(n)
    return spool.write.store("quarantine", letter.replace(reason=reason, detail=detail or None), raw, index=False)


def test_waiting_lists_only_the_answers_awaiting_their_letter_in_filing_order_at_most_most(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    first = _quarantined(spool, 1, "awaiting-parent")
    _quarantined(spool, 2, "not-a-party")
    _file(spool, "unread", 3)
    third = _quarantined(spool, 4, "awaiting-parent")
    assert spool.read.waiting(10) == [first.id, third.id]
    assert spool.read.waiting(1) == [first.id]
    assert spool.read.waiting(0) == []


def test_a_waiting_letter_whose_notes_are_torn_is_not_listed_and_breaks_no_query(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    torn = _quarantined(spool, 1, "awaiting-parent")
    kept = _quarantined(spool, 2, "awaiting-parent")
    with spool.db.write() as tx:
        tx.execute("UPDATE notes SET data='{not json' WHERE id=?", (torn.id,))
    assert spool.read.waiting(10) == [kept.id]


def test_quarantine_again_replaces_the_verdict_in_place_and_in_the_ledger(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    waiting = _quarantined(spool, 1, "awaiting-parent", "it waits")
    seq = _row(spool, waiting.id, "seq")
    assert spool.write.quarantine_again(waiting.id, waiting.replace(reason="not-a-party", detail="an outsider"))
    again = spool.read.letter(waiting.id)
    assert (again.state, again.reason, again.detail) == ("quarantine", "not-a-party", "an outsider")
    assert (_row(spool, waiting.id, "seq"), _row(spool, waiting.id, "thread")) == (seq, None)
    assert spool.read.annotations(waiting.id)["quarantined"]["reason"] == "not-a-party"
    assert spool.read.waiting(10) == []
    entry = ledger.read(str(spool.root), STATES)[waiting.id]
    assert entry.state == "quarantine" and entry.notes["quarantined"]["detail"] == "an outsider"


def test_quarantine_again_leaves_a_letter_no_longer_in_quarantine_alone(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    filed = _file(spool, "unread", 1)
    assert not spool.write.quarantine_again(filed.id, filed.replace(reason="not-a-party"))
    assert spool.read.letter(filed.id).state == "unread" and spool.read.letter(filed.id).reason is None
    assert "quarantined" not in spool.read.annotations(filed.id)
