"""The one writer's primitives in ``_fs`` held to their exact answers (mutation run 17): the
flags and mode of every open, which fd each fsync gets (and that ``durable=False`` gets none), the
temporary of an atomic write, a link only of the very same file with nothing left behind
otherwise, ``is_same`` for each way a copy stops being the same, syncfs before sync, the lock."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import _fs

from ..depth import examples, suppressed

WRITE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW


class Calls:
    """Each os.open (path, flags, mode), os.fsync (fd), os.close (fd) and os.sync, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[tuple[str, int, int | None, int]] = []  # path, flags, mode, fd
        self.synced: list[int] = []
        self.closed: list[int] = []
        self.syncs = 0
        real_open: Callable[..., int] = os.open
        real_fsync, real_close = os.fsync, os.close

        def open_(path: Any, flags: int, *mode: int) -> int:
            fd = real_open(path, flags, *mode)
            self.opened.append((str(path), flags, mode[0] if mode else None, fd))
            return fd

        def fsync(fd: int) -> None:
            self.synced.append(fd)
            real_fsync(fd)

        def close(fd: int) -> None:
            self.closed.append(fd)
            real_close(fd)

        def sync() -> None:
            self.syncs += 1

        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "close", close)
        monkeypatch.setattr(os, "sync", sync)

    def fd_of(self, path: Path) -> int:
        (fd,) = [fd for opened, _, _, fd in self.opened if opened == str(path)]
        return fd


# --- _kind: the words of a refusal -------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        (stat.S_IFLNK | 0o777, "a symbolic link"),
        (stat.S_IFDIR | 0o755, "a directory"),
        (stat.S_IFIFO | 0o600, "a FIFO"),
        (stat.S_IFSOCK | 0o600, "a socket"),
        (stat.S_IFCHR | 0o600, "a device"),
        (stat.S_IFBLK | 0o600, "a device"),
        (stat.S_IFREG | 0o600, "no regular file"),
        (0, "no regular file"),
    ],
)
def test_each_kind_of_entry_is_named_in_its_own_words(mode: int, words: str) -> None:
    assert _fs._kind(mode) == words


# --- write_new, write_atomic: the opens, the fsyncs ---------------------------------------------


def test_write_new_opens_exclusively_never_through_a_link_0600_and_fsyncs_that_fd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    _fs.write_new(tmp_path / "new", b"letter")
    fd = calls.fd_of(tmp_path / "new")
    assert calls.opened == [(str(tmp_path / "new"), WRITE | os.O_EXCL, 0o600, fd)]
    assert calls.synced == [fd] and calls.closed == [fd]  # durable by default: the file's own fd
    assert (tmp_path / "new").read_bytes() == b"letter"


def test_write_new_not_durable_fsyncs_nothing_and_takes_the_mode_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    _fs.write_new(tmp_path / "new", b"x", durable=False, mode=0o640)
    fd = calls.fd_of(tmp_path / "new")
    assert calls.opened == [(str(tmp_path / "new"), WRITE | os.O_EXCL, 0o640, fd)]
    assert calls.synced == [] and calls.closed == [fd]


def test_write_atomic_writes_a_temporary_beside_it_fsyncs_it_renames_it_and_fsyncs_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    tmp = folder / f".f.{os.getpid()}.tmp"
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src: Path, dst: Path) -> None:
        replaced.append((str(src), str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    calls = Calls(monkeypatch)
    _fs.write_atomic(folder / "f", b"whole")
    file_fd = calls.fd_of(tmp)
    dir_fd = calls.fd_of(folder)
    assert calls.opened == [
        (str(tmp), WRITE | os.O_TRUNC, 0o600, file_fd),
        (str(folder), os.O_RDONLY | os.O_DIRECTORY, None, dir_fd),
    ]
    assert replaced == [(str(tmp), str(folder / "f"))]
    assert calls.synced == [file_fd, dir_fd] and calls.closed == [file_fd, dir_fd]
    assert (folder / "f").read_bytes() == b"whole" and os.listdir(folder) == ["f"]


def test_write_atomic_not_durable_fsyncs_nothing_and_takes_the_mode_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = tmp_path / f".f.{os.getpid()}.tmp"
    calls = Calls(monkeypatch)
    _fs.write_atomic(tmp_path / "f", b"x", mode=0o644, durable=False)
    assert calls.opened == [(str(tmp), WRITE | os.O_TRUNC, 0o644, calls.fd_of(tmp))]
    assert calls.synced == []


def test_a_temporary_left_by_a_crashed_write_is_cut_to_the_new_bytes(tmp_path: Path) -> None:
    # the same pid after a reboot finds its old temporary: the new bytes replace all of it
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / f".f.{os.getpid()}.tmp").write_bytes(b"a much longer torn letter")
    _fs.write_atomic(folder / "f", b"short", durable=False)
    assert (folder / "f").read_bytes() == b"short" and os.listdir(folder) == ["f"]


def test_write_atomic_never_writes_through_a_link_planted_as_its_temporary(tmp_path: Path) -> None:
    os.symlink(tmp_path / "victim", tmp_path / f".f.{os.getpid()}.tmp")
    with pytest.raises(OSError) as refused:
        _fs.write_atomic(tmp_path / "f", b"x", durable=False)
    assert refused.value.errno == errno.ELOOP
    assert not (tmp_path / "victim").exists() and not (tmp_path / "f").exists()


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(st.binary(max_size=4096), st.binary(max_size=4096))
def test_what_is_written_is_what_is_read_back(tmp_path: Path, first: bytes, second: bytes) -> None:
    folder = tmp_path / "written"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    _fs.write_new(folder / "new", first, durable=False)
    _fs.write_atomic(folder / "atomic", first, durable=False)
    _fs.write_atomic(folder / "atomic", second, durable=False)
    assert (folder / "new").read_bytes() == first and (folder / "atomic").read_bytes() == second
    assert sorted(os.listdir(folder)) == ["atomic", "new"]


# --- fsync_dir, fsync_file, sync_filesystem -----------------------------------------------------


def test_fsync_dir_fsyncs_the_folder_opened_as_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_bytes(b"")
    calls = Calls(monkeypatch)
    _fs.fsync_dir(tmp_path)
    fd = calls.fd_of(tmp_path)
    assert calls.opened == [(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY, None, fd)]
    assert calls.synced == [fd] and calls.closed == [fd]
    with pytest.raises(NotADirectoryError):
        _fs.fsync_dir(tmp_path / "file")


def test_fsync_file_fsyncs_that_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_bytes(b"late")
    calls = Calls(monkeypatch)
    _fs.fsync_file(tmp_path / "file")
    fd = calls.fd_of(tmp_path / "file")
    assert calls.opened == [(str(tmp_path / "file"), os.O_RDONLY, None, fd)]
    assert calls.synced == [fd] and calls.closed == [fd]


def _libc(monkeypatch: pytest.MonkeyPatch, **functions: Any) -> None:
    monkeypatch.setattr(_fs, "libc", lambda: SimpleNamespace(**functions))


@pytest.mark.parametrize(("answer", "syncs"), [(0, 0), (-1, 1)])
def test_sync_filesystem_asks_syncfs_of_the_folder_and_syncs_all_only_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: int, syncs: int
) -> None:
    asked: list[int] = []

    def syncfs(fd: int) -> int:
        asked.append(fd)
        return answer

    _libc(monkeypatch, syncfs=syncfs)
    calls = Calls(monkeypatch)
    _fs.sync_filesystem(tmp_path)
    fd = calls.fd_of(tmp_path)
    assert calls.opened == [(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY, None, fd)]
    assert asked == [fd] and calls.syncs == syncs and calls.closed == [fd]


def test_sync_filesystem_without_syncfs_or_when_it_raises_syncs_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _libc(monkeypatch)  # a C library without syncfs (not Linux)
    calls = Calls(monkeypatch)
    _fs.sync_filesystem(tmp_path)
    assert calls.syncs == 1 and calls.closed == [calls.opened[0][3]]

    def broken(fd: int) -> int:
        raise OSError(errno.ENOSYS, "no syncfs")

    _libc(monkeypatch, syncfs=broken)
    _fs.sync_filesystem(tmp_path)
    assert calls.syncs == 2 and len(calls.closed) == 2


def test_sync_filesystem_on_the_real_c_library_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch)
    _fs.sync_filesystem(tmp_path)
    assert calls.syncs == 0  # Linux has syncfs: the whole-machine sync is never needed
    with pytest.raises(NotADirectoryError):
        _fs.sync_filesystem(Path(__file__))


# --- link_same, is_same: the very same file or nothing ------------------------------------------


def _copy(path: Path) -> tuple[str, int, int]:
    st_ = os.lstat(path)
    return str(path), st_.st_dev, st_.st_ino


def test_the_very_same_file_is_linked_never_following_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "copy").write_bytes(b"letter")
    linked: list[tuple[str, str, dict[str, Any]]] = []
    real_link = os.link

    def link(src: str, dst: Path, **kw: Any) -> None:
        linked.append((src, str(dst), kw))
        real_link(src, dst, **kw)

    monkeypatch.setattr(os, "link", link)
    assert _fs.link_same(_copy(tmp_path / "copy"), tmp_path / "filed", 6) is True
    assert linked == [(str(tmp_path / "copy"), str(tmp_path / "filed"), {"follow_symlinks": False})]
    assert os.lstat(tmp_path / "filed").st_ino == os.lstat(tmp_path / "copy").st_ino


@pytest.mark.parametrize("change", ["replaced", "grown", "linked", "moved"])
def test_a_copy_no_longer_the_same_is_never_linked_and_leaves_nothing(tmp_path: Path, change: str) -> None:
    copy = tmp_path / "copy"
    copy.write_bytes(b"letter")
    seen = _copy(copy)
    if change == "replaced":  # another file of the same size in its place
        (tmp_path / "other").write_bytes(b"LETTER")
        os.replace(tmp_path / "other", copy)
    elif change == "grown":
        copy.write_bytes(b"letter, and more")
    elif change == "linked":  # a symbolic link to the very file, under the copy's name
        os.rename(copy, tmp_path / "real")
        os.symlink(tmp_path / "real", copy)
        seen = (str(copy), *_copy(tmp_path / "real")[1:])
    else:
        os.unlink(copy)
    assert _fs.is_same(seen, 6) is False
    assert _fs.link_same(seen, tmp_path / "filed", 6) is False
    assert not os.path.lexists(tmp_path / "filed")


def test_a_link_over_an_existing_name_is_refused_and_the_name_kept(tmp_path: Path) -> None:
    (tmp_path / "copy").write_bytes(b"letter")
    (tmp_path / "filed").write_bytes(b"already")
    assert _fs.link_same(_copy(tmp_path / "copy"), tmp_path / "filed", 6) is False
    assert (tmp_path / "filed").read_bytes() == b"already"


def test_a_copy_still_the_same_is_same_and_a_link_of_itself_is_not(tmp_path: Path) -> None:
    (tmp_path / "copy").write_bytes(b"letter")
    assert _fs.is_same(_copy(tmp_path / "copy"), 6) is True
    assert _fs.is_same(_copy(tmp_path / "copy"), 7) is False
    os.symlink("copy", tmp_path / "link")  # a link judged by its own lstat: still no plain file
    assert _fs.is_same(_copy(tmp_path / "link"), len("copy")) is False


# --- locked: the mailbox lock -------------------------------------------------------------------


def test_the_lock_file_is_created_0600_never_through_a_link(tmp_path: Path) -> None:
    with _fs.locked(tmp_path / "lock") as fd:
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600 & ~_umask()
    os.symlink(tmp_path / "elsewhere", tmp_path / "planted")
    with pytest.raises(OSError) as refused, _fs.locked(tmp_path / "planted"):
        pass
    assert refused.value.errno == errno.ELOOP and not (tmp_path / "elsewhere").exists()


def test_shared_holders_coexist_and_keep_out_an_exclusive_one(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with (
        _fs.locked(lock, shared=True),
        _fs.locked(lock, shared=True, wait=False),
        pytest.raises(BlockingIOError),
        _fs.locked(lock, wait=False),
    ):
        pass
    other = os.open(lock, os.O_RDONLY)
    try:
        with _fs.locked(lock, wait=False), pytest.raises(BlockingIOError):  # all released: taken
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.close(other)


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old
