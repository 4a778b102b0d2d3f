"""Where agentmail keeps its files: ``$AGENTMAIL_HOME`` (default ``~/.agentmail``)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any


def agentmail_home() -> Path:
    return Path(os.environ.get("AGENTMAIL_HOME") or "~/.agentmail").expanduser()


def fsync_dir(path: Path) -> None:
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


def write_atomic(path: Path, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """Write ``data`` to ``path`` so a crash leaves the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)
