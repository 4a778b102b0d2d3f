"""What a sync flushes, and what a power cut may take from it (DESIGN §7, issue 11's receive path).

A letter synced from the local post office is filed as a copy of the post-office file (its own
file: issue 23), whose bytes the sender flushed and whose name in ``cur/`` the reader flushes
before it commits; the copy itself is never flushed. So a power cut may take the spool's file of
any letter a batch copied, and nothing else of it: its row and the checkpoint past it were
committed by one durable commit. These tests make that loss deterministic (the files are
deleted, as the cut would leave them) and check that every letter is still there, once, byte for
byte: its file is copied again from the post office."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from agentmail import _fs
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.model import Letter
from agentmail.spool import Spool
from agentmail.spool import filing as store_module
from agentmail.transport.local import deliver

from ..conftest import make_signed_letters

KILL_POINT = Path(__file__).parents[1] / "helpers" / "kill_point.py"
LETTER = Letter("<m@x>", "alpha", "a@x", "beta", "b@x", "note", "thr-0123456789", "s", "b", "d")


def power_cut(spool_root: Path) -> list[str]:
    """Take what a sync never flushed in the spool: every letter file copied from a post-office
    file without a flush (its row notes the ``copy``; in tmp/ or letters/). The database keeps
    its durable commits. Returns the ids whose files were taken."""
    spool = Spool(spool_root)
    taken = []
    for folder in ("tmp", "letters"):
        for path in sorted((spool_root / folder).glob("*.eml")):
            if "copy" in spool.read.annotations(path.stem):
                path.unlink()
                taken.append(path.stem)
    spool.db.close()
    return taken


def files_of(spool: Spool) -> dict[str, bytes]:
    return {i: spool.read.raw(i) for state in ("unread", "read", "quarantine") for i in spool.read.ids(state)}


@pytest.fixture
def flushed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path agentmail flushes from here on (os.fsync and syncfs; SQLite's own WAL sync is
    in C and not seen: it is the batch's commit)."""
    seen: list[str] = []
    fsync, syncfs = os.fsync, _fs.sync_filesystem

    def recording_fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    def recording_syncfs(path: Path) -> None:
        seen.append(f"syncfs {path}")
        syncfs(path)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(store_module, "sync_filesystem", recording_syncfs)
    return seen


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name a flushed descriptor")
@pytest.mark.parametrize("n", [1, 7])  # one letter, and a batch large enough for a syncfs before
def test_a_sync_from_the_post_office_flushes_only_its_folder(
    n: int, alpha: AgentMail, beta: AgentMail, home: Path, flushed: list[str]
) -> None:
    beta.sync()  # the spool and its database exist: only the letters' own costs below
    for _mid, raw in make_signed_letters(alpha, "beta", n, "flush"):
        deliver(home / "postoffice" / "beta", raw)
    flushed.clear()
    report = beta.sync()
    assert len(report.accepted) == n
    # the counter before the renames it reserves (Mailbox._assign_names), then the renames
    assert flushed == [str(home / "postoffice" / "beta" / ".uidnext"), str(home / "postoffice" / "beta" / "cur")]


def test_a_letter_written_into_a_batch_is_flushed_before_the_commit(tmp_path: Path, flushed: list[str]) -> None:
    spool = Spool(tmp_path / "spool").ensure()
    letter = spool.write.store("quarantine", LETTER, b"not from the post office", index=False, defer=True)
    spool.write.commit()
    tmp = spool.root / "tmp"
    assert flushed == [str(tmp / f"{letter.id}.eml"), str(tmp)]


def test_a_power_cut_after_a_sync_loses_no_letter(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    sent = dict(make_signed_letters(alpha, "beta", 7, "cut"))
    for raw in sent.values():
        deliver(home / "postoffice" / "beta", raw)
    report = beta.sync()
    assert len(report.accepted) == 7
    before = files_of(beta.spool)
    assert sorted(power_cut(beta.spool.root)) == sorted(before)

    restarted = AgentMail(beta.registry, Identity("beta"), home)
    assert files_of(restarted.spool) == before  # read again from the post office
    assert sorted(x.message_id for x in restarted.inbox()) == sorted(sent)
    restarted.from_start()
    again = restarted.sync()
    assert (again.accepted, again.duplicates) == ([], 7), "a letter filed twice"
    for letter_id in before:  # that sync's sweep put each file back in place
        assert (restarted.spool.root / "letters" / f"{letter_id}.eml").read_bytes() == before[letter_id]


def test_a_letter_flagged_in_the_post_office_is_still_found(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    ((_mid, raw),) = make_signed_letters(alpha, "beta", 1, "flagged")
    deliver(home / "postoffice" / "beta", raw)
    (letter,) = beta.sync().accepted
    (cur,) = (home / "postoffice" / "beta" / "cur").iterdir()
    os.rename(cur, cur.with_name(cur.name + "S"))  # a person's mail client marked it seen
    power_cut(beta.spool.root)
    assert AgentMail(beta.registry, Identity("beta"), home).raw(letter.id) == raw


def test_only_the_very_bytes_are_restored(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    """A post-office file changed since (not what a Maildir ever does) is not taken for the letter."""
    ((_mid, raw),) = make_signed_letters(alpha, "beta", 1, "changed")
    deliver(home / "postoffice" / "beta", raw)
    (letter,) = beta.sync().accepted
    (cur,) = (home / "postoffice" / "beta" / "cur").iterdir()
    power_cut(beta.spool.root)
    cur.write_bytes(raw.replace(b"letter 0", b"letter 9"))
    restarted = AgentMail(beta.registry, Identity("beta"), home)
    with pytest.raises(OSError):
        restarted.raw(letter.id)
    assert list((restarted.spool.root / "tmp").iterdir()) == []


# Every point a sync batch passes (tests/system/test_crash.py section 7), each followed by a power cut.
SYNC_POINTS = ("batch-durable", "batch-committed", "batch-publishing", "batch-published", "checkpoint-set")


def test_a_sync_killed_at_every_commit_point_then_a_power_cut_loses_and_doubles_nothing(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    per_round = 7
    letters = make_signed_letters(alpha, "beta", per_round * len(SYNC_POINTS), "kill-and-cut")
    expected = dict(letters)
    env = dict(os.environ, AGENTMAIL_HOME=str(home))
    for n, point in enumerate(SYNC_POINTS):
        for _mid, raw in letters[n * per_round : (n + 1) * per_round]:
            deliver(home / "postoffice" / "beta", raw)
        victim = subprocess.run(
            [sys.executable, str(KILL_POINT), "sync", point, "1", "beta"], env=env, capture_output=True, timeout=300
        )
        assert victim.returncode == -signal.SIGKILL, (point, victim.returncode, victim.stderr[-2000:])
        power_cut(beta.spool.root)
        spool = Spool(beta.spool.root)
        filed = {i: spool.read.raw(i) for i in spool.read.ids("unread")}  # every committed letter readable
        spool.db.close()
        twice = [raw for raw, count in Counter(filed.values()).items() if count > 1]
        assert twice == [], f"a letter filed twice after a kill at {point} and a power cut"
        assert set(filed.values()) <= set(expected.values())

    report = AgentMail(beta.registry, Identity("beta"), home).sync()  # a clean restart
    assert report.quarantined == []
    spool = Spool(beta.spool.root)
    filed = {i: spool.read.raw(i) for i in spool.read.ids("unread")}
    assert sorted(filed.values()) == sorted(expected.values()), "a letter was lost or doubled"
    again = AgentMail(beta.registry, Identity("beta"), home)
    again.from_start()
    assert again.sync().duplicates == len(expected)
