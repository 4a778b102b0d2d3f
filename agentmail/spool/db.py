"""The spool's SQLite file: schema, opening, and transactions (DESIGN §7).

One ``spool.db`` per mailbox, in WAL mode: readers never wait for the writer, writers queue
behind each other (``BEGIN IMMEDIATE`` with a long busy timeout, so a second writer waits
rather than fails). Opening costs a connect and one ``PRAGMA user_version``; the schema is
created, or a spool of the per-file layout converted, only when that number says so.

Durability is chosen per transaction, to be exactly what each write was before: ``durable``
commits run with ``synchronous=FULL`` (the WAL is fsynced at COMMIT), the others with
``NORMAL`` (written to the WAL, fsynced by the next durable commit or checkpoint; a crash of
the process loses nothing, a power cut may lose them: a refetch or a retry makes up for it).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .._fs import locked
from ..errors import StorageError
from . import ledger

FILE = "spool.db"
STALE = (f"{FILE}-wal", f"{FILE}-shm")  # SQLite's files beside it: alone, they are no database
# SQLite's primary result codes (the low byte of sqlite_errorcode) that name a storage failure
_FULL, _CORRUPT, _NOTADB, _IOERR = 13, 11, 26, 10
RECOVER = "run 'agentmail rebuild' to rebuild it from the letter files (or restore it from a backup)"
# user_version: 0 a new file · MOVING the rows are in, letter files still being moved out of
# the state folders of the old layout · UNINDEXED ready but without the search index (its
# tables are made and filled at the next opening, the old search.sqlite beside it removed) ·
# UNLEDGERED ready but its ledger not begun (written from the rows at the next opening) ·
# UNOPENED ready but without the openers table (made and filled from the rows at the next
# opening) · CURRENT ready.
MOVING = 1
UNINDEXED = 2
UNLEDGERED = 3
UNOPENED = 4
CURRENT = 5
BUSY_MS = 600_000  # a writer waits this long for another before giving up (never on a busy box)

SCHEMA = """
CREATE TABLE letters(
  seq INTEGER PRIMARY KEY,   -- filing order (threads list their letters in it)
  id TEXT NOT NULL UNIQUE,   -- the letter file letters/<id>.eml
  state TEXT NOT NULL,       -- unread read sent outbox held failed quarantine   (the truth)
  meta TEXT,                 -- what was parsed from the letter, with its depth  (cache, NULL: parse again)
  thread TEXT,               -- its thread (NULL in quarantine)                  (cache)
  type TEXT,                 --                                                 (cache)
  msgkey TEXT,               -- hash of (sender platform, Message-ID)            (cache)
  rawkey TEXT                -- hash of the bytes, for quarantined letters       (cache)
);
CREATE INDEX letters_state ON letters(state, id);
CREATE INDEX letters_thread ON letters(thread, seq);
CREATE INDEX letters_msgkey ON letters(msgkey);
CREATE INDEX letters_rawkey ON letters(rawkey);
CREATE TABLE notes(id TEXT PRIMARY KEY, data TEXT NOT NULL);          -- annotations (the truth)
CREATE TABLE threads(thread TEXT PRIMARY KEY, open INTEGER NOT NULL); -- open threads (cache)
CREATE INDEX threads_open ON threads(open, thread);
CREATE TABLE claims(key TEXT PRIMARY KEY, holder TEXT NOT NULL);     -- reply claims (cache)
CREATE TABLE checkpoints(transport TEXT PRIMARY KEY, value TEXT);
CREATE TABLE facts(name TEXT PRIMARY KEY, value TEXT);               -- e.g. which caches are built
"""
# The threads this mailbox opened (sent, queued, held, a sibling's), for the new-thread quota:
# written in the transaction that files the letter, so counting the hour reads the hour's rows
# and nothing else (cache; its state is the letter's row).
OPENERS = """
CREATE TABLE IF NOT EXISTS openers(
  id TEXT PRIMARY KEY,       -- the letter (letters.id): ids sort by creation time
  ms INTEGER NOT NULL,       -- when it was made (the id's time)
  key TEXT NOT NULL          -- model.opener_key of its Message-ID: the post office's marker name
) WITHOUT ROWID
"""

# Test hook: called with the name of each point a crash may land on (tests/system/test_crash.py
# kills the process there); None in production.
crash_point: Callable[[str], None] | None = None


def reached(point: str) -> None:
    if crash_point is not None:
        crash_point(point)


def storage_error(exc: sqlite3.Error, path: Path) -> StorageError:
    """What SQLite said, as the one line a person acts on (DESIGN §8, exit 7)."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == _FULL:
        return StorageError(
            "disk-full",
            f"the disk holding {path} is full ({exc}): nothing was changed; free some space and run the command again",
        )
    if code in (_CORRUPT, _NOTADB):
        return StorageError("db-damaged", f"{path} is damaged ({exc}): {RECOVER}")
    if code == _IOERR:
        return StorageError(
            "db-io", f"{path} could not be read or written ({exc}): check the disk, then 'agentmail doctor'"
        )
    return StorageError("db-error", f"spool database: {exc} ({path})")


class _Connection(sqlite3.Connection):
    """Every statement's storage failure translated at the one place SQLite is called."""

    where: Path

    def execute(self, sql: str, parameters: object = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)  # type: ignore[arg-type]
        except sqlite3.OperationalError as exc:
            raise storage_error(exc, self.where) from exc
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # IntegrityError and the like: our own logic's
                raise
            raise storage_error(exc, self.where) from exc


class Db:
    """One mailbox's database: a connection per thread (and per process: never across fork)."""

    def __init__(self, root: Path, prepare: Callable[[Db], None]) -> None:
        self.root = root
        self.path = root / FILE
        self._prepare = prepare  # creates or converts the file when its version says so
        self._local = threading.local()
        self._pid = -1

    def conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._local = threading.local()
            self._pid = os.getpid()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            self._local.durable = True
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] != CURRENT:
                    self._prepare(self)
            except BaseException:
                self.close()
                raise
        return conn

    def _connect(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.path.exists(self.path):
            stale = [name for name in STALE if os.path.lexists(self.root / name)]
            if stale:  # SQLite would open a new, empty file beside them, or fail on them
                raise StorageError(
                    "db-stale-wal",
                    f"{self.path} is missing but {' and '.join(stale)} from a removed database lie beside "
                    f"it: the mailbox's states, notes, claims and checkpoints are not in them; {RECOVER}",
                )
        try:  # a file SQLite cannot open at all (a folder in its place): the spool's storage, said so
            conn = sqlite3.connect(
                self.path, timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False, factory=_Connection
            )
        except sqlite3.Error as exc:
            raise storage_error(exc, self.path) from None
        conn.where = self.path
        conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        os.chmod(self.path, 0o600)
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._pid == os.getpid():
            conn.close()
        self._local = threading.local()

    def version(self) -> int:
        return int(self.conn().execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def setup_lock(self) -> Iterator[None]:
        """Creating or converting the file: one process at a time, the others wait for it."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with locked(self.root / "setup.lock"):
            yield

    def _durability(self, conn: sqlite3.Connection, durable: bool) -> None:
        if self._local.durable != durable:
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._local.durable = durable

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction; joins the one already open (a sync batch) rather than nesting."""
        conn = self.conn()
        if conn.in_transaction:  # a sync batch: committed (durably) with it
            yield conn
            return
        self._durability(conn, durable)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            self._local.__dict__.pop("ledger", None)
            raise
        self._commit(conn)

    def log(self, record: dict[str, object]) -> None:
        """A change of the truth (a state, a letter's notes) for the ledger, written there when
        the transaction that made it commits and forgotten if it rolls back (``spool/ledger.py``)."""
        pending: list[bytes] = self._local.__dict__.setdefault("ledger", [])
        pending.append(ledger.line(record))

    def _commit(self, conn: sqlite3.Connection) -> None:
        """COMMIT, and the ledger's lines of this transaction after it, in commit order."""
        with ledger.appending(str(self.root), self._local.__dict__.pop("ledger", [])):
            conn.execute("COMMIT")

    def begin_batch(self, *, durable: bool = True) -> sqlite3.Connection:
        """Open the transaction a sync batch fills; ``commit_batch`` or ``rollback`` ends it.
        ``durable=False``: committed with no WAL flush (``SpoolWriter.begin_filing``)."""
        conn = self.conn()
        if not conn.in_transaction:
            self._durability(conn, durable)
            conn.execute("BEGIN IMMEDIATE")
        return conn

    def commit_batch(self) -> None:
        conn = self.conn()
        if conn.in_transaction:
            self._commit(conn)

    def rollback(self) -> None:
        conn = self.conn()
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        self._local.__dict__.pop("ledger", None)

    def fact(self, name: str) -> str | None:
        row = self.conn().execute("SELECT value FROM facts WHERE name=?", (name,)).fetchone()
        return None if row is None else str(row[0])


def create(conn: sqlite3.Connection) -> None:
    """The schema, inside the caller's transaction (a crash leaves no half-made file)."""
    for statement in SCHEMA.split(";"):
        code = "\n".join(line.partition("--")[0] for line in statement.splitlines())
        if code.strip():
            conn.execute(code)
    create_openers(conn)


def create_openers(conn: sqlite3.Connection) -> None:
    """The openers table, if the file has none (one made before it, or left MOVING by such a release)."""
    conn.execute("\n".join(line.partition("--")[0] for line in OPENERS.splitlines()))
