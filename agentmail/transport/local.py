"""The embedded default transport: a post office of Maildirs on this machine (DESIGN §2).

``postoffice/<platform>/`` is a Maildir. Delivery is what an MTA does: write into ``tmp/``,
fsync, rename into ``new/``, fsync ``new/``. Anything that does that has delivered a letter.

Reading works like an IMAP server: the first reader to look moves each letter from ``new/``
to ``cur/<uid>:2,`` with the next UID, under a lock, so every mailbox (platform or
platform@agent) keeps its own "last UID" checkpoint and several agents can share a platform
without stealing each other's mail. A fetch costs what is new, never the history.
"""

from __future__ import annotations

import bisect
import errno
import heapq
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import ages
from .._fs import NotAFile, fsync_dir, fsync_file, link_same, locked, read_plain, write_new
from ..model import opener_key
from .base import Checkpoint, Claimed, Incoming, OnResult, Outgoing, SubmitResult, Transport, opener_id
from .claim_marks import Claims
from .sent_record import SENT, local_copies, local_pending, record

if TYPE_CHECKING:
    from . import inotify

BATCH = 50  # letters committed per checkpoint step: a killed sync redoes at most this many
POLL = 0.05
# With inotify the wait still looks at the mailbox this often, in case an event was missed (e.g. a
# letter renamed in over NFS): the wake comes from the event, this is only the safety net.
RECHECK = 1.0
OPENED = ".opened"  # postoffice/.opened/<platform>/<hour>/: threads opened, for the quota (no platform name starts with a dot)


_made: set[Path] = set()  # Maildirs this process has seen complete: no mkdirs per letter


def _make_maildir(maildir: Path) -> None:
    for sub in ("tmp", "new", "cur"):
        (maildir / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    _made.add(maildir)


def deliver(maildir: Path, raw: bytes, copy: tuple[str, int, int] | None = None) -> str:
    """Deliver ``raw`` into a Maildir the durable way; returns the file name in ``new/``.
    Two fsyncs (the file, then ``new/`` after the rename): once this returns, the letter
    survives a crash — that is what "sent" means on this transport.

    ``copy``: a file holding exactly ``raw`` (path, st_dev, st_ino: the sender's spool copy),
    hard-linked into ``tmp/`` instead of written, then fsynced and renamed like a written one."""
    if maildir not in _made:
        _make_maildir(maildir)
    try:
        return _deliver(maildir, raw, copy)
    except FileNotFoundError:  # the Maildir was removed under a long-lived process: make it again
        _make_maildir(maildir)
        return _deliver(maildir, raw, copy)


def _deliver(maildir: Path, raw: bytes, copy: tuple[str, int, int] | None) -> str:
    # os.uname().nodename is what socket.gethostname() returns, without importing socket
    name = f"{time.time_ns()}.{os.getpid()}_{secrets.token_hex(6)}.{os.uname().nodename.replace('/', '_')}"
    base = str(maildir)  # str paths: a pathlib join per step costs more than the syscall
    tmp = f"{base}/tmp/{name}"
    if copy is not None and link_same(copy, tmp, len(raw)):
        # One inode for the sender's copy and the post office's: no new file to create (0.2-0.4 ms
        # on a busy ext4, a link ~0.01 ms). Its bytes were written unflushed: flushed here, in tmp/,
        # before the rename makes them visible in new/ (a reader never sees a letter not on disk).
        fsync_file(tmp)
    else:
        write_new(tmp, raw)
    os.rename(tmp, f"{base}/new/{name}")
    fsync_dir(f"{base}/new")
    return name


# What an entry that is no readable letter gives when opened: it is noted and passed, never retried
# forever (a symbolic link swapped in after the look, a file this user may not read).
_NOT_A_LETTER = {errno.ELOOP, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.ETXTBSY}

_COUNTER_WIDTH = 12  # .uidnext, overwritten in place at a fixed width
# Names in new/ numbered per pass, the first in sorted order: sorting a million names at once
# held ~80 MB of them (issue 28); a pass holds ~4 MB and reads the folder's listing once.
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
                if len(head) == 12 and head.isdigit():
                    highest = max(highest, int(head))
        return highest + 1

    def _find(self, uid: int) -> Path | None:
        exact = self.dir / "cur" / f"{uid:012d}:2,"
        if os.path.lexists(exact):  # a symbolic link there is found (and refused), never followed
            return exact
        flagged = list((self.dir / "cur").glob(f"{uid:012d}:2,*"))  # rare: a mail client flagged it
        return flagged[0] if flagged else None

    def assign(self) -> int:
        """Give every letter waiting in ``new/`` a UID; returns the next free UID."""
        self.ensure()
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
        # UID went to a second letter, which every reader past it skips: lost. No fsync: a
        # rename lost in a crash puts the letter back in new/, it gets a later UID, and the
        # reader's spool drops the second copy. Overwritten in place (fixed width, no new
        # file): a torn value is only a cache miss for _uidnext.
        reserved = uid + len(names)
        fd = os.open(self.dir / ".uidnext", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_size > _COUNTER_WIDTH:
                # A longer (damaged) file would keep its tail after the value: "…05" + "0" is
                # 50. Emptied first, which a reader takes as no counter (cur/ is read), never
                # as a wrong one.
                os.ftruncate(fd, 0)
            os.pwrite(fd, f"{reserved:0{_COUNTER_WIDTH}d}".encode(), 0)
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


class _Markers:
    """One hour folder's opener markers as parsed: the names, and (key, ms) newest first."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._minus_ms: list[int] = []  # -ms, ascending (newest first), for bisect
        self._keys: list[str] = []

    def add(self, names: set[str]) -> None:
        self.names |= names
        for name in names:
            when, _, key = name.partition("-")
            if len(key) == 16 and when.isdigit():
                at = bisect.bisect_right(self._minus_ms, -int(when))
                self._minus_ms.insert(at, -int(when))
                self._keys.insert(at, key)

    def since(self, cutoff_ms: int) -> dict[str, int]:
        """key -> ms of the markers at or after ``cutoff_ms``; the oldest of one key wins."""
        end = bisect.bisect_right(self._minus_ms, -cutoff_ms)
        return dict(zip(self._keys[:end], map(int.__neg__, self._minus_ms[:end]), strict=True))


class LocalTransport(Transport):
    """``resolve`` maps a recipient address to a platform name (None: no such mailbox)."""

    name = "local"
    sent_is_durable = True  # deliver() fsyncs the copy in the post office before it returns

    def __init__(self, postoffice: Path, platform: str, resolve: Callable[[str], str | None]) -> None:
        self.postoffice = postoffice
        self.platform = platform
        self.mailbox = Mailbox(postoffice / platform)
        self.resolve = resolve
        self._watch: inotify.Watch | None = None  # kept from one wait to the next (_watcher)
        self._fetched_to = 0  # the UIDNEXT the last fetch read up to, once it had read them all
        self._fetched_under: str | None = None  # the UIDVALIDITY the last fetch read under
        self._watch_inode = 0
        self._waiting = threading.Lock()  # held by the thread waiting on the kept watch
        # Reply claims every home sharing this post office sees (O_EXCL files; the clock is
        # injectable: ``claims.now``).
        self.claims = Claims(postoffice / platform / ".claims")
        self._pruned = False
        self.sent_box = Mailbox(postoffice / SENT / platform)  # every home's letters (sent_record.py)
        self._markers: dict[int, _Markers] = {}  # the opener markers' names parsed, per hour folder

    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        results: list[SubmitResult] = []
        for item in messages:
            refused: list[tuple[str, str]] = []
            delivered = 0
            for rcpt in item.envelope.rcpt_to:
                target = self.resolve(rcpt)
                if target is None:
                    refused.append((rcpt, "550 no such mailbox on this bus"))
                    continue
                deliver(self.postoffice / target, item.raw, item.copy)
                delivered += 1
            if delivered == 0:
                detail = "; ".join(f"{r}: {why}" for r, why in refused) or "no recipients"
                result = SubmitResult(item.key, "failed", detail, tuple(refused))
            else:
                self._record_opener(item.raw)
                record(self.sent_box.dir, item.raw, item.copy)
                result = SubmitResult(item.key, "sent", "delivered to the local post office", tuple(refused))
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results

    def claim_reply(self, message_id: str, key: str, holder: str) -> Claimed:
        return Claimed(self.claims.claim(key, holder))

    def reply_sent(self, message_id: str, key: str, holder: str) -> bool:
        sent = self.claims.sent(key, holder)
        if not self._pruned:  # once a process, after a reply left: the old answered claims go
            self._pruned = True
            self.claims.prune()
        return sent

    def release_reply(self, message_id: str, key: str, holder: str) -> None:
        self.claims.release(key, holder)

    def _opened_dir(self, hour: int) -> Path:
        return self.postoffice / OPENED / self.platform / str(hour)

    def _record_opener(self, raw: bytes) -> None:
        """The post office's copy of a thread this platform opened, for every home sharing it
        (the new-thread quota, DESIGN §6): ``.opened/<platform>/<hour>/<ms>-<hash>`` holding the
        Message-ID. Nothing for replies and notes. Not flushed: a lost marker undercounts by one."""
        message_id = opener_id(raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0])
        if message_id is None:
            return

        when = ages.now_ms()  # the clock letter ids are made by (tests and benchmarks move it)
        folder = self._opened_dir(when // 3_600_000)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"{when}-{opener_key(message_id)}"  # counted by this name (``opener_keys_since``)
        try:
            write_new(folder / name, message_id.encode(), durable=False)
        except FileExistsError:
            pass  # the same letter submitted again (a retried outbox)

    def openers_since(self, cutoff_ms: int) -> dict[str, int] | None:
        """From the post office's markers: the hour folders the window touches, nothing older."""
        found: dict[str, int] = {}
        now_hour = time.time_ns() // 1_000_000 // 3_600_000
        for hour in range(cutoff_ms // 3_600_000, now_hour + 1):
            try:
                names = os.listdir(self._opened_dir(hour))
            except OSError:
                continue
            for name in names:
                when_text, _, _hash = name.partition("-")
                if not when_text.isdigit() or int(when_text) < cutoff_ms:
                    continue
                try:
                    data, _stat = read_plain(self._opened_dir(hour) / name, 1000)
                except OSError:
                    continue
                if data:
                    found[data.decode("utf-8", "replace")] = int(when_text)
        return found

    def opener_keys_since(self, cutoff_ms: int) -> dict[str, int] | None:
        """From the markers' names alone (``<ms>-<opener_key>``): no marker opened or read, and a
        name parsed once a process (a send parses its own marker, not the hour's). Of two markers
        of one letter (submitted again), the older counts."""
        found: dict[str, int] = {}
        now_hour = time.time_ns() // 1_000_000 // 3_600_000
        for hour in range(now_hour, cutoff_ms // 3_600_000 - 1, -1):  # newest first: older ones overwrite
            try:
                names = set(os.listdir(self._opened_dir(hour)))
            except OSError:
                continue
            markers = self._markers.get(hour)
            if markers is None or not markers.names <= names:  # new, or a marker gone: parsed afresh
                markers = self._markers[hour] = _Markers()
            markers.add(names - markers.names)
            found.update(markers.since(cutoff_ms))
        for hour in [h for h in self._markers if h < cutoff_ms // 3_600_000]:  # out of every window now
            del self._markers[hour]
        return found

    def sent_copies(self, checkpoint: str | None, max_size: int) -> Iterator[tuple[list[Incoming], str]]:
        return local_copies(self.sent_box, checkpoint, max_size)

    def sent_pending(self, checkpoint: str | None) -> bool:
        return local_pending(self.sent_box, checkpoint)

    def fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        self._fetched_to = 0
        uidnext = self.mailbox.assign()
        # A rebuilt post office (new UIDVALIDITY) is read again; the spool drops duplicates.
        self._fetched_under = validity = self.mailbox.uidvalidity
        last = Checkpoint.parse(checkpoint).under(validity).last
        if uidnext > last + 1:
            # What this reader is about to read and commit past must keep its name after a power
            # cut: the renames into cur/ (by whichever reader made them) are flushed once here.
            # Else a checkpoint could outlive the rename that gave a UID, and the UID go to
            # another letter that the checkpoint skips; and the spool files each letter as an
            # unflushed link of this very file, restored from this name (DESIGN §7).
            fsync_dir(self.mailbox.dir / "cur")
        batch: list[Incoming] = []
        for uid in range(last + 1, uidnext):
            item = self.mailbox.read(uid, max_size)
            if item is None:
                continue
            batch.append(item)
            if len(batch) >= BATCH:
                yield batch
                batch = []
        if batch:
            yield batch
        self._fetched_to = uidnext  # every UID below it was read and handed on, or is no file

    def advance(self, checkpoint: str | None, committed: Sequence[Incoming]) -> str | None:
        # The UIDs handed out belong to the UIDVALIDITY they were read under (read once per fetch)
        validity = self._fetched_under if self._fetched_under is not None else self.mailbox.uidvalidity
        seen = Checkpoint.parse(checkpoint).under(validity).past(committed)
        # The close of a whole fetch (nothing committed with it) also passes the UIDs no file
        # held: a letter a mail client deleted from cur/, or took from new/ while it was numbered.
        return str(seen if committed else seen.through(self._fetched_to))

    def pending(self, checkpoint: str | None) -> bool:
        self.mailbox.ensure()
        seen = Checkpoint.parse(checkpoint)
        if seen.validity != self.mailbox.uidvalidity:
            return True
        if any(os.scandir(self.mailbox.dir / "new")):
            return True
        return self.mailbox._uidnext() > seen.last + 1

    def wait(self, checkpoint: str | None, timeout: float) -> str | None:
        self.mailbox.ensure()
        if not self._waiting.acquire(blocking=False):  # another thread waits on the kept watch
            from . import inotify

            own = inotify.watch(self.mailbox.dir / "new")
            try:
                return self._wait(own, checkpoint, timeout)
            finally:
                if own is not None:
                    own.close()
        try:
            watcher = self._watcher()
            if watcher is not None:
                watcher.wait(0)  # events from before this call: the look below covers them
            return self._wait(watcher, checkpoint, timeout)
        finally:
            self._waiting.release()

    def _wait(self, watcher: inotify.Watch | None, checkpoint: str | None, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        if self.pending(checkpoint):
            return "inotify" if watcher else "poll"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if watcher is not None:
                if watcher.wait(min(left, RECHECK)) or self.pending(checkpoint):
                    return "inotify"
            else:
                time.sleep(min(POLL, left))
                if self.pending(checkpoint):
                    return "poll"

    def _watcher(self) -> inotify.Watch | None:
        """The inotify watch on ``new/``, kept open until ``close``: closing one waits for the
        kernel to retire it (measured here: a median 12 ms, up to 24), which must not fall
        between a wake and the letter it woke for. Made again if ``new/`` was replaced."""
        from . import inotify  # ctypes: only a process that waits needs it, never a send or a read

        folder = self.mailbox.dir / "new"
        inode = os.stat(folder).st_ino
        if self._watch is not None and self._watch_inode != inode:
            self._watch.close()
            self._watch = None
        if self._watch is None:
            self._watch, self._watch_inode = inotify.watch(folder), inode
        return self._watch

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
