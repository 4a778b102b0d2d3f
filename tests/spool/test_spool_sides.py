"""The spool by composition: one ``Spool`` a caller opens, its reading side with no method that
changes a letter, its writing side, and the per-home reply claim under a name that says which."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.model import ulid_ms
from agentmail.spool import Spool, SpoolReader, SpoolWriter
from agentmail.spool.home_claims import HomeClaims
from agentmail.spool.layout import _raw_key

from ..conftest import OPENER
from ..helpers.opened import opened_since
from .test_spool import _file, _letter, _spool

# What changes a letter (files, moves, annotates, claims, commits): never reachable from a reader.
CHANGES = {
    "store",
    "release",
    "drop_quarantined",
    "make_durable",
    "move",
    "take",
    "annotate",
    "set_checkpoint",
    "set_copies_due",
    "begin_filing",
    "commit",
    "discard",
    "sweep_tmp",
    "claim_reply",
    "drop_caches",
    "recover",
}


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")}


def test_the_reader_has_no_method_that_changes_a_letter() -> None:
    assert not _public(SpoolReader) & CHANGES
    assert not _public(SpoolReader) & _public(SpoolWriter)  # reading lives on one side only
    assert _public(SpoolWriter) >= CHANGES - {"claim_reply", "drop_caches", "recover"}
    assert "claim_reply" in _public(HomeClaims) and {"drop_caches", "recover"} <= _public(Spool)


def test_one_reader_serves_the_spool_and_its_writer(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    assert spool.write.read is spool.read and spool.home_claims is spool.home_claims
    filed = _file(spool)
    assert spool.read.locate(filed.id) == "unread" and spool.read.mailbox == "beta"
    assert spool.read.root == spool.root and spool.read.platform_root == spool.platform_root


def test_a_reader_reads_every_agent_of_the_platform(tmp_path: Path) -> None:
    """The platform-wide views (the openers of the hour, the notes' recipients) read the siblings'
    readers, never open a writer on them."""
    mine = _spool(tmp_path)
    other = Spool(tmp_path / "spool" / "beta@ci", platform_root=mine.root)
    letter, raw = _letter(5)
    sent = other.write.store("sent", letter.replace(sender="beta", to="alpha", in_reply_to=""), raw)
    mine.ensure()
    assert opened_since(mine.read, 0) == [sent.id]


def test_reading_changes_no_truth(tmp_path: Path) -> None:
    """Every view over a spool leaves the rows that are its truth (states, notes, checkpoints) as
    they were: what a reader writes is caches."""
    spool = _spool(tmp_path)
    filed = _file(spool, "unread", 1)
    _file(spool, "sent", 2)
    spool.write.annotate(filed.id, seen="yes")
    spool.write.set_checkpoint("local", "1:1")

    def truth() -> list[object]:
        conn = spool.db.conn()
        return [
            conn.execute("SELECT id, state, seq FROM letters ORDER BY seq").fetchall(),
            conn.execute("SELECT id, data FROM notes ORDER BY id").fetchall(),
            conn.execute("SELECT transport, value FROM checkpoints").fetchall(),
        ]

    before = truth()
    read = spool.read
    for state in ("unread", "sent", "read"):
        read.ids(state)
        read.letters(state)
    read.letter(filed.id)
    read.meta(filed.id)
    read.raw(filed.id)
    read.named(filed.id[:8])
    read.threads()
    read.open_threads()
    read.thread_ids(filed.thread)
    read.note_recipients()
    read.opener_keys_since(0)
    read.opener_key_set(0)
    read.checkpoint("local")
    read.copies_due()
    assert truth() == before


def test_the_views_of_the_facade_read_through_the_reader(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota", OPENER)
    assert isinstance(beta.threads.read, SpoolReader) and beta.threads.read is beta.spool.read
    (got,) = beta.inbox()
    assert [x.subject for x in beta.thread(got.thread, sync=False)] == ["Quota"]


def test_no_two_modules_share_a_name() -> None:
    """Two modules called ``claims`` held two different claims: each name now says which."""
    package = Path(__file__).parents[2] / "agentmail"
    stems = [p.stem for p in package.rglob("*.py") if p.stem != "__init__"]
    assert sorted(s for s in set(stems) if stems.count(s) > 1) == []
    assert (package / "spool" / "home_claims.py").exists() and (package / "spool" / "server_claims.py").exists()


def test_the_reader_counts_closed_threads_without_notes(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    _file(spool, "read", 1, thread="thr-open0000000")
    _file(spool, "read", 2, thread="thr-shut0000000")
    _file(spool, "read", 3, thread="thr-shut0000000", in_reply_to="<2.alpha@bus.test>", type="close")
    _file(spool, "read", 4, thread="thr-note0000000", type="note")  # a note's thread is none
    assert spool.read.closed_threads() == 1 and spool.read.open_threads() == ["thr-open0000000"]


def test_the_openers_of_every_agent_come_keyed_once_the_oldest_first(tmp_path: Path) -> None:
    """Two mailboxes of one platform that hold one opener (a sibling's copy): counted once, at
    the older of its two times."""
    mine = _spool(tmp_path)
    other = Spool(tmp_path / "spool" / "beta@ci", platform_root=mine.root)
    letter, raw = _letter(5)
    opener = letter.replace(sender="beta", to="alpha", in_reply_to="")
    first = other.write.store("sent", opener, raw)
    again = mine.write.store("sibling", opener, raw)
    keys = mine.read.opener_keys_since(0)
    assert list(keys.values()) == [min(ulid_ms(first.id), ulid_ms(again.id))] and len(keys) == 1
    assert mine.read.opener_key_set(0) == (set(keys), min(keys.values()))


def test_a_letter_restored_meanwhile_by_another_reader_is_read_from_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A letter whose unflushed copy was lost is copied again from the post-office file it came
    from; another reader doing the same at once (the copy exists when this one writes) is no error."""
    spool = _spool(tmp_path)
    filed = _file(spool)
    raw = spool.read.raw(filed.id)
    source = tmp_path / "postoffice" / "1.eml"
    source.parent.mkdir()
    source.write_bytes(raw)
    spool.write.annotate(filed.id, copy=os.path.relpath(source, spool.root), copy_key=_raw_key(raw))
    (spool.root / "letters" / f"{filed.id}.eml").unlink()  # lost in a power cut
    real = spool.layout.write_tmp

    def racing(letter_id: str, data: bytes, durable: bool, copy: tuple[str, int, int] | None = None) -> bool:
        real(letter_id, data, durable, copy)  # the other reader's copy
        raise FileExistsError(letter_id)

    monkeypatch.setattr(spool.layout, "write_tmp", racing)
    assert spool.read.path("", filed.id) == spool.root / "tmp" / f"{filed.id}.eml"
    assert spool.read.raw(filed.id) == raw
