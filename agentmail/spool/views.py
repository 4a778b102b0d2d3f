"""What one mailbox holds, read from spool.db's rows (DESIGN §7): a letter's parsed fields and
depth (cached, rebuilt from its file when missing), its state, its thread, the openers of the
last hour and the names notes went to.
"""

from __future__ import annotations

import heapq
import json
import os
import sqlite3
import stat
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from .._fs import read_plain
from ..errors import NotFound
from ..model import Letter, ulid_floor
from . import depth
from .layout import (
    COPIES_DUE,
    LEAVING,
    MIN_PREFIX,
    OUTGOING,
    WHERE_NOTES,
    Layout,
    _key,
    _loads,
    _raw_key,
    same_bytes,
)


def _ulid_floor(ms: int) -> str:
    """The smallest ULID made at ``ms`` (its first ten characters): ids sort by creation."""
    return ulid_floor(ms)[:10]


def shown(notes: dict[str, Any]) -> dict[str, Any]:
    """A letter's notes as its facts: without where its bytes lie in the post office."""
    return {k: v for k, v in notes.items() if k not in WHERE_NOTES} if WHERE_NOTES & notes.keys() else notes


# Of the files of a lost sent letter's size in a recipient's cur/, at most this many are read
# in one search: whoever can write there can fill it with files of that size (the letter's
# recipients know it), and every read of a letter not found searches again.
CUR_READS = 64


def _candidates(origins: list[Path], size: int | None) -> Iterator[Path]:
    """Where a letter's post-office file may be now: each noted name, that name with flags a
    mail client added (at most ``CUR_READS``: anyone who saw the name can plant more); then,
    for a letter sent (its ``size`` noted), the files of that size in each Maildir's ``cur/``,
    where its reader renamed it under a UID (the newest first), at most ``CUR_READS`` of them
    in each (decoys in one never hide the copy in another)."""
    for origin in origins:
        yield origin
        yield from heapq.nsmallest(CUR_READS, origin.parent.glob(f"{glob_escape(origin.name)}*"))
    if size is None:
        return
    for origin in origins:
        left = CUR_READS
        cur = origin.parent.parent / "cur"
        try:
            names = sorted(os.listdir(cur), reverse=True)
        except OSError:
            continue
        for name in names:
            try:
                st = os.lstat(cur / name)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size == size:
                if left == 0:
                    break
                left -= 1
                yield cur / name


def _whole(path: Path) -> bool:
    """Is there a letter file at ``path``? Not an empty one: a letter file written without a
    flush whose name a later flush of anything else made durable (a journal commits every name)
    is what a power cut leaves of it, and it is restored as a lost one."""
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False


class SpoolReader:
    """What one mailbox holds, for reading (``Spool.read``): it has no method that files, moves
    or annotates a letter, so a command handed only a reader cannot change one. What it writes
    is caches (a parsed letter's fields and depth, a letter file copied again from the post
    office), which give the same answers rebuilt from the letter files."""

    def __init__(self, at: Layout, siblings: Callable[[], Sequence[SpoolReader]]) -> None:
        self._at = at
        self._siblings = siblings  # the readers of the platform's other mailboxes
        self._window: _OpenersWindow | None = None  # this mailbox's openers of the hour, kept (``opener_key_set``)

    @property
    def root(self) -> Path:
        return self._at.root

    @property
    def mailbox(self) -> str:
        return self._at.mailbox

    @property
    def platform_root(self) -> Path:
        return self._at.platform_root

    def sql(self) -> sqlite3.Connection:
        """spool.db, made ready, for a query (the search index reads its tables)."""
        self._at.ensure()
        return self._at.sql()

    def path(self, state: str, letter_id: str) -> Path:
        """The letter's file (``state`` is no part of it: a letter file never moves)."""
        del state
        final = self._at.root / "letters" / f"{letter_id}.eml"
        if _whole(final):
            return final
        born = self._at.root / "tmp" / f"{letter_id}.eml"
        if _whole(born) or (letter_id.isalnum() and self.restore(letter_id)):
            return born
        return born if born.exists() and not final.exists() else final

    def has_file(self, letter_id: str) -> bool:
        """Is the letter's file there, whole enough to read (not one a power cut left empty)?"""
        return any(_whole(self._at.root / folder / f"{letter_id}.eml") for folder in ("letters", "tmp"))

    def restore(self, letter_id: str, noted: dict[str, Any] | None = None) -> bool:
        """A filed letter whose file is gone after a power cut: one copied from the post office
        by a sync batch, whose copy was never flushed, or one this mailbox sent there, whose
        name here was never flushed (DESIGN §7). Copied again from a post-office file it was
        (its name there was flushed before the row that notes it committed), if that file still
        holds exactly its bytes: never a link of it, never through a symbolic link or a FIFO.
        ``noted``: the letter's notes as the ledger has them (``rebuild``, spool.db gone)."""
        note = self.annotations(letter_id) if noted is None else noted
        source, key, more = note.get("copy"), note.get("copy_key"), note.get("copies")
        if not isinstance(source, str) or not isinstance(key, str):
            return False
        sources = [source, *(m for m in more if isinstance(m, str))] if isinstance(more, list) else [source]
        size = note.get("copy_size")
        size = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
        origins = [self._at.root / s for s in sources if s and "\x00" not in s]
        for candidate in _candidates(origins, size):
            try:  # a FIFO or a symbolic link put there is never opened or followed, nor more read than noted
                raw, st = read_plain(candidate, size)
            except OSError:
                continue
            if raw is None or _raw_key(raw) != key:
                continue
            self._at.put_back(letter_id, raw)  # not flushed either: the note stays, and so does the post office's file
            return True
        return False

    def file_of(self, letter_id: str) -> tuple[str, int, int] | None:
        """The letter's file as (path, st_dev, st_ino), for a transport to hard-link rather than
        write the same bytes again (a letter file is never changed in place); None if missing."""
        name = f"{letter_id}.eml"
        for path in (self._at.letters + name, self._at.tmp + name):
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
        row = self._at.sql().execute("SELECT state FROM letters WHERE id=?", (letter_id,)).fetchone()
        return None if row is None else str(row[0])

    def annotations(self, letter_id: str) -> dict[str, Any]:
        row = self._at.sql().execute("SELECT data FROM notes WHERE id=?", (letter_id,)).fetchone()
        return (_loads(row[0]) if row else None) or {}

    def raw(self, letter_id: str) -> bytes:
        state = self.locate(letter_id)
        if state is None:
            raise NotFound(f"no letter {letter_id}")
        return self.path(state, letter_id).read_bytes()

    def checkpoint(self, transport: str) -> str | None:
        row = self._at.sql().execute("SELECT value FROM checkpoints WHERE transport=?", (transport,)).fetchone()
        return None if row is None or not isinstance(row[0], str) else row[0]

    def known(self, sender: str, message_id: str) -> str | None:
        """The id of the stored letter with this (sender, Message-ID)."""
        row = (
            self._at.sql()
            .execute("SELECT id FROM letters WHERE msgkey=? ORDER BY seq LIMIT 1", (_key(sender, message_id),))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def filed(self, sender: str, message_id: str) -> tuple[str, str, str | None] | None:
        """The stored letter ``known`` finds, as (id, state, meta): one statement where ``known``,
        ``locate`` and ``_parsed`` are three."""
        row = (
            self._at.sql()
            .execute(
                "SELECT id, state, meta FROM letters WHERE msgkey=? ORDER BY seq LIMIT 1", (_key(sender, message_id),)
            )
            .fetchone()
        )
        return None if row is None else (str(row[0]), str(row[1]), row[2])

    def known_record(self, sender: str, message_id: str) -> dict[str, Any] | None:
        """The letter ``known`` finds, as ``meta`` gives it: one statement where they are two."""
        row = (
            self._at.sql()
            .execute(
                "SELECT l.id, l.state, l.meta, n.data FROM letters l LEFT JOIN notes n ON n.id = l.id "
                "WHERE l.msgkey=? ORDER BY l.seq LIMIT 1",
                (_key(sender, message_id),),
            )
            .fetchone()
        )
        return None if row is None else self._complete(str(row[0]), row[1], row[2], row[3])

    def named(self, ref: str, senders: tuple[str, ...] = (), most: int = 5) -> list[str]:
        """The letters ``ref`` names, as a user may quote one (DESIGN §8): its id here (any
        case), its Message-ID (with or without the angle brackets; the one name both sides of
        the wire share), or a prefix of either of at least ``MIN_PREFIX`` characters. At most
        ``most`` ids; where several match, the authenticated ones (a forger may reuse a
        Message-ID, into quarantine). ``senders``: the platforms whose (sender, Message-ID)
        index is asked first. Typed text: compared, never parsed or used as a path.

        An id or a whole Message-ID costs an index lookup; a prefix of a Message-ID reads every
        letter's record (a quarter of a second at 100,000 letters)."""
        text = ref.strip()
        lowered = text.lower()
        if lowered.isascii() and lowered.isalnum() and self.locate(lowered):
            return [lowered]
        forms = list(dict.fromkeys(t.removeprefix("<").removesuffix(">") for t in (text, lowered)))
        if not forms[0] or not forms[0].isprintable() or len(forms[0]) > 998:
            return []
        whole = (self.known(sender, f"<{form}>") for form in forms for sender in senders)
        found = {(i, self.locate(i) or "") for i in whole if i}
        if not found and len(forms[0]) >= MIN_PREFIX:
            ids = self._at.sql().execute(  # ids are [0-9a-z]: "~" sorts after every one
                "SELECT id, state FROM letters WHERE id >= ? AND id <= ? LIMIT ?", (lowered, lowered + "~", most + 1)
            )
            found = {(str(i), str(state)) for i, state in ids}
            patterns = [json.dumps(f"<{form}")[:-1] for form in forms]  # as the record spells it, open-ended
            rows = self._at.sql().execute(
                f"SELECT id, state, meta FROM letters WHERE {' OR '.join(['instr(meta, ?) > 0'] * len(patterns))}",
                patterns,
            )
            for letter_id, state, meta in rows:
                message_id = str((_loads(meta) or {}).get("message_id") or "")
                if any(message_id.startswith(f"<{form}") for form in forms):
                    found.add((str(letter_id), str(state)))
        ordered = sorted(found)
        trusted = [i for i, state in ordered if state != "quarantine"]
        return (trusted or [i for i, _ in ordered])[:most]

    def has_bytes(self, raw: bytes, sender: str | None = None, message_id: str | None = None) -> bool:
        """Are these exact bytes already filed (a refetch after a crash, a second delivery)?
        Found by (sender, Message-ID) when given, else by their hash (quarantined letters)."""
        return self.holds_bytes(raw, self.known(sender, message_id) if sender and message_id else None)

    def known_and_hashed(self, sender: str, message_id: str, raw: bytes) -> tuple[str | None, bool]:
        """``known(sender, message_id)`` and whether a letter with these bytes' hash is filed
        (``has_bytes``' second look-up), in one statement."""
        row = (
            self._at.sql()
            .execute(
                "SELECT (SELECT id FROM letters WHERE msgkey=? ORDER BY seq LIMIT 1), "
                "EXISTS (SELECT 1 FROM letters WHERE rawkey=?)",
                (_key(sender, message_id), _raw_key(raw)),
            )
            .fetchone()
        )
        return (None if row[0] is None else str(row[0])), bool(row[1])

    def holds_bytes(self, raw: bytes, existing: str | None, hashed: bool | None = None) -> bool:
        """``has_bytes`` with its look-ups made by the caller: ``existing`` is what ``known`` found
        (None: none, or not asked), ``hashed`` whether the bytes' hash is filed (None: not asked),
        so a caller that needs them again asks once."""
        if existing:
            try:
                if self.raw(existing) == raw:
                    return True
            except (NotFound, OSError):
                pass
            # Other bytes under a filed Message-ID (a forgery reusing it): asked by their
            # hash, so a quarantined forgery is recorded once, not again on every resync.
        if hashed is not None:
            return hashed
        row = self._at.sql().execute("SELECT 1 FROM letters WHERE rawkey=? LIMIT 1", (_raw_key(raw),)).fetchone()
        return row is not None

    def ids(self, state: str) -> list[str]:
        """Ids in one state, oldest first (ids are ULIDs: they sort by creation)."""
        rows = self._at.sql().execute("SELECT id FROM letters WHERE state=? ORDER BY id", (state,)).fetchall()
        return [str(r[0]) for r in rows]

    def waiting(self, most: int) -> list[str]:
        """The quarantined letters whose verdict is ``awaiting-parent`` (answers waiting for the
        letter they answer), in filing order, the oldest ``most`` of each sender: one query,
        whatever the quarantine holds. Per sender, so one partner's flood of orphan answers
        never holds back another's answer (each sender is authenticated: it passed judging)."""
        rows = (
            self._at.sql()
            .execute(
                "SELECT id FROM (SELECT l.id, l.seq, ROW_NUMBER() OVER (PARTITION BY "
                "json_extract(n.data, '$.quarantined.from') ORDER BY l.seq) AS nth "
                "FROM letters l JOIN notes n ON n.id = l.id WHERE l.state='quarantine' AND "
                "CASE WHEN json_valid(n.data) THEN json_extract(n.data, '$.quarantined.reason') END = "
                "'awaiting-parent') WHERE nth <= ? ORDER BY seq",
                (most,),
            )
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def ids_of_type(self, state: str, letter_type: str) -> list[str]:
        """Ids in one state whose letters are of type ``letter_type``, oldest first: one indexed look,
        not every letter of the state read (e.g. the people's letters among the unread)."""
        rows = (
            self._at.sql()
            .execute("SELECT id FROM letters WHERE state=? AND type=? ORDER BY id", (state, letter_type))
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def unchanged(self, letter_id: str, raw: bytes) -> bool | None:
        """Are ``raw`` the bytes this letter was filed with? From the hash noted at filing (a
        letter with attachments, or one synced from the post office); None: nothing was noted."""
        return same_bytes(self.annotations(letter_id), raw)

    def meta(self, letter_id: str, state: str | None = None) -> dict[str, Any]:
        del state  # the row says which: a letter moved since it was listed shows where it is now
        row = (
            self._at.sql()
            .execute(
                "SELECT l.state, l.meta, n.data FROM letters l LEFT JOIN notes n ON n.id = l.id WHERE l.id=?",
                (letter_id,),
            )
            .fetchone()
        )
        if row is None or not letter_id.isalnum():
            raise NotFound(f"no letter {letter_id}")
        return self._complete(letter_id, *row)

    def _complete(self, letter_id: str, state: str, meta: str | None, notes: str | None) -> dict[str, Any]:
        data = _loads(meta)
        if data is None:  # the cache is gone or torn: parsed again, and written back
            data = self._rebuild_meta(letter_id, state)
            if state != "quarantine":
                data["depth"] = self.depth_for(letter_id, data)
            self._cache_meta(letter_id, data)
        elif state != "quarantine" and "depth" not in data:
            data["depth"] = self.depth_for(letter_id, data)
            self._cache_meta(letter_id, data)
        data["id"] = letter_id
        data["state"] = state
        if state in OUTGOING:
            data.update(shown(_loads(notes) or {}))
        return data

    def _parsed(self, letter_id: str, state: str) -> dict[str, Any]:
        """The cached fields, or (gone or torn) the letter parsed again; no depth computed here."""
        row = self._at.sql().execute("SELECT meta FROM letters WHERE id=?", (letter_id,)).fetchone()
        return self._record(letter_id, state, row[0] if row else None)

    def _record(self, letter_id: str, state: str, meta: str | None) -> dict[str, Any]:
        """``_parsed`` of a row read already: its meta, or (gone or torn) the letter parsed again."""
        data = _loads(meta)
        return data if data is not None else self._rebuild_meta(letter_id, state)

    def _cache_meta(self, letter_id: str, data: dict[str, Any]) -> None:
        clean = {k: v for k, v in data.items() if k != "state"}
        with self._at.db.write(durable=False) as tx:
            tx.execute("UPDATE letters SET meta=? WHERE id=?", (json.dumps(clean), letter_id))

    def _rebuild_meta(self, letter_id: str, state: str) -> dict[str, Any]:
        """The cache is gone or torn: parse the letter again (no verdicts: it is already filed)."""
        from ..letter import wire

        verdict = self.annotations(letter_id).get("quarantined" if state == "quarantine" else "person_letter")
        if isinstance(verdict, dict):  # what the verdict saw (or a person's letter as it was read)
            return dict(verdict)
        raw = self.path(state, letter_id).read_bytes()
        try:
            letter = wire.to_letter(wire.parse_message(raw, len(raw) + 1))
            data = letter.to_json()
            del data["depth"]  # not in the letter file: depth_for walks the chain when it is asked
            data["from"] = self._at.name(data["sender_address"])
            data["to"] = self._at.name(data["to_address"])
        except wire.Malformed as exc:
            data = {"id": letter_id, "reason": exc.reason, "detail": exc.detail}
        data["id"] = letter_id
        data.pop("state", None)
        return data

    def depth_for(self, letter_id: str, letter: Letter | dict[str, Any]) -> int:
        """How deep ``letter`` (id ``letter_id``, filed or about to be) is in its thread (``depth``)."""
        return depth.depth_for(self, letter_id, letter)

    def letter(self, letter_id: str, state: str | None = None) -> Letter:
        """The filed letter, with its state, depth and what was learnt about it later (``extra``)."""
        return Letter.from_json(self.meta(letter_id, state))

    def letters(self, state: str) -> list[Letter]:
        rows = (
            self._at.sql()
            .execute(
                "SELECT l.id, l.state, l.meta, n.data FROM letters l LEFT JOIN notes n ON n.id = l.id "
                "WHERE l.state=? ORDER BY l.id",
                (state,),
            )
            .fetchall()
        )
        return [Letter.from_json(self._complete(str(i), s, m, n)) for i, s, m, n in rows]

    def thread_ids(self, thread: str) -> list[str]:
        rows = (
            self._at.sql()
            .execute("SELECT id FROM letters WHERE thread=? AND state!='quarantine' ORDER BY seq", (thread,))
            .fetchall()
        )
        return [str(r[0]) for r in rows]

    def thread_records(self, thread: str) -> list[dict[str, Any]]:
        """The records of ``thread``'s letters not in quarantine, in filing order, as ``meta`` gives
        each: one statement where ``thread_ids`` then ``locate`` and ``meta`` of each are 1 + 2n."""
        rows = (
            self._at.sql()
            .execute(
                "SELECT l.id, l.state, l.meta, n.data FROM letters l LEFT JOIN notes n ON n.id = l.id "
                "WHERE l.thread=? AND l.state!='quarantine' ORDER BY l.seq",
                (thread,),
            )
            .fetchall()
        )
        return [self._complete(str(i), s, m, n) for i, s, m, n in rows]

    def open_threads(self) -> list[str]:
        """Threads whose last letter is not a close (notes neither open nor close one)."""
        rows = self._at.sql().execute("SELECT thread FROM threads WHERE open=1 ORDER BY thread").fetchall()
        return [str(r[0]) for r in rows]

    def closed_threads(self) -> int:
        """How many threads are closed (notes' threads are none): one count over the threads
        cache, for the "no open threads" line, without reading their letters."""
        row = (
            self._at.sql()
            .execute(
                "SELECT count(*) FROM threads t WHERE open=0 AND EXISTS (SELECT 1 FROM letters l"
                " WHERE l.thread=t.thread AND l.type != 'note' AND l.state != 'quarantine')"
            )
            .fetchone()
        )
        return int(row[0])

    def threads(self) -> list[str]:
        rows = self._at.sql().execute("SELECT thread FROM threads ORDER BY thread").fetchall()
        return [str(r[0]) for r in rows]

    def opener_keys_since(self, cutoff_ms: int) -> dict[str, int]:
        """The threads' first letters this *platform* (every agent's mailbox) sent or queued or
        holds, created at or after ``cutoff_ms`` (ms since the epoch; the id is a ULID: its
        creation time), as ``model.opener_key`` of each Message-ID -> when (ms): the key the
        server's count shares (client/quota.py). The oldest of two letters with one key counts."""
        mine, *theirs = self._openers("o.key, o.ms", cutoff_ms)  # newest first: an older letter's row wins
        if not any(theirs):
            return dict(mine)  # (one mailbox: no sort)
        rows = [row for part in (mine, *theirs) for row in part]
        rows.sort(key=lambda row: int(row[1]), reverse=True)
        return dict(rows)

    def opener_key_set(self, cutoff_ms: int) -> tuple[set[str], int | None]:
        """``opener_keys_since`` as its keys and the oldest time (None: no opener). This
        mailbox's part is kept in the process between calls and brought up to date from the
        rows changed since (``_OpenersWindow``): a send at 1,000 letters in the hour reads what
        changed, not the hour. The returned set is read, never changed."""
        keys, oldest = self._own_openers(cutoff_ms)
        siblings = self._siblings()
        if siblings:
            keys = set(keys)
            for sibling in siblings:
                theirs, low = sibling._own_openers(cutoff_ms)
                keys |= theirs
                oldest = low if oldest is None else oldest if low is None else min(oldest, low)
        return keys, oldest

    def _own_openers(self, cutoff_ms: int) -> tuple[set[str], int | None]:
        conn = self._at.sql()
        if conn.in_transaction:  # (a write under way on this connection: its rows are not final)
            return _OpenersWindow(conn).load(cutoff_ms)
        window = self._window
        if window is None or window.conn is not conn:
            window = self._window = _OpenersWindow(conn)
        return window.since(cutoff_ms)

    def _openers(self, columns: str, cutoff_ms: int) -> list[list[Any]]:
        """The window's rows of the openers table whose letter is in a state the quota counts, newest
        first, of each mailbox of the platform here (this one first): what the hour holds, never
        the history nor a letter read."""
        rows: list[list[Any]] = []
        floor = _ulid_floor(cutoff_ms)
        for spool in (self, *self._siblings()):
            rows.append(
                spool._at.sql()
                .execute(
                    f"SELECT {columns} FROM openers o JOIN letters l ON l.id = o.id"
                    " WHERE o.id >= ? AND o.ms >= ? AND l.state IN (?, ?, ?, ?) ORDER BY o.id DESC",
                    (floor, cutoff_ms, *LEAVING, "sibling"),
                )
                .fetchall()
            )
        return rows

    def note_recipients(self) -> set[str]:
        """The agent names the platform's notes (every mailbox of it here) were addressed to:
        from the type index, the notes alone."""
        found: set[str] = set()
        for spool in (self, *self._siblings()):
            rows = spool._at.sql().execute("SELECT id, state FROM letters WHERE type='note'").fetchall()
            for letter_id, state in rows:
                name = spool._parsed(letter_id, state).get("to_agent")
                if isinstance(name, str) and name:
                    found.add(name)
        return found

    def copies_due(self) -> list[str]:
        """The ids of sent or outgoing letters whose sent-folder copy is not made yet, oldest
        first (``SpoolWriter.set_copies_due``)."""
        return (self._at.db.fact(COPIES_DUE) or "").split()


_COUNTED = (*LEAVING, "sibling")
_TOUCHED = "am_openers_touched"  # a temporary table of this connection: not in spool.db
# Every change this connection makes to what the window holds names its letter there: a row of
# openers made, replaced or removed, a letter's state changed, a letter gone.
# Letters received (unread, read, quarantine) name nothing: only those of the counted states.
_STATES = ", ".join(f"'{state}'" for state in _COUNTED)
_TRIGGERS = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_TOUCHED}(id TEXT PRIMARY KEY) WITHOUT ROWID",
    *(
        f"CREATE TEMP TRIGGER IF NOT EXISTS {_TOUCHED}_{n} AFTER {event} ON main.{table} {when}BEGIN "
        + " ".join(f"INSERT OR IGNORE INTO {_TOUCHED}(id) VALUES({row}.id);" for row in rows)
        + " END"
        for n, (event, table, rows, when) in enumerate(
            (
                ("INSERT", "openers", ("new",), ""),
                ("DELETE", "openers", ("old",), ""),
                ("UPDATE", "openers", ("old", "new"), ""),
                ("INSERT", "letters", ("new",), f"WHEN new.state IN ({_STATES}) "),
                ("DELETE", "letters", ("old",), f"WHEN old.state IN ({_STATES}) "),
                (
                    "UPDATE OF id, state",
                    "letters",
                    ("old", "new"),
                    f"WHEN old.state IN ({_STATES}) OR new.state IN ({_STATES}) ",
                ),
            )
        )
    ),
)
_MANY = 200  # more letters changed than this since the last count: the window is read again


_UNTIMED = 1 << 48  # a row's time (the id's, as ``opener_row`` writes it) at or past this, or below 0: no ULID's


def _timed(ms: int) -> bool:
    """A row whose id is a ULID of its time: in the window exactly while its time is, so it
    leaves by the heap. Any other is judged by the query's own test."""
    return 0 <= ms < _UNTIMED


_ROWS = (
    "SELECT o.id, o.key, o.ms FROM openers o JOIN letters l ON l.id = o.id"
    " WHERE o.id >= ? AND o.ms >= ? AND l.state IN (?, ?, ?, ?)"
)

_VERSION = "SELECT * FROM pragma_data_version(), pragma_schema_version()"
# ``_VERSION``, and each letter the list names with its ``_ROWS`` row found by the letter's id
# (NULLs: the window holds none): one row with a NULL id when the list is empty.
_OF_CHANGED = (
    "FROM openers o JOIN letters l ON l.id = o.id"
    " WHERE o.id = t.id AND o.id >= ?1 AND o.ms >= ?2 AND l.state IN (?3, ?4, ?5, ?6)"
)
_CHANGED = (
    f"SELECT d.*, s.*, t.id, (SELECT o.key {_OF_CHANGED}), (SELECT o.ms {_OF_CHANGED})"
    f" FROM pragma_data_version() d, pragma_schema_version() s LEFT JOIN {_TOUCHED} t"
)


class _OpenersWindow:
    """One mailbox's openers of the hour as the quota counts them (``SpoolReader._openers``'s
    rows), kept in the process for one connection: loaded once, then brought up to date from
    the letters this connection changed since (temporary triggers name them) and, when another
    connection committed or the schema changed (``PRAGMA data_version``, ``schema_version``),
    loaded again. Rows leave as the window slides (a heap by time). Always the rows the plain
    query gives: tests/spool/test_openers.py holds the two equal over random histories."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._version: tuple[int, int] | None = None
        self._cutoff = 0
        self._rows: dict[str, tuple[str, int]] = {}  # id -> (key, ms)
        self._holders: Counter[str] = Counter()  # key -> how many ids hold it (a sibling's copy shares one)
        self._keyset: set[str] = set()  # the keys of ``_holders``
        self._heap: list[tuple[int, str]] = []  # (ms, id): the oldest first, stale ones skipped
        self._odd: set[str] = set()  # ids that are no ULID of their time: judged by the query's test

    def load(self, cutoff_ms: int) -> tuple[set[str], int | None]:
        """The window read whole (the plain query), made into the kept structures in bulk."""
        self._cutoff = cutoff_ms
        rows = self.conn.execute(
            f"{_ROWS} ORDER BY o.ms, o.id", (_ulid_floor(cutoff_ms), cutoff_ms, *_COUNTED)
        ).fetchall()
        self._rows = {i: (k, m) for i, k, m in rows}
        self._holders = Counter([k for _, k, _ in rows])
        self._keyset = set(self._holders)
        self._heap = [(m, i) for i, _, m in rows if 0 <= m < _UNTIMED]  # in order by time: a heap as it is
        self._odd = {i for i, _, m in rows if not 0 <= m < _UNTIMED}
        return self._answer()

    def since(self, cutoff_ms: int) -> tuple[set[str], int | None]:
        conn = self.conn
        if self._version is None:  # (the list of letters changed is made at the first count)
            rows = conn.execute(_VERSION).fetchall()
        else:  # the versions, and the letters changed since with their rows, in one read
            rows = conn.execute(_CHANGED, (_ulid_floor(self._cutoff), self._cutoff, *_COUNTED)).fetchall()
        version = (int(rows[0][0]), int(rows[0][1]))
        if version != self._version or cutoff_ms < self._cutoff:
            for statement in _TRIGGERS:  # (again after a schema change: they went with its tables)
                conn.execute(statement)
            conn.execute(f"DELETE FROM {_TOUCHED}")
            self._version = version
            return self.load(cutoff_ms)
        touched = [row[2:] for row in rows if row[2] is not None]
        if touched:
            # Only this connection's writes name letters there, and none ran since the read.
            conn.execute(f"DELETE FROM {_TOUCHED}")
            if len(touched) > _MANY or len(self._heap) > 4 * len(self._rows) + _MANY:
                return self.load(cutoff_ms)  # (a rebuild, a long sync of siblings' letters; a heap of stale entries)
            for letter_id, _key, _ms in touched:
                self._drop(str(letter_id))
            for letter_id, key, ms in touched:
                if key is not None:  # (NULL: the window holds no row of it)
                    self._add(str(letter_id), str(key), int(ms))
        self._slide(cutoff_ms)
        return self._answer()

    def _add(self, letter_id: str, key: str, ms: int) -> None:
        self._rows[letter_id] = (key, ms)
        self._holders[key] += 1
        self._keyset.add(key)
        if _timed(ms):
            heapq.heappush(self._heap, (ms, letter_id))
        else:
            self._odd.add(letter_id)

    def _drop(self, letter_id: str) -> None:
        row = self._rows.pop(letter_id, None)
        if row is None:
            return
        self._holders[row[0]] -= 1
        if not self._holders[row[0]]:
            del self._holders[row[0]]
            self._keyset.discard(row[0])
        self._odd.discard(letter_id)

    def _slide(self, cutoff_ms: int) -> None:
        self._cutoff = cutoff_ms
        heap = self._heap
        while heap and (heap[0][0] < cutoff_ms or self._rows.get(heap[0][1], (None, None))[1] != heap[0][0]):
            ms, letter_id = heapq.heappop(heap)
            if ms < cutoff_ms and self._rows.get(letter_id, (None, None))[1] == ms:
                self._drop(letter_id)
        floor = _ulid_floor(cutoff_ms)
        for letter_id in [i for i in self._odd if not (i >= floor and self._rows[i][1] >= cutoff_ms)]:
            self._drop(letter_id)

    def _answer(self) -> tuple[set[str], int | None]:
        self._slide(self._cutoff)
        oldest = self._heap[0][0] if self._heap else None
        if self._odd:
            lows = [self._rows[i][1] for i in self._odd]
            oldest = min(lows) if oldest is None else min(oldest, *lows)
        return self._keyset, oldest
