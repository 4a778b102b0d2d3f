"""When a sent letter becomes durable on the local post office (issue 11, the send path).

"Sent" there means the copy in the post office is on disk (deliver fsyncs it), so the outbox
copy is filed with no flush and flushed only when the letter has to wait. These tests drive
the two cases that matter: a letter that could not leave is flushed before ``send`` gives up,
and an outbox row that outlived its file (a power cut) is never submitted. The SIGKILLs at the
send's commit points are in test_crash.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client import AgentMail
from agentmail.spool import Spool

from .conftest import OPENER


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
    [letter_id] = alpha.spool.ids("outbox")
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


@pytest.mark.parametrize("left", [b"", b"\0" * 300])
def test_an_outbox_row_that_outlived_its_file_is_never_submitted(alpha: AgentMail, home: Path, left: bytes) -> None:
    """A power cut can keep a row filed with no flush and lose its bytes (an empty file, or
    zeros): flush says it did not go rather than deliver what is left."""
    from agentmail.compose import Draft
    from agentmail.model import new_thread_id

    letter, raw = alpha._compose(Draft("beta", "report", new_thread_id(), "Quota endpoint returns 500", OPENER))
    stored = alpha.spool.store("outbox", letter, raw, extra=letter.extra, durable=False)
    Path(alpha.spool.path("outbox", stored.id)).write_bytes(left)

    assert alpha.flush() == []
    assert not (home / "postoffice" / "beta" / "new").exists() or os.listdir(home / "postoffice" / "beta" / "new") == []
    failed = Spool(alpha.spool.root).letter(stored.id)
    assert failed.state == "failed"
    assert "lost in a crash" in failed.extra["failed_reason"]
