"""The helpers written once: the file-system primitives (_fs) and the fetch Checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmail import _fs
from agentmail.transport.base import Checkpoint, Incoming


@given(st.text(st.characters(exclude_characters=":"), max_size=12), st.integers(0, 2**40))
def test_a_checkpoint_reads_back_what_it_wrote(validity: str, last: int) -> None:
    assert Checkpoint.parse(str(Checkpoint(validity, last))) == Checkpoint(validity, last)


@pytest.mark.parametrize("stored", [None, "", "garbage", "17:", "17:-3", "17:x"])
def test_a_missing_or_torn_checkpoint_starts_from_the_beginning(stored: str | None) -> None:
    assert Checkpoint.parse(stored).last == 0


def test_a_renumbered_mailbox_is_read_again_and_a_checkpoint_never_moves_back() -> None:
    seen = Checkpoint.parse("17:40")
    assert seen.under("17") == seen and seen.under("18") == Checkpoint("18", 0)
    assert str(seen.past([Incoming("12", b"", 0), Incoming("41", b"", 0)])) == "17:41"
    assert seen.past([Incoming("3", b"", 0)]) == seen


def test_write_new_never_overwrites_and_never_follows_a_link(tmp_path: Path) -> None:
    _fs.write_new(tmp_path / "a", b"first")
    with pytest.raises(FileExistsError):
        _fs.write_new(tmp_path / "a", b"second")
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    with pytest.raises(FileExistsError):
        _fs.write_new(tmp_path / "link", b"x")
    assert (tmp_path / "a").read_bytes() == b"first" and not (tmp_path / "elsewhere").exists()


def test_write_atomic_replaces_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    _fs.write_atomic(folder / "f", b"old")
    _fs.write_atomic(folder / "f", b"new", durable=False)
    assert (folder / "f").read_bytes() == b"new" and os.listdir(folder) == ["f"]


def test_a_short_write_is_carried_on_until_every_byte_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.write may write fewer bytes than asked (a filling disk, a signal): a letter cut short
    # and fsynced would look filed. Here the kernel takes at most 3 bytes a call.
    real_write = os.write
    calls: list[int] = []

    def stingy(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))

    monkeypatch.setattr(os, "write", stingy)
    _fs.write_new(tmp_path / "new", b"0123456789")
    _fs.write_atomic(tmp_path / "atomic", b"abcdefgh", durable=False)
    monkeypatch.undo()
    assert (tmp_path / "new").read_bytes() == b"0123456789"
    assert (tmp_path / "atomic").read_bytes() == b"abcdefgh"
    assert calls == [10, 7, 4, 1, 8, 5, 2]


def test_a_lock_is_exclusive_until_released(tmp_path: Path) -> None:
    with _fs.locked(tmp_path / "lock"), pytest.raises(BlockingIOError), _fs.locked(tmp_path / "lock", wait=False):
        pass  # flock locks belong to an open file: a second open conflicts, even in-process
    with _fs.locked(tmp_path / "lock", wait=False):
        pass
