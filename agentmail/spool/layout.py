"""Where one mailbox's letters lie (DESIGN §7): the letter files, spool.db, the locks, the
checkpoints. The bottom of the spool: ``views`` reads rows over it, ``filing`` writes them,
``store.Spool`` opens, rebuilds and claims.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Self

from .._fs import is_same, locked, read_plain, write_new
from ..errors import NotFound
from ..model import opener_key, ulid_ms
from ..protocol import opens_thread
from .db import Db, reached

# ``sibling``: a letter this platform sent from another mailbox (agent or machine), learnt from
# the server's sent record (client/picture.py): part of the threads, never inbox, outbox or answer.
STATES = ("unread", "read", "sent", "outbox", "held", "failed", "quarantine", "sibling")
OUTGOING = ("outbox", "held", "sent", "failed")
# A reply that failed (or that a person rejected) never reached anyone: the letter may be
# answered again. One held for approval answers it, pending the person's decision.
ANSWERING = ("outbox", "held", "sent")
# What the new-thread quota counts: letters that left or wait to leave (failed ones never left).
LEAVING = ("sent", "outbox", "held")
# The states whose letters the openers table holds (a failed one keeps its row: never counted).
OPENING = (*OUTGOING, "sibling")
MIN_PREFIX = 6  # the shortest prefix of an id or a Message-ID that names a letter


def reply_key(message_id: str, sender: str) -> str:
    """What the one reply to a letter claims: its Message-ID (first: the server finds the letter
    by it) and its verified sender. A Message-ID is the sender's choice, so another platform's
    letter reusing it claims its own reply, never the real letter's."""
    return f"{message_id} from {sender}"


def opener_row(letter_id: str, state: str, data: dict[str, Any]) -> tuple[str, int, str] | None:
    """The ``openers`` row (id, ms, key) of a filed letter that opens a thread of this platform:
    one it sends, queues or holds, or a sibling's, neither a reply nor a note; None for any other."""
    if state not in OPENING or "reason" in data:
        return None
    if not opens_thread(str(data.get("type") or ""), bool(data.get("in_reply_to"))):  # the one opener rule
        return None
    return letter_id, ulid_ms(letter_id), opener_key(str(data.get("message_id") or letter_id))


def _key(*parts: str) -> str:
    import hashlib  # here, not at the top: a read (inbox --no-sync) never loads OpenSSL for it (issue 11)

    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def _raw_key(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()[:40]


def _sha256(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def _loads(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class SpoolLayout:
    """One mailbox's files at ``root`` (see ``Spool``)."""

    # Makes spool.db ready as it opens (created, converted or rebuilt): ``store.Spool._prepare``.
    _prepare: Callable[[Db], None]

    def __init__(
        self, root: Path, *, platform_root: Path | None = None, name_of: Callable[[str], str | None] | None = None
    ) -> None:
        self.root = root
        self.platform_root = platform_root or root
        self.name_of = name_of
        self.db = Db(root, self._prepare)
        self._batch: list[str] = []  # ids of the open sync batch, their files still in tmp/
        self._written: list[str] = []  # those of them not copied from a durable file: commit flushes these
        self._platform: Self | None = None
        self._tmp = f"{root}/tmp/"  # str paths on the hot path: a pathlib join costs more than the syscall
        self._letters = f"{root}/letters/"
        self._recovering = False  # recover() is making spool.db again: no refusal, its lock held

    @property
    def mailbox(self) -> str:
        return self.root.name

    def siblings(self) -> list[Self]:
        """The spools of the other mailboxes of this platform (platform and platform@agent)."""
        base = self.platform_root
        found = [base] + sorted(base.parent.glob(f"{base.name}@*")) if base.parent.is_dir() else []
        return [type(self)(p, platform_root=base, name_of=self.name_of) for p in found if p != self.root and p.is_dir()]

    def _sql(self) -> sqlite3.Connection:
        return self.db.conn()

    def ensure(self) -> Self:
        if not (os.path.isdir(self._letters) and os.path.isdir(self._tmp)):  # two stats, not two mkdirs
            for name in ("letters", "tmp"):
                (self.root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._sql()
        return self

    def path(self, state: str, letter_id: str) -> Path:
        """The letter's file (``state`` is no part of it: a letter file never moves)."""
        del state
        final = self.root / "letters" / f"{letter_id}.eml"
        if final.exists():
            return final
        born = self.root / "tmp" / f"{letter_id}.eml"
        if born.exists() or (letter_id.isalnum() and self._restore(letter_id, born)):
            return born
        return final

    def _restore(self, letter_id: str, tmp: Path) -> bool:
        """A filed letter whose file is gone: one copied from the post office by a sync batch,
        whose copy was never flushed (DESIGN §7), after a power cut. Copied again from the
        post-office file it was (its name there was flushed before the batch committed), if
        that file still holds exactly its bytes; a mail client may have added flags to the name."""
        note = self.annotations(letter_id)
        source, key = note.get("copy"), note.get("copy_key")
        if not isinstance(source, str) or not isinstance(key, str):
            return False
        origin = self.root / source
        for candidate in (origin, *sorted(origin.parent.glob(f"{glob_escape(origin.name)}*"))):
            try:  # a FIFO or a symbolic link put there is never opened or followed
                raw, st = read_plain(candidate)
            except OSError:
                continue
            if raw is None or _raw_key(raw) != key:
                continue
            try:  # not flushed either: the note stays, and so does the post office's file
                self._write_tmp(letter_id, raw, durable=False, copy=(str(candidate), st.st_dev, st.st_ino))
            except FileExistsError:
                pass  # restored meanwhile by another reader
            return True
        return False

    def file_of(self, letter_id: str) -> tuple[str, int, int] | None:
        """The letter's file as (path, st_dev, st_ino), for a transport to hard-link rather than
        write the same bytes again (a letter file is never changed in place); None if missing."""
        name = f"{letter_id}.eml"
        for path in (self._letters + name, self._tmp + name):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            return (path, st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
        return None

    def locate(self, letter_id: str) -> str | None:
        """The state a letter is in, or None. Ids are ours: never a path from a letter."""
        if not letter_id.isalnum():
            return None
        row = self._sql().execute("SELECT state FROM letters WHERE id=?", (letter_id,)).fetchone()
        return None if row is None else str(row[0])

    @contextmanager
    def locked(self, name: str = "sync") -> Iterator[None]:
        """One syncer per mailbox at a time (others wait): no double commit of one fetch."""
        self.ensure()
        with locked(self.root / f"{name}.lock"):
            yield

    @contextmanager
    def platform_locked(self, name: str) -> Iterator[None]:
        """One holder among every agent of the platform (the new-thread quota: count, then file)."""
        self.platform_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with locked(self.platform_root / f"{name}.lock"):
            yield

    def _write_tmp(self, letter_id: str, raw: bytes, durable: bool, copy: tuple[str, int, int] | None = None) -> bool:
        """The letter's file in tmp/, always a file of its own: never a link of the post-office
        file, which is the sender's sent copy too (one inode on the local post office), so an
        edit there would change what this spool hands out. True when ``copy`` is still the very
        file the bytes were read from (durable there: this one is not flushed, DESIGN §7),
        False when written and flushed like any other."""
        tmp = self.root / "tmp" / f"{letter_id}.eml"
        if copy is not None and is_same(copy, len(raw)):
            write_new(tmp, raw, durable=False)
            return True
        write_new(tmp, raw, durable=durable)
        return False

    def annotations(self, letter_id: str) -> dict[str, Any]:
        row = self._sql().execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
        return (_loads(row[0]) if row else None) or {}

    def raw(self, letter_id: str) -> bytes:
        state = self.locate(letter_id)
        if state is None:
            raise NotFound(f"no letter {letter_id}")
        return self.path(state, letter_id).read_bytes()

    def checkpoint(self, transport: str) -> str | None:
        row = self._sql().execute("SELECT value FROM checkpoints WHERE transport=?", (transport,)).fetchone()
        return None if row is None or not isinstance(row[0], str) else row[0]

    def set_checkpoint(self, transport: str, value: str | None) -> None:
        # Not durable: a checkpoint lost in a crash only means a refetch, and the spool drops
        # what it already holds. It is written after the letters are durable, never before.
        with self.db.write(durable=False) as tx:
            tx.execute("INSERT OR REPLACE INTO checkpoints(transport, value) VALUES(?, ?)", (transport, value))
        reached("checkpoint-set")
