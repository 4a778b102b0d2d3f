"""When a sent letter becomes durable on the local post office (issue 11, the send path).

"Sent" there means the copy in the post office is on disk (deliver fsyncs it), so the outbox
copy is filed with no flush and flushed only when the letter has to wait. These tests drive
the two cases that matter: a letter that could not leave is flushed before ``send`` gives up,
and an outbox row that outlived its file (a power cut) is never submitted. The SIGKILLs at the
send's commit points are in test_crash.py."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.spool import Spool, SpoolWriter
from agentmail.transport.local import deliver

from ..conftest import OPENER


def _fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` is called on from now (the real fsync still runs)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_a_letter_the_post_office_could_not_take_is_flushed_before_send_gives_up(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    maildir = home / "postoffice" / "beta"
    maildir.mkdir(parents=True)
    (maildir / "tmp").write_text("a file where the Maildir's tmp/ should be")  # every delivery fails
    seen = _fsynced(monkeypatch)
    with pytest.raises(OSError):
        alpha.send("beta", "Quota endpoint returns 500", OPENER)
    [letter_id] = alpha.spool.read.ids("outbox")
    letter_file = alpha.spool.root / "letters" / f"{letter_id}.eml"
    assert str(letter_file) in seen and str(letter_file.parent) in seen, seen

    (maildir / "tmp").unlink()  # the post office is repaired: the queued letter goes, once
    assert [(r.key, r.status) for r in alpha.flush()] == [(letter_id, "sent")]
    assert len(os.listdir(maildir / "new")) == 1


def test_a_sent_letter_is_durable_in_the_post_office_before_send_returns(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _fsynced(monkeypatch)
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    assert letter.state == "sent"
    [name] = os.listdir(home / "postoffice" / "beta" / "new")
    new = home / "postoffice" / "beta" / "new"
    assert str(new / name) not in seen  # fsynced in tmp/, then renamed
    assert any(p.startswith(str(home / "postoffice" / "beta" / "tmp")) for p in seen) and str(new) in seen


def test_the_senders_record_of_a_delivered_letter_is_durable_before_send_returns(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As durable as the recipient's copy: one FULL commit (``make_durable``) moves the letter
    to sent/ and notes, with its row, the post-office files that hold its bytes; the spool's
    own name for them (a link of the recipient's, unflushed) is not flushed: two fsyncs a send,
    the post office's."""
    made: list[str] = []
    real = SpoolWriter.make_durable

    def make_durable(self: SpoolWriter, letter_id: str, **how: object) -> bool:
        made.append(f"{letter_id} {self.read.locate(letter_id)} {how.get('moved')}")
        return real(self, letter_id, **how)  # type: ignore[arg-type]

    monkeypatch.setattr(SpoolWriter, "make_durable", make_durable)
    alpha.send("beta", "warm", OPENER)  # the Maildirs exist
    seen = _fsynced(monkeypatch)
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    assert letter.state == "sent" and made[-1] == f"{letter.id} outbox ('outbox', 'sent')"
    spool = Spool(alpha.spool.root)
    assert spool.read.locate(letter.id) == "sent"
    new = home / "postoffice" / "beta" / "new"
    assert [p for p in seen if not p.startswith(str(home / "postoffice" / "beta" / "tmp"))] == [str(new)], seen
    assert len(seen) == 2, seen
    note = spool.read.annotations(letter.id)
    raw = spool.read.raw(letter.id)
    names = [note["copy"], *note["copies"]]
    assert [os.path.normpath(alpha.spool.root / n) for n in names] == [
        str(p)
        for p in (*new.iterdir(), *(home / "postoffice" / ".sent" / "alpha" / "new").iterdir())
        if os.path.samefile(p, alpha.spool.root / "letters" / f"{letter.id}.eml")
    ]
    assert note["copy_size"] == len(raw)
    # the spool's bookkeeping, not a fact of the letter: neither the send nor a read shows it
    assert not {"copy", "copy_key", "copy_size", "copies", "copy_by"} & {*letter.extra, *alpha.show(letter.id).extra}


def _statements(alpha: AgentMail) -> list[str]:
    """Every statement the mailbox's connection runs from now."""
    seen: list[str] = []
    alpha.spool.read.ids("outbox")  # the connection is open
    alpha.spool.db.conn().set_trace_callback(lambda sql: seen.append(" ".join(sql.split())))
    return seen


def test_a_send_commits_twice_the_filing_and_the_durable_sent_record(alpha: AgentMail) -> None:
    """The outbox row (no flush), then one FULL commit that records it sent: no third commit to
    make the move durable on its own, and no read-back of the state it was just moved to."""
    alpha.send("beta", "warm", OPENER)
    seen = _statements(alpha)
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    commits = [i for i, sql in enumerate(seen) if sql == "COMMIT"]
    assert len(commits) == 2, seen
    durable = seen.index("PRAGMA synchronous=FULL")
    assert commits[0] < durable < commits[1]
    assert f"UPDATE letters SET state='sent' WHERE id='{letter.id}' AND state='outbox'" in seen[durable:]
    assert not any(sql.startswith("SELECT state FROM letters") for sql in seen), seen
    # a new thread answers nothing: no server claim to confirm or mark answered
    assert sum(sql.startswith("SELECT data FROM notes") for sql in seen) == 1, seen
    assert letter.extra == alpha.show(letter.id).extra


def test_a_fact_noted_after_the_sent_commit_is_on_the_letter_send_returns(
    alpha: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the flush notes after the commit that records the letter sent (a sent-folder copy
    that failed) is on the letter ``send`` returns, as a read of it shows it."""
    from agentmail.transport.local import LocalTransport

    submitted: list[str] = []
    real = LocalTransport.submit

    def submit(self: LocalTransport, messages: Any, on_result: Any = None) -> Any:
        submitted.extend(item.key for item in messages)
        return real(self, messages, on_result)

    monkeypatch.setattr(LocalTransport, "submit", submit)
    monkeypatch.setattr(LocalTransport, "copy_failures", lambda self: dict.fromkeys(submitted, "sent folder full"))
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    assert letter.state == "sent" and letter.extra.get("sent_copy_failed") == "sent folder full", letter.extra
    assert letter.extra == alpha.show(letter.id).extra


def test_a_linked_letter_is_not_flushed_twice_a_written_copy_is(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The post office's copy is the spool's inode, flushed by the delivery: the sender's file
    needs no second fsync. Where the post office wrote its own copy (a link refused), the
    sender's file is flushed before ``send`` returns."""
    seen = _fsynced(monkeypatch)
    linked = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    mine = str(alpha.spool.read.path("sent", linked.id))
    assert os.stat(mine).st_nlink > 1 and mine not in seen, seen
    assert any(p.startswith(str(home / "postoffice" / "beta" / "tmp")) for p in seen)

    seen.clear()
    postoffice = f"{os.sep}postoffice{os.sep}"
    real_link = os.link

    def no_link(src: object, dst: object, **kwargs: object) -> None:
        if postoffice in os.fspath(dst):  # type: ignore[arg-type]
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_link(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", no_link)
    written = alpha.send("beta", "Quota endpoint returns 500 again", OPENER)
    mine = str(alpha.spool.read.path("sent", written.id))
    assert os.stat(mine).st_nlink == 1 and mine in seen, seen
    assert seen.index(mine) < seen.index(str(alpha.spool.root / "letters"))


@pytest.mark.parametrize("left", [b"", b"\0" * 300])
def test_an_outbox_row_that_outlived_its_file_is_never_submitted(alpha: AgentMail, home: Path, left: bytes) -> None:
    """A power cut can keep a row filed with no flush and lose its bytes (an empty file, or
    zeros): flush says it did not go rather than deliver what is left."""
    from agentmail.model import new_thread_id
    from agentmail.stages.compose import Draft

    letter, raw = alpha.box.compose(Draft("beta", "report", new_thread_id(), "Quota endpoint returns 500", OPENER))
    stored = alpha.spool.write.store("outbox", letter, raw, extra=letter.extra, durable=False)
    Path(alpha.spool.read.path("outbox", stored.id)).write_bytes(left)

    assert alpha.flush() == []
    assert not (home / "postoffice" / "beta" / "new").exists() or os.listdir(home / "postoffice" / "beta" / "new") == []
    failed = Spool(alpha.spool.root).read.letter(stored.id)
    assert failed.state == "failed"
    assert "lost in a crash" in failed.extra["failed_reason"]


# --- one file per letter: the post office's copy is the spool's, hard-linked ------------------


def test_a_sent_letter_is_one_file_shared_by_the_spool_and_the_post_office(alpha: AgentMail, home: Path) -> None:
    letter = alpha.send("beta", "Quota endpoint returns 500", OPENER)
    mine = alpha.spool.read.path("sent", letter.id)
    [name] = os.listdir(home / "postoffice" / "beta" / "new")
    there = home / "postoffice" / "beta" / "new" / name
    # one file: the spool's, the recipient's and the platform's sent record (issue 25)
    [kept] = os.listdir(home / "postoffice" / ".sent" / "alpha" / "new")
    assert (
        os.stat(there).st_ino
        == os.stat(mine).st_ino
        == os.stat(home / "postoffice" / ".sent" / "alpha" / "new" / kept).st_ino
    )
    # and a fourth: the post office's marker of a thread opened, for the new-thread quota
    [marker] = (home / "postoffice" / ".opened" / "alpha").glob("*/*")
    assert os.stat(marker).st_ino == os.stat(mine).st_ino and os.stat(mine).st_nlink == 4
    assert there.read_bytes() == mine.read_bytes() and (os.stat(there).st_mode & 0o777) == 0o600
    assert os.listdir(home / "postoffice" / "beta" / "tmp") == []


def test_the_linked_copy_is_flushed_in_tmp_then_renamed_into_new_then_new_flushed(
    alpha: AgentMail, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order a reader and a power cut rely on: never a name in new/ for bytes not on disk."""
    calls: list[tuple[str, str]] = []
    maildir = str(home / "postoffice" / "beta")
    for name in ("link", "rename", "fsync"):
        real = getattr(os, name)

        def wrapper(*args: object, _real: object = real, _name: str = name, **kwargs: object) -> object:
            target = os.readlink(f"/proc/self/fd/{args[0]}") if _name == "fsync" else str(args[1])
            if target.startswith(maildir):
                calls.append((_name, target[len(maildir) :]))
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(os, name, wrapper)
    alpha.send("beta", "Quota endpoint returns 500", OPENER)
    [name] = os.listdir(f"{maildir}/new")
    assert calls == [("link", f"/tmp/{name}"), ("fsync", f"/tmp/{name}"), ("rename", f"/new/{name}"), ("fsync", "/new")]


def test_a_copy_that_is_not_the_named_file_is_written_not_linked(tmp_path: Path) -> None:
    raw = b"Subject: x\r\n\r\nbody\r\n"
    source = tmp_path / "letter.eml"
    source.write_bytes(raw)
    st = os.stat(source)
    for wrong in ((str(source), st.st_dev, st.st_ino + 1), (str(tmp_path / "gone.eml"), st.st_dev, st.st_ino)):
        name = deliver(tmp_path / "po", raw, wrong)
        delivered = tmp_path / "po" / "new" / name
        assert delivered.read_bytes() == raw and os.stat(delivered).st_ino != st.st_ino
    assert os.listdir(tmp_path / "po" / "tmp") == [] and os.stat(source).st_nlink == 1
    # the right inode with other bytes than the letter's (a size that differs) is not linked either
    name = deliver(tmp_path / "po", raw + b"more", (str(source), st.st_dev, st.st_ino))
    assert (tmp_path / "po" / "new" / name).read_bytes() == raw + b"more" and os.stat(source).st_nlink == 1


def test_a_copy_on_another_file_system_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = b"Subject: x\r\n\r\nbody\r\n"
    source = tmp_path / "letter.eml"
    source.write_bytes(raw)
    st = os.stat(source)

    def cross_device(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    name = deliver(tmp_path / "po", raw, (str(source), st.st_dev, st.st_ino))
    assert (tmp_path / "po" / "new" / name).read_bytes() == raw and os.stat(source).st_nlink == 1
