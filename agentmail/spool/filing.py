"""Filing letters in one mailbox and moving them between states (DESIGN §7): born in ``tmp/``,
made durable, its row committed, renamed into ``letters/``; a state change is one conditional
UPDATE; a sync batch is one transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._fs import fsync_dir, fsync_file, sync_filesystem
from ..model import Letter, new_ulid
from . import words
from .db import reached
from .layout import (
    COPIES_DUE,
    OPENING,
    Layout,
    _key,
    _loads,
    _raw_key,
    _sha256,
    opener_row,
)
from .views import SpoolReader


@contextmanager
def _machine() -> Iterator[None]:
    """The database failing (disk full, I/O error, locked for longer than the busy timeout) is
    the machine failing, as an OSError is: it stops a sync, never quarantines a letter."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise OSError(f"spool database: {exc}") from exc


class SpoolWriter:
    """What changes one mailbox (``Spool.write``): filing, moving, annotating. It reads through
    ``read``, the same mailbox's reader."""

    def __init__(self, at: Layout, read: SpoolReader) -> None:
        self._at = at
        self.read = read
        self._batch: list[str] = []  # ids of the open sync batch, their files still in tmp/
        self._written: list[str] = []  # those of them not copied from a durable file: commit flushes these

    def store(
        self,
        state: str,
        letter: Letter,
        raw: bytes,
        *,
        extra: dict[str, Any] | None = None,
        index: bool = True,
        defer: bool = False,
        durable: bool = True,
        copy: tuple[str, int, int] | None = None,
    ) -> Letter:
        """File a new letter in ``state``; returns it with its id and state set.

        ``index``: record its (sender, Message-ID) so a second copy is recognised (else its
        bytes). ``defer``: part of a sync batch that ``commit`` makes durable and visible
        together (one filesystem flush and one transaction for the batch). ``durable=False``:
        filed in the same order, with no flush (a letter submitted at once to a transport whose
        "sent" is itself durable); ``make_durable`` flushes it if it has to wait after all.
        ``copy``: a durable file holding exactly ``raw`` (path, st_dev, st_ino): in a batch, the
        spool's own copy is then written without a flush, and the row notes where the bytes lie
        durable (``SpoolReader.restore``).
        """
        if not (defer and self._batch):  # a batch's first letter made the folders moments ago
            self._at.ensure()
        letter_id = letter.id or new_ulid()
        if defer:
            with _machine():
                self._at.db.begin_batch()
        # One copy of the letter made, not two: its depth reads none of the fields set here.
        depth = letter.depth if state == "quarantine" else self.read.depth_for(letter_id, letter)
        letter = letter.replace(id=letter_id, state=state, depth=depth)
        data = letter.to_json()
        data.pop("state", None)
        data.update(extra or {})
        copied = self._at.write_tmp(letter_id, raw, durable=durable and not defer, copy=copy if defer else None)
        if defer:
            with _machine():
                noted = None
                if copied and copy is not None:  # where its bytes lie durable, if this copy is lost
                    source = os.path.relpath(copy[0], self._at.root)  # a moved home still finds it
                    noted = {"copy": source, "copy_key": _raw_key(raw)}
                self._insert(self._at.sql(), letter, data, raw, index, noted)
            self._batch.append(letter_id)
            if not copied:
                self._written.append(letter_id)
            return letter
        if durable:
            fsync_dir(self._at.tmp)  # the file's name is durable before the row that names it
        with _machine(), self._at.db.write(durable=durable) as tx:
            self._insert(tx, letter, data, raw, index)
        reached("stored")
        self._publish(letter_id)
        return letter

    def release(self, letter_id: str, letter: Letter) -> bool:
        """A quarantined letter that passes today's judgement (``quarantine recheck``): its row
        becomes the ``unread`` letter it is, in place (same id, same file, same filing order),
        in one durable transaction; its verdict fact goes. False when it is no longer in
        quarantine (another recheck won)."""
        letter = letter.replace(id=letter_id, state="unread")
        letter = letter.replace(depth=self.read.depth_for(letter_id, letter))
        data = letter.to_json()
        data.pop("state", None)
        with _machine(), self._at.db.write() as tx:
            moved = tx.execute(
                "UPDATE letters SET state='unread', meta=?, thread=?, type=?, msgkey=?, rawkey=NULL "
                "WHERE id=? AND state='quarantine'",
                (json.dumps(data), letter.thread, letter.type, _key(letter.sender, letter.message_id), letter_id),
            ).rowcount
            if moved != 1:
                return False
            row = tx.execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
            notes = (_loads(row[0]) if row else None) or {}
            notes.pop("quarantined", None)
            if data.get("person"):
                notes["person_letter"] = {k: v for k, v in data.items() if k != "depth"}
            tx.execute("INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(notes)))
            self._at.db.log({"id": letter_id, "state": "unread"})
            self._at.db.log({"id": letter_id, "notes": notes})
            self._mark_thread(tx, letter.thread, letter.type)
            words.again(tx, letter_id, data)  # searchable as the letter it is now
        return True

    def quarantine_again(self, letter_id: str, letter: Letter) -> bool:
        """A quarantined letter judged again that stays quarantined for another reason (an answer
        that waited for its letter, now ``not-a-party``): its verdict, as ``letter`` carries it,
        replaces the old one, in place. False when it is no longer in quarantine."""
        data = letter.replace(id=letter_id, state="quarantine").to_json()
        data.pop("state", None)
        with _machine(), self._at.db.write() as tx:
            moved = tx.execute(
                "UPDATE letters SET meta=? WHERE id=? AND state='quarantine'", (json.dumps(data), letter_id)
            ).rowcount
            if moved != 1:
                return False
            row = tx.execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
            notes = (_loads(row[0]) if row else None) or {}
            notes["quarantined"] = {k: v for k, v in data.items() if k != "depth"}
            tx.execute("INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(notes)))
            self._at.db.log({"id": letter_id, "notes": notes})
        return True

    def drop_quarantined(self, letter_id: str) -> bool:
        """Forget a quarantined copy of a letter filed already (``quarantine recheck``: it now
        passes, and the inbox holds it): what a sync does with a duplicate. Row first, then file."""
        with _machine(), self._at.db.write() as tx:
            seqs = tx.execute(
                "DELETE FROM letters WHERE id=? AND state='quarantine' RETURNING seq", (letter_id,)
            ).fetchall()
            gone = len(seqs)
            if gone == 1:
                tx.execute("DELETE FROM notes WHERE id=?", (letter_id,))
                words.forget(tx, int(seqs[0][0]))
                self._at.db.log({"id": letter_id, "gone": True})
        if gone == 1:
            for folder in (self._at.letters, self._at.tmp):
                try:
                    os.unlink(f"{folder}{letter_id}.eml")
                except FileNotFoundError:
                    pass
        return gone == 1

    def make_durable(
        self,
        letter_id: str,
        *,
        moved: tuple[str, str] | None = None,
        flushed: bool = False,
        copies: tuple[str, ...] = (),
        raw: bytes | None = None,
    ) -> bool:
        """Flush a letter filed with ``durable=False``: its file, its folder, then the database
        (a durable commit fsyncs the write-ahead log, and the row is in it). ``moved``: (source,
        target), the letter's move made in that same commit (a sent letter: one transaction, not
        two); False when it was no longer in ``source``. ``flushed``: its file's inode was
        flushed already (linked into the post office and flushed there): its bytes are on disk.

        ``copies`` (with ``raw``, the letter's bytes): the durable post-office files holding
        them; their names go into the row's notes in the same commit and the spool's own name is
        not flushed: a power cut that takes it leaves the row, and ``SpoolReader.path`` copies
        the bytes back from one of those files (DESIGN §7, "Sending on the local post office")."""
        path = self.read.path("", letter_id)
        if not flushed:
            fsync_file(path)
        noted = raw if copies and flushed else None  # the bytes whose post-office copies the row notes
        if noted is None:
            fsync_dir(path.parent)  # its name in letters/ is durable before the row that names it
        with _machine(), self._at.db.write() as tx:
            if noted is not None:
                where = [os.path.relpath(c, self._at.root) for c in copies]  # a moved home still finds them
                fields = {"copy": where[0], "copy_key": _raw_key(noted), "copy_size": len(noted), "copies": where[1:],
                          "copy_by": self._at.mailbox}  # fmt: skip
                # Merged into what is noted already in the statement that writes it: no read first.
                tx.execute(
                    "INSERT INTO notes(id, data) VALUES(?, ?) ON CONFLICT(id) DO UPDATE SET data = CASE WHEN "
                    "json_valid(data) THEN json_patch(data, excluded.data) ELSE excluded.data END",
                    (letter_id, json.dumps(fields)),
                )
                self._at.db.log({"id": letter_id, "set": fields})
            if moved is None:
                done = tx.execute("UPDATE letters SET state=state WHERE id=?", (letter_id,)).rowcount == 1
            else:
                done = self._move(tx, letter_id, *moved)
        reached("made-durable")
        return done

    def warm(self) -> None:
        """A durable commit that changes nothing. SQLite fsyncs the mailbox's folder at a
        connection's first durable commit (it opened the WAL to create it if missing): a waiter
        pays that before it blocks, not in the commit of the letter it waits for."""
        with _machine(), self._at.db.write() as tx:
            version = int(tx.execute("PRAGMA user_version").fetchone()[0])
            tx.execute(f"PRAGMA user_version={version}")

    def _insert(
        self,
        tx: sqlite3.Connection,
        letter: Letter,
        data: dict[str, Any],
        raw: bytes,
        index: bool,
        noted: dict[str, Any] | None = None,
    ) -> None:
        """The letter's rows, in the caller's transaction; ``noted``: more of its notes (where a
        copy's bytes lie durable), written with the facts filing notes, in the same statement."""
        quarantined = letter.state == "quarantine"
        filed = tx.execute(
            "INSERT INTO letters(id, state, meta, thread, type, msgkey, rawkey) VALUES(?,?,?,?,?,?,?)",
            (
                letter.id,
                letter.state,
                json.dumps(data),
                None if quarantined else letter.thread,
                letter.type,
                _key(letter.sender, letter.message_id) if index else None,
                None if index else _raw_key(raw),
            ),
        )
        self._at.db.log({"id": letter.id, "state": letter.state, "seq": int(filed.lastrowid or 0)})
        opener = opener_row(letter.id, letter.state, data)
        if opener is not None:  # counted by the new-thread quota from the hour's rows alone
            tx.execute("INSERT OR REPLACE INTO openers(id, ms, key) VALUES(?, ?, ?)", opener)
        # The verdict is no part of the letter: kept as a fact, not a cache. So is a person's
        # letter as it was read (its platform, its thread, its new text): the file alone does not say.
        notes: dict[str, Any] = {}
        fact = "quarantined" if quarantined else "person_letter" if data.get("person") else None
        if fact:
            notes[fact] = {k: v for k, v in data.items() if k != "depth"}
        if data.get("attachments") and not quarantined:  # what save/apply check the file against later
            notes["sha256"] = _sha256(raw)
        notes.update(noted or {})
        if notes:
            self._note_new(tx, letter.id, notes)
        if not quarantined:
            self._mark_thread(tx, letter.thread, letter.type)
        reached("filed-unindexed")  # tests/system/test_crash.py: the row is in, its index rows not yet
        words.put(tx, int(filed.lastrowid or 0), data)  # searchable in the same commit

    def _fill_openers(self, tx: sqlite3.Connection) -> None:
        """The openers table made again from the letters' records (a rebuild, an older file)."""
        tx.execute("DELETE FROM openers")
        marks = ",".join("?" * len(OPENING))
        rows = tx.execute(f"SELECT id, state FROM letters WHERE state IN ({marks})", OPENING).fetchall()
        for letter_id, state in rows:
            self._add_opener(tx, str(letter_id), str(state))

    def _add_opener(self, tx: sqlite3.Connection, letter_id: str, state: str) -> None:
        """A letter's openers row, if it opens a thread (one moved into an outgoing state, a rebuild)."""
        opener = opener_row(letter_id, state, self.read._parsed(letter_id, state))
        if opener is not None:
            tx.execute("INSERT OR REPLACE INTO openers(id, ms, key) VALUES(?, ?, ?)", opener)

    def _mark_thread(self, tx: sqlite3.Connection, thread: str, letter_type: str) -> None:
        """Keep ``threads`` (and which are open) current, so ``status`` costs what is open. A
        close ends the thread, or in a fan-out this platform opened, one counterpart's part of
        it: the thread stays open while another part has no close."""
        if letter_type == "note":  # a note neither opens nor closes a thread
            tx.execute("INSERT OR IGNORE INTO threads(thread, open) VALUES(?, 0)", (thread,))
        else:
            still_open = letter_type != "close" or self._parts_open(tx, thread)
            tx.execute(
                "INSERT INTO threads(thread, open) VALUES(?, ?) ON CONFLICT(thread) DO UPDATE SET open=excluded.open",
                (thread, 1 if still_open else 0),
            )

    def _parts_open(self, tx: sqlite3.Connection, thread: str) -> bool:
        """Is a part of this fan-out thread still without a close? (False: not a fan-out of mine.)
        From the thread's records, as filed: the same answer when the caches are rebuilt."""
        me = self._at.platform_root.name
        parties: list[str] = []
        closed: set[str] = set()
        rows = tx.execute("SELECT meta FROM letters WHERE thread=? AND state!='quarantine' ORDER BY seq", (thread,))
        for (meta,) in rows:
            data = _loads(meta) or {}
            sender, recipients = str(data.get("from") or ""), data.get("recipients") or []
            mine = sender == me
            between = (
                [self._at.name(str(a)) for a in recipients] if mine and recipients else [str(data.get("to") or "")]
            )
            if mine and recipients:
                parties += between
            if data.get("type") == "close":
                closed.update(between if mine else [sender])
        return any(party not in closed for party in parties if party != me)

    def _publish(self, letter_id: str) -> None:
        """Move a filed letter's file from tmp/ into letters/ (not fsynced: a rename lost in a
        power cut leaves it in tmp/, where it is read from and the next sweep finishes it)."""
        name = f"{letter_id}.eml"
        try:
            os.rename(self._at.tmp + name, self._at.letters + name)
        except FileNotFoundError:
            if not os.path.exists(self._at.letters + name):
                raise

    def begin_filing(self) -> None:
        """Open a sync batch whose commit does not flush the WAL (DESIGN §7). Safe because the
        batch's checkpoint is written after it into the same WAL, so a power cut that takes the
        filing takes the checkpoint with it (the letters are fetched again), and every change
        that acts on a filed letter (``done``, a reply's claim, a hold's release) is a durable
        commit, which flushes every earlier frame of the WAL first."""
        self._at.ensure()
        with _machine():
            self._at.db.begin_batch(durable=False)

    def commit(self) -> None:
        """Make the batch's letter files durable, then commit its rows: all appear, or none.
        A file copied from the post office is not flushed here: its bytes and its name there
        are durable already, and its row notes where (``SpoolReader.restore``; DESIGN §7)."""
        batch, self._batch = self._batch, []  # a failure below must not poison later syncs
        written, self._written = self._written, []
        if not self._at.sql().in_transaction:
            return
        try:
            tmp_dir = self._at.root / "tmp"
            if len(written) > 4:
                sync_filesystem(tmp_dir)
            elif written:
                for letter_id in written:
                    fsync_file(tmp_dir / f"{letter_id}.eml")
                fsync_dir(tmp_dir)
            reached("batch-durable")
            with _machine():
                self._at.db.commit_batch()
        except BaseException:
            self._batch = batch
            self.discard()
            raise
        reached("batch-committed")
        for n, letter_id in enumerate(batch):
            self._publish(letter_id)
            if n == 0:
                reached("batch-publishing")
        reached("batch-published")

    def discard(self) -> None:
        """Forget a batch that failed half-way; its letters will be fetched again."""
        self._at.db.rollback()
        for letter_id in self._batch:
            (self._at.root / "tmp" / f"{letter_id}.eml").unlink(missing_ok=True)
        self._batch = []
        self._written = []

    def sweep_tmp(self, older_than: float = 3600.0) -> None:
        """Finish what a crash left in tmp/: a filed letter's file is moved into letters/, and
        files that are no letter (never committed) are removed once older than an hour."""
        cutoff = time.time() - older_than
        try:
            entries = list(os.scandir(self._at.root / "tmp"))
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                name = entry.name
                if name.endswith(".eml") and self.read.locate(name[:-4]):
                    self._publish(name[:-4])
                elif entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass

    def move(self, letter_id: str, source: str, target: str, *, durable: bool = True) -> bool:
        """One conditional UPDATE; False when the letter is no longer in ``source`` (someone
        else won). ``durable=False`` where losing it in a power cut is harmless (outbox → sent:
        the letter is submitted again and the receiver drops the duplicate)."""
        with self._at.db.write(durable=durable) as tx:
            return self._move(tx, letter_id, source, target)

    def _move(self, tx: sqlite3.Connection, letter_id: str, source: str, target: str) -> bool:
        moved = tx.execute("UPDATE letters SET state=? WHERE id=? AND state=?", (target, letter_id, source)).rowcount
        if moved == 1:
            self._at.db.log({"id": letter_id, "state": target})
            if target in OPENING and source not in OPENING:
                self._add_opener(tx, letter_id, target)
        return moved == 1

    def take(self, letter_ids: list[str], source: str, target: str) -> list[str]:
        """Move those of ``letter_ids`` still in ``source`` in one durable transaction; the ids
        this call moved (a claim: concurrent callers never both get one)."""
        if not letter_ids:
            return []
        with self._at.db.write() as tx:
            marks = ",".join("?" * len(letter_ids))
            rows = tx.execute(
                f"UPDATE letters SET state=? WHERE state=? AND id IN ({marks}) RETURNING id",
                (target, source, *letter_ids),
            ).fetchall()
            for (taken,) in rows:
                self._at.db.log({"id": str(taken), "state": target})
                if target in OPENING and source not in OPENING:
                    self._add_opener(tx, str(taken), target)
        return [str(r[0]) for r in rows]

    def _note_new(self, tx: sqlite3.Connection, letter_id: str, fields: dict[str, Any]) -> None:
        """A letter filed just now: its notes written whole, with no read first. Notes already
        under its id (none a letter of this spool left: ``drop_quarantined`` takes them with
        it) are merged as ``_annotate`` merges them."""
        fresh = tx.execute("INSERT OR IGNORE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(fields)))
        if fresh.rowcount == 1:
            self._at.db.log({"id": letter_id, "notes": fields})
        else:
            self._annotate(tx, letter_id, fields)

    def _annotate(self, tx: sqlite3.Connection, letter_id: str, fields: dict[str, Any]) -> None:
        row = tx.execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
        data = _loads(row[0]) if row else None
        data = data or {}
        if all(data.get(k) == v for k, v in fields.items()):
            return
        # Only what changed goes to the ledger: the notes may hold a letter's text (a verdict, a
        # person's letter), which each later fact would otherwise write there again.
        record: dict[str, object] = {"id": letter_id, "set": fields} if data else {"id": letter_id, "notes": fields}
        data.update(fields)
        tx.execute("INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(data)))
        self._at.db.log(record)

    def annotate(self, letter_id: str, *, durable: bool = True, **fields: str) -> None:
        """Attach facts learnt later (undeliverable, failed, why it is queued) to a sent letter."""
        if all(self.read.annotations(letter_id).get(k) == v for k, v in fields.items()):
            return
        with self._at.db.write(durable=durable) as tx:
            self._annotate(tx, letter_id, fields)

    # The sent letters whose copy to the IMAP sent folder waits for the next batch: noted
    # before they are submitted, so a process killed in between copies them next time.
    def set_copies_due(self, ids: list[str]) -> None:
        with self._at.db.write(durable=False) as tx:  # lost in a power cut with the moves it follows
            if ids:
                tx.execute("INSERT OR REPLACE INTO facts(name, value) VALUES(?, ?)", (COPIES_DUE, " ".join(ids)))
            else:
                tx.execute("DELETE FROM facts WHERE name=?", (COPIES_DUE,))

    def set_checkpoint(self, transport: str, value: str | None) -> None:
        # Not durable: a checkpoint lost in a crash only means a refetch, and the spool drops
        # what it already holds. It is written after the letters are durable, never before.
        with self._at.db.write(durable=False) as tx:
            tx.execute("INSERT OR REPLACE INTO checkpoints(transport, value) VALUES(?, ?)", (transport, value))
        reached("checkpoint-set")
