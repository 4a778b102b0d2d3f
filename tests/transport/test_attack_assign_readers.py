"""Attacks on ``Mailbox.assign(arrived=True)`` (a wake's fetch numbers under the lock without
the look before it): two readers of one Maildir (two ``wait()`` processes, a ``wait`` and an
``inbox``, another machine on the shared post office), each taking a wake's hint or not, one
stale (the letter taken by the other reader already), a wake for a name that is no letter (a
mail client's rename, a flag changed in cur/), a counter made garbage, ahead, or a reader killed
between reserving the UIDs and its renames. Each reader reads from its own checkpoint up to the
UID ``assign`` returns, as ``LocalTransport.fetch`` does: every letter is read exactly once by
each reader, and no two letters ever hold one UID."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.transport.uid_mailbox import Mailbox

from ..depth import examples

_EVENT = st.one_of(
    st.tuples(st.just("land"), st.integers(0, 2)),  # how many letters land
    st.tuples(st.just("fetch"), st.tuples(st.integers(0, 1), st.booleans())),  # (reader, a wake's hint)
    st.tuples(st.just("flag"), st.integers(0, 30)),  # a mail client flags a numbered letter
    st.tuples(st.just("junk"), st.sampled_from(["new", "cur"])),  # a name that is no letter
    st.tuples(st.just("counter"), st.sampled_from([b"garbage", b"", b"000000000099", b"00000000000"])),
    st.tuples(st.just("killed"), st.integers(1, 3)),  # UIDs reserved, the process killed before its renames
)


def _uids(box: Mailbox) -> list[int]:
    return [int(name[:12]) for name in os.listdir(box.dir / "cur") if name[:12].isdigit()]


def _run(events: list[tuple[str, Any]], where: Path) -> None:
    readers = [Mailbox(where / "beta"), Mailbox(where / "beta")]
    for box in readers:
        box.ensure()
    landed: list[bytes] = []
    read: list[list[bytes]] = [[], []]
    last = [0, 0]
    for what, arg in [*events, ("fetch", (0, False)), ("fetch", (1, False))]:
        box = readers[0]
        if what == "land":
            for _ in range(arg):
                body = f"letter {len(landed)}".encode()
                landed.append(body)
                (box.dir / "new" / f"{len(landed):04d}.host").write_bytes(body)
        elif what == "fetch":
            who, hint = arg
            uidnext = readers[who].assign(arrived=hint)
            for uid in range(last[who] + 1, uidnext):
                item = readers[who].read(uid, 1 << 20)
                if item is not None and item.raw is not None and item.raw in landed:
                    read[who].append(item.raw)
            last[who] = max(last[who], uidnext - 1)
        elif what == "flag":
            names = sorted(n for n in os.listdir(box.dir / "cur") if n.endswith(":2,"))
            if names:
                name = names[arg % len(names)]
                os.rename(box.dir / "cur" / name, box.dir / "cur" / f"{name}S")
        elif what == "junk":
            (box.dir / arg / "junk.tmp:2,").write_bytes(b"not a letter")
        elif what == "counter":
            value = int(arg) if arg.isdigit() and int(arg) >= 1 else None
            if value is None and box._uidnext() > box._past_cur() or value is not None and value < box._uidnext():
                # The documented limit (DESIGN §7, *UIDs*): a counter written back, or made
                # unusable while it held UIDs past every name in cur/ (reserved by a reader killed
                # before its renames, or their letters expunged), gives a UID again and a reader
                # already past it skips that letter. Only a hand on the file does it: assign()
                # never moves the counter back.
                continue
            (box.dir / ".uidnext").write_bytes(arg)
        elif what == "killed":
            held = box._uidnext()
            (box.dir / ".uidnext").write_bytes(f"{held + arg:012d}".encode())
        uids = _uids(box)
        assert len(uids) == len(set(uids)), ("two letters hold one UID", what, arg)
    for who in (0, 1):
        assert sorted(read[who]) == sorted(landed), (who, "every letter read exactly once")


@settings(max_examples=examples(200), deadline=None)
@given(events=st.lists(_EVENT, max_size=25))
def test_two_readers_with_wake_hints_read_every_letter_once(events: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as where:
        _run(events, Path(where))


@pytest.mark.parametrize("hint", [False, True])
def test_a_stale_hint_after_the_other_reader_took_the_letter(hint: bool, tmp_path: Path) -> None:
    """The wake's letter numbered and read by the other reader first: the hinted fetch still
    returns the counter past it, and reads it once."""
    _run([("land", 1), ("fetch", (1, False)), ("fetch", (0, hint)), ("land", 1), ("fetch", (0, hint))], tmp_path)


@pytest.fixture
def counter_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, bool]]:
    """Every value written to a ``.uidnext`` and whether an fsync made it durable: a power cut
    may keep any value written up to the last flushed one (the kernel wrote it back, or not)."""
    writes: list[tuple[bytes, bool]] = []
    pwrite, fsync = os.pwrite, os.fsync

    def counter(fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").endswith("/.uidnext")

    def recording_pwrite(fd: int, data: Any, offset: int) -> int:
        if counter(fd):
            writes.append((bytes(data), False))
        return pwrite(fd, data, offset)

    def recording_fsync(fd: Any) -> None:
        if isinstance(fd, int) and counter(fd) and writes:
            writes[-1] = (writes[-1][0], True)
        fsync(fd)

    monkeypatch.setattr(os, "pwrite", recording_pwrite)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    return writes


@pytest.mark.parametrize("hint", [False, True])
def test_a_power_cut_that_loses_the_counters_write_gives_no_uid_twice(
    hint: bool, tmp_path: Path, counter_writes: list[tuple[bytes, bool]]
) -> None:
    """The renames were flushed (the fetch flushes cur/ before reading past them), the counter's
    last write was not: after the cut it reads behind them. A mail client flags the letter at
    that UID (``…:2,S``), so the exact-name probe misses it: the next letter was given its UID
    and the reader, whose checkpoint is past it, never read that letter (lost)."""
    box = Mailbox(tmp_path / "beta")
    box.ensure()
    (box.dir / "new" / "1.host").write_bytes(b"L1")
    assert box.assign(arrived=hint) == 2
    (box.dir / "new" / "2.host").write_bytes(b"L2")
    assert box.assign(arrived=hint) == 3  # the reader reads UID 2: its checkpoint is 2
    # the power cut: the counter as the disk may hold it, the last write kept only if flushed
    kept = counter_writes[-1] if counter_writes[-1][1] else counter_writes[-2]
    (box.dir / ".uidnext").write_bytes(kept[0])
    os.rename(box.dir / "cur" / "000000000002:2,", box.dir / "cur" / "000000000002:2,S")
    (box.dir / "new" / "3.host").write_bytes(b"L3")
    uidnext = box.assign(arrived=hint)
    assert sorted(_uids(box)) == [1, 2, 3]
    item = box.read(3, 1 << 20)
    assert uidnext == 4 and item is not None and item.raw == b"L3"
