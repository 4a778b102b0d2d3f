"""The statements a filing costs, exactly (issue 40: CPU per letter): a filed letter's notes are
written in one statement with no read first, and give what the read-then-write gave (the notes
and the ledger's copy of them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentmail.spool import STATES, Spool, ledger
from agentmail.spool.layout import _raw_key

from .test_spool import _letter, _spool


@contextmanager
def _statements(spool: Spool) -> Iterator[list[str]]:
    """Every statement the spool's connection runs inside the block."""
    conn = spool.db.conn()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _notes(spool: Spool, letter_id: str) -> Any:
    row = spool.db.conn().execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
    return None if row is None else json.loads(row[0])


def _post_office_copy(tmp_path: Path, raw: bytes) -> tuple[str, int, int]:
    path = tmp_path / "postoffice" / "beta" / "cur" / "000000000001:2,"
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    st_ = os.lstat(path)
    return str(path), st_.st_dev, st_.st_ino


def test_a_synced_letters_notes_are_written_in_one_statement_and_the_ledger_says_the_same(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter(1)
    copy = _post_office_copy(tmp_path, raw)
    spool.write.begin_filing()
    with _statements(spool) as seen:
        filed = spool.write.store("unread", letter, raw, defer=True, copy=copy)
    spool.write.commit()
    on_notes = [s for s in seen if " notes" in s]
    assert len(on_notes) == 1 and on_notes[0].startswith("INSERT OR IGNORE INTO notes")  # no read first
    noted = {"copy": os.path.relpath(copy[0], spool.root), "copy_key": _raw_key(raw)}
    assert _notes(spool, filed.id) == noted
    assert ledger.read(str(spool.root), STATES)[filed.id].notes == noted


def test_a_quarantined_copy_has_its_verdict_and_its_copy_noted_together(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter(1)
    copy = _post_office_copy(tmp_path, raw)
    spool.write.begin_filing()
    with _statements(spool) as seen:
        filed = spool.write.store(
            "quarantine", letter.replace(reason="unsigned"), raw, index=False, defer=True, copy=copy
        )
    spool.write.commit()
    assert len([s for s in seen if " notes" in s]) == 1
    notes = _notes(spool, filed.id)
    assert list(notes) == ["quarantined", "copy", "copy_key"]  # the verdict first, as it was written
    assert notes["quarantined"]["reason"] == "unsigned" and notes["copy_key"] == _raw_key(raw)
    assert ledger.read(str(spool.root), STATES)[filed.id].notes == notes


def test_notes_already_under_a_new_letters_id_are_kept_beside_its_own(tmp_path: Path) -> None:
    """No spool leaves them, but the merge stays what it was: the old notes and the new."""
    spool = _spool(tmp_path)
    letter, raw = _letter(1)
    with spool.db.write() as tx:
        tx.execute("INSERT INTO notes(id, data) VALUES(?, ?)", ("01aaaaaaaaaaaaaaaaaaaaaaaa", '{"left": "x"}'))
    filed = spool.write.store("quarantine", letter.replace(id="01aaaaaaaaaaaaaaaaaaaaaaaa", reason="unsigned"), raw,
                              index=False)  # fmt: skip
    notes = _notes(spool, filed.id)
    assert notes["left"] == "x" and notes["quarantined"]["reason"] == "unsigned"
    assert ledger.read(str(spool.root), STATES)[filed.id].notes["quarantined"]["reason"] == "unsigned"
