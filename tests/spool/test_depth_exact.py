"""A letter's depth, exactly (spool/depth.py ``depth_for``): bounded work — a new letter reads its
parent's cached depth and walks no further up the chain — and a depth asked for a letter filed
already never rewrites that letter's record (tests/MUTATION.md, run 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .test_spool import _file, _letter, _row, _spool


def test_a_new_letter_reads_its_parents_cached_depth_and_no_letter_above_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = _spool(tmp_path)
    ids = [_file(spool, n=1).id]
    for n in range(2, 6):
        ids.append(_file(spool, n=n, in_reply_to=f"<{n - 1}.alpha@bus.test>").id)
    parent = json.loads(_row(spool, ids[-1], "meta"))
    assert parent["depth"] == 4
    # the cache says 7 (a chain whose first links another mailbox held): the parent's word is taken
    spool.db.conn().execute("UPDATE letters SET meta=? WHERE id=?", (json.dumps({**parent, "depth": 7}), ids[-1]))
    read: list[str] = []
    real = spool.read._record

    def counted(letter_id: str, state: str, meta: str | None) -> dict[str, Any]:
        read.append(letter_id)
        return real(letter_id, state, meta)

    monkeypatch.setattr(spool.read, "_record", counted)
    child = _file(spool, n=6, in_reply_to="<5.alpha@bus.test>")
    assert child.depth == 8
    assert read == [ids[-1]]  # one look-up, not one a link: the work is the same at any depth
    assert [json.loads(_row(spool, i, "meta"))["depth"] for i in ids] == [0, 1, 2, 3, 7]  # nothing above rewritten


def test_a_second_release_of_a_released_letter_leaves_its_record_whole(tmp_path: Path) -> None:
    """Another recheck won: the depth asked on the way finds the letter filed, and must not cache
    the few fields a depth is made of over the letter's record."""
    spool = _spool(tmp_path)
    _file(spool, n=1)
    letter, raw = _letter(2, in_reply_to="<1.alpha@bus.test>")
    held = spool.write.store("quarantine", letter.replace(reason="unauthenticated"), raw, index=False)
    assert spool.write.release(held.id, letter) is True
    record = _row(spool, held.id, "meta")
    assert json.loads(record)["depth"] == 1 and json.loads(record)["subject"] == "Letter 2"
    assert spool.write.release(held.id, letter) is False
    assert _row(spool, held.id, "meta") == record
    assert spool.read.letter(held.id).subject == "Letter 2"
