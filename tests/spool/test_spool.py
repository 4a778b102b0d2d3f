"""The spool (spool/store.py, spool/db.py, spool/migrate.py) on its own: exact answers of filing,
moving, batches, sweeping, dedup, reply claims, rebuilt caches and depths, and the conversion of
the per-file layout in its odd corners (torn JSON, stray files), with no client in between.

The mutation group ``spool`` (tests/MUTATION.md) runs these against the modules' mutants; the
end-to-end crash tests (test_crash.py, test_migration.py) prove the same under SIGKILL.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import agentmail
from agentmail._fs import locked
from agentmail.errors import NotFound, StorageError
from agentmail.letter import wire
from agentmail.model import Letter, new_ulid, opener_key, ulid_floor, ulid_ms
from agentmail.spool import Spool, db
from agentmail.spool.db import CURRENT, MOVING, Db
from agentmail.spool.home_claims import CLAIMS_BUILT
from agentmail.spool.layout import _key, reply_key
from agentmail.spool.views import _ulid_floor

from ..helpers.letters import burst
from ..helpers.opened import opened_since

NAMES = {"alpha@bus.test": "alpha", "beta@bus.test": "beta"}
DATE = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _spool(tmp_path: Path, name: str = "beta") -> Spool:
    return Spool(tmp_path / "spool" / name, name_of=NAMES.get)


def _letter(n: int = 1, **changes: Any) -> tuple[Letter, bytes]:
    """alpha's letter to beta (Message-ID <n.alpha@bus.test>), as filed: platform names set."""
    # a fixed Date: the same letter renders to the same bytes whenever it is rendered
    raw = wire.render(burst(message_id=f"<{n}.alpha@bus.test>", subject=f"Letter {n}", date=DATE, **changes))
    letter = wire.to_letter(wire.parse_message(raw, len(raw) + 1))  # as a sync files it: Date and all
    return letter.replace(sender="alpha", to="beta"), raw


def _file(spool: Spool, state: str = "unread", n: int = 1, **changes: Any) -> Letter:
    letter, raw = _letter(n, **changes)
    return spool.write.store(state, letter, raw)


def _row(spool: Spool, letter_id: str, column: str) -> Any:
    return spool.db.conn().execute(f"SELECT {column} FROM letters WHERE id=?", (letter_id,)).fetchone()[0]


# --- filing and moving ---------------------------------------------------------------------------


def test_a_filed_letter_is_in_one_state_with_its_file_in_letters(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter()
    filed = spool.write.store("unread", letter, raw)
    assert filed.id and filed.state == "unread" and filed.depth == 0
    assert spool.read.locate(filed.id) == "unread" and spool.read.ids("unread") == [filed.id]
    assert os.listdir(spool.root / "tmp") == [] and spool.read.raw(filed.id) == raw
    assert spool.read.path("read", filed.id) == spool.root / "letters" / f"{filed.id}.eml"
    assert spool.read.meta(filed.id)["subject"] == "Letter 1" and spool.read.meta(filed.id)["state"] == "unread"
    assert spool.read.letter(filed.id).message_id == "<1.alpha@bus.test>"
    assert _row(spool, filed.id, "thread") == "thr-abc123def0" and _row(spool, filed.id, "type") == "report"
    assert _row(spool, filed.id, "msgkey") == _key("alpha", "<1.alpha@bus.test>")
    assert _row(spool, filed.id, "rawkey") is None
    assert _row(spool, filed.id, "msgkey") == hashlib.sha256(b"alpha\0<1.alpha@bus.test>").hexdigest()[:40]
    assert "state" not in json.loads(_row(spool, filed.id, "meta"))  # the row's column is the truth
    assert spool.read.threads() == ["thr-abc123def0"] and spool.read.open_threads() == ["thr-abc123def0"]
    assert spool.read.thread_ids("thr-abc123def0") == [filed.id]
    # the id a letter brings is kept
    kept = spool.write.store("read", letter.replace(id="01KEPT"), raw)
    assert kept.id == "01KEPT" and spool.read.locate("01KEPT") == "read"
    extra = spool.write.store("sent", letter.replace(id="01EXTRA"), raw, extra={"held_reason": "asked"})
    assert spool.read.meta(extra.id)["held_reason"] == "asked"  # what the file does not say is kept


def test_move_is_conditional_on_the_source_state(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    filed = _file(spool)
    assert spool.write.move(filed.id, "unread", "read") is True
    assert spool.write.move(filed.id, "unread", "read") is False  # someone else moved it first
    assert (
        spool.read.locate(filed.id) == "read"
        and spool.read.ids("unread") == []
        and spool.read.ids("read") == [filed.id]
    )
    assert (
        spool.write.move(filed.id, "read", "unread", durable=False) is True and spool.read.locate(filed.id) == "unread"
    )
    assert spool.write.move("01NOSUCH", "unread", "read") is False


def test_ids_of_type_lists_one_state_and_type_oldest_first(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    report = _file(spool, n=1)
    person = [_file(spool, n=n) for n in (2, 3)]
    for letter in person:  # what a person's letter is filed as: type human (its row and its meta)
        spool.db.conn().execute("UPDATE letters SET type='human' WHERE id=?", (letter.id,))
    spool.write.move(person[1].id, "unread", "read")
    assert spool.read.ids_of_type("unread", "human") == [person[0].id]
    assert spool.read.ids_of_type("read", "human") == [person[1].id]
    assert spool.read.ids_of_type("unread", report.type) == [report.id]
    assert spool.read.ids_of_type("sent", "human") == []


def test_take_moves_only_what_is_still_in_the_source(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    a, b, c = (_file(spool, n=n).id for n in (1, 2, 3))
    assert spool.write.move(c, "unread", "read")
    assert sorted(spool.write.take([a, b, c, "01NOSUCH"], "unread", "read")) == sorted([a, b])
    assert spool.write.take([a, b], "unread", "read") == []  # a second claimer gets nothing
    assert spool.write.take([], "unread", "read") == []
    assert spool.read.ids("read") == sorted([a, b, c]) and spool.read.ids("unread") == []


def test_lookups_of_what_is_not_there(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    filed = _file(spool)
    assert spool.read.locate("../" + filed.id) is None and spool.read.locate("") is None
    for missing in ("01NOSUCH", "../x"):
        with pytest.raises(NotFound, match=f"no letter {missing}"):
            spool.read.raw(missing)
        with pytest.raises(NotFound, match=f"no letter {missing}"):
            spool.read.meta(missing)
    assert spool.read.path("unread", "01NOSUCH") == spool.root / "letters" / "01NOSUCH.eml"


def test_a_quarantined_letter_is_found_by_its_bytes_and_opens_no_thread(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter()
    held = spool.write.store("quarantine", letter.replace(reason="unsigned", detail="no signature"), raw, index=False)
    assert _row(spool, held.id, "thread") is None and _row(spool, held.id, "msgkey") is None
    assert _row(spool, held.id, "rawkey") == hashlib.sha256(raw).hexdigest()[:40]  # as earlier releases wrote it
    assert spool.read.threads() == [] and spool.read.thread_ids("thr-abc123def0") == []
    assert spool.read.has_bytes(raw) is True and spool.read.has_bytes(raw + b"x") is False
    assert spool.read.known("alpha", "<1.alpha@bus.test>") is None
    answering, answering_raw = _letter(9, in_reply_to="<1.alpha@bus.test>")
    spool.write.store("unread", *_letter(1))
    assert spool.write.store("quarantine", answering.replace(reason="unsigned"), answering_raw, index=False).depth == 0
    deferred = _letter(10)
    spool.write.store("quarantine", deferred[0].replace(reason="unsigned"), deferred[1], index=False, defer=True)
    spool.write.commit()
    assert spool.read.has_bytes(deferred[1]) is True
    assert (
        spool.read.has_bytes(raw, "alpha", None) is True
        and spool.read.has_bytes(raw, None, "<1.alpha@bus.test>") is True
    )
    assert spool.read.annotations(held.id)["quarantined"]["reason"] == "unsigned"
    assert "depth" not in spool.read.meta(held.id) and spool.read.meta(held.id)["reason"] == "unsigned"


def test_has_bytes_by_sender_and_message_id(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter()
    filed = spool.write.store("unread", letter, raw)
    assert spool.read.known("alpha", "<1.alpha@bus.test>") == filed.id
    assert spool.read.has_bytes(raw, "alpha", "<1.alpha@bus.test>") is True
    assert spool.read.has_bytes(raw + b"x", "alpha", "<1.alpha@bus.test>") is False  # same id, other bytes
    assert spool.read.has_bytes(raw, "alpha", "<2.alpha@bus.test>") is False
    assert spool.read.has_bytes(raw) is False  # an indexed letter's bytes are not hashed
    (spool.root / "letters" / f"{filed.id}.eml").unlink()  # its file lost: not the same letter
    assert spool.read.has_bytes(raw, "alpha", "<1.alpha@bus.test>") is False


def test_threads_open_close_and_notes(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    _file(spool, n=1, thread="thr-one0000000")
    _file(spool, n=2, thread="thr-two0000000")
    _file(spool, n=3, thread="thr-one0000000", type="close")
    _file(spool, n=4, thread="thr-two0000000", type="note")  # a note neither opens nor closes
    _file(spool, n=5, thread="thr-note000000", type="note")  # a thread of only a note: known, not open
    assert spool.read.threads() == ["thr-note000000", "thr-one0000000", "thr-two0000000"]
    assert spool.read.open_threads() == ["thr-two0000000"]
    _file(spool, n=6, thread="thr-one0000000")  # a letter after the close opens it again
    assert spool.read.open_threads() == ["thr-one0000000", "thr-two0000000"]


# --- sync batches --------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 6])  # fsync per file, and one syncfs for a larger batch
def test_a_batch_appears_at_its_commit_all_at_once(tmp_path: Path, count: int) -> None:
    spool = _spool(tmp_path).ensure()
    other = _spool(tmp_path)  # another process's view: its own connection
    filed = [spool.write.store("unread", *_letter(n), defer=True) for n in range(count)]
    assert other.read.ids("unread") == []
    assert sorted(os.listdir(spool.root / "tmp")) == sorted(f"{x.id}.eml" for x in filed)
    assert spool.read.path("unread", filed[0].id) == spool.root / "tmp" / f"{filed[0].id}.eml"
    spool.write.commit()
    assert other.read.ids("unread") == sorted(x.id for x in filed)
    assert os.listdir(spool.root / "tmp") == []
    assert sorted(os.listdir(spool.root / "letters")) == sorted(f"{x.id}.eml" for x in filed)
    spool.write.commit()  # nothing open: nothing to do
    assert other.read.ids("unread") == sorted(x.id for x in filed)


def test_a_discarded_batch_leaves_nothing_and_the_next_one_commits(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    lost = [spool.write.store("unread", *_letter(n), defer=True) for n in (1, 2)]
    spool.write.discard()
    assert spool.read.ids("unread") == [] and os.listdir(spool.root / "tmp") == []
    assert spool.read.locate(lost[0].id) is None and spool.read.threads() == []
    again = spool.write.store("unread", *_letter(1), defer=True)
    spool.write.commit()
    assert spool.read.ids("unread") == [again.id] and spool.read.known("alpha", "<1.alpha@bus.test>") == again.id


def test_a_commit_that_fails_discards_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = _spool(tmp_path).ensure()
    filed = [spool.write.store("unread", *_letter(n), defer=True) for n in (1, 2)]

    def fail(point: str) -> None:
        if point == "batch-durable":
            raise OSError("I/O error")

    monkeypatch.setattr(db, "crash_point", fail)
    with pytest.raises(OSError, match="I/O error"):
        spool.write.commit()
    monkeypatch.setattr(db, "crash_point", None)
    assert spool.read.ids("unread") == [] and os.listdir(spool.root / "tmp") == []
    assert spool.read.locate(filed[0].id) is None and spool.write._batch == []
    spool.write.commit()  # the failed batch is gone: nothing to commit
    assert spool.read.ids("unread") == []


def test_the_commit_points_come_in_order_and_each_where_its_name_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/system/test_crash.py SIGKILLs a sync at each of these points by name: each must be reached
    once, in this order, with the letter files where the name says."""
    spool = _spool(tmp_path).ensure()
    seen: list[tuple[str, int, int]] = []

    def point(name: str) -> None:
        seen.append((name, len(os.listdir(spool.root / "tmp")), len(os.listdir(spool.root / "letters"))))

    monkeypatch.setattr(db, "crash_point", point)
    for n in (1, 2, 3):
        spool.write.store("unread", *_letter(n), defer=True)
    spool.write.commit()
    spool.write.set_checkpoint("local", "v:3")
    _file(spool, n=4)
    assert seen == [
        ("filed-unindexed", 1, 0),  # inside each letter's insert: its row in, its index rows not yet
        ("filed-unindexed", 2, 0),
        ("filed-unindexed", 3, 0),
        ("batch-durable", 3, 0),
        ("batch-committed", 3, 0),
        ("batch-publishing", 2, 1),  # after the first file's rename
        ("batch-published", 0, 3),
        ("checkpoint-set", 0, 3),
        ("filed-unindexed", 1, 3),
        ("stored", 1, 3),  # the row is committed, the file not yet renamed
    ]


def test_a_discarded_letter_whose_file_is_already_gone_is_no_error(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    gone = spool.write.store("unread", *_letter(1), defer=True)
    kept = spool.write.store("unread", *_letter(2), defer=True)
    (spool.root / "tmp" / f"{gone.id}.eml").unlink()
    spool.write.discard()
    assert (
        os.listdir(spool.root / "tmp") == [] and spool.read.ids("unread") == [] and spool.read.locate(kept.id) is None
    )


def test_a_batch_without_letters_commits_its_other_writes(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    spool.db.begin_batch()  # a sync whose every letter was a duplicate: only its checkpoint moves
    spool.write.set_checkpoint("local", "v:3")
    assert _spool(tmp_path).read.checkpoint("local") is None
    spool.write.commit()
    assert _spool(tmp_path).read.checkpoint("local") == "v:3" and os.listdir(spool.root / "letters") == []


def test_a_write_inside_a_batch_joins_it(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    deferred = spool.write.store("unread", *_letter(1), defer=True)
    spool.write.set_checkpoint("local", "v:1")  # joins the open batch: not committed on its own
    spool.write.discard()
    assert spool.read.checkpoint("local") is None and spool.read.locate(deferred.id) is None


# --- sweeping tmp/ -------------------------------------------------------------------------------


def test_sweep_finishes_a_committed_letter_and_removes_only_old_strays(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    filed = _file(spool)
    os.rename(spool.root / "letters" / f"{filed.id}.eml", spool.root / "tmp" / f"{filed.id}.eml")  # rename lost
    assert spool.read.raw(filed.id) == _letter()[1]  # read from tmp/ meanwhile
    old, fresh, odd = (spool.root / "tmp" / n for n in ("01OLDSTRAY.eml", "01FRESH.eml", "junk"))
    for path in (old, fresh, odd):
        path.write_bytes(b"x")
    an_hour_ago = time.time() - 3601
    os.utime(old, (an_hour_ago, an_hour_ago))
    os.utime(odd, (an_hour_ago, an_hour_ago))
    link = spool.root / "tmp" / "01LINK.eml"
    link.symlink_to(spool.root / "tmp" / "nowhere")  # dangling: its own age counts, not a target's
    os.utime(link, (an_hour_ago, an_hour_ago), follow_symlinks=False)
    just_over = spool.root / "tmp" / "01JUSTOVER.eml"
    just_over.write_bytes(b"x")
    os.utime(just_over, (time.time() - 3600.5, time.time() - 3600.5))
    spool.write.sweep_tmp()
    assert sorted(os.listdir(spool.root / "tmp")) == ["01FRESH.eml"]
    assert (spool.root / "letters" / f"{filed.id}.eml").read_bytes() == _letter()[1]
    spool.write.sweep_tmp(older_than=0)
    assert os.listdir(spool.root / "tmp") == []


def test_sweep_of_a_spool_without_tmp_does_nothing(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    spool.write.sweep_tmp()
    assert not spool.root.exists()


def test_sweep_tolerates_a_file_that_vanishes_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spool = _spool(tmp_path).ensure()
    stray = spool.root / "tmp" / "01GONE.eml"
    stray.write_bytes(b"x")
    real_locate = spool.read.locate

    def locate(letter_id: str) -> str | None:
        stray.unlink()  # another process's sweep took it between the listing and the stat
        return real_locate(letter_id)

    monkeypatch.setattr(spool.read, "locate", locate)
    spool.write.sweep_tmp(older_than=0)
    assert os.listdir(spool.root / "tmp") == []


def test_publishing_twice_is_harmless_and_a_lost_file_is_an_error(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    filed = _file(spool)
    spool.write._publish(filed.id)  # already in letters/ (another process finished it)
    assert spool.read.raw(filed.id) == _letter()[1]
    (spool.root / "letters" / f"{filed.id}.eml").unlink()
    with pytest.raises(FileNotFoundError):
        spool.write._publish(filed.id)


def test_one_syncer_per_mailbox_and_one_quota_holder_per_platform(tmp_path: Path) -> None:
    beta = _spool(tmp_path)
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root).ensure()
    with beta.locked():
        with pytest.raises(BlockingIOError), locked(beta.root / "sync.lock", wait=False):
            pass
        with locked(bob.root / "sync.lock", wait=False):  # another mailbox's syncer goes on
            pass
    with bob.platform_locked("quota"), pytest.raises(BlockingIOError), locked(beta.root / "quota.lock", wait=False):
        pass
    with locked(beta.root / "sync.lock", wait=False), locked(beta.root / "quota.lock", wait=False):
        pass  # both released


# --- notes, checkpoints --------------------------------------------------------------------------


def test_annotations_are_kept_per_letter_and_shown_for_outgoing_letters_only(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    sent = _file(spool, "sent", n=1)
    read = _file(spool, "read", n=2)
    assert spool.read.annotations(sent.id) == {}
    spool.write.annotate(sent.id, undeliverable="550 no such user")
    spool.write.annotate(sent.id, undeliverable="550 no such user")  # the same again: one value
    spool.write.annotate(sent.id, durable=False, queued="smtp down")
    spool.write.annotate(read.id, queued="x")
    conn = spool.db.conn()
    changes = conn.total_changes
    with spool.db.write() as tx:  # what another process annotated meanwhile: not written again
        spool.write._annotate(tx, sent.id, {"undeliverable": "550 no such user"})
    assert conn.total_changes == changes
    assert spool.read.annotations(sent.id) == {"undeliverable": "550 no such user", "queued": "smtp down"}
    assert (
        spool.read.meta(sent.id)["undeliverable"] == "550 no such user"
        and spool.read.meta(sent.id)["queued"] == "smtp down"
    )
    assert "queued" not in spool.read.meta(read.id)
    assert spool.read.letter(sent.id).extra == {"undeliverable": "550 no such user", "queued": "smtp down"}
    assert [x.extra for x in spool.read.letters("sent")] == [
        {"undeliverable": "550 no such user", "queued": "smtp down"}
    ]
    spool.db.conn().execute("UPDATE notes SET data='not json' WHERE id=?", (sent.id,))
    assert spool.read.annotations(sent.id) == {} and "undeliverable" not in spool.read.meta(sent.id)
    spool.write.annotate(sent.id, failed="yes")
    assert spool.read.annotations(sent.id) == {"failed": "yes"}


def test_checkpoints_per_transport(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    assert spool.read.checkpoint("local") is None
    spool.write.set_checkpoint("local", "123:4")
    spool.write.set_checkpoint("imap", "9:9")
    assert (spool.read.checkpoint("local"), spool.read.checkpoint("imap")) == ("123:4", "9:9")
    spool.write.set_checkpoint("local", None)
    assert spool.read.checkpoint("local") is None and spool.read.checkpoint("imap") == "9:9"
    assert _spool(tmp_path).read.checkpoint("imap") == "9:9"  # committed, seen by another connection


# --- rebuilt caches and depths -------------------------------------------------------------------


def test_a_lost_cache_is_parsed_again_with_the_same_answers(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    filed = _file(spool, "sent", n=1)
    before = spool.read.meta(filed.id)
    spool.db.conn().execute("UPDATE letters SET meta=NULL")
    after = spool.read.meta(filed.id)
    assert after == before
    assert json.loads(_row(spool, filed.id, "meta"))["subject"] == "Letter 1"  # written back
    assert "state" not in json.loads(_row(spool, filed.id, "meta"))
    spool.db.conn().execute("UPDATE letters SET meta='[1, 2]'")  # JSON, but no fields: parsed again
    assert spool.read.meta(filed.id) == before
    spool.db.conn().execute("UPDATE letters SET meta='{\"torn'")
    assert spool.read.letters("sent")[0].to_json() == spool.read.letter(filed.id).to_json()
    assert spool.read.meta(filed.id) == before


def test_a_cache_without_depth_gets_it(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    parent = _file(spool, n=1)
    child = _file(spool, n=2, in_reply_to="<1.alpha@bus.test>")
    assert (spool.read.meta(parent.id)["depth"], spool.read.meta(child.id)["depth"]) == (0, 1)
    for letter_id in (parent.id, child.id):
        data = json.loads(_row(spool, letter_id, "meta"))
        del data["depth"]
        spool.db.conn().execute("UPDATE letters SET meta=? WHERE id=?", (json.dumps(data), letter_id))
    assert spool.read.meta(child.id)["depth"] == 1  # the parent's depth is walked to, and cached too
    assert json.loads(_row(spool, parent.id, "meta"))["depth"] == 0
    assert json.loads(_row(spool, child.id, "meta"))["depth"] == 1


def test_depth_follows_the_local_reply_chain_and_counts_only_references_filed_here(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    a = _file(spool, n=1)
    b = _file(spool, n=2, in_reply_to="<1.alpha@bus.test>")
    c = _file(spool, n=3, in_reply_to="<2.alpha@bus.test>")
    assert [a.depth, b.depth, c.depth] == [0, 1, 2]
    refs = tuple(f"<r{i}@x>" for i in range(5))
    d = _file(spool, n=4, in_reply_to="<3.alpha@bus.test>", references=refs)
    assert d.depth == 3  # made-up References count nothing: the local chain says how deep it is
    e = _file(spool, n=5, in_reply_to="<9.unknown@bus.test>", references=refs[:2])
    assert e.depth == 0
    filed = ("<1.alpha@bus.test>", "<2.alpha@bus.test>", "<3.alpha@bus.test>", "<4.alpha@bus.test>")
    f = _file(spool, n=6, in_reply_to="<9.unknown@bus.test>", references=(*refs, *filed))
    assert f.depth == 4  # parent not here: the References that name letters of its thread filed here count
    other = _file(spool, n=8, in_reply_to="<9.unknown@bus.test>", references=filed, thread="thr-0therthread")
    assert other.depth == 0  # letters of another thread are no links of this one
    # letters answering letters of another side: beta's own reply to alpha's letter
    mine, raw = _letter(7, in_reply_to="<2.alpha@bus.test>")
    reply = spool.write.store("sent", mine.replace(sender="beta", to="alpha", message_id="<7.beta@bus.test>"), raw)
    assert reply.depth == 2
    # a letter naming a parent filed after it (a cycle, or a clock) is not its child
    assert spool.read.depth_for("zzzzzzzzzzzzzz", {"in_reply_to": "<2.alpha@bus.test>", "from": "alpha"}) == 2
    assert spool.read.depth_for("00", {"in_reply_to": "<2.alpha@bus.test>", "from": "alpha"}) == 0


def test_a_letter_answering_itself_is_no_chain(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    looped = _file(spool, n=1, in_reply_to="<1.alpha@bus.test>")
    assert looped.depth == 0
    spool.db.conn().execute("UPDATE letters SET meta=NULL")
    assert spool.read.meta(looped.id)["depth"] == 0


def test_depth_walks_a_chain_whose_caches_are_gone_and_caches_each_step(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    ids = [_file(spool, n=1).id]
    for n in range(2, 6):
        ids.append(_file(spool, n=n, in_reply_to=f"<{n - 1}.alpha@bus.test>").id)
    spool.db.conn().execute("UPDATE letters SET meta=NULL")
    assert spool.read.meta(ids[-1])["depth"] == 4
    assert [json.loads(_row(spool, i, "meta"))["depth"] for i in ids] == [0, 1, 2, 3, 4]


def test_a_letter_that_no_longer_parses_is_rebuilt_with_its_reason(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, _raw = _letter()
    filed = spool.write.store("read", letter, b"no header at all")
    spool.db.conn().execute("UPDATE letters SET meta=NULL")
    data = spool.read.meta(filed.id)
    assert data["id"] == filed.id and data["state"] == "read" and data["reason"] and data["detail"]
    assert data["depth"] == 0 and set(data) == {"id", "state", "reason", "detail", "depth"}


def test_a_persons_letter_and_a_verdict_are_rebuilt_from_their_notes(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    letter, raw = _letter()
    person = spool.write.store("unread", letter, b"garbled", extra={"person": "carol@example.org"})
    held = spool.write.store("quarantine", letter.replace(reason="forged", detail="bad"), b"also garbled", index=False)
    spool.db.conn().execute("UPDATE letters SET meta=NULL")
    assert (
        spool.read.meta(person.id)["person"] == "carol@example.org"
        and spool.read.meta(person.id)["subject"] == "Letter 1"
    )
    assert (spool.read.meta(held.id)["reason"], spool.read.meta(held.id)["detail"]) == ("forged", "bad")
    spool.db.conn().execute("UPDATE letters SET meta=NULL")
    assert "depth" not in spool.read.meta(held.id)
    assert "depth" not in spool.read.annotations(person.id)["person_letter"]
    del raw


def test_names_are_rebuilt_from_the_registry_else_the_local_part(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "beta", name_of={"beta@bus.test": "beta-platform"}.get)
    letter, raw = _letter()
    raw = raw.replace(b"From: Alpha <alpha@bus.test>", b"From: Gamma <gamma@elsewhere.test>")
    filed = spool.write.store("unread", letter, raw)
    spool.drop_caches()
    data = spool.read.meta(filed.id)
    assert (data["from"], data["to"]) == ("gamma", "beta-platform")
    assert spool.layout.name("") == "" and Spool(tmp_path / "x").layout.name("delta+q@x.test") == "delta"


def test_dropped_caches_give_every_answer_again(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    a = _file(spool, n=1)
    b = _file(spool, "read", n=2, in_reply_to="<1.alpha@bus.test>", type="close")
    _file(spool, n=3, thread="thr-note000000", type="note")
    held = spool.write.store("quarantine", _letter(4)[0].replace(reason="unsigned"), _letter(4)[1], index=False)
    later = _file(spool, n=5, thread="thr-late000000")  # filed after the quarantined letter

    def snapshot() -> dict[str, object]:
        return {
            "meta": [spool.read.meta(i) for i in (a.id, b.id, held.id, later.id)],
            "threads": spool.read.threads(),
            "open": spool.read.open_threads(),
            "known": spool.read.known("alpha", "<2.alpha@bus.test>"),
            "thread": spool.read.thread_ids("thr-abc123def0"),
        }

    before = snapshot()
    spool.drop_caches()
    assert spool.db.version() == CURRENT  # rebuilt on the first use
    assert _row(spool, held.id, "rawkey") is not None and _row(spool, held.id, "thread") is None
    after = snapshot()
    assert after == before and before["open"] == ["thr-late000000"] and before["known"] == b.id
    assert before["thread"] == [a.id, b.id] and "thr-late000000" in before["threads"]
    assert spool.read.known("alpha", "<4.alpha@bus.test>") is None  # a quarantined letter is found by its bytes only
    assert spool.read.has_bytes(_letter(1)[1]) is False
    for letter_id in (a.id, b.id):  # the cache holds no state: the row's column is the truth
        assert "state" not in json.loads(_row(spool, letter_id, "meta"))
    assert spool.read.has_bytes(_letter(4)[1]) is True


# --- new-thread quota ----------------------------------------------------------------------------


def test_opened_since_counts_the_platforms_new_threads_only(tmp_path: Path) -> None:
    beta = _spool(tmp_path)
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root, name_of=NAMES.get)
    now = int(time.time() * 1000)
    opener = _file(beta, "sent", n=1)
    _file(beta, "sent", n=2, in_reply_to="<1.alpha@bus.test>")  # a reply opens nothing
    _file(beta, "outbox", n=3, type="note")  # a note opens nothing
    _file(beta, "unread", n=4)  # not one of ours
    _file(beta, "failed", n=5)  # never left
    held = _file(beta, "held", n=6)
    queued = _file(bob, "outbox", n=7)
    garbled = beta.write.store("sent", _letter(8)[0], b"garbled")
    beta.drop_caches()  # its record is made again from its bytes: they parse to a reason
    assert "reason" in beta.read.meta(garbled.id)
    old = beta.write.store("sent", _letter(9)[0].replace(id=_ulid_floor(now - 3_600_000) + "0" * 16), _letter(9)[1])
    assert ulid_ms(old.id) == now - 3_600_000
    for state in ("held", "outbox", "sent"):  # ids that are no ULID: no creation time, never counted
        beta.write.store(state, _letter(10)[0].replace(id="01u" + state), _letter(10)[1])
    assert opened_since(beta.read, now - 1000) == sorted([opener.id, held.id, queued.id])
    assert opened_since(bob.read, now - 1000) == sorted([opener.id, held.id, queued.id])
    assert opened_since(beta.read, now - 3_600_000) == sorted([old.id, opener.id, held.id, queued.id])
    assert opened_since(beta.read, now + 3_600_000) == []
    # the product's count (the openers table) holds what the oracle reads from the letters
    recent = {opener_key(x.message_id): ulid_ms(x.id) for x in (opener, held, queued)}
    assert beta.read.opener_keys_since(now - 1000) == bob.read.opener_keys_since(now - 1000) == recent
    assert beta.read.opener_keys_since(now - 3_600_000) == {**recent, opener_key(old.message_id): ulid_ms(old.id)}
    assert beta.read.opener_key_set(now + 3_600_000) == (set(), None)


def test_the_ulid_floor_is_the_smallest_id_of_its_millisecond() -> None:
    now = int(time.time() * 1000)
    made = new_ulid()
    floor = _ulid_floor(ulid_ms(made))
    assert len(floor) == 10 and made[:10] == floor and ulid_ms(floor + "0" * 16) == ulid_ms(made)
    assert _ulid_floor(-5) == "0" * 10 and _ulid_floor(0) == "0" * 10
    assert _ulid_floor(now) < _ulid_floor(now + 1)
    assert _ulid_floor(1) == "0000000001" and _ulid_floor(32) == "0000000010"


def test_ids_have_one_alphabet_and_one_floor() -> None:
    """Issue 27: the Crockford alphabet is written once (model), and the spool's and search's
    floors are model's: the full floor sorts at or before every id made in its millisecond."""
    package = Path(agentmail.__file__).parent
    copies = [p for p in package.rglob("*.py") if "0123456789abcdefghjkmnpqrstvwxyz" in p.read_text().lower()]
    assert copies == [package / "model.py"]
    made = new_ulid()
    floor = ulid_floor(ulid_ms(made))
    assert len(floor) == 26 and floor <= made and floor[:10] == _ulid_floor(ulid_ms(made)) == made[:10]
    assert ulid_floor(1 << 60) == "7" + "z" * 9 + "0" * 16  # clamped to a ULID's 48 bits of ms


# --- reply claims --------------------------------------------------------------------------------


def _alpha_key(message_id: str) -> str:
    """The claim key of alpha's letter ``message_id``: its Message-ID and its sender."""
    return reply_key(message_id, "alpha")


def _reply(letter_id: str, mid: str = "<1.alpha@bus.test>") -> tuple[Letter, bytes]:
    """beta's reply to alpha's letter ``mid``, its file saying so too (the claims are rebuilt from it)."""
    draft = burst(message_id=f"<{letter_id}@bus.test>", sender_address="beta@bus.test",
                  to_address="alpha@bus.test", in_reply_to=mid, subject="Letter 50", date=DATE)  # fmt: skip
    raw = wire.render(draft)
    letter = wire.to_letter(wire.parse_message(raw, len(raw) + 1))
    return letter.replace(sender="beta", to="alpha", id=letter_id), raw


def test_a_claim_names_the_mailbox_that_answered(tmp_path: Path) -> None:
    beta = _spool(tmp_path).ensure()
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root, name_of=NAMES.get)
    assert beta.home_claims.replied_by(_alpha_key("<1.alpha@bus.test>")) is None  # the platform's claims are built now
    with bob.home_claims.claim_reply(_alpha_key("<1.alpha@bus.test>"), "01BOBREPLY") as holder:
        assert holder is None
        bob.write.store("sent", *_reply("01BOBREPLY"))
    assert beta.home_claims.replied_by(_alpha_key("<1.alpha@bus.test>")) == "beta@bob 01BOBREPLY"
    with beta.home_claims.claim_reply(_alpha_key("<1.alpha@bus.test>"), "01BETAREPLY") as holder:
        assert holder == "beta@bob 01BOBREPLY"
    assert beta.home_claims.replied_by(_alpha_key("<2.alpha@bus.test>")) is None
    # nested claims of one thread (a follow-up to several counterparts) do not wait on themselves
    with (
        beta.home_claims.claim_reply(_alpha_key("<3.alpha@bus.test>"), "01A") as first,
        beta.home_claims.claim_reply(_alpha_key("<4.alpha@bus.test>"), "01B") as second,
    ):
        assert (first, second) == (None, None)


@pytest.mark.parametrize(
    "holder",
    [
        "gamma 01X",
        "alpha 01X",
        "beta/../alpha 01X",
        "beta@bob/../beta 01X",
        "betamax 01X",
        "beta@ghost 01X",
        "beta 01NOSUCH",
        "01X",
    ],
)
def test_a_claim_naming_no_reply_of_this_platform_answers_nothing(tmp_path: Path, holder: str) -> None:
    beta = _spool(tmp_path).ensure()
    beta.write.store("sent", *_reply("01X"))  # beta's reply 01X exists: only a claim naming it stands
    _spool(tmp_path, "alpha").write.store("sent", *_reply("01X"))  # another platform's letter of that id
    _spool(tmp_path, "beta@bob").ensure()
    beta.home_claims._claims()
    beta.db.conn().execute("UPDATE claims SET holder=?", (holder,))
    expected = "01X" if holder == "01X" else None  # no mailbox named: the platform's own
    assert beta.home_claims.replied_by(_alpha_key("<1.alpha@bus.test>")) == expected
    with beta.home_claims.claim_reply(_alpha_key("<1.alpha@bus.test>"), "01Y") as got:
        assert got == expected
    assert sorted(os.listdir(tmp_path / "spool")) == ["alpha", "beta", "beta@bob"]  # no mailbox made by asking


def test_claims_are_rebuilt_from_the_answering_letters_of_every_mailbox(tmp_path: Path) -> None:
    beta = _spool(tmp_path).ensure()
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root, name_of=NAMES.get)
    bob.write.store("held", *_reply("01HELD", "<1.alpha@bus.test>"))
    beta.write.store("failed", *_reply("01FAILED", "<2.alpha@bus.test>"))  # a failed reply answered nothing
    beta.write.store("outbox", *_reply("01QUEUED", "<3.alpha@bus.test>"))
    beta.write.store("sent", *_letter(4))  # no in_reply_to: claims nothing
    beta.drop_caches()
    assert beta.home_claims.replied_by(_alpha_key("<1.alpha@bus.test>")) == "beta@bob 01HELD"
    assert beta.home_claims.replied_by(_alpha_key("<2.alpha@bus.test>")) is None
    assert beta.home_claims.replied_by(_alpha_key("<3.alpha@bus.test>")) == "beta 01QUEUED"
    assert beta.db.fact("claims") == CLAIMS_BUILT
    assert sorted(r[0] for r in beta.db.conn().execute("SELECT holder FROM claims")) == [
        "beta 01QUEUED",
        "beta@bob 01HELD",
    ]


def test_siblings_are_the_other_mailboxes_of_the_platform(tmp_path: Path) -> None:
    beta = _spool(tmp_path).ensure()
    for name in ("beta@bob", "beta@alice", "betamax", "alpha"):
        Spool(tmp_path / "spool" / name).ensure()
    bob = Spool(tmp_path / "spool" / "beta@bob", platform_root=beta.root)
    assert [s.mailbox for s in beta.siblings()] == ["beta@alice", "beta@bob"]
    assert [s.mailbox for s in bob.siblings()] == ["beta", "beta@alice"]
    assert Spool(tmp_path / "nowhere" / "x").siblings() == []


# --- the database file ---------------------------------------------------------------------------


def test_the_database_is_private_in_wal_mode_and_current(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    assert oct(spool.db.path.stat().st_mode & 0o777) == "0o600"
    for made in ("letters", "tmp"):
        assert oct((spool.root / made).stat().st_mode & 0o777) == "0o700"
    conn = spool.db.conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert spool.db.version() == CURRENT and conn.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_MS
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    search = {"found", "words", "words_config", "words_content", "words_data", "words_docsize", "words_idx"}
    assert tables == {"letters", "notes", "threads", "claims", "checkpoints", "facts", "openers", *search}
    assert spool.db.fact("claims") is None


def test_durability_is_chosen_per_transaction(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    conn = spool.db.conn()
    with spool.db.write(durable=False):
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with spool.db.write():
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with spool.db.write(durable=False):
        pass
    spool.db.begin_batch()
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # a batch commits durably
    spool.db.rollback()
    spool.write.begin_filing()  # a sync's batch: its checkpoint follows it in the WAL (issue 28)
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1
    spool.db.rollback()


def test_each_write_is_as_durable_as_what_it_records(tmp_path: Path) -> None:
    """FULL (fsynced at COMMIT) for a letter's state and facts; NORMAL where a power cut only
    costs a refetch or a recomputation (checkpoints, caches) or a harmless resubmission."""
    spool = _spool(tmp_path)
    filed = _file(spool, "sent")
    conn = spool.db.conn()

    def synchronous() -> int:
        return int(conn.execute("PRAGMA synchronous").fetchone()[0])

    steps = [
        (lambda: spool.write.set_checkpoint("local", "v:1"), 1),
        (lambda: spool.write.move(filed.id, "sent", "read"), 2),
        (lambda: spool.write.move(filed.id, "read", "sent", durable=False), 1),
        (lambda: spool.write.annotate(filed.id, queued="a"), 2),
        (lambda: spool.write.annotate(filed.id, durable=False, queued="b"), 1),
        (lambda: spool.write.take([filed.id], "sent", "read"), 2),
        (lambda: spool.read._cache_meta(filed.id, {"subject": "x"}), 1),
        (lambda: spool.write.move(filed.id, "read", "sent"), 2),
        (lambda: spool.home_claims._claims(), 1),  # a cache: rebuilt if lost
    ]
    for step, expected in steps:
        step()
        assert synchronous() == expected, step


def test_a_failed_write_rolls_back_and_the_next_one_commits(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    with pytest.raises(ValueError, match="boom"), spool.db.write() as tx:
        tx.execute("INSERT INTO facts(name, value) VALUES('x', '1')")
        raise ValueError("boom")
    assert spool.db.fact("x") is None and not spool.db.conn().in_transaction
    with spool.db.write() as tx:
        tx.execute("INSERT INTO facts(name, value) VALUES('x', '2')")
    assert _spool(tmp_path).db.fact("x") == "2"
    spool.db.commit_batch()  # nothing open: no-ops
    spool.db.rollback()
    assert spool.db.fact("x") == "2"


def test_a_database_error_is_the_machine_failing(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    blocker = sqlite3.connect(spool.db.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        spool.db.conn().execute("PRAGMA busy_timeout=0")
        with pytest.raises(OSError, match="spool database: database is locked"):
            spool.write.store("unread", *_letter(1), defer=True)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert spool.read.ids("unread") == []


def test_an_opening_that_fails_is_tried_again_on_the_next_use(tmp_path: Path) -> None:
    calls: list[int] = []

    def prepare(database: Db) -> None:
        calls.append(database.version())
        if len(calls) == 1:
            raise OSError("disk full")
        with database.write() as tx:
            db.create(tx)
            tx.execute(f"PRAGMA user_version={CURRENT}")

    database = Db(tmp_path / "box", prepare)
    with pytest.raises(OSError, match="disk full"):
        database.conn()
    assert database.version() == CURRENT and calls == [0, 0]
    first = database.conn()
    database.close()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")  # closed, not left open
    database.close()  # closing twice is harmless
    assert database.version() == CURRENT and calls == [0, 0]


def test_a_connection_is_never_shared_across_fork(tmp_path: Path) -> None:
    spool = _spool(tmp_path)
    _file(spool)
    parent = spool.db.conn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a connection of its own, and the parent's left open
        try:
            child = spool.db.conn()
            ok = child is not parent and spool.read.ids("unread") != [] and spool.db.conn() is child
            spool.db.close()
            os.write(write, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 2) == b"ok"
    os.close(read)
    os.waitpid(pid, 0)
    assert spool.db.conn() is parent and spool.read.ids("unread") != []


def test_the_schema_is_made_statement_by_statement_without_its_comments(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    db.create(conn)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(letters)")]
    assert columns == ["seq", "id", "state", "meta", "thread", "type", "msgkey", "rawkey"]
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")}
    assert indexes == {"letters_state", "letters_thread", "letters_msgkey", "letters_rawkey", "threads_open"}
    assert MOVING == 1 and db.UNINDEXED == 2 and db.UNLEDGERED == 3 and db.UNOPENED == 4 and CURRENT == 5
    assert [r[1] for r in conn.execute("PRAGMA table_info(openers)")] == ["id", "ms", "key"]


# --- converting the per-file layout --------------------------------------------------------------


def _old_spool(root: Path) -> dict[str, bytes]:
    """A spool of the per-file layout with its odd corners; returns id -> bytes of its letters."""
    letters = {}
    for state, n in (("unread", 1), ("sent", 2), ("quarantine", 3), ("read", 4)):
        letter, raw = _letter(n)
        letter_id = new_ulid()
        (root / state).mkdir(parents=True, exist_ok=True)
        (root / state / f"{letter_id}.eml").write_bytes(raw)
        letters[letter_id] = raw
        (root / "meta").mkdir(exist_ok=True)
        if state == "unread":  # what the old release parsed is kept, not parsed again
            meta = {**letter.to_json(), "id": letter_id, "state": "unread", "depth": 0, "subject": "As parsed then"}
            (root / "meta" / f"{letter_id}.json").write_text(json.dumps(meta))
        elif state == "sent":
            (root / "meta" / f"{letter_id}.json").write_text('{"torn')  # rebuilt from the letter
        elif state == "quarantine":
            (root / "meta" / f"{letter_id}.json").write_text("[1, 2]")  # JSON, but no meta: rebuilt
        else:  # a meta file of a release that kept no state in it
            meta = {**letter.to_json(), "id": letter_id, "depth": 0}
            del meta["state"]
            (root / "meta" / f"{letter_id}.json").write_text(json.dumps(meta))
    (root / "unread" / "notes.txt").write_text("not a letter")  # kept for a person
    for odd in ("bad-name.eml", "abcd-.eml", "abcd-x.eml"):
        (root / "read" / odd).write_text("not one of our ids")
    unread_id, sent_id = sorted(letters)[:2]
    (root / "index" / "annotations").mkdir(parents=True)
    (root / "annotations").mkdir()
    (root / "index" / "annotations" / f"{sent_id}.json").write_text('{"undeliverable": "old"}')
    (root / "index" / "annotations" / f"{unread_id}.json").write_text('{"person_letter": {"subject": "kept"}}')
    (root / "annotations" / f"{sent_id}.json").write_text('{"undeliverable": "550 newer"}')  # the newer wins
    (root / "annotations" / "torn.json").write_text("[1, 2")
    (root / "annotations" / "list.json").write_text("[1, 2]")  # JSON, but no notes
    (root / "annotations" / "README").write_text("not json")
    (root / "annotations" / "dir.json").mkdir()  # unreadable
    (root / "checkpoint.json").write_text(json.dumps({"local": "1:5", "imap": 7}))
    return letters


def test_an_old_spool_is_converted_once_with_its_odd_corners(tmp_path: Path) -> None:
    root = tmp_path / "spool" / "beta"
    letters = _old_spool(root)
    spool = _spool(tmp_path)
    unread, sent, held, read = sorted(letters)
    assert (
        spool.read.ids("unread") == [unread]
        and spool.read.ids("sent") == [sent]
        and spool.read.ids("quarantine") == [held]
    )
    assert spool.read.ids("read") == [read] and spool.read.meta(read)["subject"] == "Letter 4"
    assert spool.read.annotations(unread) == {"person_letter": {"subject": "kept"}}
    for letter_id, raw in letters.items():
        assert (root / "letters" / f"{letter_id}.eml").read_bytes() == raw
    assert spool.read.meta(sent)["undeliverable"] == "550 newer" and spool.read.meta(sent)["subject"] == "Letter 2"
    assert spool.read.meta(unread)["subject"] == "As parsed then" and "state" not in json.loads(
        _row(spool, unread, "meta")
    )
    assert spool.read.meta(held)["subject"] == "Letter 3"
    assert [r[0] for r in spool.db.conn().execute("SELECT id FROM notes ORDER BY id")] == sorted([unread, sent])
    for made in ("letters", "tmp"):
        assert oct((root / made).stat().st_mode & 0o777) == "0o700"
    assert spool.read.checkpoint("local") == "1:5" and spool.read.checkpoint("imap") is None
    assert sorted(os.listdir(root)) == [
        "ledger.jsonl",  # begun with the converted rows: a rebuild restores them as they stand
        "letters",
        "read",
        "setup.lock",
        "spool.db",
        "spool.db-shm",
        "spool.db-wal",
        "tmp",
        "unread",
    ]
    assert os.listdir(root / "unread") == ["notes.txt"]
    assert sorted(os.listdir(root / "read")) == ["abcd-.eml", "abcd-x.eml", "bad-name.eml"]
    assert spool.db.version() == CURRENT and spool.read.has_bytes(letters[held]) is True
    assert spool.read.threads() == ["thr-abc123def0"]
    assert _spool(tmp_path).read.ids("unread") == [unread]  # a second opening converts nothing


def test_the_conversion_points_come_in_order_with_the_files_where_their_names_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """test_migration.py SIGKILLs a conversion at each of these points by name."""
    root = tmp_path / "spool" / "beta"
    _old_spool(root)
    seen: list[tuple[str, int]] = []

    def point(name: str) -> None:
        folder = root / "letters"
        seen.append((name, len(os.listdir(folder)) if folder.is_dir() else -1))

    monkeypatch.setattr(db, "crash_point", point)
    _spool(tmp_path).ensure()
    assert seen == [("migration-rows", 0), ("migration-moving", 1), ("migration-moved", 4), ("migration-cleaned", 4)]


def test_an_old_spool_of_letters_alone_is_converted(tmp_path: Path) -> None:
    root = tmp_path / "spool" / "beta"
    (root / "sent").mkdir(parents=True)
    letter_id = new_ulid()
    (root / "sent" / f"{letter_id}.eml").write_bytes(_letter(1)[1])
    spool = _spool(tmp_path)
    assert spool.read.ids("sent") == [letter_id] and spool.read.meta(letter_id)["subject"] == "Letter 1"
    assert spool.read.checkpoint("local") is None and spool.read.annotations(letter_id) == {}


def test_a_new_spool_has_nothing_to_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(db, "crash_point", seen.append)
    spool = _spool(tmp_path).ensure()
    assert seen == ["migration-rows"]  # created CURRENT at once: no files to move, no caches to rebuild
    assert sorted(os.listdir(spool.root)) == [
        "letters",
        "setup.lock",
        "spool.db",
        "spool.db-shm",
        "spool.db-wal",
        "tmp",
    ]
    assert spool.db.version() == CURRENT


# --- recover: spool.db made again from the letter files ------------------------------------------


def test_recover_leaves_a_file_classify_refuses_and_one_gone_since_it_was_judged(tmp_path: Path) -> None:
    """``recover`` reads each file twice (judged, then filed: a big spool never holds every body):
    a file ``classify`` refuses, and a file deleted between its judging and its filing, are
    counted ``left`` and get no row; the rest are filed in their states."""
    spool = _spool(tmp_path).ensure()
    kept, refused, vanishing = (_file(spool, "unread", n) for n in (1, 2, 3))

    def classify(letter_id: str, raw: bytes, _was: object) -> tuple[str, Letter] | None:
        if letter_id == refused.id:
            return None
        letter = wire.to_letter(wire.parse_message(raw, len(raw) + 1)).replace(sender="alpha", to="beta")
        if letter_id == vanishing.id:
            spool.read.path("", letter_id).unlink()  # gone after its judging, before its filing
        return ("read" if letter_id == kept.id else "unread"), letter

    counts = spool.recover(classify)
    assert counts["left"] == 2
    assert counts["read"] == 1 and counts["unread"] == 0
    assert spool.read.ids("read") == [kept.id]
    assert spool.read.ids("unread") == []
    assert spool.read.locate(refused.id) is None and spool.read.locate(vanishing.id) is None
    assert len(counts["kept_aside"]) >= 1  # the spool.db replaced is kept aside, never deleted


def test_check_names_a_damaged_spool_db_and_how_to_recover(tmp_path: Path) -> None:
    spool = _spool(tmp_path).ensure()
    for n in range(1, 40):
        _file(spool, "unread", n)
    spool.db.close()
    path = spool.root / db.FILE
    data = bytearray(path.read_bytes())
    page = 4096
    for at in range(2 * page, min(len(data), 6 * page)):  # pages of the letters table, not the header
        data[at] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError) as raised:
        spool.check()
    assert raised.value.reason == "db-damaged"
    assert str(raised.value).startswith(f"{path} is damaged (")
    assert str(raised.value).endswith(f"): {db.RECOVER}")
