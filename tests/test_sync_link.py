"""A synced letter's file is the post office's own durable file, hard-linked (issue 11: creating a
file is the costliest step of filing), and only ever the very file whose bytes were judged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client import AgentMail
from agentmail.model import Letter
from agentmail.spool import Spool
from agentmail.transport.local import deliver

from .conftest import make_signed_letters

LETTER = Letter("<m@x>", "alpha", "a@x", "beta", "b@x", "note", "thr-0123456789", "s", "b", "d")


def _copy(path: Path) -> tuple[str, int, int]:
    st = os.stat(path)
    return (str(path), st.st_dev, st.st_ino)


def test_a_synced_letter_shares_the_post_office_file(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    ((_mid, raw), (_mid2, bad)) = make_signed_letters(alpha, "beta", 2, "linked")
    deliver(home / "postoffice" / "beta", raw)
    deliver(home / "postoffice" / "beta", bad.replace(b"letter 1 of 2", b"letter 1 of 3"))  # quarantined
    report = beta.sync()
    (cur_good, cur_bad) = sorted((home / "postoffice" / "beta" / "cur").iterdir())
    (good,) = report.accepted
    (quarantined,) = report.quarantined
    for letter, cur in ((good, cur_good), (quarantined, cur_bad)):
        filed = beta.spool.root / "letters" / f"{letter.id}.eml"
        assert os.path.samefile(filed, cur) and filed.stat().st_nlink == 2
        assert beta.raw(letter.id) == cur.read_bytes()
    assert beta.raw(good.id) == raw


def test_the_copy_is_linked_when_it_is_the_file_read(tmp_path: Path) -> None:
    source = tmp_path / "po"
    source.write_bytes(b"the letter")
    spool = Spool(tmp_path / "spool")
    letter = spool.store("unread", LETTER, b"the letter", copy=_copy(source))
    assert os.path.samefile(spool.root / "letters" / f"{letter.id}.eml", source)
    assert spool.raw(letter.id) == b"the letter"


@pytest.mark.parametrize("change", ["replaced", "gone", "symlink"])
def test_a_copy_that_is_not_the_file_read_is_written_instead(tmp_path: Path, change: str) -> None:
    source = tmp_path / "po"
    source.write_bytes(b"the letter")
    copy = _copy(source)
    if change == "replaced":  # another file under the same name since it was read
        (tmp_path / "other").write_bytes(b"not the letter")
        os.replace(tmp_path / "other", source)
    elif change == "gone":
        source.unlink()
    else:  # a symlink to the file read is linked as a symlink: refused too
        os.rename(source, tmp_path / "real")
        source.symlink_to(tmp_path / "real")
        copy = (str(source), copy[1], copy[2])
    spool = Spool(tmp_path / "spool")
    for defer in (False, True):
        letter = spool.store("unread", LETTER, b"the letter", defer=defer, copy=copy)
        spool.commit()
        filed = spool.root / "letters" / f"{letter.id}.eml"
        assert filed.read_bytes() == b"the letter" and filed.stat().st_nlink == 1 and not filed.is_symlink()
    assert sorted(os.listdir(spool.root / "tmp")) == []
