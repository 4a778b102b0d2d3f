"""The mailbox's ledger (``ledger.jsonl`` beside spool.db): what spool.db holds as truth and no
letter file says, written again outside it, so ``agentmail rebuild`` restores what was (DESIGN §7).

One JSON object a line, appended by each commit that changed it, in commit order (``Db``
writes them, ``appending``):
``{"id": ID, "state": STATE, "seq": N}`` when a letter is filed or moves (``seq``: its filing
number, when filed), ``{"id": ID, "notes": {...}}`` with the letter's whole notes after a change,
``{"id": ID, "set": {...}}`` with only the notes a later change set (the whole notes can hold a
letter's text: written once, not again with every fact added to them),
``{"id": ID, "gone": true}`` when a quarantined copy is dropped. The last word on an id wins.
Not flushed: a power cut that also loses spool.db may lose the last changes of the seconds
before (a letter then comes back as it stood before them, never as something it never was).

Read back as hostile input (it is a file on disk like any other): a line that is not one of the
shapes above is skipped, an id is a spool id (alphanumeric), a state one of the spool's.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._fs import read_plain
from .._value import Value, field

FILE = "ledger.jsonl"
_MAX_LINE = 1 << 26  # a notes record can hold a letter's text (a quarantine's verdict); never more


class Entry(Value):
    """What the ledger last said of one letter."""

    state: str = ""
    seq: int = -1  # its filing number when filed (-1: not said)
    notes: dict[str, Any] = field(default_factory=dict)
    notes_said: bool = False  # a notes record was read (an empty one clears them)


def line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


@contextmanager
def appending(root: str, lines: list[bytes]) -> Iterator[None]:
    """Around the commit that made ``lines``: the ledger is held (flock) while it commits, then
    they are added in one write. So lines land in the order their commits did, across processes
    (a second writer commits only after the first's, and appends only after the first appended),
    and a commit that raises adds nothing. A ledger that cannot be opened, or is no regular file,
    is left alone: spool.db is the truth, the ledger its copy for a rebuild, never a reason to fail."""
    if not lines:
        yield
        return
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(os.path.join(root, FILE), flags, 0o600)
    except OSError:
        yield
        return
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)  # a FIFO put there is never waited on or written to
        if regular:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
        if regular:
            try:
                _write_all(fd, _after_torn(fd) + b"".join(lines))
            except OSError:  # a full disk: spool.db has it
                pass
    finally:
        os.close(fd)  # the lock goes with it


def _after_torn(fd: int) -> bytes:
    """A newline when the ledger's last line is torn (a crash or a full disk cut an append
    short): the next records then begin a line of their own, never glued to it and lost."""
    size = os.fstat(fd).st_size
    return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""


def _write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append(root: str, lines: list[bytes]) -> None:
    """Add ``lines`` at the end of the ledger (no commit to order them after)."""
    with appending(root, lines):
        pass


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 64 and value.isascii() and value.isalnum()


def parse(data: bytes, states: tuple[str, ...]) -> dict[str, Entry]:
    """Every letter the ledger speaks of, with what it said last; bad lines are skipped, and a
    state not among ``states``."""
    entries: dict[str, Entry] = {}
    for raw in data.split(b"\n"):
        if not raw or len(raw) > _MAX_LINE:
            continue
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict) or not _valid_id(record.get("id")):
            continue
        letter_id = str(record["id"])
        if record.get("gone") is True:
            entries.pop(letter_id, None)
            continue
        entry = entries.get(letter_id) or Entry()
        state, seq, notes, more = record.get("state"), record.get("seq"), record.get("notes"), record.get("set")
        if isinstance(state, str) and state in states:
            entry.state = state
            if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0:
                entry.seq = seq
        elif isinstance(notes, dict) and all(isinstance(k, str) for k in notes):
            entry.notes, entry.notes_said = notes, True
        elif isinstance(more, dict) and all(isinstance(k, str) for k in more):
            entry.notes, entry.notes_said = {**entry.notes, **more}, True
        else:
            continue
        entries[letter_id] = entry
    return entries


def read(root: str, states: tuple[str, ...]) -> dict[str, Entry]:
    """The ledger of the mailbox at ``root`` (empty when it has none)."""
    try:
        data, _st = read_plain(os.path.join(root, FILE))
    except OSError:  # none, or no regular file: nothing it says is believed
        return {}
    return parse(data or b"", states)
