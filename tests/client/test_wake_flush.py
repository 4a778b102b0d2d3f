"""The receiver's flush of the post office's ``cur/`` is made by the fetch before it hands out
what it read, so it has returned before the batch's first write and its commit name a letter:
the order DESIGN §7 keeps for a power cut, on the caller's thread, whatever the machine's load."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.client.receiver import Receiver
from agentmail.spool.filing import SpoolWriter
from agentmail.transport.local import LocalTransport, deliver

BODY = "Is cur/ flushed before the commit?"


def test_the_cur_flush_comes_before_the_judging_and_the_first_write(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha.send("beta", "Order", BODY, type="question")
    events: list[str] = []
    threads: set[int] = set()
    real_fsync, real_judged = os.fsync, Receiver._judged
    real_store, real_commit = SpoolWriter.store, SpoolWriter.commit

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/postoffice/beta/cur"):
            events.append("cur flushed")
            threads.add(threading.get_ident())

    def judged(self: Receiver, raw: bytes) -> object:
        events.append("judged")
        return real_judged(self, raw)

    def store(self: SpoolWriter, *args: object, **kwargs: object) -> object:
        events.append("stored")
        return real_store(self, *args, **kwargs)  # type: ignore[arg-type]

    def commit(self: SpoolWriter) -> None:
        events.append("commit")
        real_commit(self)

    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine: still one thread
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Receiver, "_judged", judged)
    monkeypatch.setattr(SpoolWriter, "store", store)
    monkeypatch.setattr(SpoolWriter, "commit", commit)
    assert len(beta.sync().accepted) == 1
    assert events == ["cur flushed", "judged", "stored", "commit"]
    assert threads == {threading.get_ident()}  # no thread of its own: the caller's


def test_a_flush_that_fails_stops_the_sync_before_anything_is_committed(
    alpha: AgentMail, beta: AgentMail, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha.send("beta", "Order", BODY, type="question")
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
    assert [letter.subject for letter in beta.sync().accepted] == ["Order"]


def test_the_fetch_flushes_before_it_hands_out_a_letter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that never calls ``settle`` (doctor's look) has the flush behind every letter and
    checkpoint it is handed."""
    transport = LocalTransport(tmp_path / "po", "beta", {"beta@bus.test": "beta"}.get)
    deliver(tmp_path / "po" / "beta", b"Subject: x\r\n\r\nhi\r\n")
    flushed: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    batch = next(transport.fetch(None, 1 << 20))
    # the counter before the renames it reserves (Mailbox._assign_names), then the renames
    assert flushed == [str(tmp_path / "po" / "beta" / ".uidnext"), str(tmp_path / "po" / "beta" / "cur")]
    checkpoint = transport.advance(None, batch)
    transport.settle()  # nothing left to flush
    assert len(flushed) == 2 and checkpoint is not None and checkpoint.endswith(":1")


def test_a_fetch_with_nothing_new_flushes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    transport = LocalTransport(tmp_path / "po", "beta", {"beta@bus.test": "beta"}.get)
    deliver(tmp_path / "po" / "beta", b"Subject: x\r\n\r\nhi\r\n")
    (batch,) = list(transport.fetch(None, 1 << 20))
    checkpoint = transport.advance(None, batch)
    flushed: list[int] = []
    monkeypatch.setattr(os, "fsync", flushed.append)
    assert list(transport.fetch(checkpoint, 1 << 20)) == []
    transport.settle()
    assert flushed == []
