"""A synced letter's file is its own copy of the bytes judged, never a link of the post-office file
(issue 23: that file is the sender's sent copy too, so an edit there changed the reader's letter).
It is not flushed only while the post-office file it came from is the very file read, durable
there (issue 11: a flush per letter was the costliest step of filing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.model import Letter
from agentmail.spool import Spool
from agentmail.transport.local import deliver

from ..conftest import make_signed_letters

LETTER = Letter("<m@x>", "alpha", "a@x", "beta", "b@x", "note", "thr-0123456789", "s", "b", "d")


def _copy(path: Path) -> tuple[str, int, int]:
    st = os.stat(path)
    return (str(path), st.st_dev, st.st_ino)


def test_a_synced_letter_is_its_own_file_not_the_post_office_s(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    ((_mid, raw), (_mid2, bad)) = make_signed_letters(alpha, "beta", 2, "linked")
    deliver(home / "postoffice" / "beta", raw)
    deliver(home / "postoffice" / "beta", bad.replace(b"letter 1 of 2", b"letter 1 of 3"))  # quarantined
    report = beta.sync()
    (cur_good, cur_bad) = sorted((home / "postoffice" / "beta" / "cur").iterdir())
    (good,) = report.accepted
    (quarantined,) = report.quarantined
    for letter, cur in ((good, cur_good), (quarantined, cur_bad)):
        filed = beta.spool.root / "letters" / f"{letter.id}.eml"
        assert not os.path.samefile(filed, cur) and filed.stat().st_nlink == 1
        assert beta.raw(letter.id) == cur.read_bytes()
        assert beta.spool.read.annotations(letter.id)["copy"] == os.path.relpath(cur, beta.spool.root)
    assert beta.raw(good.id) == raw
    cur_good.write_bytes(raw.replace(b"letter 0 of 2", b"LETTER 0 OF 2"))  # the post office's file edited
    assert beta.raw(good.id) == raw


def test_a_copy_of_the_file_read_is_not_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "po"
    source.write_bytes(b"the letter")
    spool = Spool(tmp_path / "spool")
    spool.ensure()
    flushed: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: flushed.append(fd))
    letter = spool.write.store("unread", LETTER, b"the letter", defer=True, copy=_copy(source))
    spool.write.commit()
    assert flushed == []
    filed = spool.root / "letters" / f"{letter.id}.eml"
    assert not os.path.samefile(filed, source) and spool.read.raw(letter.id) == b"the letter"


@pytest.mark.parametrize("change", ["replaced", "gone", "symlink"])
def test_a_copy_whose_source_is_not_the_file_read_is_flushed_and_noted_nowhere(tmp_path: Path, change: str) -> None:
    source = tmp_path / "po"
    source.write_bytes(b"the letter")
    copy = _copy(source)
    if change == "replaced":  # another file under the same name since it was read
        (tmp_path / "other").write_bytes(b"not the letter")
        os.replace(tmp_path / "other", source)
    elif change == "gone":
        source.unlink()
    else:  # a symlink in its place is not the file read either
        os.rename(source, tmp_path / "real")
        source.symlink_to(tmp_path / "real")
        copy = (str(source), copy[1], copy[2])
    spool = Spool(tmp_path / "spool")
    for defer in (False, True):
        letter = spool.write.store("unread", LETTER, b"the letter", defer=defer, copy=copy)
        spool.write.commit()
        filed = spool.root / "letters" / f"{letter.id}.eml"
        assert filed.read_bytes() == b"the letter" and filed.stat().st_nlink == 1 and not filed.is_symlink()
        assert "copy" not in spool.read.annotations(letter.id)  # nothing to restore it from: it was flushed
    assert sorted(os.listdir(spool.root / "tmp")) == []
