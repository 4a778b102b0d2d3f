"""File-system primitives, written once: atomic replace, exclusive create, durable rename, locks.

Every durable write here is the same dance: write a file, fsync it, rename it into place,
fsync the folder. ``durable=False`` skips the fsyncs where a lost write only costs a refetch.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def fsync_dir(path: str | Path) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def libc() -> Any:
    """The C library, loaded once (syncfs here, inotify in the local transport)."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def sync_filesystem(path: Path) -> None:
    """Flush every dirty file of the filesystem holding ``path`` (Linux syncfs; else sync)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if getattr(libc(), "syncfs", None) is None or libc().syncfs(fd) != 0:
            os.sync()
    except OSError:
        os.sync()
    finally:
        os.close(fd)


def _write(path: str | Path, data: bytes, flags: int, mode: int, durable: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | flags, mode)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data``: ``os.write`` may write fewer (a filling disk, a signal),
    and a letter cut short and fsynced would be a lost letter that looks filed."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_new(path: str | Path, data: bytes, *, durable: bool = True, mode: int = 0o600) -> None:
    """Create ``path`` (never over an existing file, never through a symlink) holding ``data``."""
    _write(path, data, os.O_EXCL, mode, durable)


def link_same(copy: tuple[str, int, int], target: str | Path, size: int) -> bool:
    """Hard-link the very file ``copy`` names (path, st_dev, st_ino: a plain file of ``size``
    bytes) as ``target``: no new inode to create, nothing to write. False, with nothing left
    behind, for anything else: another file system, a file replaced since, links not allowed.
    Only for letter files, which nothing changes in place (a spool never rewrites one, a
    Maildir client writes a new file and renames)."""
    path, dev, ino = copy
    try:
        os.link(path, target, follow_symlinks=False)
    except OSError:
        return False
    st = os.lstat(target)
    if (st.st_dev, st.st_ino, st.st_size) == (dev, ino, size) and stat.S_ISREG(st.st_mode):
        return True
    os.unlink(target)
    return False


class NotAFile(OSError):
    """A path that is no regular file: a FIFO, a directory, a device, a socket, a symbolic link."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return "no regular file"


def read_plain(path: str | Path, limit: int | None = None) -> tuple[bytes | None, os.stat_result]:
    """The bytes of the regular file ``path`` and its stat; None for the bytes when it holds
    more than ``limit``. Never through a symbolic link, never blocking, never more than
    ``limit`` + 1 bytes read; anything but a regular file is NotAFile, and is never even opened
    (opening a FIFO waits for a writer, opening a device may act)."""
    before = os.lstat(path)
    if not stat.S_ISREG(before.st_mode):
        raise NotAFile(errno.EINVAL, f"{_kind(before.st_mode)}, not a regular file", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise NotAFile(errno.EINVAL, "replaced while it was opened", str(path))
        if limit is not None and st.st_size > limit:
            return None, st
        data = b""
        want = st.st_size + 1  # one more than it says: a file that grew since is seen
        while True:
            if limit is not None:
                want = min(want, limit + 1 - len(data))
            chunk = os.read(fd, want)
            data += chunk
            if limit is not None and len(data) > limit:
                return None, st
            if len(chunk) < want:  # a short read of a regular file: its end
                return data, st
            want = 1 << 16
    finally:
        os.close(fd)


def is_same(copy: tuple[str, int, int], size: int) -> bool:
    """Is ``copy`` (path, st_dev, st_ino) still that very plain file, of ``size`` bytes?"""
    path, dev, ino = copy
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino, st.st_size) == (dev, ino, size) and stat.S_ISREG(st.st_mode)


def fsync_file(path: str | Path) -> None:
    """Make the contents of a file written with ``durable=False`` durable after all."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """Write ``data`` to ``path`` so a crash leaves the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _write(tmp, data, os.O_TRUNC, mode, durable)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


@contextmanager
def locked(path: Path, *, wait: bool = True, shared: bool = False) -> Iterator[int]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block; yields its fd.

    ``wait=False``: raise BlockingIOError at once when another process holds it. ``shared``:
    a shared lock (many holders; an exclusive one waits for them all). Closing the fd
    releases the lock, so a crashed holder never leaves it taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        fcntl.flock(fd, kind if wait else kind | fcntl.LOCK_NB)
        yield fd
    finally:
        os.close(fd)
