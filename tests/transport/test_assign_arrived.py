"""A wake that saw a letter land in new/ lets the next fetch number it without the look that
precedes the lock (``Mailbox.assign(arrived=True)``): the same UIDs, the same counter, the same
folders as the look then the lock give, whatever new/, cur/ and the counter hold."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.client.facade import AgentMail
from agentmail.transport import uid_mailbox
from agentmail.transport.uid_mailbox import Mailbox

from ..conftest import OPENER
from ..depth import examples, suppressed


def _state(box: Mailbox) -> tuple[list[str], list[str], bytes | None]:
    counter = box.dir / ".uidnext"
    return (
        sorted(os.listdir(box.dir / "new")),
        sorted(os.listdir(box.dir / "cur")),
        counter.read_bytes() if counter.exists() else None,
    )


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(
    landed=st.lists(st.sampled_from(["a", "b", "c", "d.eml", "1.x"]), unique=True, max_size=4),
    numbered=st.integers(0, 3),
    flagged=st.booleans(),
    counter=st.sampled_from([None, "ok", "behind", "ahead", b"garbage", b"", b"000000000001xx"]),
)
def test_a_wake_numbers_as_the_look_then_the_lock_do(
    tmp_path: Path, landed: list[str], numbered: int, flagged: bool, counter: object
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as where:
        box = Mailbox(Path(where) / "beta")
        box.ensure()
        for uid in range(1, numbered + 1):
            flag = "S" if flagged and uid == numbered else ""
            (box.dir / "cur" / f"{uid:012d}:2,{flag}").write_bytes(b"x")
        for name in landed:
            (box.dir / "new" / name).write_bytes(name.encode())
        if counter is not None:
            value = {"ok": numbered + 1, "behind": max(1, numbered - 1), "ahead": numbered + 5}.get(str(counter))
            raw = f"{value:012d}".encode() if value is not None else counter
            assert isinstance(raw, bytes)
            (box.dir / ".uidnext").write_bytes(raw)
        other = Mailbox(Path(where) / "copy")
        shutil.copytree(box.dir, other.dir)
        looked = box.assign()
        woken = other.assign(arrived=True)
        assert woken == looked
        assert _state(other) == _state(box)
        for uid in range(1, woken):  # each letter that landed holds its UID, in the same file
            names = [n for n in os.listdir(box.dir / "cur") if n.startswith(f"{uid:012d}:")]
            assert [(other.dir / "cur" / n).read_bytes() for n in names] == [
                (box.dir / "cur" / n).read_bytes() for n in names
            ]


def test_a_wake_on_a_letter_landing_reads_the_counter_once(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = beta.receiver
    receiver.sync(woken=True)  # the spool and the post office made, nothing to fetch
    transport = receiver.transport
    checkpoint = receiver._checkpoint(transport.name)
    looks = iter([True])  # the first look finds nothing: the letter lands after it, and wakes the watch

    def pending(_checkpoint: str | None) -> bool:
        if next(looks, False):
            alpha.send("beta", "One", OPENER)
        return False

    monkeypatch.setattr(transport, "pending", pending)
    assert transport.wait(checkpoint, 30) == "inotify"
    monkeypatch.undo()
    reads: list[int] = []
    counted = uid_mailbox.Mailbox._uidnext

    def uidnext(box: Mailbox) -> int:
        reads.append(1)
        return counted(box)

    monkeypatch.setattr(uid_mailbox.Mailbox, "_uidnext", uidnext)
    report = receiver.sync(woken=True)
    assert len(report.accepted) == 1 and len(reads) == 1  # under the lock only
    assert transport._arrived is False  # the hint is spent with the fetch it was for
