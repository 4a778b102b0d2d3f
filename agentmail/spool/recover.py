"""Filing a mailbox's letter files again into a new spool.db (``agentmail rebuild``; DESIGN §7):
each file judged by the caller, in the order the ledger says they were filed, each thread's
letters after the letters they answer, with the notes the ledger kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._fs import read_plain
from ..model import Letter
from . import ledger
from .layout import OUTGOING, STATES, _loads

if TYPE_CHECKING:
    from .db import Db
    from .filing import SpoolWriter
    from .layout import Layout
    from .views import SpoolReader


class Rebuilt(Protocol):
    """What a rebuild uses of the spool it files again (``store.Spool``, which calls it: named
    here, so the two modules import one way)."""

    @property
    def root(self) -> Path: ...
    @property
    def db(self) -> Db: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def read(self) -> SpoolReader: ...
    @property
    def write(self) -> SpoolWriter: ...
    def ensure(self) -> object: ...


def _parents_first(judged: list[tuple[str, str, Letter]]) -> Iterator[tuple[str, str, Letter]]:
    """Filing order for ``recover``: by id, except that a letter waits for the letter it answers
    when that one's id is later (a sibling's letter is named by when it was written, which can be
    before this mailbox filed what it answers), so each thread reads as it happened."""
    present = {letter.message_id for _, _, letter in judged}
    filed: set[str] = set()
    waiting: dict[str, list[tuple[str, str, Letter]]] = {}
    for item in judged:
        parent = item[2].in_reply_to or ""
        if parent in present and parent not in filed:
            waiting.setdefault(parent, []).append(item)
            continue
        ready = [item]
        while ready:
            done = ready.pop(0)
            yield done
            filed.add(done[2].message_id)
            ready += waiting.pop(done[2].message_id, [])
    for rest in waiting.values():  # (a parent that was no letter after all: never, kept in order)
        yield from rest


# ``recover``'s judge: (id, bytes, what the ledger last said of it) -> (state, letter) or None
Classify = Callable[[str, bytes, "ledger.Entry | None"], "tuple[str, Letter] | None"]


def _filing_order(letter_id: str, entry: ledger.Entry | None) -> tuple[int, int, str]:
    """Letters the ledger numbered, in the order they were filed; those it does not know (filed
    before it was kept), first, by id."""
    if entry is None or entry.seq < 0:
        return (0, 0, letter_id)
    return (1, entry.seq, letter_id)


def _said(was: dict[str, ledger.Entry], letter_id: str) -> bool:
    """Does the ledger say how the letter stood?"""
    entry = was.get(letter_id)
    return entry is not None and bool(entry.state)


def restore_rows(spool: Rebuilt, classify: Classify, counts: dict[str, Any]) -> None:
    """File every letter file again as ``classify`` judges it, with the ledger's notes (``Spool.recover``)."""
    spool.ensure()
    was = ledger.read(str(spool.root), STATES)  # before any write of this rebuild adds to it
    with spool.db.write() as tx:
        # tmp/ only for what the ledger says was committed (its rename into letters/ undone
        # by a power cut, or not made yet): any other file there may be a letter never
        # committed (no letter), and what was received is fetched again anyway.
        published = spool.layout.letter_files(born=False)
        on_disk = set(spool.layout.letter_files())
        # A sent letter whose spool name a power cut took: its bytes from the post office. Only
        # one the ledger says this mailbox sent (a sibling's ledger copied in names post-office
        # files of this platform too), and kept only if judged this platform's own (below): a
        # ledger from another platform's mailbox names them as well.
        mailbox = spool.read.mailbox
        platform = mailbox.partition("@")[0]
        fetched = {
            letter_id
            for letter_id, said_of in was.items()
            if said_of.state == "sent" and letter_id.isalnum()
            if letter_id not in on_disk or not spool.read.has_file(letter_id)  # (empty: what a cut left)
            if said_of.notes.get("copy_by") == mailbox and spool.read.restore(letter_id, said_of.notes)
        }
        committed = set(published) | {i for i, entry in was.items() if entry.state}
        judged_all: list[tuple[str, str, Letter]] = []  # not the bytes (read again below): a big spool stays small
        # What the ledger knows first, the last filed first (of two filings of one letter, a
        # power cut took the earlier from spool.db); then the files it does not know, judged
        # against them.
        files = [i for i in spool.layout.letter_files() if i in committed]
        said = sorted((i for i in files if _said(was, i)), reverse=True)
        for letter_id in said + [i for i in files if not _said(was, i)]:
            try:
                raw, _st = read_plain(spool.read.path("", letter_id))
            except OSError:
                raw = None
            # An empty file is no letter: what a power cut left of a copy written without a flush
            # (a received one is fetched again; a sent one was restored above if it could be).
            judged = classify(letter_id, raw, was.get(letter_id)) if raw else None
            if letter_id in fetched and (judged is None or judged[0] != "sent" or judged[1].sender != platform):
                spool.read.path("", letter_id).unlink(missing_ok=True)  # not ours: never filed here
                judged = None
            if judged is None or raw is None:
                counts["left"] += 1
                continue
            judged_all.append((letter_id, *judged))
        judged_all.sort(key=lambda item: _filing_order(item[0], was.get(item[0])))
        for letter_id, state, letter in _parents_first(judged_all):
            try:
                raw, _st = read_plain(spool.read.path("", letter_id))
            except OSError:
                raw = None
            if raw is None:  # gone since it was judged
                counts["left"] += 1
                continue
            letter = letter.replace(id=letter_id, state=state)
            if state != "quarantine":
                letter = letter.replace(depth=spool.read.depth_for(letter_id, letter))
            data = letter.to_json()
            data.pop("state", None)
            if state in OUTGOING:
                data.update(letter.extra)
            spool.write._insert(tx, letter, data, raw, index=state != "quarantine")
            entry = was.get(letter_id)
            if entry is not None and entry.notes_said:  # the notes as they were, whole
                tx.execute("INSERT OR REPLACE INTO notes(id, data) VALUES(?, ?)", (letter_id, json.dumps(entry.notes)))
                spool.db.log({"id": letter_id, "notes": entry.notes})
            counts[state] += 1
        answering = tx.execute(
            "SELECT meta FROM letters WHERE state IN ('outbox', 'held', 'sent', 'sibling')"
        ).fetchall()
        answered = {(_loads(meta) or {}).get("in_reply_to") for (meta,) in answering} - {None, ""}
        for letter_id, meta in tx.execute("SELECT id, meta FROM letters WHERE state='unread'").fetchall():
            if letter_id in was and was[letter_id].state:
                continue  # the ledger said how it stood
            if (_loads(meta) or {}).get("message_id") in answered:
                tx.execute("UPDATE letters SET state='read' WHERE id=?", (letter_id,))
                spool.db.log({"id": letter_id, "state": "read"})
                counts["unread"] -= 1
                counts["read"] += 1
