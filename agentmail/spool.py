"""The spool: one mailbox's letters on disk, crash-safe (DESIGN §7).

    spool/<platform>[@agent]/
      unread/ read/ sent/ outbox/ held/ failed/ quarantine/   <id>.eml — the raw RFC-822 letter
                           (held/: signed, waiting for a person's approve or reject; never sent)
      tmp/                                              where every file is born
      meta/<id>.json       what was parsed from the letter, and its depth (a cache)
      index/msgid/<h>      (platform, Message-ID) → id, for authenticated and sent letters
      index/raw/<h>        these exact bytes are filed as → id   (a refetch is no second entry)
      index/open/<thread>  threads not closed yet (a cache, rebuilt from threads/ when missing)
      annotations/<id>.json  facts no letter file holds, so not a cache: what was learnt later
                           about a sent letter (undeliverable, failed), and the verdict that
                           quarantined a letter (older spools: index/annotations)
      threads/<thread>     the ids of one thread, one per line (a cache)
      checkpoint.json      where each transport's fetch stopped

    spool/<platform>/index/replied/<h>   this letter was answered by → "<mailbox> <id>": one
                           reply per letter per *platform*, shared by its agents' mailboxes

Everything under meta/ and index/ is a cache: deleted, it is rebuilt from the letter files
with the same answers (an index folder counts as complete only with its ``.built`` marker).
A letter's depth is its place in the local In-Reply-To chain: its parent's depth + 1, where
the parent is a letter filed here before it, and never less than the number of References it
carries (a header can only deepen a thread, never make it shallower).

A letter is in exactly one state: the state is the folder that holds its .eml, and a state
change is one rename. Files are written in tmp/, fsynced, renamed, and the folder fsynced.
An index entry is written before the letter it names, and an entry whose letter does not
exist is treated as absent, so a crash between the two loses nothing and duplicates nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._fs import append, fsync_dir, fsync_file, locked, rename_into, sync_filesystem, touch, write_atomic, write_new
from .errors import NotFound
from .model import Letter, new_ulid

STATES = ("unread", "read", "sent", "outbox", "held", "failed", "quarantine")
OUTGOING = ("outbox", "held", "sent", "failed")
# A reply that failed (or that a person rejected) never reached anyone: the letter may be
# answered again. One held for approval answers it, pending the person's decision.
ANSWERING = ("outbox", "held", "sent")
# What the new-thread quota counts: letters that left or wait to leave (failed ones never left).
LEAVING = ("sent", "outbox", "held")
BUILT = ".built"  # an index folder without it is incomplete: rebuilt from the letters


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]


def _raw_key(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:40]


def _facts(letter: Letter | dict[str, Any]) -> dict[str, Any]:
    """The fields of a letter (or of its meta) that its depth depends on, as in meta."""
    if isinstance(letter, Letter):
        return {
            "from": letter.sender,
            "to": letter.to,
            "in_reply_to": letter.in_reply_to,
            "references": list(letter.references),
        }
    return letter


class Spool:
    """One mailbox's spool at ``root``. ``platform_root`` is the spool of the platform itself
    (``spool/<platform>``): its ``index/replied`` is shared by every agent of the platform.
    ``name_of`` maps an address to a platform name, for rebuilding ``from``/``to``."""

    def __init__(
        self, root: Path, *, platform_root: Path | None = None, name_of: Callable[[str], str | None] | None = None
    ) -> None:
        self.root = root
        self.platform_root = platform_root or root
        self.name_of = name_of
        self._ensured = False
        self._pending: dict[str, tuple[str, str, str]] = {}  # deferred id -> (state, thread, type)

    @property
    def mailbox(self) -> str:
        return self.root.name

    def siblings(self) -> list[Spool]:
        """The spools of the other mailboxes of this platform (platform and platform@agent)."""
        base = self.platform_root
        found = [base] + sorted(base.parent.glob(f"{base.name}@*")) if base.parent.is_dir() else []
        return [Spool(p, platform_root=base, name_of=self.name_of) for p in found if p != self.root and p.is_dir()]

    # --- layout ----------------------------------------------------------------------------

    def ensure(self) -> Spool:
        if not self._ensured:
            for name in (*STATES, "tmp", "meta", "threads", "index", "annotations"):
                (self.root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
            self._ensured = True
        return self

    def path(self, state: str, letter_id: str) -> Path:
        return self.root / state / f"{letter_id}.eml"

    def locate(self, letter_id: str) -> str | None:
        """The state a letter is in, or None. Ids are ours: never a path from a letter."""
        if not letter_id.isalnum():
            return None
        if letter_id in self._pending:
            return self._pending[letter_id][0]
        for state in STATES:
            if self.path(state, letter_id).exists():
                return state
        return None

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

    # --- writing ---------------------------------------------------------------------------

    def _write_tmp(self, letter_id: str, raw: bytes, durable: bool) -> Path:
        tmp = self.root / "tmp" / f"{letter_id}.eml"
        write_new(tmp, raw, durable=durable)
        return tmp

    def _write_meta(self, letter: Letter, extra: dict[str, Any]) -> None:
        data = letter.to_json()
        data.pop("state", None)
        data.update(extra)
        # The verdict is no part of the letter: kept as a fact. So is a person's letter as it was
        # read (its platform, its thread, its new text): the letter file alone does not say.
        fact = "quarantined" if letter.state == "quarantine" else "person_letter" if data.get("person") else None
        if fact:
            write_atomic(
                self.root / "annotations" / f"{letter.id}.json",
                json.dumps({fact: {k: v for k, v in data.items() if k != "depth"}}).encode(),
                durable=False,
            )
        write_atomic(self.root / "meta" / f"{letter.id}.json", json.dumps(data).encode(), durable=False)

    def _index_put(self, kind: str, key: str, value: str) -> None:
        write_atomic(self._index_dir(kind) / key, value.encode(), durable=False)

    def _index_get(self, kind: str, key: str) -> str | None:
        try:
            return (self._index_dir(kind) / key).read_text().strip() or None
        except FileNotFoundError:
            return None

    def _index_dir(self, kind: str) -> Path:
        """``index/<kind>``, rebuilt from the letter files first if it is missing or incomplete."""
        folder = (self.platform_root if kind == "replied" else self.root) / "index" / kind
        if not (folder / BUILT).exists():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            for key, value in self._index_entries(kind):
                try:  # never over an entry a writer put there meanwhile
                    write_new(folder / key, value.encode(), durable=False)
                except FileExistsError:
                    continue
            touch(folder / BUILT)
        return folder

    def _index_entries(self, kind: str) -> Iterator[tuple[str, str]]:
        """What ``index/<kind>`` holds, read from the letter files (one pass over the history)."""
        if kind == "raw":
            for letter_id in self.ids("quarantine"):
                yield _raw_key(self.path("quarantine", letter_id).read_bytes()), letter_id
        elif kind == "msgid":
            for state in STATES:
                if state == "quarantine":
                    continue
                for letter_id in self.ids(state):
                    data = self._parsed(letter_id, state)
                    if data.get("message_id"):
                        yield _key(str(data.get("from") or ""), data["message_id"]), letter_id
        elif kind == "replied":
            for spool in (self, *self.siblings()):
                for state in ANSWERING:
                    for letter_id in spool.ids(state):
                        parent = spool._parsed(letter_id, state).get("in_reply_to")
                        if parent:
                            yield _key(parent), f"{spool.mailbox} {letter_id}"

    def _thread_add(self, thread: str, letter_id: str, kind: str) -> None:
        append(self.root / "threads" / thread, f"{letter_id}\n".encode())
        self._mark_open(thread, kind)

    def _mark_open(self, thread: str, kind: str) -> None:
        """Keep ``index/open`` (threads not closed) current, so ``status`` costs what is open."""
        folder = self.root / "index" / "open"
        if not folder.is_dir() or kind == "note":
            return  # not built yet: open_threads() builds it from the thread files
        if kind == "close":
            (folder / thread).unlink(missing_ok=True)
        else:
            touch(folder / thread)

    def store(
        self,
        state: str,
        letter: Letter,
        raw: bytes,
        *,
        extra: dict[str, Any] | None = None,
        index: bool = True,
        defer: bool = False,
    ) -> Letter:
        """File a new letter in ``state``; returns it with its id and state set.

        ``index``: record its (sender, Message-ID) so a second copy is recognised.
        ``defer``: part of a batch that ``commit`` makes durable and visible together (a sync
        batch pays one filesystem flush instead of an fsync per letter).
        """
        self.ensure()
        letter_id = letter.id or new_ulid()
        letter = replace(letter, id=letter_id, state=state)
        if state != "quarantine":
            letter = replace(letter, depth=self.depth_for(letter_id, letter))
        if index:
            self._index_put("msgid", _key(letter.sender, letter.message_id), letter_id)
        else:
            self._index_put("raw", _raw_key(raw), letter_id)  # no Message-ID to go by
        self._write_meta(letter, extra or {})
        tmp = self._write_tmp(letter_id, raw, durable=not defer)
        if defer:
            self._pending[letter_id] = (state, letter.thread, letter.type)
            return letter
        if state != "quarantine":
            self._thread_add(letter.thread, letter_id, letter.type)  # before the letter: views skip missing ids
        rename_into(tmp, self.path(state, letter_id))
        return letter

    def commit(self) -> None:
        """Make the deferred letters durable, then visible: each is complete or absent."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}  # a failure below must not poison later syncs
        tmp_dir = self.root / "tmp"
        if len(pending) > 4:
            sync_filesystem(tmp_dir)
        else:
            for letter_id in pending:
                fsync_file(tmp_dir / f"{letter_id}.eml")
        for letter_id, (state, thread, kind) in pending.items():
            if state != "quarantine":
                self._thread_add(thread, letter_id, kind)  # before the letter: views skip missing ids
        for letter_id, (state, _thread, _kind) in pending.items():
            os.rename(tmp_dir / f"{letter_id}.eml", self.path(state, letter_id))
        for state in {state for state, _, _ in pending.values()}:
            fsync_dir(self.root / state)

    def discard(self) -> None:
        """Forget a batch that failed half-way; its letters will be fetched again."""
        for letter_id in self._pending:
            (self.root / "tmp" / f"{letter_id}.eml").unlink(missing_ok=True)
        self._pending.clear()

    def sweep_tmp(self, older_than: float = 3600.0) -> None:
        """Remove files a crash left in tmp/ (as Maildir readers do); they are never letters."""
        import time

        cutoff = time.time() - older_than
        try:
            entries = list(os.scandir(self.root / "tmp"))
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass

    def move(self, letter_id: str, source: str, target: str, *, durable: bool = True) -> bool:
        """One atomic rename; False when the letter is no longer in ``source`` (someone else won).

        ``durable=False`` where losing the rename in a crash is harmless (outbox → sent: the
        letter is submitted again and the receiver drops the duplicate)."""
        try:
            rename_into(self.path(source, letter_id), self.path(target, letter_id), durable=durable)
        except FileNotFoundError:
            return False
        return True

    # --- dedup and indexes -----------------------------------------------------------------

    def known(self, sender: str, message_id: str) -> str | None:
        """The id of the stored letter with this (sender, Message-ID), if it really exists."""
        found = self._index_get("msgid", _key(sender, message_id))
        return found if found and self.locate(found) else None

    def has_bytes(self, raw: bytes, sender: str | None = None, message_id: str | None = None) -> bool:
        """Are these exact bytes already filed (a refetch after a crash, a second delivery)?
        Found by (sender, Message-ID) when given, else by their hash (quarantined letters)."""
        if sender and message_id:
            existing = self.known(sender, message_id)
            if existing:
                try:
                    return self.raw(existing) == raw
                except (NotFound, OSError):
                    return False
        existing = self._index_get("raw", _raw_key(raw))
        return bool(existing and self.locate(existing))

    def replied_by(self, message_id: str) -> str | None:
        """Which mailbox of this platform answered ``message_id``, as "<mailbox> <reply id>"."""
        holder = self._index_get("replied", _key(message_id))
        return holder if holder and self._reply_exists(holder) else None

    def _reply_exists(self, holder: str) -> bool:
        """Does the reply a claim names exist (in any outgoing state of its mailbox)?"""
        mailbox, _, reply_id = holder.rpartition(" ")
        mailbox = mailbox or self.platform_root.name  # an entry written before siblings shared one
        base = self.platform_root.name
        if not reply_id.isalnum() or (mailbox != base and not mailbox.startswith(base + "@")) or "/" in mailbox:
            return False
        root = self.platform_root.parent / mailbox
        return any((root / state / f"{reply_id}.eml").exists() for state in ANSWERING)

    @contextmanager
    def claim_reply(self, message_id: str, reply_id: str) -> Iterator[str | None]:
        """Claim the one reply of this platform to ``message_id``, across processes and agents.

        Yields None while the claim is ours: file the reply inside the block. Yields who
        answered ("<mailbox> <id>") when another reply exists. The claim file is locked while
        its reply is being filed, so a sibling waits and then sees the reply; a claim whose
        reply never got filed (a crash) names a letter that does not exist and is taken over."""
        path = self._index_dir("replied") / _key(message_id)
        with locked(path) as fd:  # closing it releases the lock
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            if holder and self._reply_exists(holder):
                yield holder
                return
            mine = f"{self.mailbox} {reply_id}".encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, mine, 0)
            os.fsync(fd)
            fsync_dir(path.parent)
            yield None

    def annotate(self, letter_id: str, *, durable: bool = True, **fields: str) -> None:
        """Attach facts learnt later (undeliverable, failed, why it is queued) to a sent letter."""
        self.ensure()
        path = self.root / "annotations" / f"{letter_id}.json"
        data = self.annotations(letter_id)
        if all(data.get(k) == v for k, v in fields.items()):
            return
        data.update(fields)
        write_atomic(path, json.dumps(data).encode(), durable=durable)

    def annotations(self, letter_id: str) -> dict[str, Any]:
        # index/annotations: where spools written before this layout keep them
        for folder in (self.root / "annotations", self.root / "index" / "annotations"):
            try:
                loaded = json.loads((folder / f"{letter_id}.json").read_text())
                return loaded if isinstance(loaded, dict) else {}
            except (FileNotFoundError, ValueError):
                continue
        return {}

    # --- reading ---------------------------------------------------------------------------

    def ids(self, state: str) -> list[str]:
        """Ids in one state, oldest first (ids are ULIDs: they sort by creation)."""
        try:
            names = os.listdir(self.root / state)
        except FileNotFoundError:
            return []
        return sorted(n[:-4] for n in names if n.endswith(".eml"))

    def raw(self, letter_id: str) -> bytes:
        state = self.locate(letter_id)
        if state is None:
            raise NotFound(f"no letter {letter_id}")
        return self.path(state, letter_id).read_bytes()

    def meta(self, letter_id: str, state: str | None = None) -> dict[str, Any]:
        state = state or self.locate(letter_id)
        if state is None:
            raise NotFound(f"no letter {letter_id}")
        data = self._parsed(letter_id, state)
        if state != "quarantine" and "depth" not in data:
            data["depth"] = self.depth_for(letter_id, data)
            self._cache_meta(letter_id, data)
        data["id"] = letter_id
        data["state"] = state
        notes = self.annotations(letter_id) if state in OUTGOING else {}
        data.update(notes)
        return data

    def _parsed(self, letter_id: str, state: str) -> dict[str, Any]:
        """The meta cache, or (gone or torn) the letter parsed again; no depth computed here."""
        try:
            data: dict[str, Any] = json.loads((self.root / "meta" / f"{letter_id}.json").read_bytes())
            if isinstance(data, dict):
                return data
        except (FileNotFoundError, ValueError):
            pass
        return self._rebuild_meta(letter_id, state)

    def _cache_meta(self, letter_id: str, data: dict[str, Any]) -> None:
        clean = {k: v for k, v in data.items() if k != "state"}
        (self.root / "meta").mkdir(exist_ok=True, mode=0o700)
        write_atomic(self.root / "meta" / f"{letter_id}.json", json.dumps(clean).encode(), durable=False)

    def _rebuild_meta(self, letter_id: str, state: str) -> dict[str, Any]:
        """The cache is gone or torn: parse the letter again (no verdicts: it is already filed)."""
        from . import wire

        verdict = self.annotations(letter_id).get("quarantined" if state == "quarantine" else "person_letter")
        if isinstance(verdict, dict):  # what the verdict saw when it quarantined the letter
            self._cache_meta(letter_id, verdict)
            return dict(verdict)
        raw = self.path(state, letter_id).read_bytes()
        try:
            letter = wire.to_letter(wire.parse_message(raw, len(raw) + 1))
            data = letter.to_json()
            del data["depth"]  # not in the letter file: depth_for walks the chain when it is asked
            data["from"] = self._name(data["sender_address"])
            data["to"] = self._name(data["to_address"])
        except wire.Malformed as exc:
            data = {"id": letter_id, "reason": exc.reason, "detail": exc.detail}
        data["id"] = letter_id
        self._cache_meta(letter_id, data)
        return data

    def _name(self, address: str) -> str:
        """The platform an address belongs to (the registry's answer, else its local part)."""
        if not address:
            return ""
        named = self.name_of(address) if self.name_of else None
        return named or address.partition("@")[0].split("+")[0]

    def depth_for(self, letter_id: str, letter: Letter | dict[str, Any]) -> int:
        """How deep ``letter`` (id ``letter_id``, filed or about to be) is in its thread.

        Its parent's depth + 1, where the parent is the letter filed here before it whose
        Message-ID it answers (sent by this platform or by either side of it), and never less
        than its References count. Only the letter files go into it, so a lost cache gives the
        same number."""
        chain: list[tuple[str, dict[str, Any]]] = []
        node: tuple[str, dict[str, Any]] | None = (letter_id, _facts(letter))
        base = -1
        while node is not None:
            node_id, facts = node
            chain.append(node)
            node = None
            parent_mid = facts.get("in_reply_to")
            if not parent_mid:
                break
            sides = (self.platform_root.name, facts.get("from") or "", facts.get("to") or "")  # mine first: a
            for side in dict.fromkeys(sides):  # wrong To never hides that it answers one of my letters
                parent_id = self.known(side, parent_mid)
                if parent_id and parent_id < node_id:  # filed before it: the chain has no cycles
                    parent = self._parsed(parent_id, self.locate(parent_id) or "")
                    if "depth" in parent:
                        base = int(parent["depth"])
                    else:
                        node = (parent_id, parent)
                    break
        depth = base
        for node_id, facts in reversed(chain):
            depth = max(depth + 1, len(facts.get("references") or ()))
            if node_id != letter_id and self.locate(node_id):
                self._cache_meta(node_id, {**facts, "depth": depth})
        return depth

    def letter(self, letter_id: str, state: str | None = None) -> Letter:
        """The filed letter, with its state, depth and what was learnt about it later (``extra``)."""
        return Letter.from_json(self.meta(letter_id, state))

    def letters(self, state: str) -> list[Letter]:
        return [self.letter(i, state) for i in self.ids(state)]

    def thread_ids(self, thread: str) -> list[str]:
        try:
            lines = (self.root / "threads" / thread).read_text().split()
        except FileNotFoundError:
            return []
        return list(dict.fromkeys(lines))

    def open_threads(self) -> list[str]:
        """Threads whose last letter is not a close (and not notes), from ``index/open``."""
        folder = self.root / "index" / "open"
        if not folder.is_dir():
            self._build_open(folder)
        return sorted(os.listdir(folder))

    def _build_open(self, folder: Path) -> None:
        """One pass over the history, the first time (or after the cache was deleted)."""
        building = folder.with_name(f".open.{os.getpid()}")
        building.mkdir(parents=True, exist_ok=True)
        for thread in self.threads():
            ids = [i for i in self.thread_ids(thread) if self.locate(i)]
            kinds = {self.meta(i).get("type") for i in ids[-1:]}
            if ids and not kinds & {"close", "note"}:
                touch(building / thread)
        try:
            os.rename(building, folder)
        except OSError:  # another process built it first
            for name in os.listdir(building):
                os.unlink(building / name)
            building.rmdir()

    def threads(self) -> list[str]:
        try:
            return sorted(os.listdir(self.root / "threads"))
        except FileNotFoundError:
            return []

    def opened_since(self, cutoff_ms: int) -> list[str]:
        """The ids of the threads' first letters this *platform* (every agent's mailbox) sent or
        queued or holds, created at or after ``cutoff_ms`` (ms since the epoch), oldest first.
        From the letter files alone (the id is a ULID: its creation time), so the count survives
        restarts and deleted caches."""
        from .model import ulid_ms

        found: list[str] = []
        for spool in (self, *self.siblings()):
            for state in LEAVING:
                for letter_id in spool.ids(state):
                    if ulid_ms(letter_id) < cutoff_ms:
                        continue
                    data = spool._parsed(letter_id, state)
                    if not data.get("in_reply_to") and data.get("type") != "note" and "reason" not in data:
                        found.append(letter_id)
        return sorted(found)

    # --- checkpoint ------------------------------------------------------------------------

    def checkpoint(self, transport: str) -> str | None:
        try:
            data = json.loads((self.root / "checkpoint.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        value = data.get(transport) if isinstance(data, dict) else None
        return value if isinstance(value, str) else None

    def set_checkpoint(self, transport: str, value: str | None) -> None:
        path = self.root / "checkpoint.json"
        try:
            data = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            data = {}
        data[transport] = value
        # Not fsynced: a checkpoint lost in a crash only means a refetch, and the spool drops
        # what it already holds. It is written after the letters are durable, never before.
        write_atomic(path, json.dumps(data).encode(), durable=False)
