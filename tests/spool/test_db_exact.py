"""The spool's SQLite file (``spool/db.py``), exactly: each storage failure said as its one line,
the schema as SQLite keeps it, the refusal of a database's leftovers without it, and the
transactions' edges (joined, rolled back, committed with their ledger lines)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentmail.errors import StorageError
from agentmail.spool import db
from agentmail.spool.db import Db

WHERE = Path("/spool/beta/spool.db")


def _made(base: Db) -> None:
    """What a spool's own preparation does, at its least: the schema, then the version."""
    with base.write() as conn:
        db.create(conn)
        conn.execute(f"PRAGMA user_version={db.CURRENT}")


def _error(kind: type[sqlite3.Error], code: int | None, text: str = "it said so") -> sqlite3.Error:
    exc = kind(text)
    if code is not None:
        exc.sqlite_errorcode = code  # type: ignore[attr-defined]  (set by SQLite when it raises)
    return exc


@pytest.mark.parametrize(
    ("code", "reason", "said"),
    [
        (
            13,
            "disk-full",
            f"the disk holding {WHERE} is full (it said so): nothing was changed; "
            "free some space and run the command again",
        ),  # fmt: skip
        (13 | 0x300, "disk-full", None),  # an extended code: its low byte is the primary one
        (11, "db-damaged", f"{WHERE} is damaged (it said so): {db.RECOVER}"),
        (26, "db-damaged", f"{WHERE} is damaged (it said so): {db.RECOVER}"),
        (10, "db-io", f"{WHERE} could not be read or written (it said so): check the disk, then 'agentmail doctor'"),
        (10 | 0x100, "db-io", None),
        (5, "db-error", f"spool database: it said so ({WHERE})"),
        (0, "db-error", None),
        (None, "db-error", f"spool database: it said so ({WHERE})"),  # made by hand: no code at all
    ],
)
def test_each_storage_failure_is_its_reason_and_one_line(code: int | None, reason: str, said: str | None) -> None:
    error = db.storage_error(_error(sqlite3.OperationalError, code), WHERE)
    assert error.reason == reason and error.exit_code == 7
    if said is not None:
        assert str(error) == said


def test_a_statements_storage_failure_is_a_storage_error_and_our_own_logics_is_not(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    conn = base.conn()
    conn.execute("CREATE TABLE t(x PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(StorageError) as raised:
        conn.execute("SELECT x FROM nowhere")
    assert raised.value.reason == "db-error"
    assert str(raised.value) == f"spool database: no such table: nowhere ({tmp_path / db.FILE})"
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)


def test_a_file_that_is_no_database_is_said_damaged_at_its_first_statement(tmp_path: Path) -> None:
    path = tmp_path / db.FILE
    path.write_bytes(b"not a database, and long enough to be read as one's header" * 20)
    conn = sqlite3.connect(path, factory=db._Connection)
    conn.where = path
    with pytest.raises(StorageError) as raised:
        conn.execute("SELECT * FROM letters")
    assert raised.value.reason == "db-damaged" and str(raised.value).startswith(f"{path} is damaged (")
    conn.close()


def test_the_schema_sqlite_keeps_is_code_without_the_comments(tmp_path: Path) -> None:
    """The comments explain the columns in the source; the file keeps the statements alone."""
    conn = Db(tmp_path, _made).conn()
    kept = [sql for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")]
    assert len(kept) == 12 and not any("--" in sql for sql in kept)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"letters", "notes", "threads", "claims", "checkpoints", "facts", "openers"}
    (openers,) = [sql for sql in kept if "openers(" in sql]
    assert openers.endswith("WITHOUT ROWID") and "ms INTEGER NOT NULL," in openers
