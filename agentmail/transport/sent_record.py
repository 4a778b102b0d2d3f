"""The platform's own letters as the server keeps them, for every machine of the platform.

Each machine files only what it sent; the server holds what every one of them sent: over IMAP
the sent folder every machine copies to, on the local post office ``postoffice/.sent/<platform>/``
(a Maildir with UIDs like a platform's, written by ``submit``). A sync reads it past its own
checkpoint, so a home learns its siblings' letters (``client/sibling_letters.py``, DESIGN §7). Reading
only: nothing here decides what a letter is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import maildir
from .base import Checkpoint, Incoming
from .imap_uids import uid_batches
from .uid_mailbox import Mailbox

SENT = ".sent"  # postoffice/.sent/<platform>/ (no platform name starts with a dot)
BATCH = 50  # letters committed per checkpoint step, as for the INBOX


def record(folder: Path, raw: bytes, copy: tuple[str, int, int] | None) -> str:
    """Keep ``raw`` in the post office's sent record ``folder`` (a Maildir): the sender's spool
    file hard-linked in where it can be (no new bytes), else written. Not flushed: the letter
    itself is durable in its recipient's Maildir, and so is the sender's spool record of it
    (``client/outbox.py``); a record lost here in a power cut only means the platform's other
    homes do not see that one letter in their threads. Returns its name in ``new/``."""
    return maildir.put(folder, raw, copy, suffix="sent", durable=False)


def local_pending(mailbox: Mailbox, checkpoint: str | None) -> bool:
    """Anything in the post office's sent record past ``checkpoint``? A few stats, no listing of the history."""
    if not os.path.isdir(mailbox.dir / "new"):
        return False
    mailbox.ensure()
    seen = Checkpoint.parse(checkpoint)
    if seen.validity != mailbox.uidvalidity or any(os.scandir(mailbox.dir / "new")):
        return True
    return mailbox._uidnext() > seen.last + 1


def local_copies(mailbox: Mailbox, checkpoint: str | None, max_size: int) -> Iterator[tuple[list[Incoming], str]]:
    """The record's letters past ``checkpoint`` in batches, each with the checkpoint after it."""
    if not os.path.isdir(mailbox.dir / "new"):
        return
    uidnext = mailbox.assign()
    validity = mailbox.uidvalidity
    seen = Checkpoint.parse(checkpoint).under(validity)
    batch: list[Incoming] = []
    for uid in range(seen.last + 1, uidnext):
        item = mailbox.read(uid, max_size)
        if item is not None:
            batch.append(item)
        if len(batch) >= BATCH:
            seen = seen.past(batch)
            yield batch, str(seen)
            batch = []
    yield batch, str(seen.past(batch).through(uidnext))


def imap_pending(client: Any, folder: str, checkpoint: str | None) -> bool:
    """One STATUS of the sent folder (one round trip): its UIDVALIDITY and UIDNEXT against
    ``checkpoint``. (A folder not made yet answers NO: the caller takes that as nothing pending.)"""
    status = client.folder_status(folder, [b"UIDVALIDITY", b"UIDNEXT"])
    seen = Checkpoint.parse(checkpoint)
    validity, uidnext = str(status.get(b"UIDVALIDITY", b"")), int(status.get(b"UIDNEXT", 0) or 0)
    # No UIDNEXT in the answer says nothing about what is new: read, as the select would.
    return validity != seen.validity or not uidnext or uidnext > seen.last + 1


def imap_copies(
    client: Any, folder: str, checkpoint: str | None, max_size: int
) -> Iterator[tuple[list[Incoming], str]]:
    """The sent folder's letters past ``checkpoint`` (read-only: no flag changes), in batches.
    The folder must exist (the caller knows: one LIST per transport, not per sync)."""
    info = client.select_folder(folder, readonly=True)
    validity, uidnext = str(info.get(b"UIDVALIDITY", b"")), int(info.get(b"UIDNEXT", 0) or 0)
    seen = Checkpoint.parse(checkpoint).under(validity)
    if uidnext and uidnext <= seen.last + 1:
        return
    for chunk, _sizes, bodies in uid_batches(client, seen.last, max_size, BATCH, uidnext):
        batch = []
        for uid in chunk:  # a letter too large is passed: only a sibling's letter, never one to answer
            raw = bodies.get(uid, {}).get(b"BODY[]")
            if isinstance(raw, bytes | bytearray):  # whatever else a server sends is no letter
                batch.append(Incoming(str(uid), bytes(raw), len(raw)))
        seen = Checkpoint(validity, max(seen.last, *chunk))
        yield batch, str(seen)
    if uidnext:
        yield [], str(seen.through(uidnext))
