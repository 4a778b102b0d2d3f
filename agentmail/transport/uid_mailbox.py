"""One Maildir's letters numbered as an IMAP server numbers them: UIDs, UIDVALIDITY, read by UID.

The first reader to look moves each letter from ``new/`` to ``cur/<uid>:2,`` with the next UID,
under a lock, so every mailbox (platform or platform@agent) keeps its own "last UID" checkpoint
and several agents can share a platform without stealing each other's mail. The post office's
INBOX (``local``) and its sent record (``sent_record``) are both read so.
"""

from __future__ import annotations

import errno
import heapq
import os
import time
from pathlib import Path

from .._fs import NotAFile, locked, read_plain
from .base import Incoming

# What an entry that is no readable letter gives when opened: it is noted and passed, never retried
# forever (a symbolic link swapped in after the look, a file this user may not read).
_NOT_A_LETTER = {errno.ELOOP, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.ETXTBSY}

_COUNTER_WIDTH = 12  # .uidnext, overwritten in place at a fixed width
# Names in new/ numbered per pass, the first in sorted order: sorting a million names at once
# held them all in memory; a pass holds a chunk and reads the folder's listing once.
ASSIGN_CHUNK = 50_000


def _any_name(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is not None


def _first_names(folder: Path, count: int) -> list[str]:
    """The first ``count`` names in ``folder`` in sorted order, without holding them all."""
    with os.scandir(folder) as entries:
        return heapq.nsmallest(count, (entry.name for entry in entries))


class Mailbox:
    """One platform's Maildir with UIDs, as an IMAP server would keep it."""

    def __init__(self, maildir: Path) -> None:
        self.dir = maildir
        self._ensured = False

    def ensure(self) -> None:
        if self._ensured:
            return
        for sub in ("tmp", "new", "cur"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.path.exists(f"{self.dir}/.uidvalidity"):
            self._number(replace=False)
        self._ensured = True

    def _number(self, *, replace: bool) -> None:
        """A new UIDVALIDITY, written aside, then linked into place (or, over a damaged one,
        renamed): a reader never sees it empty, and of two processes racing to make the first
        one exactly one value wins."""
        aside = f"{self.dir}/.uidvalidity.{os.getpid()}"
        with open(aside, "w") as out:
            out.write(str(int(time.time())))
        try:
            (os.replace if replace else os.link)(aside, f"{self.dir}/.uidvalidity")
        except FileExistsError:
            pass
        finally:
            if os.path.exists(aside):
                os.unlink(aside)

    def _small(self, name: str) -> bytes:
        """A counter file's bytes; read on every look, so no pathlib and no text layer."""
        fd = os.open(f"{self.dir}/{name}", os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there never blocks
        try:
            return os.read(fd, 4096)
        finally:
            os.close(fd)

    @property
    def uidvalidity(self) -> str:
        """Digits, as IMAP's. One removed, torn or edited into anything else is replaced by a new
        value: every reader then reads the post office from the start again and its spool drops
        what it already holds (a rebuilt post office), rather than every sync failing on it."""
        for _ in range(2):
            try:
                value: bytes | None = self._small(".uidvalidity").strip()
            except FileNotFoundError:
                value = None
            if value is not None and value.isdigit():  # bytes: ASCII digits only
                return value.decode()
            self._number(replace=value is not None)
        raise OSError(f"{self.dir}/.uidvalidity is damaged and could not be written again")

    def _uidnext(self) -> int:
        try:
            value = int(self._small(".uidnext"))
        except (FileNotFoundError, ValueError):
            value = 0
        if value < 1:
            # No counter, or no usable one (removed, torn): every name in cur/ is read, flagged
            # ones too. Probing from 1 would stop at the first letter a mail client had flagged
            # (``…:2,S``) and give its UID again, to a letter that readers then skip: lost.
            value = self._past_cur()
        # The counter is a cache that assign() writes before its renames, so it is never behind
        # them; a power cut can still lose its last write (never flushed). Only the exact name
        # is checked (a stat, not a listing of the whole history).
        while os.path.exists(f"{self.dir}/cur/{value:012d}:2,"):
            value += 1
        return value

    def _past_cur(self) -> int:
        """One more than the highest UID named in cur/ (1 for none)."""
        highest = 0
        with os.scandir(self.dir / "cur") as entries:
            for entry in entries:
                head = entry.name.partition(":")[0]
                if len(head) == 12 and head.isascii() and head.isdigit():
                    highest = max(highest, int(head))
        return highest + 1

    def _find(self, uid: int) -> Path | None:
        exact = self.dir / "cur" / f"{uid:012d}:2,"
        if os.path.lexists(exact):  # a symbolic link there is found (and refused), never followed
            return exact
        flagged = list((self.dir / "cur").glob(f"{uid:012d}:2,*"))  # rare: a mail client flagged it
        return flagged[0] if flagged else None

    def assign(self, *, arrived: bool = False) -> int:
        """Give every letter waiting in ``new/`` a UID; returns the next free UID. ``arrived``: a
        letter was just seen landing in new/ (a wake), so the look without the lock, which
        would find it, is not made: under the lock the same counter and listing are read."""
        self.ensure()
        if not arrived:
            # Read before looking at new/: another reader numbering letters writes the counter
            # before its renames, so a counter read while new/ then shows nothing has every UID
            # below it in cur/ (or never used). A fetch may pass what it then finds missing.
            settled = self._uidnext()
            if not _any_name(self.dir / "new"):
                return settled
        with locked(self.dir / ".lock"):
            uid = reserved = self._uidnext()
            while names := _first_names(self.dir / "new", ASSIGN_CHUNK):
                uid = reserved = self._assign_names(uid, names)
                if len(names) < ASSIGN_CHUNK:
                    break
            return reserved  # a UID a vanished letter left unused stays unused: never given twice

    def _assign_names(self, uid: int, names: list[str]) -> int:
        """UIDs from ``uid`` on for ``names`` (in new/), in their order; returns the next free."""
        # The UIDs are reserved before any letter takes one: a process killed among the
        # renames leaves the counter past every UID it gave. Were it written after them, a
        # kill in between left it behind a letter's UID, and if a mail client flagged that
        # letter (``…:2,S``) before the next assign, the exact-name probe missed it and the
        # UID went to a second letter, which every reader past it skips: lost. For the same
        # reason the value is flushed before the renames: a power cut that kept a rename (the
        # fetch flushes cur/) but not this write left the counter behind a UID just the same.
        # The renames are not flushed here: one lost in a crash puts the letter back in new/,
        # it gets a later UID, and the reader's spool drops the second copy. Overwritten in
        # place (fixed width, no new file): a torn value is only a cache miss for _uidnext.
        reserved = uid + len(names)
        fd = os.open(self.dir / ".uidnext", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_size > _COUNTER_WIDTH:
                # A longer (damaged) file would keep its tail after the value: "…05" + "0" is
                # 50. Emptied first, which a reader takes as no counter (cur/ is read), never
                # as a wrong one.
                os.ftruncate(fd, 0)
            os.pwrite(fd, f"{reserved:0{_COUNTER_WIDTH}d}".encode(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        for name in names:
            try:
                os.rename(self.dir / "new" / name, self.dir / "cur" / f"{uid:012d}:2,")
            except FileNotFoundError:
                continue  # taken by a mail client meanwhile
            uid += 1
        return reserved

    def read(self, uid: int, max_size: int) -> Incoming | None:
        """The letter with ``uid``: None if no entry has it (any more). An entry that is no
        readable regular file (a FIFO, a directory, a device, a symbolic link wherever it points,
        a file this user may not read) is never followed, opened or waited for: it comes back
        with ``problem`` set, so the reader notes it and reads the next letter (DESIGN §2)."""
        path = self._find(uid)
        if path is None:
            return None
        try:
            raw, st = read_plain(path, max_size)
        except FileNotFoundError:
            return None  # taken by a mail client meanwhile
        except OSError as exc:
            if not isinstance(exc, NotAFile) and exc.errno not in _NOT_A_LETTER:
                raise  # the machine failing (I/O error, no file descriptors left): the sync stops
            why = exc.strerror if isinstance(exc, NotAFile) else f"a file that cannot be read ({exc.strerror})"
            return Incoming(str(uid), None, 0, problem=f"{self.dir.name}/cur/{path.name} is {why}")
        if raw is None:
            return Incoming(key=str(uid), raw=None, size=st.st_size)
        return Incoming(str(uid), raw, len(raw), (str(path), st.st_dev, st.st_ino))
