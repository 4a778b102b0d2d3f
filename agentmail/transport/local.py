"""The embedded default transport: a post office of Maildirs on this machine (DESIGN §2).

``postoffice/<platform>/`` is a Maildir. Delivery is what an MTA does: write into ``tmp/``,
fsync, rename into ``new/``, fsync ``new/``. Anything that does that has delivered a letter.

Reading works like an IMAP server (``mailbox.Mailbox``: UIDs given in ``cur/`` under a lock),
so several agents can share a platform without stealing each other's mail. A fetch costs what
is new, never the history.
"""

from __future__ import annotations

import bisect
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import ages
from .._fs import fsync_dir, link_same, write_new
from ..model import opener_key
from .base import Checkpoint, Claimed, Incoming, OnResult, Outgoing, SubmitResult, Transport, opener_id
from .claim_marks import Claims
from .maildir import put_linked
from .sent_record import SENT, local_copies, local_pending, record
from .uid_mailbox import Mailbox

if TYPE_CHECKING:
    from . import inotify

BATCH = 50  # letters committed per checkpoint step: a killed sync redoes at most this many
POLL = 0.05
# With inotify the wait still looks at the mailbox this often, in case an event was missed (e.g. a
# letter renamed in over NFS): the wake comes from the event, this is only the safety net.
RECHECK = 1.0
WATCH_FROM = 256  # an hour folder of opener markers this big is watched, not listed, from its next count
OPENED = ".opened"  # postoffice/.opened/<platform>/<hour>/: threads opened, for the quota (no platform name starts with a dot)


def deliver(maildir: Path, raw: bytes, copy: tuple[str, int, int] | None = None) -> str:
    """Deliver ``raw`` into a platform's Maildir (``maildir.put``): once this returns, the
    letter survives a crash — that is what "sent" means on this transport."""
    return put_linked(maildir, raw, copy)[0]


MARKER_HEAD = 64 * 1024  # of a marker that is the letter itself, only the header is read


def marked_id(path: str) -> str | None:
    """The Message-ID an opener marker names: the bytes of one written as the Message-ID, the
    header's of one that is a link of the letter (a letter starts with a field, never ``<``).
    None for anything else: no regular file (never opened, never followed), unreadable, empty."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, MARKER_HEAD) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    if data.startswith(b"<"):
        return data.decode("utf-8", "replace")
    return opener_id(data.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]) if data else None


class _Markers:
    """One hour folder's opener markers as parsed: the names, (key, ms) newest first, and each
    key's oldest time (what a window holding the whole folder counts, kept rather than made again)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._minus_ms: list[int] = []  # -ms, ascending (newest first), for bisect
        self._keys: list[str] = []
        self._oldest: dict[str, int] = {}  # key -> its oldest marker's ms
        # A folder this big is watched rather than listed at every count: the names added since
        # come from the watch (inotify), read again whole when one went or events were lost.
        self.watch: inotify.Watch | None = None

    def add(self, names: set[str]) -> None:
        self.names |= names
        for name in names:
            when, _, key = name.partition("-")
            if len(key) == 16 and when.isascii() and when.isdigit():  # not "²": no int
                at = bisect.bisect_right(self._minus_ms, -int(when))
                self._minus_ms.insert(at, -int(when))
                self._keys.insert(at, key)
                self._oldest[key] = min(int(when), self._oldest.get(key, int(when)))

    def since(self, cutoff_ms: int) -> dict[str, int]:
        """key -> ms of the markers at or after ``cutoff_ms``; the oldest of one key wins."""
        if not self._minus_ms or -self._minus_ms[-1] >= cutoff_ms:  # the whole folder is in the window
            return self._oldest
        end = bisect.bisect_right(self._minus_ms, -cutoff_ms)
        return dict(zip(self._keys[:end], map(int.__neg__, self._minus_ms[:end]), strict=True))


class LocalTransport(Transport):
    """``resolve`` maps a recipient address to a platform name (None: no such mailbox)."""

    name = "local"
    sent_is_durable = True  # deliver() fsyncs the copy in the post office before it returns
    links_copies = True

    def __init__(self, postoffice: Path, platform: str, resolve: Callable[[str], str | None]) -> None:
        self.postoffice = postoffice
        self.platform = platform
        # str paths on the send: a pathlib join costs more than the syscall it names
        self._office = str(postoffice)
        self._opened = f"{self._office}/{OPENED}/{platform}"
        self.mailbox = Mailbox(postoffice / platform)
        self.resolve = resolve
        self._watch: inotify.Watch | None = None  # kept from one wait to the next (_watcher)
        self._fetched_to = 0  # the UIDNEXT the last fetch read up to, once it had read them all
        self._fetched_under: str | None = None  # the UIDVALIDITY the last fetch read under
        # A wake saw a letter land in new/: the next fetch goes straight to numbering it (a hint
        # only: Mailbox.assign answers the same with it or without it).
        self._arrived = False
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
            delivered, linked, copies = 0, False, []
            for rcpt in item.envelope.rcpt_to:
                target = self.resolve(rcpt)
                if target is None:
                    refused.append((rcpt, "550 no such mailbox on this bus"))
                    continue
                name, one = put_linked(f"{self._office}/{target}", item.raw, item.copy)
                linked = one or linked
                copies.append(f"{self._office}/{target}/new/{name}")
                delivered += 1
            if delivered == 0:
                detail = "; ".join(f"{r}: {why}" for r, why in refused) or "no recipients"
                result = SubmitResult(item.key, "failed", detail, tuple(refused))
            else:
                self._record_opener(item.raw, item.copy)
                copies.append(f"{self.sent_box.dir}/new/{record(self.sent_box.dir, item.raw, item.copy)}")
                result = SubmitResult(
                    item.key,
                    "sent",
                    "delivered to the local post office",
                    tuple(refused),
                    flushed_copy=linked,
                    copies=tuple(copies),
                )
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

    def _opened_dir(self, hour: int) -> str:
        return f"{self._opened}/{hour}"

    def _record_opener(self, raw: bytes, copy: tuple[str, int, int] | None = None) -> None:
        """The post office's copy of a thread this platform opened, for every home sharing it
        (the new-thread quota, DESIGN §6): ``.opened/<platform>/<hour>/<ms>-<hash>``, a hard
        link of the letter (the sender's spool file, ``copy``) where it can be, no new file to
        create; else a file holding the Message-ID. Nothing for replies and notes. Not flushed:
        a lost marker undercounts by one."""
        message_id = opener_id(raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0])
        if message_id is None:
            return

        when = ages.now_ms()  # the clock letter ids are made by (tests and benchmarks move it)
        folder = self._opened_dir(when // 3_600_000)
        try:  # Path.mkdir(parents=True, exist_ok=True)'s steps: two syscalls when it is there
            os.mkdir(folder, 0o700)
        except FileNotFoundError:  # the first marker of this platform: the parents first
            os.makedirs(folder, 0o700, exist_ok=True)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
        path = f"{folder}/{when}-{opener_key(message_id)}"  # counted by this name (``opener_keys_since``)
        if copy is not None and link_same(copy, path, len(raw)):
            return
        try:
            write_new(path, message_id.encode(), durable=False)
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
                if not (when_text.isascii() and when_text.isdigit()) or int(when_text) < cutoff_ms:
                    continue
                message_id = marked_id(f"{self._opened_dir(hour)}/{name}")
                if message_id:
                    found[message_id] = int(when_text)
        return found

    def opener_keys_since(self, cutoff_ms: int) -> dict[str, int] | None:
        """From the markers' names alone (``<ms>-<opener_key>``): no marker opened or read, and a
        name parsed once a process (a send parses its own marker, not the hour's). Of two markers
        of one letter (submitted again), the older counts."""
        parts: list[dict[str, int]] = []  # newest first: older ones overwrite
        now_hour = time.time_ns() // 1_000_000 // 3_600_000
        for hour in range(now_hour, cutoff_ms // 3_600_000 - 1, -1):  # newest first: older ones overwrite
            markers = self._markers.get(hour)
            if markers is not None and markers.watch is not None:
                added, only_added = markers.watch.added()
                if only_added:  # nothing went: what was added is all that is new
                    markers.add(set(added) - markers.names)
                    parts.append(markers.since(cutoff_ms))
                    continue
                markers.watch.close()
                markers = self._markers[hour] = _Markers()  # read again whole
            folder = self._opened_dir(hour)
            watch = None
            if markers is not None and len(markers.names) >= WATCH_FROM:
                from . import inotify

                # made before the listing: a name added between the two is in one or the other
                watch = inotify.watch(folder, inotify.EVERY_NAME)
            try:
                names = set(os.listdir(folder))
            except OSError:
                if watch is not None:
                    watch.close()
                continue
            if markers is None or not markers.names <= names:  # new, or a marker gone: parsed afresh
                markers = self._markers[hour] = _Markers()
            markers.add(names - markers.names)
            markers.watch = watch
            parts.append(markers.since(cutoff_ms))
        for hour in [h for h in self._markers if h < cutoff_ms // 3_600_000]:  # out of every window now
            gone = self._markers.pop(hour)
            if gone.watch is not None:
                gone.watch.close()
        if len(parts) == 1:  # (one folder holds the window's markers: its kept answer, not a copy)
            return parts[0]
        found: dict[str, int] = {}
        for part in parts:
            found.update(part)
        return found

    def sent_copies(self, checkpoint: str | None, max_size: int) -> Iterator[tuple[list[Incoming], str]]:
        return local_copies(self.sent_box, checkpoint, max_size)

    def sent_pending(self, checkpoint: str | None) -> bool:
        return local_pending(self.sent_box, checkpoint)

    def fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        self._fetched_to = 0
        arrived, self._arrived = self._arrived, False
        uidnext = self.mailbox.assign(arrived=arrived)
        # A rebuilt post office (new UIDVALIDITY) is read again; the spool drops duplicates.
        self._fetched_under = validity = self.mailbox.uidvalidity
        last = Checkpoint.parse(checkpoint).under(validity).last
        if uidnext > last + 1:
            # What this reader is about to read and commit past must keep its name after a power
            # cut: the renames into cur/ (by whichever reader made them) are flushed once here.
            # Else a checkpoint could outlive the rename that gave a UID, and the UID go to
            # another letter that the checkpoint skips; and the spool files each letter as an
            # unflushed copy of this very file, restored from this name (DESIGN §7). Flushed at
            # once, on this thread: right after the rename the journal commit is the one the
            # sender's flush of new/ has just made or is making; after the judging it would
            # wait behind the sender's next flushes (benchmarks/README.md, issue 40).
            fsync_dir(f"{self.mailbox.dir}/cur")
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
                if watcher.wait(min(left, RECHECK)):
                    self._arrived = True
                    return "inotify"
                if self.pending(checkpoint):
                    return "inotify"
            else:
                time.sleep(min(POLL, left))
                if self.pending(checkpoint):
                    return "poll"

    def _watcher(self) -> inotify.Watch | None:
        """The inotify watch on ``new/``, kept open until ``close``: closing one waits for the
        kernel to retire it (milliseconds), which must not fall
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
        for markers in self._markers.values():  # the quota's watches of big marker folders: listed again next time
            if markers.watch is not None:
                markers.watch.close()
                markers.watch = None
