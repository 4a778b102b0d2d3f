"""One mailbox's spool over SQLite and letter files (DESIGN §7).

A letter is born in ``tmp/``, made durable (fsync, or one ``syncfs`` per sync batch), then
its row is committed (the letter exists from that instant, in exactly one state), then the
file is renamed into ``letters/`` (a rename a crash interrupts is finished by the next sweep;
until then the file is read from ``tmp/``). A state change is one conditional UPDATE. A sync
batch is one transaction: its letters all appear at once, or none does and the batch is
fetched again.

Rows hold two kinds of column: the truth (id, state, filing order; the notes table; the
checkpoints) and caches (everything else), which ``drop_caches`` clears and the next opening
rebuilds from the letter files with the same answers. A letter's depth is its place in the
local In-Reply-To chain: its parent's depth + 1, where the parent is a letter filed here before
it, and never less than the number of References it carries.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from .._fs import fsync_dir, fsync_file, is_same, locked, read_plain, sync_filesystem, write_new
from ..errors import NotFound, StorageError
from ..model import Letter, new_ulid, ulid_floor
from . import db as dbmod
from . import words
from .db import Db, reached

# ``sibling``: a letter this platform sent from another mailbox (agent or machine), learnt from
# the server's sent record (client/picture.py): part of the threads, never inbox, outbox or answer.
STATES = ("unread", "read", "sent", "outbox", "held", "failed", "quarantine", "sibling")
OUTGOING = ("outbox", "held", "sent", "failed")
# A reply that failed (or that a person rejected) never reached anyone: the letter may be
# answered again. One held for approval answers it, pending the person's decision.
ANSWERING = ("outbox", "held", "sent")
# What the new-thread quota counts: letters that left or wait to leave (failed ones never left).
LEAVING = ("sent", "outbox", "held")
MIN_PREFIX = 6  # the shortest prefix of an id or a Message-ID that names a letter
_HOLDING = threading.local()  # the claims locks this thread holds (see Spool._claims_locked)


def _key(*parts: str) -> str:
    import hashlib  # here, not at the top: a read (inbox --no-sync) never loads OpenSSL for it (issue 11)

    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def _raw_key(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()[:40]


def _sha256(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def _facts(letter: Letter | dict[str, Any]) -> dict[str, Any]:
    """The fields of a letter (or of its meta) that its depth depends on, as in meta."""
    if isinstance(letter, Letter):
        return {
            "from": letter.sender,
            "to": letter.to,
            "in_reply_to": letter.in_reply_to,
            "references": list(letter.references),
        }
    return letter


def _ulid_floor(ms: int) -> str:
    """The smallest ULID made at ``ms`` (its first ten characters): ids sort by creation."""
    return ulid_floor(ms)[:10]


@contextmanager
def _machine() -> Iterator[None]:
    """The database failing (disk full, I/O error, locked for longer than the busy timeout) is
    the machine failing, as an OSError is: it stops a sync, never quarantines a letter."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise OSError(f"spool database: {exc}") from exc


def _parents_first(judged: list[tuple[str, str, Letter]]) -> Iterator[tuple[str, str, Letter]]:
    """Filing order for ``recover``: by id, except that a letter waits for the letter it answers
    when that one's id is later (a sibling's letter is named by when it was written, which can be
    before this mailbox filed what it answers: issue 25), so each thread reads as it happened."""
    present = {letter.message_id for _, _, letter in judged}
    filed: set[str] = set()
    waiting: dict[str, list[tuple[str, str, Letter]]] = {}
    for item in judged:
        parent = item[2].in_reply_to or ""
        if parent in present and parent not in filed:
            waiting.setdefault(parent, []).append(item)
            continue
        ready = [item]
        while ready:
            done = ready.pop(0)
            yield done
            filed.add(done[2].message_id)
            ready += waiting.pop(done[2].message_id, [])
    for rest in waiting.values():  # (a parent that was no letter after all: never, kept in order)
        yield from rest


def _loads(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class Spool:
    """One mailbox's spool at ``root``. ``platform_root`` is the spool of the platform itself
    (``spool/<platform>``): its reply claims are shared by every agent of the platform.
    ``name_of`` maps an address to a platform name, for rebuilding ``from``/``to``."""

    def __init__(
        self, root: Path, *, platform_root: Path | None = None, name_of: Callable[[str], str | None] | None = None
    ) -> None:
        self.root = root
        self.platform_root = platform_root or root
        self.name_of = name_of
        self.db = Db(root, self._prepare)
        self._batch: list[str] = []  # ids of the open sync batch, their files still in tmp/
        self._written: list[str] = []  # those of them not copied from a durable file: commit flushes these
        self._platform: Spool | None = None
        self._tmp = f"{root}/tmp/"  # str paths on the hot path: a pathlib join costs more than the syscall
        self._letters = f"{root}/letters/"
        self._recovering = False  # recover() is making spool.db again: no refusal, its lock held

    @property
    def mailbox(self) -> str:
        return self.root.name

    def siblings(self) -> list[Spool]:
        """The spools of the other mailboxes of this platform (platform and platform@agent)."""
        base = self.platform_root
        found = [base] + sorted(base.parent.glob(f"{base.name}@*")) if base.parent.is_dir() else []
        return [Spool(p, platform_root=base, name_of=self.name_of) for p in found if p != self.root and p.is_dir()]

    def _sql(self) -> sqlite3.Connection:
        return self.db.conn()

    # --- layout ----------------------------------------------------------------------------

    def ensure(self) -> Spool:
        if not (os.path.isdir(self._letters) and os.path.isdir(self._tmp)):  # two stats, not two mkdirs
            for name in ("letters", "tmp"):
                (self.root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._sql()
        return self

    def path(self, state: str, letter_id: str) -> Path:
        """The letter's file (``state`` is no part of it: a letter file never moves)."""
        del state
        final = self.root / "letters" / f"{letter_id}.eml"
        if final.exists():
            return final
        born = self.root / "tmp" / f"{letter_id}.eml"
        if born.exists() or (letter_id.isalnum() and self._restore(letter_id, born)):
            return born
        return final

    def _restore(self, letter_id: str, tmp: Path) -> bool:
        """A filed letter whose file is gone: one copied from the post office by a sync batch,
        whose copy was never flushed (DESIGN §7), after a power cut. Copied again from the
        post-office file it was (its name there was flushed before the batch committed), if
        that file still holds exactly its bytes; a mail client may have added flags to the name."""
        note = self.annotations(letter_id)
        source, key = note.get("copy"), note.get("copy_key")
        if not isinstance(source, str) or not isinstance(key, str):
            return False
        origin = self.root / source
        for candidate in (origin, *sorted(origin.parent.glob(f"{glob_escape(origin.name)}*"))):
            try:  # a FIFO or a symbolic link put there is never opened or followed
                raw, st = read_plain(candidate)
            except OSError:
                continue
            if raw is None or _raw_key(raw) != key:
                continue
            try:  # not flushed either: the note stays, and so does the post office's file
                self._write_tmp(letter_id, raw, durable=False, copy=(str(candidate), st.st_dev, st.st_ino))
            except FileExistsError:
                pass  # restored meanwhile by another reader
            return True
        return False

    def file_of(self, letter_id: str) -> tuple[str, int, int] | None:
        """The letter's file as (path, st_dev, st_ino), for a transport to hard-link rather than
        write the same bytes again (a letter file is never changed in place); None if missing."""
        name = f"{letter_id}.eml"
        for path in (self._letters + name, self._tmp + name):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            return (path, st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
        return None

    def locate(self, letter_id: str) -> str | None:
        """The state a letter is in, or None. Ids are ours: never a path from a letter."""
        if not letter_id.isalnum():
            return None
        row = self._sql().execute("SELECT state FROM letters WHERE id=?", (letter_id,)).fetchone()
        return None if row is None else str(row[0])

    @contextmanager
    def locked(self, name: str = "sync") -> Iterator[None]:
        """One syncer per mailbox at a time (others wait): no double commit of one fetch."""
        self.ensure()
        with locked(self.root / f"{name}.lock"):
            yield

    @contextmanager
    def platform_locked(self, name: str) -> Iterator[None]:
        """One holder among every agent of the platform (the new-thread quota: count, then file)."""
        self.platform_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with locked(self.platform_root / f"{name}.lock"):
            yield

    # --- opening: create, convert, rebuild ---------------------------------------------------

    def _prepare(self, db: Db) -> None:
        """The file's version is not current: create it, convert an old spool, or rebuild caches."""
        from . import migrate

        with nullcontext() if self._recovering else db.setup_lock():  # recover() holds it already
            conn = db.conn()
            version = db.version()
            if version == 0 and not self._recovering and not migrate.has_old_layout(self.root):
                self._refuse_if_lost()
            if version == 0:
                conn.execute("PRAGMA journal_mode=WAL")
                with db.write() as tx:
                    dbmod.create(tx)
                    words.create(tx)
                    migrate.remove_old_index(self)  # a search.sqlite beside a lost or older spool
                    moving = migrate.import_rows(self, tx)
                    tx.execute(f"PRAGMA user_version={dbmod.MOVING if moving else dbmod.CURRENT}")
                reached("migration-rows")
                version = db.version()
            if version == dbmod.MOVING:
                migrate.move_files(self)
                with db.write() as tx:
                    words.create(tx)  # a file an older release left MOVING has none yet
                    self._rebuild(tx)
                    migrate.remove_old(self)
                    migrate.remove_old_index(self)
                    reached("migration-cleaned")
                    tx.execute(f"PRAGMA user_version={dbmod.CURRENT}")
            if version == dbmod.UNINDEXED:  # the search index moves in from search.sqlite beside it
                with db.write() as tx:
                    words.create(tx)
                    words.fill(tx)
                    migrate.remove_old_index(self)
                    tx.execute(f"PRAGMA user_version={dbmod.CURRENT}")

    def _letter_files(self, *, born: bool = True) -> list[str]:
        """The ids of the letter files on disk in ``letters/`` (and ``tmp/``: ``born``), whatever
        spool.db says, in filing order."""
        found: list[str] = []
        for folder in (self._letters, self._tmp) if born else (self._letters,):
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                continue
            found += [n[:-4] for n in names if n.endswith(".eml") and n[:-4].isalnum()]
        return sorted(set(found))

    def _refuse_if_lost(self) -> None:
        """A new spool.db beside filed letters is a lost one: their states, notes, claims and the
        checkpoints were in it. Starting afresh would read the post office from the start, every
        letter unread again and every reply claim gone (a second answer to an answered letter):
        refused, until it is rebuilt from the letter files or restored."""
        held = self._letter_files()
        if held:
            raise StorageError(
                "db-missing",
                f"{self.root / dbmod.FILE} is missing (or empty) but {len(held)} letter file(s) lie in "
                f"{self.root}: their states, notes, reply claims and checkpoints were in it; {dbmod.RECOVER}",
            )

    def recover(self, classify: Callable[[str, bytes], tuple[str, Letter] | None]) -> dict[str, Any]:
        """Make spool.db again from the letter files (``agentmail rebuild``; DESIGN §7).

        What is there (spool.db, its -wal and -shm) is kept aside as ``<name>.lost-<time>``, never
        deleted. Each file in ``letters/`` is given to ``classify`` (id, bytes) in filing order,
        which says its state and letter (None: not restored, the file is left). A received
        letter that one of the restored letters answers is ``read``. No checkpoint is restored:
        the next sync reads the post office from the start and drops what is filed already."""
        import time

        counts: dict[str, Any] = {state: 0 for state in STATES}
        counts["left"] = 0
        with self.db.setup_lock(), locked(self.root / "sync.lock"):
            self.db.close()
            stamp = time.strftime("%Y%m%dT%H%M%S")
            aside = []
            for name in (dbmod.FILE, *dbmod.STALE):
                path = self.root / name
                if not os.path.lexists(path):
                    continue
                if name == dbmod.FILE and os.lstat(path).st_size == 0:
                    path.unlink()  # the empty file an opening made: nothing to keep
                    continue
                os.rename(path, self.root / f"{name}.lost-{stamp}")
                aside.append(f"{name}.lost-{stamp}")
            fsync_dir(self.root)
            self._recovering = True
            try:
                self._recover_rows(classify, counts)
            finally:
                self._recovering = False
                self.db.close()
        counts["kept_aside"] = aside
        return counts

    def _recover_rows(
        self, classify: Callable[[str, bytes], tuple[str, Letter] | None], counts: dict[str, Any]
    ) -> None:
        self.ensure()
        with self.db.write() as tx:
            # Not tmp/: a file there may be a letter never committed (no letter), and what was
            # received is fetched again from the post office anyway.
            judged_all: list[tuple[str, str, Letter]] = []  # not the bytes (read again below): a big spool stays small
            for letter_id in self._letter_files(born=False):
                try:
                    raw, _st = read_plain(self.path("", letter_id))
                except OSError:
                    raw = None
                judged = classify(letter_id, raw) if raw is not None else None
                if judged is None or raw is None:
                    counts["left"] += 1
                    continue
                judged_all.append((letter_id, *judged))
            for letter_id, state, letter in _parents_first(judged_all):
                try:
                    raw, _st = read_plain(self.path("", letter_id))
                except OSError:
                    raw = None
                if raw is None:  # gone since it was judged
                    counts["left"] += 1
                    continue
                letter = letter.replace(id=letter_id, state=state)
                if state != "quarantine":
                    letter = letter.replace(depth=self.depth_for(letter_id, letter))
                data = letter.to_json()
                data.pop("state", None)
                if state in OUTGOING:
                    data.update(letter.extra)
                self._insert(tx, letter, data, raw, index=state != "quarantine")
                counts[state] += 1
            answering = tx.execute(
                "SELECT meta FROM letters WHERE state IN ('outbox', 'held', 'sent', 'sibling')"
            ).fetchall()
            answered = {(_loads(meta) or {}).get("in_reply_to") for (meta,) in answering} - {None, ""}
            for letter_id, meta in tx.execute("SELECT id, meta FROM letters WHERE state='unread'").fetchall():
                if (_loads(meta) or {}).get("message_id") in answered:
                    tx.execute("UPDATE letters SET state='read' WHERE id=?", (letter_id,))
                    counts["unread"] -= 1
                    counts["read"] += 1

    def check(self) -> str:
        """A look at spool.db as ``doctor`` takes it: what it holds, or StorageError saying why it
        cannot be used (SQLite's quick_check reads every page: a damaged one is found here)."""
        conn = self._sql()
        problems = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall() if r[0] != "ok"]
        if problems:
            raise StorageError("db-damaged", f"{self.db.path} is damaged ({problems[0][:200]}): {dbmod.RECOVER}")
        count = int(conn.execute("SELECT count(*) FROM letters").fetchone()[0])
        return f"{self.db.path}: {count} letter(s)"

    def drop_caches(self) -> None:
        """Forget every cache (parsed fields, depths, indexes, threads, claims, the search index); the next opening
        rebuilds them from the letter files. For tests and for a person who distrusts them."""
        with self.db.write() as tx:
            tx.execute("UPDATE letters SET meta=NULL, thread=NULL, type=NULL, msgkey=NULL, rawkey=NULL")
            tx.execute("DELETE FROM threads")
            tx.execute("DELETE FROM claims")
            tx.execute("DELETE FROM facts WHERE name='claims'")
            words.clear(tx)
            tx.execute(f"PRAGMA user_version={dbmod.MOVING}")
        self.db.close()

    def _rebuild(self, tx: sqlite3.Connection) -> None:
        """Fill every cache column a row lacks from its letter file, then depths and threads."""
        rows = tx.execute("SELECT id, state, meta FROM letters ORDER BY seq").fetchall()
        for letter_id, state, meta in rows:
            data = _loads(meta)
            if data is None:
                data = self._rebuild_meta(letter_id, state)
            quarantined = state == "quarantine"
            tx.execute(
                "UPDATE letters SET meta=?, thread=?, type=?, msgkey=?, rawkey=? WHERE id=?",
                (
                    json.dumps(data),
                    None if quarantined else str(data.get("thread") or ""),
                    str(data.get("type") or ""),
                    None
                    if quarantined or not data.get("message_id")
                    else _key(str(data.get("from") or ""), data["message_id"]),
                    _raw_key(self.path(state, letter_id).read_bytes()) if quarantined else None,
                    letter_id,
                ),
            )
        tx.execute("DELETE FROM threads")
        for letter_id, state, _meta in rows:
            if state == "quarantine":
                continue
            data = self._parsed(letter_id, state)
            if "depth" not in data:
                data["depth"] = self.depth_for(letter_id, data)
                self._cache_meta(letter_id, data)
            self._mark_thread(tx, str(data.get("thread") or ""), str(data.get("type") or ""))  # in filing order
        tx.execute("DELETE FROM claims")
        tx.execute("DELETE FROM facts WHERE name='claims'")
        words.clear(tx)
        words.fill(tx)

    # --- writing ---------------------------------------------------------------------------

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
        durable (``_restore``).
        """
        if not (defer and self._batch):  # a batch's first letter made the folders moments ago
            self.ensure()
        letter_id = letter.id or new_ulid()
        letter = letter.replace(id=letter_id, state=state)
        if defer:
            with _machine():
                self.db.begin_batch()
        if state != "quarantine":
            letter = letter.replace(depth=self.depth_for(letter_id, letter))
        data = letter.to_json()
        data.pop("state", None)
        data.update(extra or {})
        copied = self._write_tmp(letter_id, raw, durable=durable and not defer, copy=copy if defer else None)
        tmp = self.root / "tmp" / f"{letter_id}.eml"
        if defer:
            with _machine():
                self._insert(self._sql(), letter, data, raw, index)
                if copied and copy is not None:  # where its bytes lie durable, if this copy is lost
                    source = os.path.relpath(copy[0], self.root)  # a moved home still finds it
                    self._annotate(self._sql(), letter_id, {"copy": source, "copy_key": _raw_key(raw)})
            self._batch.append(letter_id)
            if not copied:
                self._written.append(letter_id)
            return letter
        if durable:
            fsync_dir(tmp.parent)  # the file's name is durable before the row that names it
        with _machine(), self.db.write(durable=durable) as tx:
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
        letter = letter.replace(depth=self.depth_for(letter_id, letter))
        data = letter.to_json()
        data.pop("state", None)
        with _machine(), self.db.write() as tx:
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
            self._mark_thread(tx, letter.thread, letter.type)
            words.again(tx, letter_id, data)  # searchable as the letter it is now
        return True

    def drop_quarantined(self, letter_id: str) -> bool:
        """Forget a quarantined copy of a letter filed already (``quarantine recheck``: it now
        passes, and the inbox holds it): what a sync does with a duplicate. Row first, then file."""
        with _machine(), self.db.write() as tx:
            seqs = tx.execute(
                "DELETE FROM letters WHERE id=? AND state='quarantine' RETURNING seq", (letter_id,)
            ).fetchall()
            gone = len(seqs)
            if gone == 1:
                tx.execute("DELETE FROM notes WHERE id=?", (letter_id,))
                words.forget(tx, int(seqs[0][0]))
        if gone == 1:
            for folder in (self._letters, self._tmp):
                try:
                    os.unlink(f"{folder}{letter_id}.eml")
                except FileNotFoundError:
                    pass
        return gone == 1

    def make_durable(self, letter_id: str) -> None:
        """Flush a letter filed with ``durable=False``: its file, its folder, then the database
        (a durable commit fsyncs the write-ahead log, and the row is in it)."""
        path = self.path("", letter_id)
        fsync_file(path)
        fsync_dir(path.parent)
        with _machine(), self.db.write() as tx:
            tx.execute("UPDATE letters SET state=state WHERE id=?", (letter_id,))
        reached("made-durable")

    def warm(self) -> None:
        """A durable commit that changes nothing. SQLite fsyncs the mailbox's folder at a
        connection's first durable commit (it opened the WAL to create it if missing): a waiter
        pays that before it blocks, not in the commit of the letter it waits for."""
        with _machine(), self.db.write() as tx:
            version = int(tx.execute("PRAGMA user_version").fetchone()[0])
            tx.execute(f"PRAGMA user_version={version}")

    def _write_tmp(self, letter_id: str, raw: bytes, durable: bool, copy: tuple[str, int, int] | None = None) -> bool:
        """The letter's file in tmp/, always a file of its own: never a link of the post-office
        file, which is the sender's sent copy too (one inode on the local post office), so an
        edit there would change what this spool hands out. True when ``copy`` is still the very
        file the bytes were read from (durable there: this one is not flushed, DESIGN §7),
        False when written and flushed like any other."""
        tmp = self.root / "tmp" / f"{letter_id}.eml"
        if copy is not None and is_same(copy, len(raw)):
            write_new(tmp, raw, durable=False)
            return True
        write_new(tmp, raw, durable=durable)
        return False

    def _insert(self, tx: sqlite3.Connection, letter: Letter, data: dict[str, Any], raw: bytes, index: bool) -> None:
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
        # The verdict is no part of the letter: kept as a fact, not a cache. So is a person's
        # letter as it was read (its platform, its thread, its new text): the file alone does not say.
        fact = "quarantined" if quarantined else "person_letter" if data.get("person") else None
        if fact:
            self._annotate(tx, letter.id, {fact: {k: v for k, v in data.items() if k != "depth"}})
        if data.get("attachments") and not quarantined:  # what save/apply check the file against later
            self._annotate(tx, letter.id, {"sha256": _sha256(raw)})
        if not quarantined:
            self._mark_thread(tx, letter.thread, letter.type)
        reached("filed-unindexed")  # tests/system/test_crash.py: the row is in, its index rows not yet
        words.put(tx, int(filed.lastrowid or 0), data)  # searchable in the same commit

    def _mark_thread(self, tx: sqlite3.Connection, thread: str, kind: str) -> None:
        """Keep ``threads`` (and which are open) current, so ``status`` costs what is open. A
        close ends the thread, or in a fan-out this platform opened, one counterpart's part of
        it: the thread stays open while another part has no close."""
        if kind == "note":  # a note neither opens nor closes a thread
            tx.execute("INSERT OR IGNORE INTO threads(thread, open) VALUES(?, 0)", (thread,))
        else:
            still_open = kind != "close" or self._parts_open(tx, thread)
            tx.execute(
                "INSERT INTO threads(thread, open) VALUES(?, ?) ON CONFLICT(thread) DO UPDATE SET open=excluded.open",
                (thread, 1 if still_open else 0),
            )

    def _parts_open(self, tx: sqlite3.Connection, thread: str) -> bool:
        """Is a part of this fan-out thread still without a close? (False: not a fan-out of mine.)
        From the thread's records, as filed: the same answer when the caches are rebuilt."""
        me = self.platform_root.name
        parties: list[str] = []
        closed: set[str] = set()
        rows = tx.execute("SELECT meta FROM letters WHERE thread=? AND state!='quarantine' ORDER BY seq", (thread,))
        for (meta,) in rows:
            data = _loads(meta) or {}
            sender, recipients = str(data.get("from") or ""), data.get("recipients") or []
            mine = sender == me
            between = [self._name(str(a)) for a in recipients] if mine and recipients else [str(data.get("to") or "")]
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
            os.rename(self._tmp + name, self._letters + name)
        except FileNotFoundError:
            if not os.path.exists(self._letters + name):
                raise

    def begin_filing(self) -> None:
        """Open a sync batch whose commit does not flush the WAL (DESIGN §7). Safe because the
        batch's checkpoint is written after it into the same WAL, so a power cut that takes the
        filing takes the checkpoint with it (the letters are fetched again), and every change
        that acts on a filed letter (``done``, a reply's claim, a hold's release) is a durable
        commit, which flushes every earlier frame of the WAL first."""
        self.ensure()
        with _machine():
            self.db.begin_batch(durable=False)

    def commit(self) -> None:
        """Make the batch's letter files durable, then commit its rows: all appear, or none.
        A file copied from the post office is not flushed here: its bytes and its name there
        are durable already, and its row notes where (``_restore``; DESIGN §7)."""
        batch, self._batch = self._batch, []  # a failure below must not poison later syncs
        written, self._written = self._written, []
        if not self._sql().in_transaction:
            return
        try:
            tmp_dir = self.root / "tmp"
            if len(written) > 4:
                sync_filesystem(tmp_dir)
            elif written:
                for letter_id in written:
                    fsync_file(tmp_dir / f"{letter_id}.eml")
                fsync_dir(tmp_dir)
            reached("batch-durable")
            with _machine():
                self.db.commit_batch()
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
        self.db.rollback()
        for letter_id in self._batch:
            (self.root / "tmp" / f"{letter_id}.eml").unlink(missing_ok=True)
        self._batch = []
        self._written = []

    def sweep_tmp(self, older_than: float = 3600.0) -> None:
        """Finish what a crash left in tmp/: a filed letter's file is moved into letters/, and
        files that are no letter (never committed) are removed once older than an hour."""
        import time

        cutoff = time.time() - older_than
        try:
            entries = list(os.scandir(self.root / "tmp"))
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                name = entry.name
                if name.endswith(".eml") and self.locate(name[:-4]):
                    self._publish(name[:-4])
                elif entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass

    def move(self, letter_id: str, source: str, target: str, *, durable: bool = True) -> bool:
        """One conditional UPDATE; False when the letter is no longer in ``source`` (someone
        else won). ``durable=False`` where losing it in a power cut is harmless (outbox → sent:
        the letter is submitted again and the receiver drops the duplicate)."""
        with self.db.write(durable=durable) as tx:
            moved = tx.execute(
                "UPDATE letters SET state=? WHERE id=? AND state=?", (target, letter_id, source)
            ).rowcount
        return moved == 1

    def take(self, letter_ids: list[str], source: str, target: str) -> list[str]:
        """Move those of ``letter_ids`` still in ``source`` in one durable transaction; the ids
        this call moved (a claim: concurrent callers never both get one)."""
        if not letter_ids:
            return []
        with self.db.write() as tx:
            marks = ",".join("?" * len(letter_ids))
            rows = tx.execute(
                f"UPDATE letters SET state=? WHERE state=? AND id IN ({marks}) RETURNING id",
                (target, source, *letter_ids),
            ).fetchall()
        return [str(r[0]) for r in rows]

    # --- dedup and indexes -----------------------------------------------------------------

    def known(self, sender: str, message_id: str) -> str | None:
        """The id of the stored letter with this (sender, Message-ID)."""
        row = (
            self._sql()
            .execute("SELECT id FROM letters WHERE msgkey=? ORDER BY seq LIMIT 1", (_key(sender, message_id),))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def named(self, ref: str, senders: tuple[str, ...] = (), most: int = 5) -> list[str]:
        """The letters ``ref`` names, as a user may quote one (DESIGN §8): its id here (any
        case), its Message-ID (with or without the angle brackets; the one name both sides of
        the wire share), or a prefix of either of at least ``MIN_PREFIX`` characters. At most
        ``most`` ids; where several match, the authenticated ones (a forger may reuse a
        Message-ID, into quarantine). ``senders``: the platforms whose (sender, Message-ID)
        index is asked first. Typed text: compared, never parsed or used as a path.

        An id or a whole Message-ID costs an index lookup; a prefix of a Message-ID reads every
        letter's record (a quarter of a second at 100,000 letters)."""
        text = ref.strip()
        lowered = text.lower()
        if lowered.isascii() and lowered.isalnum() and self.locate(lowered):
            return [lowered]
        forms = list(dict.fromkeys(t.removeprefix("<").removesuffix(">") for t in (text, lowered)))
        if not forms[0] or not forms[0].isprintable() or len(forms[0]) > 998:
            return []
        whole = (self.known(sender, f"<{form}>") for form in forms for sender in senders)
        found = {(i, self.locate(i) or "") for i in whole if i}
        if not found and len(forms[0]) >= MIN_PREFIX:
            ids = self._sql().execute(  # ids are [0-9a-z]: "~" sorts after every one
                "SELECT id, state FROM letters WHERE id >= ? AND id <= ? LIMIT ?", (lowered, lowered + "~", most + 1)
            )
            found = {(str(i), str(state)) for i, state in ids}
            patterns = [json.dumps(f"<{form}")[:-1] for form in forms]  # as the record spells it, open-ended
            rows = self._sql().execute(
                f"SELECT id, state, meta FROM letters WHERE {' OR '.join(['instr(meta, ?) > 0'] * len(patterns))}",
                patterns,
            )
            for letter_id, state, meta in rows:
                message_id = str((_loads(meta) or {}).get("message_id") or "")
                if any(message_id.startswith(f"<{form}") for form in forms):
                    found.add((str(letter_id), str(state)))
        ordered = sorted(found)
        trusted = [i for i, state in ordered if state != "quarantine"]
        return (trusted or [i for i, _ in ordered])[:most]

    def has_bytes(self, raw: bytes, sender: str | None = None, message_id: str | None = None) -> bool:
        """Are these exact bytes already filed (a refetch after a crash, a second delivery)?
        Found by (sender, Message-ID) when given, else by their hash (quarantined letters)."""
        if sender and message_id:
            existing = self.known(sender, message_id)
            if existing:
                try:
                    if self.raw(existing) == raw:
                        return True
                except (NotFound, OSError):
                    pass
                # Other bytes under a filed Message-ID (a forgery reusing it): asked by their
                # hash, so a quarantined forgery is recorded once, not again on every resync.
        row = self._sql().execute("SELECT 1 FROM letters WHERE rawkey=? LIMIT 1", (_raw_key(raw),)).fetchone()
        return row is not None

    def _platform_spool(self) -> Spool:
        if self.platform_root == self.root:
            return self
        if self._platform is None:
            self._platform = Spool(self.platform_root, platform_root=self.platform_root, name_of=self.name_of)
        return self._platform

    def _claims(self) -> sqlite3.Connection:
        """The platform's claims (its spool.db), rebuilt from its mailboxes' letters if unbuilt."""
        platform = self._platform_spool().ensure()
        conn = platform._sql()
        if platform.db.fact("claims") != "built":
            with platform.db.write(durable=False) as tx:
                for spool in (platform, *platform.siblings()):
                    for state in ANSWERING:
                        for letter_id in spool.ids(state):
                            parent = spool._parsed(letter_id, state).get("in_reply_to")
                            if parent:
                                tx.execute(
                                    "INSERT OR IGNORE INTO claims(key, holder) VALUES(?, ?)",
                                    (_key(parent), f"{spool.mailbox} {letter_id}"),
                                )
                tx.execute("INSERT OR REPLACE INTO facts(name, value) VALUES('claims', 'built')")
        return conn

    def replied_by(self, message_id: str) -> str | None:
        """Which mailbox of this platform answered ``message_id``, as "<mailbox> <reply id>"."""
        row = self._claims().execute("SELECT holder FROM claims WHERE key=?", (_key(message_id),)).fetchone()
        holder = None if row is None else str(row[0])
        return holder if holder and self._reply_exists(holder) else None

    def _reply_exists(self, holder: str) -> bool:
        """Does the reply a claim names exist (in any outgoing state of its mailbox)?"""
        mailbox, _, reply_id = holder.rpartition(" ")
        mailbox = mailbox or self.platform_root.name
        base = self.platform_root.name
        if not (mailbox == base or mailbox.startswith(base + "@")) or "/" in mailbox:
            return False
        if mailbox == self.mailbox:
            spool = self
        else:
            root = self.platform_root.parent / mailbox
            if not (root / dbmod.FILE).exists() and not root.is_dir():
                return False
            spool = Spool(root, platform_root=self.platform_root, name_of=self.name_of)
        return spool.locate(reply_id) in ANSWERING

    @contextmanager
    def _claims_locked(self) -> Iterator[None]:
        """The platform's claims.lock, taken once per thread: a follow-up to several
        counterparts claims one key inside another (client._claim_all), and a second flock on
        a new descriptor of the same file would wait for the first forever."""
        path = self.platform_root / "claims.lock"
        held: set[Path] = _HOLDING.__dict__.setdefault("claims", set())
        if path in held:
            yield
            return
        with locked(path):
            held.add(path)
            try:
                yield
            finally:
                held.discard(path)

    @contextmanager
    def claim_reply(self, message_id: str, reply_id: str) -> Iterator[str | None]:
        """Claim the one reply of this platform to ``message_id``, across processes and agents.

        Yields None while the claim is ours: file the reply inside the block. Yields who
        answered ("<mailbox> <id>") when another reply exists. The platform's claims are
        locked while the reply is being filed, so a sibling waits and then sees the reply; a
        claim whose reply never got filed (a crash) names no letter and is taken over."""
        key = _key(message_id)
        conn = self._claims()
        platform = self._platform_spool()
        with self._claims_locked():
            row = conn.execute("SELECT holder FROM claims WHERE key=?", (key,)).fetchone()
            holder = None if row is None else str(row[0])
            if holder and self._reply_exists(holder):
                yield holder
                return
            with platform.db.write() as tx:  # on disk before the reply is filed
                tx.execute(
                    "INSERT INTO claims(key, holder) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET holder=excluded.holder",
                    (key, f"{self.mailbox} {reply_id}"),
                )
            yield None

    def _annotate(self, tx: sqlite3.Connection, letter_id: str, fields: dict[str, Any]) -> None:
        row = tx.execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
        data = _loads(row[0]) if row else None
        data = data or {}
        if all(data.get(k) == v for k, v in fields.items()):
            return
        data.update(fields)
        tx.execute("INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(data)))

    def annotate(self, letter_id: str, *, durable: bool = True, **fields: str) -> None:
        """Attach facts learnt later (undeliverable, failed, why it is queued) to a sent letter."""
        if all(self.annotations(letter_id).get(k) == v for k, v in fields.items()):
            return
        with self.db.write(durable=durable) as tx:
            self._annotate(tx, letter_id, fields)

    def annotations(self, letter_id: str) -> dict[str, Any]:
        row = self._sql().execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
        return (_loads(row[0]) if row else None) or {}

    # --- reading ---------------------------------------------------------------------------

    def ids(self, state: str) -> list[str]:
        """Ids in one state, oldest first (ids are ULIDs: they sort by creation)."""
        rows = self._sql().execute("SELECT id FROM letters WHERE state=? ORDER BY id", (state,)).fetchall()
        return [str(r[0]) for r in rows]

    def ids_of_type(self, state: str, kind: str) -> list[str]:
        """Ids in one state whose letters are of type ``kind``, oldest first: one indexed look,
        not every letter of the state read (e.g. the people's letters among the unread)."""
        rows = (
            self._sql().execute("SELECT id FROM letters WHERE state=? AND type=? ORDER BY id", (state, kind)).fetchall()
        )
        return [str(r[0]) for r in rows]

    def unchanged(self, letter_id: str, raw: bytes) -> bool | None:
        """Are ``raw`` the bytes this letter was filed with? From the hash noted at filing (a
        letter with attachments, or one synced from the post office); None: nothing was noted."""
        note = self.annotations(letter_id)
        full, key = note.get("sha256"), note.get("copy_key")
        if isinstance(full, str):
            return _sha256(raw) == full
        if isinstance(key, str):
            return _raw_key(raw) == key
        return None

    def raw(self, letter_id: str) -> bytes:
        state = self.locate(letter_id)
        if state is None:
            raise NotFound(f"no letter {letter_id}")
        return self.path(state, letter_id).read_bytes()

    def meta(self, letter_id: str, state: str | None = None) -> dict[str, Any]:
        del state  # the row says which: a letter moved since it was listed shows where it is now
        row = (
            self._sql()
            .execute(
                "SELECT l.state, l.meta, n.data FROM letters l LEFT JOIN notes n ON n.id = l.id WHERE l.id=?",
                (letter_id,),
            )
            .fetchone()
        )
        if row is None or not letter_id.isalnum():
            raise NotFound(f"no letter {letter_id}")
        return self._complete(letter_id, *row)

    def _complete(self, letter_id: str, state: str, meta: str | None, notes: str | None) -> dict[str, Any]:
        data = _loads(meta)
        if data is None:  # the cache is gone or torn: parsed again, and written back
            data = self._rebuild_meta(letter_id, state)
            if state != "quarantine":
                data["depth"] = self.depth_for(letter_id, data)
            self._cache_meta(letter_id, data)
        elif state != "quarantine" and "depth" not in data:
            data["depth"] = self.depth_for(letter_id, data)
            self._cache_meta(letter_id, data)
        data["id"] = letter_id
        data["state"] = state
        if state in OUTGOING:
            data.update(_loads(notes) or {})
        return data

    def _parsed(self, letter_id: str, state: str) -> dict[str, Any]:
        """The cached fields, or (gone or torn) the letter parsed again; no depth computed here."""
        row = self._sql().execute("SELECT meta FROM letters WHERE id=?", (letter_id,)).fetchone()
        data = _loads(row[0]) if row else None
        return data if data is not None else self._rebuild_meta(letter_id, state)

    def _cache_meta(self, letter_id: str, data: dict[str, Any]) -> None:
        clean = {k: v for k, v in data.items() if k != "state"}
        with self.db.write(durable=False) as tx:
            tx.execute("UPDATE letters SET meta=? WHERE id=?", (json.dumps(clean), letter_id))

    def _rebuild_meta(self, letter_id: str, state: str) -> dict[str, Any]:
        """The cache is gone or torn: parse the letter again (no verdicts: it is already filed)."""
        from ..letter import wire

        verdict = self.annotations(letter_id).get("quarantined" if state == "quarantine" else "person_letter")
        if isinstance(verdict, dict):  # what the verdict saw (or a person's letter as it was read)
            return dict(verdict)
        raw = self.path(state, letter_id).read_bytes()
        try:
            letter = wire.to_letter(wire.parse_message(raw, len(raw) + 1))
            data = letter.to_json()
            del data["depth"]  # not in the letter file: depth_for walks the chain when it is asked
            data["from"] = self._name(data["sender_address"])
            data["to"] = self._name(data["to_address"])
        except wire.Malformed as exc:
            data = {"id": letter_id, "reason": exc.reason, "detail": exc.detail}
        data["id"] = letter_id
        data.pop("state", None)
        return data

    def _name(self, address: str) -> str:
        """The platform an address belongs to (the registry's answer, else its local part)."""
        if not address:
            return ""
        named = self.name_of(address) if self.name_of else None
        return named or address.partition("@")[0].split("+")[0]

    def depth_for(self, letter_id: str, letter: Letter | dict[str, Any]) -> int:
        """How deep ``letter`` (id ``letter_id``, filed or about to be) is in its thread.

        Its parent's depth + 1, where the parent is the letter filed here before it whose
        Message-ID it answers (sent by this platform or by either side of it), and never less
        than its References count. Only the letter files go into it, so a lost cache gives the
        same number."""
        chain: list[tuple[str, dict[str, Any]]] = []
        node: tuple[str, dict[str, Any]] | None = (letter_id, _facts(letter))
        base = -1
        while node is not None:
            node_id, facts = node
            chain.append(node)
            node = None
            parent_mid = facts.get("in_reply_to")
            if not parent_mid:
                break
            sides = (self.platform_root.name, facts.get("from") or "", facts.get("to") or "")  # mine first: a
            for side in dict.fromkeys(sides):  # wrong To never hides that it answers one of my letters
                parent_id = self.known(side, parent_mid)
                if parent_id and parent_id < node_id:  # filed before it: the chain has no cycles
                    parent = self._parsed(parent_id, self.locate(parent_id) or "")
                    if "depth" in parent:
                        base = int(parent["depth"])
                    else:
                        node = (parent_id, parent)
                    break
        depth = base
        for node_id, facts in reversed(chain):
            depth = max(depth + 1, len(facts.get("references") or ()))
            if node_id != letter_id and self.locate(node_id):
                self._cache_meta(node_id, {**facts, "depth": depth})
        return depth

    def letter(self, letter_id: str, state: str | None = None) -> Letter:
        """The filed letter, with its state, depth and what was learnt about it later (``extra``)."""
        return Letter.from_json(self.meta(letter_id, state))

    def letters(self, state: str) -> list[Letter]:
        rows = (
            self._sql()
            .execute(
                "SELECT l.id, l.state, l.meta, n.data FROM letters l LEFT JOIN notes n ON n.id = l.id "
                "WHERE l.state=? ORDER BY l.id",
                (state,),
            )
            .fetchall()
        )
        return [Letter.from_json(self._complete(str(i), s, m, n)) for i, s, m, n in rows]

    def thread_ids(self, thread: str) -> list[str]:
        rows = (
            self._sql()
            .execute("SELECT id FROM letters WHERE thread=? AND state!='quarantine' ORDER BY seq", (thread,))
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def open_threads(self) -> list[str]:
        """Threads whose last letter is not a close (notes neither open nor close one)."""
        rows = self._sql().execute("SELECT thread FROM threads WHERE open=1 ORDER BY thread").fetchall()
        return [str(r[0]) for r in rows]

    def closed_threads(self) -> int:
        """How many threads are closed (notes' threads are none): one count over the threads
        cache, for the "no open threads" line, without reading their letters."""
        row = (
            self._sql()
            .execute(
                "SELECT count(*) FROM threads t WHERE open=0 AND EXISTS (SELECT 1 FROM letters l"
                " WHERE l.thread=t.thread AND l.type != 'note' AND l.state != 'quarantine')"
            )
            .fetchone()
        )
        return int(row[0])

    def threads(self) -> list[str]:
        rows = self._sql().execute("SELECT thread FROM threads ORDER BY thread").fetchall()
        return [str(r[0]) for r in rows]

    def opened_since(self, cutoff_ms: int) -> list[str]:
        """The ids of the threads' first letters this *platform* (every agent's mailbox) sent or
        queued or holds, created at or after ``cutoff_ms`` (ms since the epoch), oldest first.
        From the letters alone (the id is a ULID: its creation time), so the count survives
        restarts and rebuilt caches."""
        return sorted(self.openers_since(cutoff_ms).values())

    def openers_since(self, cutoff_ms: int) -> dict[str, str]:
        """``opened_since`` keyed by each letter's Message-ID (the key the server's count shares,
        client/quota.py). The rows come from the id index, from ``cutoff_ms`` on: what the window
        holds, never the history."""
        from ..model import ulid_ms

        found: dict[str, str] = {}
        floor = _ulid_floor(cutoff_ms)
        for spool in (self, *self.siblings()):
            rows = (
                spool._sql()
                .execute(
                    "SELECT id, state FROM letters WHERE id >= ? AND state IN (?, ?, ?, ?)",
                    (floor, *LEAVING, "sibling"),
                )
                .fetchall()
            )
            for letter_id, state in rows:
                if ulid_ms(letter_id) < cutoff_ms:
                    continue
                data = spool._parsed(letter_id, state)
                if not data.get("in_reply_to") and data.get("type") != "note" and "reason" not in data:
                    found[str(data.get("message_id") or letter_id)] = letter_id
        return found

    def note_recipients(self) -> set[str]:
        """The agent names the platform's notes (every mailbox of it here) were addressed to:
        from the type index, the notes alone."""
        found: set[str] = set()
        for spool in (self, *self.siblings()):
            rows = spool._sql().execute("SELECT id, state FROM letters WHERE type='note'").fetchall()
            for letter_id, state in rows:
                name = spool._parsed(letter_id, state).get("to_agent")
                if isinstance(name, str) and name:
                    found.add(name)
        return found

    # --- checkpoint ------------------------------------------------------------------------

    def checkpoint(self, transport: str) -> str | None:
        row = self._sql().execute("SELECT value FROM checkpoints WHERE transport=?", (transport,)).fetchone()
        return None if row is None or not isinstance(row[0], str) else row[0]

    def set_checkpoint(self, transport: str, value: str | None) -> None:
        # Not durable: a checkpoint lost in a crash only means a refetch, and the spool drops
        # what it already holds. It is written after the letters are durable, never before.
        with self.db.write(durable=False) as tx:
            tx.execute("INSERT OR REPLACE INTO checkpoints(transport, value) VALUES(?, ?)", (transport, value))
        reached("checkpoint-set")
