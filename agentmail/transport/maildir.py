"""The one Maildir writer: a file put into a Maildir durably (tmp/, fsync, rename into new/,
fsync new/), as an MTA delivers. The post office's letters (``local``) and its sent record
(``sent_record``) are both written here, so both survive a power cut the moment ``put`` returns.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .._fs import fsync_dir, fsync_file, link_same, write_new

_made: set[str] = set()  # Maildirs this process has seen complete: no mkdirs per letter


def make(maildir: Path | str) -> None:
    """``tmp/``, ``new/`` and ``cur/`` of ``maildir`` (0700), made where missing."""
    for sub in ("tmp", "new", "cur"):
        os.makedirs(f"{maildir}/{sub}", mode=0o700, exist_ok=True)
    _made.add(str(maildir))


def put(
    maildir: Path | str, raw: bytes, copy: tuple[str, int, int] | None = None, *, suffix: str = "", durable: bool = True
) -> str:
    """Deliver ``raw`` into ``maildir``; returns its file name in ``new/``. Two fsyncs (the
    file, then ``new/`` after the rename): once this returns, the file survives a crash.
    ``durable=False``: neither (a file whose loss a reader makes up for).

    ``copy``: a file holding exactly ``raw`` (path, st_dev, st_ino: the sender's spool copy),
    hard-linked into ``tmp/`` instead of written, then fsynced and renamed like a written one.
    ``suffix`` ends the name in place of the host (``.sent`` in the sent record)."""
    return put_linked(maildir, raw, copy, suffix=suffix, durable=durable)[0]


def put_linked(
    maildir: Path | str, raw: bytes, copy: tuple[str, int, int] | None = None, *, suffix: str = "", durable: bool = True
) -> tuple[str, bool]:
    """``put``, and whether ``copy`` itself was linked in (then, ``durable``: its inode flushed)."""
    base = str(maildir)  # str paths: a pathlib join per step costs more than the syscall
    if base not in _made:
        make(base)
    try:
        return _put(base, raw, copy, suffix, durable)
    except FileNotFoundError:  # the Maildir was removed under a long-lived process: make it again
        make(base)
        return _put(base, raw, copy, suffix, durable)


def _put(base: str, raw: bytes, copy: tuple[str, int, int] | None, suffix: str, durable: bool) -> tuple[str, bool]:
    # os.uname().nodename is what socket.gethostname() returns, without importing socket
    host = suffix or os.uname().nodename.replace("/", "_")
    name = f"{time.time_ns()}.{os.getpid()}_{os.urandom(6).hex()}.{host}"
    tmp = f"{base}/tmp/{name}"
    linked = copy is not None and link_same(copy, tmp, len(raw))
    if linked:
        # One inode for the sender's copy and the Maildir's: no new file to create (a link costs a
        # fraction of one). Its bytes were written unflushed: flushed here, in
        # tmp/, before the rename makes them visible in new/ (a reader never sees a file not on
        # disk). A second link of an inode already flushed finds nothing left to write.
        if durable:
            fsync_file(tmp)
    else:
        write_new(tmp, raw, durable=durable)
    os.rename(tmp, f"{base}/new/{name}")
    if durable:
        fsync_dir(f"{base}/new")
    return name, linked
