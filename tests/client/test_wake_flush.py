"""The receiver's flush of the post office's ``cur/`` runs beside judging (transport/local.py
``Flush``), and has returned before the batch's commit names a letter (``Transport.settle``):
the order DESIGN §7 keeps for a power cut, without the flush on the wake path."""

from __future__ import annotations

import _thread
import os
import sys
import threading
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.client.receiver import Receiver
from agentmail.spool.filing import SpoolWriter
from agentmail.transport import local
from agentmail.transport.local import LocalTransport, deliver

BODY = "Does the flush overlap the judging?"


def test_the_cur_flush_overlaps_judging_and_returns_before_the_commit(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha.send("beta", "Overlap", BODY, type="question")
    monkeypatch.setattr(local, "spare_core", lambda: True)
    judging = threading.Event()
    events: list[str] = []
    overlapped: list[bool] = []
    real_fsync, real_file, real_commit = os.fsync, Receiver._file_isolated, SpoolWriter.commit

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith("/postoffice/beta/cur"):
            # The judging starts while this flush is still under way (a bounded wait: without
            # the overlap it never starts, and the assertion below says so).
            overlapped.append(judging.wait(30))
            real_fsync(fd)
            events.append("cur flushed")
            return
        real_fsync(fd)

    def file_isolated(self: Receiver, *args: object) -> None:
        judging.set()
        real_file(self, *args)  # type: ignore[arg-type]

    def commit(self: SpoolWriter) -> None:
        events.append("commit")
        real_commit(self)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Receiver, "_file_isolated", file_isolated)
    monkeypatch.setattr(SpoolWriter, "commit", commit)
    report = beta.sync()
    assert len(report.accepted) == 1 and overlapped == [True]
    assert events[: events.index("commit")].count("cur flushed") == 1  # flushed before the commit


def test_on_a_busy_machine_the_flush_is_done_before_the_judging(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha.send("beta", "Overlap", BODY, type="question")
    monkeypatch.setattr(local, "spare_core", lambda: False)
    events: list[str] = []
    real_fsync, real_file = os.fsync, Receiver._file_isolated

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/postoffice/beta/cur"):
            events.append("cur flushed")

    def file_isolated(self: Receiver, *args: object) -> None:
        events.append("judging")
        real_file(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Receiver, "_file_isolated", file_isolated)
    assert len(beta.sync().accepted) == 1 and events == ["cur flushed", "judging"]


@pytest.mark.parametrize("spare", [True, False])
def test_a_flush_that_fails_stops_the_sync_before_anything_is_committed(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch, spare: bool
) -> None:
    alpha.send("beta", "Overlap", BODY, type="question")
    monkeypatch.setattr(local, "spare_core", lambda: spare)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/postoffice/beta/cur"):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        beta.sync()
    monkeypatch.undo()
    # Nothing was committed: the batch is fetched again and filed now, once (not a duplicate).
    assert [letter.subject for letter in beta.sync().accepted] == ["Overlap"]


def test_advance_waits_for_the_flush_when_nothing_settled_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that never calls ``settle`` (doctor's look) still has the flush behind every
    checkpoint it is handed."""
    transport = LocalTransport(tmp_path / "po", "beta", {"beta@bus.test": "beta"}.get)
    monkeypatch.setattr(local, "spare_core", lambda: True)
    deliver(tmp_path / "po" / "beta", b"Subject: x\r\n\r\nhi\r\n")
    (batch,) = list(transport.fetch(None, 1 << 20))
    assert transport._flushing is not None
    checkpoint = transport.advance(None, batch)
    assert transport._flushing is None and checkpoint is not None and checkpoint.endswith(":1")
    transport.settle()  # nothing left to wait for


def test_a_spare_core_is_read_from_the_load_and_none_when_it_cannot_be(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (cores - 1.5, 0.0, 0.0))
    assert local.spare_core() is (cores >= 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (float(cores), 0.0, 0.0))
    assert local.spare_core() is False

    def unreadable() -> tuple[float, float, float]:
        raise OSError("no /proc")

    monkeypatch.setattr(os, "getloadavg", unreadable)
    assert local.spare_core() is False


def test_no_thread_to_be_had_flushes_inline_and_leaves_the_switch_interval_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object) -> int:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(local, "spare_core", lambda: True)
    monkeypatch.setattr(_thread, "start_new_thread", refused)
    interval = sys.getswitchinterval()
    (tmp_path / "cur").mkdir()
    flush = local.Flush(tmp_path / "cur")
    assert sys.getswitchinterval() == interval
    flush.wait()
