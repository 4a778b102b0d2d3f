"""The post office reads only letters (issue 23, class 6).

Whatever lies in a Maildir's ``new/`` besides letters — a FIFO, a directory, a symbolic link
(dangling, to a letter outside, to ``/dev/zero``), a file this user may not read — is never
followed, opened or waited for: it is quarantined ``malformed`` with a note naming it, left where
it is, and every real letter around it is filed exactly once.

The sync runs as the real CLI in a child process: a sync that hung would be killed at the
bound (a margin, never the assertion). Tests run as root here, and root reads a mode-000 file;
the child is started without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (dropped from its
bounding set before exec), so it meets the permission bits as any user does.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentmail._fs import NotAFile, read_plain
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.spool import Spool
from agentmail.transport.local import Mailbox

from ..conftest import make_signed_letters
from ..depth import examples, suppressed

KINDS = ("fifo", "directory", "dangling", "outside", "zero", "unreadable")
HANG_MARGIN = 120.0  # seconds: only a hung sync ever reaches it

_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _without_dac_override() -> None:
    """In the child before exec: root keeps every capability but the two that bypass file modes."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _cli(home: Path, *argv: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
    env["AGENTMAIL_HOME"] = str(home)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agentmail", "--as", "beta", "--json", *argv],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=HANG_MARGIN,
            preexec_fn=_without_dac_override,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"'agentmail {' '.join(argv)}' never finished: it hangs on a post office entry")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _plant(kind: str, path: Path, outside: Path, hidden: bytes) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "letter.eml").write_bytes(hidden)
    elif kind == "dangling":
        path.symlink_to(outside.parent / "nothing-here")
    elif kind == "outside":
        path.symlink_to(outside)  # a valid signed letter, outside the post office: never read
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(hidden)  # a valid signed letter that this user may not read
        path.chmod(0)


@settings(max_examples=examples(10), deadline=None, suppress_health_check=suppressed(HealthCheck.too_slow))
@given(
    st.tuples(st.lists(st.sampled_from(KINDS), max_size=5), st.integers(1, 3)).flatmap(
        lambda drawn: st.permutations([*drawn[0], *["letter"] * drawn[1]])
    )
)
@example(["fifo", "letter", "zero", "directory", "letter", "dangling", "outside", "unreadable", "letter"])
def test_every_real_letter_is_filed_once_whatever_else_lies_in_the_post_office(order: list[str]) -> None:
    with tempfile.TemporaryDirectory() as where:
        home = Path(where)
        registry = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
        alpha = AgentMail(registry, Identity("alpha"), home)
        letters = make_signed_letters(alpha, "beta", order.count("letter") + 1, "real")
        (hidden_id, hidden), real = letters[0], letters[1:]
        outside = home / "elsewhere.eml"
        outside.write_bytes(hidden)
        new = home / "postoffice" / "beta" / "new"
        Mailbox(new.parent).ensure()
        queue = iter(real)
        for n, kind in enumerate(order):  # names sort in this order: assign numbers them so
            path = new / f"{n:04d}.entry"
            if kind == "letter":
                path.write_bytes(next(queue)[1])
            else:
                _plant(kind, path, outside, hidden)

        first = _cli(home, "sync")
        again = _cli(home, "sync")

        bad = len(order) - len(real)
        assert (first["fetched"], first["accepted"], first["quarantined"]) == (len(order), len(real), bad)
        assert first["internal_errors"] == 0 and again["fetched"] == 0
        spool = Spool(home / "spool" / "beta")
        filed = [spool.read.meta(i)["message_id"] for i in spool.read.ids("unread")]
        assert sorted(filed) == sorted(mid for mid, _ in real)  # each once, nothing else
        assert hidden_id not in filed
        notes = [spool.read.meta(i) for i in spool.read.ids("quarantine")]
        assert {n["reason"] for n in notes} <= {"malformed"} and len(notes) == bad
        assert all(n["detail"].startswith("the post office entry beta/cur/") for n in notes)
        assert outside.read_bytes() == hidden
        cur = home / "postoffice" / "beta" / "cur"
        assert len(os.listdir(cur)) == len(order)  # every entry left where it is, none removed
        spool.db.close()


def test_an_entry_that_is_no_letter_is_named_in_its_note(registry: object, alpha: AgentMail, beta: AgentMail) -> None:
    new = beta.home / "postoffice" / "beta" / "new"
    Mailbox(new.parent).ensure()
    os.mkfifo(new / "0001.fifo")
    alpha.send("beta", "After the FIFO", "I am the agent of alpha. Reproduction: none; a test.\n", type="question")
    report = beta.sync()
    assert [x.subject for x in report.accepted] == ["After the FIFO"]
    (note,) = beta.quarantined(sync=False)
    assert note.reason == "malformed"
    assert note.detail == (
        "the post office entry beta/cur/000000000001:2, is a FIFO, not a regular file: not read, left where it is "
        "(once it is a readable letter, 'agentmail inbox --from-start' reads it)"
    )


def test_read_plain_reads_a_regular_file_whole_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "letter"
    path.write_bytes(b"x" * 100)
    assert read_plain(path)[0] == b"x" * 100
    assert read_plain(path, 100)[0] == b"x" * 100
    assert read_plain(path, 99)[0] is None
    assert read_plain(path, 99)[1].st_size == 100


def test_read_plain_refuses_what_is_no_regular_file_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name, kind in (
        ("fifo", "a FIFO"),
        ("zero", "a symbolic link"),
        ("link", "a symbolic link"),
        ("dir", "a directory"),
    ):
        with pytest.raises(NotAFile, match=f"^.*{kind}, not a regular file"):
            read_plain(tmp_path / name, 10)


def test_a_file_that_grows_past_its_limit_while_read_is_too_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fstat said small, the reads find more: never more than limit + 1 bytes taken."""
    path = tmp_path / "growing"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    def small(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 3, *st[7:]))

    monkeypatch.setattr(os, "fstat", small)
    assert read_plain(path, 5)[0] is None
    assert read_plain(path, 10)[0] == b"x" * 10
