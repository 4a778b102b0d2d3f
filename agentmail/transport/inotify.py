"""Linux inotify through ctypes: wake the moment a letter is renamed into a Maildir.

A few lines of libc instead of a dependency; where inotify is missing (another OS, a
filesystem that does not report events) ``Watch`` is None-able and callers poll instead.
"""

from __future__ import annotations

import ctypes
import os
import select
from pathlib import Path

from .._fs import libc

IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_CLOEXEC = 0o2000000
IN_NONBLOCK = 0o4000


class Watch:
    """Events for files moved or created in one directory."""

    fd = -1  # until __init__ has one (a failed init still meets __del__)

    def __init__(self, directory: Path) -> None:
        c = libc()
        fd = c.inotify_init1(IN_CLOEXEC | IN_NONBLOCK)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if c.inotify_add_watch(fd, os.fsencode(directory), IN_MOVED_TO | IN_CREATE) < 0:
            os.close(fd)
            raise OSError(ctypes.get_errno(), f"inotify_add_watch failed on {directory}")
        self.fd = fd

    def wait(self, timeout: float) -> bool:
        """True when an event arrived within ``timeout`` seconds (events are drained)."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
        if not ready:
            return False
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # a transport dropped unclosed: its watch goes with it
        self.close()


def watch(directory: Path) -> Watch | None:
    try:
        return Watch(directory)
    except (OSError, AttributeError):
        return None
