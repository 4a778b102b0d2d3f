"""One mailbox's spool over SQLite and letter files (DESIGN §7): ``Spool``, opened, rebuilt and
claiming replies.

The spool is four layers, each on the one below: ``layout`` (where the files and spool.db lie,
the locks, the checkpoints), ``views`` (reading rows), ``filing`` (writing them: born in
``tmp/``, made durable, the row committed, renamed into ``letters/``; a state change is one
conditional UPDATE; a sync batch is one transaction) and this module: opening spool.db
(created, converted or rebuilt), ``recover`` after a lost spool.db, and the per-home reply claim.

Rows hold two kinds of column: the truth (id, state, filing order; the notes table; the
checkpoints) and caches (everything else), which ``drop_caches`` clears and the next opening
rebuilds from the letter files with the same answers. A letter's depth is its place in the
local In-Reply-To chain: its parent's depth + 1, where the parent is a letter filed here before
it (the References a sender wrote do not count).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Self

from .._fs import fsync_dir, locked, read_plain
from ..errors import StorageError
from ..model import Letter
from . import db as dbmod
from . import ledger, words
from .db import Db, reached
from .filing import SpoolFiling
from .layout import (
    ANSWERING,
    LEAVING,
    MIN_PREFIX,
    OUTGOING,
    STATES,
    _key,
    _loads,
    _raw_key,
    reply_key,
)

_HOLDING = threading.local()  # the claims locks this thread holds (see Spool._claims_locked)
# The claims cache keyed by ``reply_key`` (sender and Message-ID): one built by Message-ID alone is built again.
CLAIMS_BUILT = "built-by-sender"


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


# ``recover``'s judge: (id, bytes, what the ledger last said of it) -> (state, letter) or None
Classify = Callable[[str, bytes, "ledger.Entry | None"], "tuple[str, Letter] | None"]


def _filing_order(letter_id: str, entry: ledger.Entry | None) -> tuple[int, int, str]:
    """Letters the ledger numbered, in the order they were filed; those it does not know (filed
    before it was kept), first, by id."""
    if entry is None or entry.seq < 0:
        return (0, 0, letter_id)
    return (1, entry.seq, letter_id)


def _said(was: dict[str, ledger.Entry], letter_id: str) -> bool:
    """Does the ledger say how the letter stood?"""
    entry = was.get(letter_id)
    return entry is not None and bool(entry.state)


__all__ = ["ANSWERING", "LEAVING", "MIN_PREFIX", "OUTGOING", "STATES", "Spool"]


class Spool(SpoolFiling):
    """One mailbox's spool at ``root``. ``platform_root`` is the spool of the platform itself
    (``spool/<platform>``): its reply claims are shared by every agent of the platform.
    ``name_of`` maps an address to a platform name, for rebuilding ``from``/``to``."""

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
                    migrate.remove_old_index(self.root)  # a search.sqlite beside a lost or older spool
                    moving = migrate.import_rows(self.root, tx)
                    self._begin_ledger(tx)
                    tx.execute(f"PRAGMA user_version={dbmod.MOVING if moving else dbmod.CURRENT}")
                reached("migration-rows")
                version = db.version()
            if version == dbmod.MOVING:
                migrate.move_files(self.root)
                with db.write() as tx:
                    words.create(tx)  # a file an older release left MOVING has none yet
                    dbmod.create_openers(tx)  # (nor this)
                    self._rebuild(tx)
                    migrate.remove_old(self.root)
                    migrate.remove_old_index(self.root)
                    self._begin_ledger(tx)
                    reached("migration-cleaned")
                    tx.execute(f"PRAGMA user_version={dbmod.CURRENT}")
            if version == dbmod.UNINDEXED:  # the search index moves in from search.sqlite beside it
                with db.write() as tx:
                    words.create(tx)
                    words.fill(tx)
                    migrate.remove_old_index(self.root)
                    tx.execute(f"PRAGMA user_version={dbmod.UNLEDGERED}")
                version = dbmod.UNLEDGERED
            if version == dbmod.UNLEDGERED:  # a spool of an older release: its ledger begins
                with db.write() as tx:
                    self._begin_ledger(tx)
                    tx.execute(f"PRAGMA user_version={dbmod.UNOPENED}")
                version = dbmod.UNOPENED
            if version == dbmod.UNOPENED:  # a spool of the release before: the quota's rows from its letters
                with db.write() as tx:
                    dbmod.create_openers(tx)
                    self._fill_openers(tx)
                    tx.execute(f"PRAGMA user_version={dbmod.CURRENT}")

    def _begin_ledger(self, tx: sqlite3.Connection) -> None:
        """Every row's state and notes into the ledger, in filing order, when this transaction
        commits: a spool filed before the ledger was kept is rebuilt as it stands from then on."""
        for letter_id, state, seq in tx.execute("SELECT id, state, seq FROM letters ORDER BY seq").fetchall():
            self.db.log({"id": letter_id, "state": state, "seq": seq})
        for letter_id, data in tx.execute("SELECT id, data FROM notes ORDER BY id").fetchall():
            self.db.log({"id": letter_id, "notes": _loads(data) or {}})

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

    def recover(self, classify: Classify) -> dict[str, Any]:
        """Make spool.db again from the letter files and the ledger (``agentmail rebuild``; DESIGN §7).

        What is there (spool.db, its -wal and -shm) is kept aside as ``<name>.lost-<time>``, never
        deleted. Each file in ``letters/`` is given to ``classify`` (id, bytes, what the ledger
        last said of it; the letters it knows first, latest first, then the others by id), which says its state and
        letter (None: not restored, the file is left); the ledger's notes of it come back with it. A received letter the
        ledger says nothing of that one of the restored letters answers is ``read``. No
        checkpoint is restored: the next sync reads the post office from the start and drops
        what is filed already."""
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

    def _recover_rows(self, classify: Classify, counts: dict[str, Any]) -> None:
        self.ensure()
        was = ledger.read(str(self.root), STATES)  # before any write of this rebuild adds to it
        with self.db.write() as tx:
            # tmp/ only for what the ledger says was committed (its rename into letters/ undone
            # by a power cut, or not made yet): any other file there may be a letter never
            # committed (no letter), and what was received is fetched again anyway.
            published = self._letter_files(born=False)
            committed = set(published) | {i for i, entry in was.items() if entry.state}
            judged_all: list[tuple[str, str, Letter]] = []  # not the bytes (read again below): a big spool stays small
            # What the ledger knows first, the last filed first (of two filings of one letter, a
            # power cut took the earlier from spool.db); then the files it does not know, judged
            # against them.
            files = [i for i in self._letter_files() if i in committed]
            said = sorted((i for i in files if _said(was, i)), reverse=True)
            for letter_id in said + [i for i in files if not _said(was, i)]:
                try:
                    raw, _st = read_plain(self.path("", letter_id))
                except OSError:
                    raw = None
                judged = classify(letter_id, raw, was.get(letter_id)) if raw is not None else None
                if judged is None or raw is None:
                    counts["left"] += 1
                    continue
                judged_all.append((letter_id, *judged))
            judged_all.sort(key=lambda item: _filing_order(item[0], was.get(item[0])))
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
                entry = was.get(letter_id)
                if entry is not None and entry.notes_said:  # the notes as they were, whole
                    tx.execute(
                        "INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(entry.notes))
                    )
                    self.db.log({"id": letter_id, "notes": entry.notes})
                counts[state] += 1
            answering = tx.execute(
                "SELECT meta FROM letters WHERE state IN ('outbox', 'held', 'sent', 'sibling')"
            ).fetchall()
            answered = {(_loads(meta) or {}).get("in_reply_to") for (meta,) in answering} - {None, ""}
            for letter_id, meta in tx.execute("SELECT id, meta FROM letters WHERE state='unread'").fetchall():
                if letter_id in was and was[letter_id].state:
                    continue  # the ledger said how it stood
                if (_loads(meta) or {}).get("message_id") in answered:
                    tx.execute("UPDATE letters SET state='read' WHERE id=?", (letter_id,))
                    self.db.log({"id": letter_id, "state": "read"})
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
        """Forget every cache (parsed fields, depths, indexes, threads, claims, openers, the search index); the next opening
        rebuilds them from the letter files. For tests and for a person who distrusts them."""
        with self.db.write() as tx:
            tx.execute("UPDATE letters SET meta=NULL, thread=NULL, type=NULL, msgkey=NULL, rawkey=NULL")
            tx.execute("DELETE FROM threads")
            tx.execute("DELETE FROM claims")
            tx.execute("DELETE FROM facts WHERE name='claims'")
            tx.execute("DELETE FROM openers")
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
        self._fill_openers(tx)
        words.clear(tx)
        words.fill(tx)

    def _platform_spool(self) -> Self:
        if self.platform_root == self.root:
            return self
        if self._platform is None:
            self._platform = type(self)(self.platform_root, platform_root=self.platform_root, name_of=self.name_of)
        return self._platform

    def _claims(self) -> sqlite3.Connection:
        """The platform's claims (its spool.db), rebuilt from its mailboxes' letters if unbuilt."""
        platform = self._platform_spool().ensure()
        conn = platform._sql()
        if platform.db.fact("claims") != CLAIMS_BUILT:
            spools = (platform, *platform.siblings())
            me = self.platform_root.name
            with platform.db.write(durable=False) as tx:
                for spool in spools:
                    for state in ANSWERING:
                        for letter_id in spool.ids(state):
                            data = spool._parsed(letter_id, state)
                            parent = data.get("in_reply_to")
                            if parent:
                                answered = reply_key(parent, _answered_sender(spools, me, data))
                                tx.execute(
                                    "INSERT OR IGNORE INTO claims(key, holder) VALUES(?, ?)",
                                    (_key(answered), f"{spool.mailbox} {letter_id}"),
                                )
                tx.execute("INSERT OR REPLACE INTO facts(name, value) VALUES('claims', ?)", (CLAIMS_BUILT,))
        return conn

    def replied_by(self, answered: str) -> str | None:
        """Which mailbox of this platform answered ``answered`` (``layout.reply_key``), as "<mailbox> <reply id>"."""
        row = self._claims().execute("SELECT holder FROM claims WHERE key=?", (_key(answered),)).fetchone()
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
    def claim_reply(self, answered: str, reply_id: str) -> Iterator[str | None]:
        """Claim the one reply of this platform to ``answered`` (``layout.reply_key``: the letter's
        Message-ID and verified sender), across processes and agents.

        Yields None while the claim is ours: file the reply inside the block. Yields who
        answered ("<mailbox> <id>") when another reply exists. The platform's claims are
        locked while the reply is being filed, so a sibling waits and then sees the reply; a
        claim whose reply never got filed (a crash) names no letter and is taken over."""
        key = _key(answered)
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


def _answered_sender(spools: tuple[Spool, ...], me: str, reply: dict[str, Any]) -> str:
    """Whose letter a filed reply answers: this platform's own, when it holds that letter in the
    reply's thread (a follow-up); else the platform the reply went to."""
    parent, thread = str(reply.get("in_reply_to") or ""), reply.get("thread")
    for spool in spools:
        found = spool.known(me, parent)
        if found is not None and spool.letter(found).thread == thread:
            return me
    return str(reply.get("to") or "")
