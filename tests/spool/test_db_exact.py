"""The spool's SQLite file (``spool/db.py``), exactly: each storage failure said as its one line,
the schema as SQLite keeps it, the refusal of a database's leftovers without it, and the
transactions' edges (joined, rolled back, committed with their ledger lines)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from agentmail.errors import StorageError
from agentmail.spool import db, ledger
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


# --- opening ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "named"),
    [
        (("spool.db-wal",), "spool.db-wal"),
        (("spool.db-shm",), "spool.db-shm"),
        (("spool.db-wal", "spool.db-shm"), "spool.db-wal and spool.db-shm"),
    ],
)
def test_a_databases_leftovers_without_it_are_refused_by_name(
    tmp_path: Path, left: tuple[str, ...], named: str
) -> None:
    for name in left:
        (tmp_path / name).symlink_to(tmp_path / "nowhere")  # even a dangling link is one of them
    with pytest.raises(StorageError) as raised:
        Db(tmp_path, _made).conn()
    assert raised.value.reason == "db-stale-wal" and raised.value.exit_code == 7
    assert str(raised.value) == (
        f"{tmp_path / db.FILE} is missing but {named} from a removed database lie beside it: the mailbox's "
        f"states, notes, claims and checkpoints are not in them; {db.RECOVER}"
    )
    assert not (tmp_path / db.FILE).exists()


def test_leftovers_beside_the_database_itself_are_its_own(tmp_path: Path) -> None:
    Db(tmp_path, _made).conn().execute("INSERT INTO facts VALUES('x', '1')")
    (tmp_path / "spool.db-shm").touch()
    assert Db(tmp_path, _made).fact("x") == "1"


def test_a_folder_where_the_database_goes_is_a_storage_error_without_sqlites_context(tmp_path: Path) -> None:
    (tmp_path / db.FILE).mkdir()
    with pytest.raises(StorageError) as raised:
        Db(tmp_path, _made).conn()
    assert raised.value.reason == "db-error"
    assert str(raised.value) == f"spool database: unable to open database file ({tmp_path / db.FILE})"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_opening_makes_a_private_folder_and_file_and_waits_long_for_a_writer(tmp_path: Path) -> None:
    base = Db(tmp_path / "spool" / "beta", _made)
    assert base.path == tmp_path / "spool" / "beta" / db.FILE and base.root == tmp_path / "spool" / "beta"
    conn = base.conn()
    assert (tmp_path / "spool" / "beta").stat().st_mode & 0o777 == 0o700
    assert base.path.stat().st_mode & 0o777 == 0o600
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 600_000 == db.BUSY_MS
    assert conn.isolation_level is None and base.version() == db.CURRENT == 5
    assert conn.where == base.path  # type: ignore[attr-defined]
    assert base.conn() is conn


def test_the_file_is_prepared_only_when_its_version_says_so(tmp_path: Path) -> None:
    calls: list[int] = []

    def prepare(base: Db) -> None:
        calls.append(base.version())
        if calls[-1] == 0:
            _made(base)
        else:
            base.conn().execute(f"PRAGMA user_version={db.CURRENT}")

    Db(tmp_path, prepare).conn()
    Db(tmp_path, prepare).conn()
    assert calls == [0]
    sqlite3.connect(tmp_path / db.FILE).execute(f"PRAGMA user_version={db.UNOPENED}").connection.close()
    Db(tmp_path, prepare).conn()
    assert calls == [0, db.UNOPENED]


def test_a_preparation_that_fails_leaves_no_connection_behind(tmp_path: Path) -> None:
    tries: list[int] = []

    def prepare(base: Db) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise KeyboardInterrupt
        _made(base)

    base = Db(tmp_path, prepare)
    with pytest.raises(KeyboardInterrupt):
        base.conn()
    assert getattr(base._local, "conn", None) is None
    assert base.version() == db.CURRENT and len(tries) == 2


def test_another_process_gets_its_own_connection_and_never_closes_the_parents(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    first = base.conn()
    base._pid = -2  # as in a child after fork: the connection it sees is its parent's
    base.close()
    assert first.execute("SELECT 1").fetchone() == (1,)  # not closed under the parent
    second = base.conn()
    assert second is not first and base._pid > 0
    base.close()
    with pytest.raises(sqlite3.ProgrammingError):
        second.execute("SELECT 1")
    assert base.conn() is not second
    base.close()
    base.close()  # nothing open: nothing to do


def test_a_connection_per_thread(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    first = base.conn()
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(base.conn()))
    thread.start()
    thread.join()
    assert seen[0] is not first and base.conn() is first


# --- transactions and their ledger lines ----------------------------------------------------------


def _ledger(root: Path) -> list[dict[str, object]]:
    path = root / ledger.FILE
    return [json.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []


def test_a_write_commits_its_ledger_lines_and_a_failed_one_forgets_them(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    with base.write() as tx:
        tx.execute("INSERT INTO facts VALUES('a', '1')")
        base.log({"id": "A1", "state": "read"})
        base.log({"id": "A2", "state": "sent"})
    assert _ledger(tmp_path) == [{"id": "A1", "state": "read"}, {"id": "A2", "state": "sent"}]
    with pytest.raises(ValueError, match="boom"), base.write() as tx:
        base.log({"id": "B1", "state": "read"})
        raise ValueError("boom")
    with base.write():
        base.log({"id": "C1", "state": "read"})
    assert [r["id"] for r in _ledger(tmp_path)] == ["A1", "A2", "C1"]
    assert base.fact("a") == "1" and base.fact("b") is None


def test_a_write_inside_a_batch_joins_it_and_commits_with_it(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    conn = base.begin_batch(durable=False)
    assert conn.in_transaction and base.begin_batch() is conn
    with base.write() as tx:
        assert tx is conn
        tx.execute("INSERT INTO facts VALUES('a', '1')")
        base.log({"id": "A1", "state": "read"})
    assert conn.in_transaction and _ledger(tmp_path) == []
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1
    base.commit_batch()
    assert not conn.in_transaction and _ledger(tmp_path) == [{"id": "A1", "state": "read"}]
    assert Db(tmp_path, _made).fact("a") == "1"


def test_a_batch_rolled_back_writes_nothing_and_forgets_its_lines(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    base.begin_batch().execute("INSERT INTO facts VALUES('a', '1')")
    base.log({"id": "A1", "state": "read"})
    base.rollback()
    base.rollback()
    base.commit_batch()
    with base.write():
        base.log({"id": "B1", "state": "read"})
    assert _ledger(tmp_path) == [{"id": "B1", "state": "read"}] and base.fact("a") is None


def test_lines_logged_outside_a_transaction_wait_for_the_next_commit(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    base.conn()
    base.log({"id": "A1", "state": "read"})
    base.commit_batch()  # nothing open: nothing committed, nothing written
    assert _ledger(tmp_path) == []
    with base.write():
        pass
    assert _ledger(tmp_path) == [{"id": "A1", "state": "read"}]


def test_a_commit_takes_the_setup_lock_folder_and_says_where_it_is(tmp_path: Path) -> None:
    base = Db(tmp_path / "new", _made)
    with base.setup_lock():
        assert (tmp_path / "new" / "setup.lock").exists()
        assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700


def test_a_fact_is_its_text(tmp_path: Path) -> None:
    base = Db(tmp_path, _made)
    with base.write() as tx:
        tx.execute("INSERT INTO facts VALUES('n', 7)")
        tx.execute("INSERT INTO facts VALUES('z', NULL)")
    assert base.fact("n") == "7" and base.fact("z") == "None" and base.fact("N") is None


def test_a_crash_point_is_called_by_name_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    db.reached("nowhere")
    monkeypatch.setattr(db, "crash_point", seen.append)
    db.reached("filed")
    assert seen == ["filed"]
