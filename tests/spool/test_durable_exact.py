"""``SpoolWriter.make_durable``'s answer: whether the letter's row was there to flush (or, with
``moved``, whether the move was made in that same commit)."""

from __future__ import annotations

from pathlib import Path

from agentmail.spool.store import Spool

from .test_spool import NAMES, _letter


def test_make_durable_says_whether_the_letter_was_there(tmp_path: Path) -> None:
    beta = Spool(tmp_path / "spool" / "beta", name_of=NAMES.get)
    letter, raw = _letter(1)
    filed = beta.write.store("outbox", letter, raw, durable=False)
    assert beta.write.make_durable(filed.id) is True
    assert beta.read.locate(filed.id) == "outbox"
    assert beta.write.make_durable(filed.id, moved=("outbox", "sent")) is True
    assert beta.read.locate(filed.id) == "sent"
    assert beta.write.make_durable(filed.id, moved=("outbox", "sent")) is False  # no longer in outbox
    assert beta.read.locate(filed.id) == "sent"
    beta.db.conn().execute("DELETE FROM letters WHERE id=?", (filed.id,))
    assert beta.write.make_durable(filed.id) is False
