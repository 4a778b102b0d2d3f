"""Recovery code that only a crash or a failure runs, and the guards of ``follow_up`` (issue 15).

Each test drives the failure for real (a full disk on the Nth write, a stale file, a lost cache)
and fails when the recovery it names is removed."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.errors import Refused
from agentmail.spool import Spool
from agentmail.spool.layout import _key, reply_key
from agentmail.stages import guards

from ..conftest import OPENER


def _disk_full_on_write(spool: Spool, monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """The spool's ``nth`` letter write fails as a full disk would (ENOSPC)."""
    real = spool.layout.write_tmp
    calls = {"n": 0}

    def write_tmp(letter_id: str, raw: bytes, durable: bool, copy: tuple[str, int, int] | None = None) -> Path:
        calls["n"] += 1
        if calls["n"] == nth:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(letter_id, raw, durable, copy)

    monkeypatch.setattr(spool.layout, "write_tmp", write_tmp)


def test_a_batch_that_fails_half_way_is_discarded_whole_and_fetched_again(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        alpha.send("beta", f"Letter {n}", OPENER)
    _disk_full_on_write(beta.spool, monkeypatch, nth=2)
    with pytest.raises(OSError, match="No space"):
        beta.sync()
    assert os.listdir(beta.spool.root / "tmp") == []  # the first letter's file is gone, not half-filed
    assert beta.spool.read.ids("unread") == [] and beta.spool.write._batch == []
    assert beta.spool.read.checkpoint("local") is None  # nothing committed: the checkpoint did not move
    monkeypatch.undo()
    monkeypatch.setenv("AGENTMAIL_HOME", str(beta.home))  # undo() also undid the autouse home fixture's env
    report = beta.sync()
    assert (len(report.accepted), report.duplicates) == (3, 0)
    assert sorted(x.subject for x in beta.inbox(sync=False)) == ["Letter 0", "Letter 1", "Letter 2"]


def test_sync_sweeps_files_a_crash_left_in_tmp_and_keeps_fresh_ones(alpha: AgentMail, beta: AgentMail) -> None:
    tmp = beta.spool.ensure().root / "tmp"
    stale, fresh = tmp / "01STALE.eml", tmp / "01FRESH.eml"
    stale.write_bytes(b"half a letter")
    fresh.write_bytes(b"a letter being written right now")
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    alpha.send("beta", "Wake the syncer", OPENER)  # sync sweeps only when it has something to take
    beta.sync()
    assert not stale.exists()
    assert fresh.exists()


def test_a_missing_meta_file_is_rebuilt_from_the_letter(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota 500s", OPENER, severity="high")
    (letter,) = beta.inbox()
    sql = beta.spool.db.conn()
    sql.execute("UPDATE letters SET meta=NULL WHERE id=?", (letter.id,))
    rebuilt = beta.show(letter.id)
    assert sql.execute("SELECT meta FROM letters WHERE id=?", (letter.id,)).fetchone()[0]  # written back
    assert (rebuilt.sender, rebuilt.type, rebuilt.thread, rebuilt.subject, rebuilt.severity, rebuilt.message_id) == (
        "alpha",
        "report",
        letter.thread,
        "Quota 500s",
        "high",
        letter.message_id,
    )


def test_a_torn_meta_file_is_rebuilt_too(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    sql = beta.spool.db.conn()
    sql.execute("""UPDATE letters SET meta='{"type": "rep' WHERE id=?""", (letter.id,))  # a torn cache
    assert beta.show(letter.id).type == "report"
    (meta,) = sql.execute("SELECT meta FROM letters WHERE id=?", (letter.id,)).fetchone()
    assert json.loads(meta)["thread"] == letter.thread


def test_a_reply_reservation_whose_reply_never_got_written_is_cleared(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota 500s", OPENER)
    (letter,) = beta.inbox()
    sql = beta.spool.ensure().db.conn()
    key = _key(reply_key(letter.message_id, letter.sender))
    beta.spool.home_claims.replied_by(
        reply_key(letter.message_id, letter.sender)
    )  # the claims are built before the crash below
    sql.execute("INSERT INTO claims VALUES(?, 'beta 01KILLEDBEFOREITSREPLYWASFILED')", (key,))  # claim, no store
    reply = beta.reply(letter, "Reproduced. Fixing.")
    assert reply is not None and reply.state == "sent", beta.why_refused(letter)
    assert sql.execute("SELECT holder FROM claims WHERE key=?", (key,)).fetchone() == (f"beta {reply.id}",)
    assert beta.reply(letter, "Twice?") is None  # a live reservation still refuses a second reply


def _thread_of_depth(alpha: AgentMail, beta: AgentMail, letters: int) -> str:
    report = alpha.send("beta", "Quota 500s", OPENER)
    for n in range(letters - 1):
        alpha.follow_up(report.thread, f"Detail {n}.", type="question")
    return report.thread


def test_follow_up_refuses_a_closed_thread(alpha: AgentMail, beta: AgentMail) -> None:
    thread = _thread_of_depth(alpha, beta, 1)
    (report,) = beta.inbox()  # beta's last word is its answer: a follow-up continues only after one's own letter
    closing = beta.reply(report, "Fixed in 2.4.2; closing.", type="close", raise_refused=True)
    assert closing is not None
    assert closing.state == "sent"
    with pytest.raises(Refused, match=f"thread {thread} is closed"):
        alpha.follow_up(thread, "One more thing.", type="question")
    assert [x.type for x in alpha.thread(thread)] == ["report", "close"]  # nothing was sent


def test_follow_up_refuses_past_the_depth_cap(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guards, "MAX_DEPTH", 3)
    thread = _thread_of_depth(alpha, beta, 3)  # depths 0, 1, 2
    assert [x.depth for x in alpha.thread(thread, sync=False)] == [0, 1, 2]
    with pytest.raises(Refused, match=r"is 3 letters deep \(cap 3\); it needs a human"):
        alpha.follow_up(thread, "And another.", type="question")
    assert len(alpha.thread(thread, sync=False)) == 3


def test_a_full_disk_in_the_database_stops_the_sync_and_quarantines_nothing(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite says "database or disk is full" as an OperationalError: that is the machine
    failing (as an OSError), so the batch is discarded and fetched again, never a letter
    quarantined as malformed for it."""
    import sqlite3

    for n in range(3):
        alpha.send("beta", f"Letter {n}", OPENER)
    real = beta.spool.write._insert
    calls = {"n": 0}

    def insert(*args: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise sqlite3.OperationalError("database or disk is full")
        real(*args)

    monkeypatch.setattr(beta.spool.write, "_insert", insert)
    with pytest.raises(OSError, match="database or disk is full"):
        beta.sync()
    assert beta.spool.read.ids("quarantine") == [] and beta.spool.read.ids("unread") == []
    assert beta.spool.read.checkpoint("local") is None
    monkeypatch.undo()
    monkeypatch.setenv("AGENTMAIL_HOME", str(beta.home))
    report = beta.sync()
    assert (len(report.accepted), report.quarantined) == (3, [])
