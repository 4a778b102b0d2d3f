"""A sync's filing is committed without a WAL flush (issue 28 target 1): what a power cut may take.

The test double keeps, of every spool database, only what a durable commit made durable: after
each commit at ``synchronous=FULL`` it copies the database and its WAL aside, and the power cut
puts those copies back (every later commit, at ``NORMAL``, is gone, as the worst cut leaves it)
and takes the letter files a sync copied without a flush (``test_receive_durability.power_cut``).
The post office keeps what its writers flushed: every delivered letter. Each case checks that
nothing is lost and nothing is answered twice."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.spool import db as db_module
from agentmail.transport.local import deliver

from ..conftest import make_signed_letters
from .test_receive_durability import power_cut as drop_unflushed_copies

SAVED = ".durable"


@pytest.fixture
def durable_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Copy a spool database aside whenever a commit is durable (FULL): all a power cut leaves."""
    execute = db_module._Connection.execute

    def recording(self: db_module._Connection, sql: str, parameters: object = (), /) -> sqlite3.Cursor:
        cursor = execute(self, sql, parameters)
        # Every write is an explicit transaction (``Db.write``, ``begin_batch``), so its COMMIT is
        # the one point a write becomes durable; the file's creation sets the WAL up.
        if sql.strip().upper() in ("COMMIT", "PRAGMA JOURNAL_MODE=WAL"):
            level = sqlite3.Connection.execute(self, "PRAGMA synchronous").fetchone()[0]
            if level >= 2:  # FULL: the WAL was flushed with this commit
                saved = self.where.parent / SAVED
                saved.mkdir(exist_ok=True)
                for suffix in ("", "-wal"):
                    source = Path(f"{self.where}{suffix}")
                    if source.exists():
                        shutil.copyfile(source, saved / source.name)
        return cursor

    monkeypatch.setattr(db_module._Connection, "execute", recording)
    yield


def cut(client: AgentMail) -> AgentMail:
    """The power goes: the spool is left with its durable commits only; a new client starts."""
    root = client.spool.root
    drop_unflushed_copies(root)
    client.close()
    client.spool.db.close()
    saved = root / SAVED
    for suffix in ("", "-wal", "-shm"):
        Path(f"{client.spool.db.path}{suffix}").unlink(missing_ok=True)
    for name in ("spool.db", "spool.db-wal"):
        if (saved / name).exists():
            shutil.copyfile(saved / name, root / name)
    return AgentMail(client.registry, Identity("beta"), client.home)


def one_letter(alpha: AgentMail, home: Path, label: str) -> str:
    ((message_id, raw),) = make_signed_letters(alpha, "beta", 1, label)
    deliver(home / "postoffice" / "beta", raw)
    return message_id


def test_a_letter_shown_then_cut_is_fetched_again_once(
    alpha: AgentMail, beta: AgentMail, home: Path, durable_only: None
) -> None:
    beta.sync()  # the spool exists, durably
    message_id = one_letter(alpha, home, "shown")
    letter, _how = beta.wait(5)
    assert letter.message_id == message_id
    restarted = cut(beta)
    assert restarted.spool.read.ids("unread") == [], "the double kept the filing: it tests nothing"
    again = restarted.inbox()  # syncs: the checkpoint went with the filing, the letter is fetched again
    assert [x.message_id for x in again] == [message_id]
    assert restarted.spool.read.ids("read") == []
    assert (
        restarted.raw(again[0].id)
        == (home / "postoffice" / "beta" / "cur")
        .joinpath(*[p.name for p in (home / "postoffice" / "beta" / "cur").iterdir()])
        .read_bytes()
    )


def test_a_letter_done_then_cut_stays_done(alpha: AgentMail, beta: AgentMail, home: Path, durable_only: None) -> None:
    beta.sync()
    message_id = one_letter(alpha, home, "done")
    letter, _how = beta.wait(5)
    beta.done(letter.id)  # durable: it flushes the filing before it
    restarted = cut(beta)
    assert restarted.inbox() == []
    assert [restarted.spool.read.letter(i).message_id for i in restarted.spool.read.ids("read")] == [message_id]


def test_a_letter_answered_then_cut_is_never_answered_again(
    alpha: AgentMail, beta: AgentMail, home: Path, durable_only: None
) -> None:
    beta.sync()
    one_letter(alpha, home, "answered")
    letter, _how = beta.wait(5)
    reply = beta.reply(letter, "Looking at it now; I will write back with the fix.", type="ack")
    assert reply is not None
    restarted = cut(beta)
    assert restarted.inbox() == [], "the answered letter is shown again after the cut"
    (filed,) = (restarted.spool.read.letter(i) for i in restarted.spool.read.ids("read"))
    assert filed.message_id == letter.message_id
    assert restarted.reply(filed, "A second answer.", type="ack") is None  # the claim holds
    # alpha's letter was made for the test, never filed at alpha: the answer waits there for it
    # (awaiting-parent), an answer all the same
    received = [*alpha.inbox(), *alpha.quarantined(sync=False)]
    answers = [x for x in received if x.in_reply_to == letter.message_id]
    assert len(answers) == 1
