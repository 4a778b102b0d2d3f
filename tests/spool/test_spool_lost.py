"""The spool survives its database (issue 23, class 7).

spool.db deleted, replaced by garbage, left as stale -wal/-shm, or the disk full: every command
says which in one line and exits 7 (DESIGN §8), ``doctor`` reports it, nothing starts afresh in
silence, and ``rebuild`` makes the database again from the letter files, its reply claims with it.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

import pytest

from agentmail import _fs
from agentmail.client.facade import AgentMail
from agentmail.errors import StorageError
from agentmail.spool import Spool

from ..conftest import OPENER, Cli


def _answered(alpha: AgentMail, beta: AgentMail) -> str:
    alpha.send("beta", "Quota 500s", OPENER)
    (report,) = beta.inbox()
    assert beta.reply(report, "Reproduced; on it.", type="ack") is not None
    beta.close()
    beta.spool.db.close()
    return report.id


def _remove_db(root: Path) -> None:
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (root / name).unlink(missing_ok=True)


def test_a_deleted_spool_db_never_lets_an_answered_report_get_a_second_ack(
    alpha: AgentMail, beta: AgentMail, cli: Cli
) -> None:
    report_id = _answered(alpha, beta)
    _remove_db(beta.spool.root)

    code, out, err = cli("--as", "beta", "reply", report_id, "-b", "Reproduced again.", "-t", "ack")
    assert (code, out) == (7, "")
    assert err.count("\n") == 1 and "spool.db is missing (or empty) but 2 letter file(s)" in err
    assert "'agentmail rebuild'" in err
    code, _, err = cli("--as", "beta", "inbox")  # no silent restart: nothing re-read
    assert code == 7 and list((beta.home / "postoffice" / "beta" / "cur").iterdir())

    code, out, _ = cli("--as", "beta", "rebuild")
    assert code == 0 and "1 sent, 1 read" in out
    code, _, err = cli("--as", "beta", "reply", report_id, "-b", "Reproduced again.", "-t", "ack")
    assert code == 4 and "already answered (by beta, letter" in err
    spool = Spool(beta.spool.root)
    assert spool.read.locate(report_id) == "read" and len(spool.read.ids("sent")) == 1
    code, _, _ = cli("--as", "beta", "sync")
    assert (
        code == 0 and spool.read.ids("unread") == [] and len(spool.read.ids("read")) == 1
    )  # refetched: no second copy
    spool.db.close()


def _stale_wal(root: Path) -> None:
    """The -wal and -shm of a live database, left behind after spool.db itself is gone."""
    conn = sqlite3.connect(root / "spool.db", isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("UPDATE letters SET state=state")
    for name in ("spool.db-wal", "spool.db-shm"):
        shutil.copy(root / name, root / f"{name}.copy")
    conn.close()
    _remove_db(root)
    for name in ("spool.db-wal", "spool.db-shm"):
        (root / f"{name}.copy").rename(root / name)


def test_stale_wal_files_beside_a_missing_db_are_their_own_error_and_doctor_reports_them(
    alpha: AgentMail, beta: AgentMail, cli: Cli
) -> None:
    _answered(alpha, beta)
    root = beta.spool.root
    _stale_wal(root)
    code, out, err = cli("--as", "beta", "status")
    assert (code, out) == (7, "") and err.count("\n") == 1
    assert "spool.db is missing but spool.db-wal and spool.db-shm from a removed database lie beside it" in err
    code, out, _ = cli("--as", "beta", "doctor")
    assert code == 6
    assert "FAIL spool: " in out and "spool.db-wal and spool.db-shm" in out and "ok   identity: beta" in out

    code, out, _ = cli("--as", "beta", "--json", "rebuild")
    assert code == 0 and '"sent": 1' in out
    assert sorted(p.name.split(".lost-")[0] for p in root.glob("*.lost-*")) == ["spool.db-shm", "spool.db-wal"]
    assert cli("--as", "beta", "doctor")[0] == 0


def test_a_damaged_db_is_its_own_error_and_rebuild_keeps_it_aside(alpha: AgentMail, beta: AgentMail, cli: Cli) -> None:
    report_id = _answered(alpha, beta)
    root = beta.spool.root
    _remove_db(root)
    garbage = bytes(range(256)) * 40
    (root / "spool.db").write_bytes(garbage)
    code, out, err = cli("--as", "beta", "inbox")
    assert (code, out) == (7, "") and err.count("\n") == 1
    assert "spool.db is damaged (file is not a database): run 'agentmail rebuild'" in err
    code, out, _ = cli("--as", "beta", "doctor")
    assert code == 6 and "FAIL spool: " in out and "is damaged" in out

    assert cli("--as", "beta", "rebuild")[0] == 0
    (kept,) = root.glob("spool.db.lost-*")
    assert kept.read_bytes() == garbage  # kept for a person, never deleted
    assert Spool(root).read.locate(report_id) == "read"
    code, _, err = cli("--as", "beta", "rebuild")
    assert code == 1 and "is in order: nothing to rebuild" in err


def test_a_database_that_cannot_grow_is_a_full_disk_and_nothing_is_lost(alpha: AgentMail, beta: AgentMail) -> None:
    """SQLITE_FULL, made deterministic with max_page_count (the file may not grow by a page)."""
    beta.sync()
    for n in range(3):
        alpha.send("beta", f"Letter {n}", OPENER + "x" * 3000)
    conn = beta.spool.db.conn()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")
    with pytest.raises(StorageError) as caught:
        beta.sync()
    assert caught.value.reason == "disk-full" and caught.value.exit_code == 7
    assert str(caught.value).startswith(f"the disk holding {beta.spool.db.path} is full (database or disk is full)")
    assert beta.spool.read.ids("unread") == beta.spool.read.ids("quarantine") == []
    beta.spool.db.close()  # space freed: a new connection has no cap
    report = beta.sync()
    assert (len(report.accepted), report.quarantined) == (3, [])


def test_a_full_disk_when_a_file_is_written_is_one_line_and_exit_7(
    alpha: AgentMail, beta: AgentMail, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(args[0]))

    monkeypatch.setattr(_fs, "_write", full)
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert (code, out) == (7, "") and err.count("\n") == 1
    assert err.startswith("agentmail: the disk is full (No space left on device: ")
    monkeypatch.undo()
    monkeypatch.setenv("AGENTMAIL_HOME", str(alpha.home))
    assert alpha.spool.read.ids("sent") == alpha.spool.read.ids("outbox") == []  # not half-sent
    assert cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)[0] == 0
    assert [x.subject for x in beta.inbox()] == ["Quota"]


def test_a_new_mailbox_and_an_old_layout_are_no_lost_database(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "fresh")
    assert spool.ensure().read.ids("unread") == []
    spool.db.close()
    old = tmp_path / "old"
    (old / "unread").mkdir(parents=True)
    (old / "unread" / "01abc.eml").write_bytes(b"From: a@b\r\n\r\nx\r\n")
    assert Spool(old).read.ids("unread") == ["01abc"]  # converted, as before (migrate)
