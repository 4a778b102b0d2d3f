"""Linux inotify through ctypes: wake the moment a letter is renamed into a Maildir.

A few lines of libc instead of a dependency; where inotify is missing (another OS, a
filesystem that does not report events) ``Watch`` is None-able and callers poll instead.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
from pathlib import Path

from .._fs import libc

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
# Anything but a name added: a name gone, the queue overflowed, the directory itself gone or moved.
NOT_ONLY_ADDED = IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_Q_OVERFLOW | IN_IGNORED
EVERY_NAME = IN_MOVED_TO | IN_CREATE | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name, NUL-padded
IN_CLOEXEC = 0o2000000
IN_NONBLOCK = 0o4000


class Watch:
    """Events for files moved or created in one directory."""

    fd = -1  # until __init__ has one (a failed init still meets __del__)

    def __init__(self, directory: Path | str, mask: int = IN_MOVED_TO | IN_CREATE) -> None:
        c = libc()
        fd = c.inotify_init1(IN_CLOEXEC | IN_NONBLOCK)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if c.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
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

    def added(self) -> tuple[list[str], bool]:
        """The names created or moved in since the last call (never blocks), and whether that is
        all that happened (False: a name went, the queue overflowed, the directory went: read it
        again). A name is decoded as ``os.listdir`` decodes it."""
        names: list[str] = []
        only_added = True
        while data := self._read():  # whole events: the kernel never splits one
            at = 0
            while at < len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + length].rstrip(b"\0")
                at += _EVENT.size + length
                if mask & (IN_CREATE | IN_MOVED_TO):
                    names.append(os.fsdecode(name))
                if mask & NOT_ONLY_ADDED:
                    only_added = False
        return names, only_added

    def _read(self) -> bytes:
        """What the queue holds (b"": nothing now)."""
        try:
            return os.read(self.fd, 65536)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # a transport dropped unclosed: its watch goes with it
        self.close()


def watch(directory: Path | str, mask: int = IN_MOVED_TO | IN_CREATE) -> Watch | None:
    try:
        return Watch(directory, mask)
    except (OSError, AttributeError):
        return None
