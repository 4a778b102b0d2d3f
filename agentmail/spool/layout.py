"""Where one mailbox's letters lie (DESIGN §7): the letter files and spool.db. The bottom of
the spool: ``views.SpoolReader`` reads rows over it, ``filing.SpoolWriter`` writes them,
``store.Spool`` holds the three and opens spool.db.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._fs import is_same, write_new
from ..model import opener_key, sha256, ulid_ms
from ..protocol import opens_thread
from .db import Db

# ``sibling``: a letter this platform sent from another mailbox (agent or machine), learnt from
# the server's sent record (client/sibling_letters.py): part of the threads, never inbox, outbox or answer.
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
# Notes saying where a letter's bytes lie durable in the post office (``SpoolReader.restore``):
# the spool's bookkeeping, never shown as facts of the letter.
# ``copy_by``: the mailbox that sent it (a sibling's ledger names post-office files of this platform too).
WHERE_NOTES = frozenset({"copy", "copy_key", "copy_size", "copies", "copy_by"})
COPIES_DUE = "copies-due"  # the facts row naming the letters whose sent-folder copy waits


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
    return sha256("\0".join(parts).encode()).hexdigest()[:40]


def _raw_key(raw: bytes) -> str:
    return sha256(raw).hexdigest()[:40]


def _sha256(raw: bytes) -> str:
    return sha256(raw).hexdigest()


def same_bytes(notes: dict[str, Any], raw: bytes) -> bool | None:
    """Are ``raw`` the bytes a letter was filed with, by the hash its notes keep (a letter with
    attachments, one synced from the post office, one sent there)? None: they keep none."""
    full, key = notes.get("sha256"), notes.get("copy_key")
    if isinstance(full, str):
        return _sha256(raw) == full
    if isinstance(key, str):
        return _raw_key(raw) == key
    return None


def _loads(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class Layout:
    """One mailbox's files at ``root``: its folders, its spool.db, the platform it belongs to.
    What the reader and the writer share; it files nothing itself."""

    def __init__(
        self,
        root: Path,
        prepare: Callable[[Db], None],
        *,
        platform_root: Path | None = None,
        name_of: Callable[[str], str | None] | None = None,
    ) -> None:
        self.root = root
        self.platform_root = platform_root or root
        self.name_of = name_of
        self.db = Db(root, prepare)  # ``prepare`` makes spool.db ready as it opens (``store.Spool``)
        self.tmp = f"{root}/tmp/"  # str paths on the hot path: a pathlib join costs more than the syscall
        self.letters = f"{root}/letters/"

    @property
    def mailbox(self) -> str:
        return self.root.name

    def sql(self) -> sqlite3.Connection:
        return self.db.conn()

    def ensure(self) -> None:
        if not (os.path.isdir(self.letters) and os.path.isdir(self.tmp)):  # two stats, not two mkdirs
            for name in ("letters", "tmp"):
                (self.root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.sql()

    def name(self, address: str) -> str:
        """The platform an address belongs to (the registry's answer, else its local part)."""
        if not address:
            return ""
        named = self.name_of(address) if self.name_of else None
        return named or address.partition("@")[0].split("+")[0]

    def letter_files(self, *, born: bool = True) -> list[str]:
        """The ids of the letter files on disk in ``letters/`` (and ``tmp/``: ``born``), whatever
        spool.db says, in filing order."""
        found: list[str] = []
        for folder in (self.letters, self.tmp) if born else (self.letters,):
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                continue
            found += [n[:-4] for n in names if n.endswith(".eml") and n[:-4].isalnum()]
        return sorted(set(found))

    def put_back(self, letter_id: str, raw: bytes) -> None:
        """A filed letter's lost file written back, unflushed (``SpoolReader.restore``): aside
        first, then renamed in, so a reader at the same time never reads it half written, and a
        copy a power cut left empty is replaced. The aside name is no letter's (no ``.eml``):
        a crash leaves it for the sweep."""
        aside = f"{self.tmp}.{letter_id}.{os.getpid()}.{time.monotonic_ns()}"
        write_new(aside, raw, durable=False)
        os.replace(aside, f"{self.tmp}{letter_id}.eml")

    def write_tmp(self, letter_id: str, raw: bytes, durable: bool, copy: tuple[str, int, int] | None = None) -> bool:
        """The letter's file in tmp/, always a file of its own: never a link of the post-office
        file, which is the sender's sent copy too (one inode on the local post office), so an
        edit there would change what this spool hands out. True when ``copy`` is still the very
        file the bytes were read from (durable there: this one is not flushed, DESIGN §7),
        False when written and flushed like any other."""
        tmp = f"{self.tmp}{letter_id}.eml"
        if copy is not None and is_same(copy, len(raw)):
            write_new(tmp, raw, durable=False)
            return True
        write_new(tmp, raw, durable=durable)
        return False
