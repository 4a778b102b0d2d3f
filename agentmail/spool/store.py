"""One mailbox's spool over SQLite and letter files (DESIGN §7): ``Spool``, the one object a
caller opens. It holds the mailbox's ``layout`` (its files and spool.db), a ``read`` side
(``views.SpoolReader``: every query, no method that changes a letter), a ``write`` side
(``filing.SpoolWriter``: born in ``tmp/``, made durable, the row committed, renamed into
``letters/``; a state change is one conditional UPDATE; a sync batch is one transaction) and the
platform's per-home reply claims (``home_claims``). This module opens spool.db (created,
converted or rebuilt) and makes it again after it was lost (``recover``).

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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Self

from .._fs import fsync_dir, locked
from ..errors import StorageError
from . import db as dbmod
from . import words
from .db import Db, reached
from .filing import SpoolWriter
from .home_claims import HomeClaims
from .layout import (
    ANSWERING,
    LEAVING,
    MIN_PREFIX,
    OUTGOING,
    STATES,
    Layout,
    _key,
    _loads,
    _raw_key,
)
from .recover import Classify, restore_rows
from .views import SpoolReader

__all__ = ["ANSWERING", "LEAVING", "MIN_PREFIX", "OUTGOING", "STATES", "Spool"]


class Spool:
    """One mailbox's spool at ``root``. ``platform_root`` is the spool of the platform itself
    (``spool/<platform>``): its reply claims are shared by every agent of the platform.
    ``name_of`` maps an address to a platform name, for rebuilding ``from``/``to``.

    Hand a command that only looks ``spool.read``: its type has no method that changes a letter."""

    def __init__(
        self, root: Path, *, platform_root: Path | None = None, name_of: Callable[[str], str | None] | None = None
    ) -> None:
        self.layout = Layout(root, self._prepare, platform_root=platform_root, name_of=name_of)
        self.root = root
        self.platform_root = self.layout.platform_root
        self.name_of = name_of
        self.db = self.layout.db
        self.read = SpoolReader(self.layout, lambda: [s.read for s in self.siblings()])
        self.write = SpoolWriter(self.layout, self.read)
        self.home_claims = HomeClaims(self)
        self._recovering = False  # recover() is making spool.db again: no refusal, its lock held

    @property
    def mailbox(self) -> str:
        return self.root.name

    def siblings(self) -> list[Self]:
        """The spools of the other mailboxes of this platform (platform and platform@agent)."""
        base = self.platform_root
        found = [base] + sorted(base.parent.glob(f"{base.name}@*")) if base.parent.is_dir() else []
        return [self.mailbox_at(p) for p in found if p != self.root and p.is_dir()]

    def mailbox_at(self, root: Path) -> Self:
        """The spool of the mailbox of this platform at ``root`` (this one's platform and names)."""
        return type(self)(root, platform_root=self.platform_root, name_of=self.name_of)

    def ensure(self) -> Self:
        """The mailbox's folders made and spool.db opened (created, converted or rebuilt)."""
        self.layout.ensure()
        return self

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
                    self.write._fill_openers(tx)
                    tx.execute(f"PRAGMA user_version={dbmod.CURRENT}")

    def _begin_ledger(self, tx: sqlite3.Connection) -> None:
        """Every row's state and notes into the ledger, in filing order, when this transaction
        commits: a spool filed before the ledger was kept is rebuilt as it stands from then on."""
        for letter_id, state, seq in tx.execute("SELECT id, state, seq FROM letters ORDER BY seq").fetchall():
            self.db.log({"id": letter_id, "state": state, "seq": seq})
        for letter_id, data in tx.execute("SELECT id, data FROM notes ORDER BY id").fetchall():
            self.db.log({"id": letter_id, "notes": _loads(data) or {}})

    def _refuse_if_lost(self) -> None:
        """A new spool.db beside filed letters is a lost one: their states, notes, claims and the
        checkpoints were in it. Starting afresh would read the post office from the start, every
        letter unread again and every reply claim gone (a second answer to an answered letter):
        refused, until it is rebuilt from the letter files or restored."""
        held = self.layout.letter_files()
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
                restore_rows(self, classify, counts)
            finally:
                self._recovering = False
                self.db.close()
        counts["kept_aside"] = aside
        return counts

    def check(self) -> str:
        """A look at spool.db as ``doctor`` takes it: what it holds, or StorageError saying why it
        cannot be used (SQLite's quick_check reads every page: a damaged one is found here)."""
        conn = self.db.conn()
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
                data = self.read._rebuild_meta(letter_id, state)
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
                    _raw_key(self.read.path(state, letter_id).read_bytes()) if quarantined else None,
                    letter_id,
                ),
            )
        tx.execute("DELETE FROM threads")
        for letter_id, state, _meta in rows:
            if state == "quarantine":
                continue
            data = self.read._parsed(letter_id, state)
            if "depth" not in data:
                data["depth"] = self.read.depth_for(letter_id, data)
                self.read._cache_meta(letter_id, data)
            self.write._mark_thread(tx, str(data.get("thread") or ""), str(data.get("type") or ""))  # in filing order
        tx.execute("DELETE FROM claims")
        tx.execute("DELETE FROM facts WHERE name='claims'")
        self.write._fill_openers(tx)
        words.clear(tx)
        words.fill(tx)
