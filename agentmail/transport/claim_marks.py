"""The marks a server claim is made of (``spool/server_claims.py`` makes the claims): reply
claims shared by every home (machine) of a platform, through one post office, or on the IMAP
server.

One reply per letter must hold across every home (machine) of a platform, not only inside one
``spool.db``. A claim is a file created with ``O_EXCL`` in ``<postoffice>/<platform>/.claims/``,
so the file system applies it for exactly one of several racing homes:

    <key>.<generation>        "<holder>\\n<claimed at, ms since the epoch>\\n"   (written aside, then link()ed: whole or not at all)
    <key>.<generation>.sent   the holder's reply went out                    (O_EXCL)
    <key>.<generation>.free   the holder's reply will never go (rejected, failed): claim again at once

``key`` is the SHA-256 of the claim key (``spool.layout.reply_key``: the answered letter's
Message-ID and verified sender; first 32 hex digits). The current
claim is the highest generation. A claim with no ``.sent`` older than ``stale_after`` seconds is
taken over by creating the next generation, again with ``O_EXCL``: of several homes taking over
at once exactly one wins. The clock is injectable (``now``), so tests never sleep.

``prune`` forgets the claims answered (or given up) more than ``PRUNE_AFTER`` ago, so the
folder does not grow for ever. Forgetting a key starts its generations again at 0, which a
home reading it meanwhile must not see half done: every claim, mark and release holds a shared
``flock`` on ``.lock`` and the prune an exclusive one, taken only when free (it never waits,
nor makes a claim wait for long).

On an IMAP server the same claim is a set of keywords on the answered letter, added with a
conditional STORE (CONDSTORE, RFC 7162: ``UNCHANGEDSINCE`` the modseq just read), which the
server applies for exactly one of several racing clients (``ImapClaim`` decides, from the
letter's flags, what to add; ``transport/smtpimap.py`` does the round trips):

    $amc-<part>-<generation>-<claimed at, base 36 s>-<mailbox>   the claim (who, when)
    $amh-<part>-<generation>-<reply id>                           the reply that holds it
    $ams-<part>-<generation>                                      the holder's reply went out
    $amf-<part>-<generation>                                      it never will: free at once

``part``: 10 hex digits of the SHA-256 of the claim key (the answered Message-ID and sender,
and the counterpart of a fan-out follow-up), so one letter carries several claims.
Every keyword stays under Dovecot's ``mail_max_keyword_length`` (50).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._fs import fsync_dir, locked, read_plain, write_new
from ..errors import TransportError
from ..model import sha256

STALE_AFTER = 600.0
"""Seconds after which a claim whose reply never went out (the home died) may be taken over."""

PRUNE_AFTER = 30 * 86400.0
"""Seconds after its reply was marked sent (or given up) when the post office forgets a claim."""

CLAIM_BYTES = 4096
"""A claim is a holder and a time: more is no claim of ours (read as one being written)."""

ASIDE_AFTER = 3600.0
"""Seconds after which a claim written aside and never linked in (its home died) is removed."""


class Claims:
    """The reply claims of one platform, in a folder every home of the platform reaches."""

    def __init__(self, root: Path, *, stale_after: float = STALE_AFTER,
                 now: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.root, self.stale_after, self.now = root, stale_after, now

    @staticmethod
    def key(message_id: str) -> str:
        return sha256(message_id.strip().encode("utf-8", "replace")).hexdigest()[:32]

    def _current(self, key: str) -> int:
        """The highest generation of ``key`` (-1: never claimed)."""
        best = -1
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return -1
        for name in names:
            stem, _, gen = name.partition(".")
            if stem == key and gen.isascii() and gen.isdigit():  # names any writer chose: "²" is no int
                best = max(best, int(gen))
        return best

    def _read(self, key: str, gen: int) -> tuple[str, float]:
        """(holder, claimed at in seconds) of one generation; ("", 0) while it is being written."""
        try:  # a name anyone may have planted: never a FIFO opened, a link followed, a big file read
            raw, _ = read_plain(self.root / f"{key}.{gen}", CLAIM_BYTES)
        except OSError:
            return "", 0.0
        text = (raw or b"").decode("utf-8", "replace")
        holder, _, rest = text.partition("\n")
        at = rest.strip()
        return holder, (int(at) / 1000 if at.isascii() and at.isdigit() else 0.0)

    def claim(self, message_id: str, holder: str) -> str | None:
        """Claim the one reply to ``message_id`` for ``holder``: None when the claim is ours
        (send the reply, then call ``sent``), else who holds it."""
        key = self.key(message_id)
        with contextlib.ExitStack() as stack:
            try:  # the folder and its lock serve every claim: one unusable is the post office's failure
                self.root.mkdir(parents=True, exist_ok=True)
                stack.enter_context(self._using())
            except OSError as exc:
                where = f"{exc.strerror or exc.__class__.__name__}: {exc.filename or self.root}"
                raise TransportError(f"the post office's claims ({self.root}) cannot be used ({where})") from None
            return self._claim(key, holder)

    def _using(self) -> contextlib.AbstractContextManager[int]:
        """The shared lock every claim, mark and release holds (``prune`` takes it exclusive)."""
        return locked(self.root / ".lock", shared=True)

    def _claim(self, key: str, holder: str) -> str | None:
        for _ in range(64):  # each round either wins, loses, or sees a newer generation
            gen = self._current(key)
            if gen >= 0:
                owner, at = self._read(key, gen)
                if (self.root / f"{key}.{gen}.sent").exists():
                    return owner or "another home"  # answered, by this holder too: never twice
                freed = (self.root / f"{key}.{gen}.free").exists()  # given up: the next is anyone's
                if not freed and owner == holder:
                    return None
                if not freed and (not at or self.now() - at < self.stale_after):
                    return owner or "another home"  # in flight
            if self._create(f"{key}.{gen + 1}", f"{holder}\n{int(self.now() * 1000)}\n".encode()):
                return None
            # another home took this generation first: read it
        return "another home"

    def _create(self, name: str, data: bytes) -> bool:
        """Create ``name`` holding ``data`` whole, or nothing when it exists: written aside,
        then hard-linked in (``link`` fails on an existing name, like ``O_EXCL``), so no home
        ever reads a claim half-written."""
        aside = self.root / f".{name}.{os.getpid()}.{time.monotonic_ns()}"
        write_new(aside, data)
        try:
            os.link(aside, self.root / name)
        except FileExistsError:
            return False
        finally:
            aside.unlink(missing_ok=True)
        fsync_dir(self.root)
        return True

    def holder(self, message_id: str) -> str | None:
        """Who holds the claim on ``message_id`` now (None: nobody)."""
        key = self.key(message_id)
        gen = self._current(key)
        return self._read(key, gen)[0] or None if gen >= 0 else None

    def release(self, message_id: str, holder: str) -> None:
        """``holder``'s reply will never go: its claim is free at once (not after ``stale_after``)."""
        key = self.key(message_id)
        if not self.root.is_dir():
            return
        with self._using():
            gen = self._current(key)
            if gen >= 0 and self._read(key, gen)[0] == holder and not (self.root / f"{key}.{gen}.sent").exists():
                try:
                    write_new(self.root / f"{key}.{gen}.free", b"")
                except FileExistsError:
                    pass

    def sent(self, message_id: str, holder: str) -> bool:
        """Mark ``holder``'s reply sent, so the claim is never taken over. False when the claim
        is no longer ``holder``'s (it was taken over: the reply went out late, say so)."""
        key = self.key(message_id)
        if not self.root.is_dir():
            return False
        with self._using():
            gen = self._current(key)
            if gen < 0 or self._read(key, gen)[0] != holder:
                return False
            try:  # the name is what counts, not the empty file: its folder flushed, so a power
                # cut after the reply went out never reopens the claim for another home to take over
                write_new(self.root / f"{key}.{gen}.sent", b"", durable=False)
            except FileExistsError:
                pass
            fsync_dir(self.root)
            return True

    def prune(self, older_than: float = PRUNE_AFTER) -> int | None:
        """Forget every claim whose current generation was marked sent (or given up) more than
        ``older_than`` seconds ago (the mark's mtime): all its files. Never a claim in flight,
        whatever its age (its holder may still send; a dead one is taken over instead). Also
        removes claims written aside and never linked in, older than ``ASIDE_AFTER``. Returns
        how many claims were forgotten; None when a home was claiming (nothing done: next time)."""
        try:
            with locked(self.root / ".lock", wait=False):
                return self._prune(older_than)
        except BlockingIOError:
            return None
        except FileNotFoundError:
            return 0  # no claim was ever made here

    def _prune(self, older_than: float) -> int:
        now = time.time()  # against the files' mtimes: the file system's clock, not the claims' (``now``)
        keys: dict[str, dict[int, set[str]]] = {}  # key -> generation -> its marks ("" the claim)
        for name in os.listdir(self.root):
            if name.startswith(".") and name != ".lock":
                self._drop_aside(name, now)
                continue
            key, _, rest = name.partition(".")
            number, _, suffix = rest.partition(".")
            if number.isascii() and number.isdigit() and suffix in ("", "sent", "free"):
                keys.setdefault(key, {}).setdefault(int(number), set()).add(suffix)
        forgotten = 0
        for key, gens in keys.items():
            top = max((g for g, marks in gens.items() if "" in marks), default=-1)
            resolution = next((m for m in ("sent", "free") if m in gens.get(top, ())), None)
            if resolution is None:
                continue  # in flight, whatever its age (or never claimed)
            try:
                resolved = os.lstat(self.root / f"{key}.{top}.{resolution}").st_mtime
            except FileNotFoundError:
                continue
            if now - resolved <= older_than:
                continue
            # Each generation's marks before its claim, the current one last: a prune cut short
            # leaves a claim in flight (taken over as stale), never a mark a new claim would inherit.
            for g in sorted(gens):
                for m in sorted(gens[g], reverse=True):
                    (self.root / (f"{key}.{g}.{m}" if m else f"{key}.{g}")).unlink(missing_ok=True)
            forgotten += 1
        if forgotten:
            fsync_dir(self.root)
        return forgotten

    def _drop_aside(self, name: str, now: float) -> None:
        """A claim written aside (``._create``) whose home died before linking it in."""
        path = self.root / name
        try:
            if now - os.lstat(path).st_mtime > ASIDE_AFTER and path.is_file():
                path.unlink()
        except FileNotFoundError:
            pass


def server_claims(condstore: bool, keywords: bool) -> str:
    """What ``agentmail doctor`` says of the reply claim on this IMAP server (DESIGN §6)."""
    if condstore and keywords:
        return ("CONDSTORE offered (RFC 7162): each reply is claimed on the server, so the machines "
                "of this platform answer each letter once")  # fmt: skip
    missing = "no CONDSTORE (RFC 7162)" if not condstore else "no keywords kept (PERMANENTFLAGS without \\*)"
    return (f"{missing}: replies are claimed per machine only; run this platform on one machine, "
            "or on a server with CONDSTORE and keywords (Dovecot has both)")  # fmt: skip


MAX_KEYWORD = 50
"""Dovecot's default ``mail_max_keyword_length``: longer keywords are refused."""

_KEYWORD = re.compile(r"\$am([chsf])-([0-9a-f]{10})-([0-9]{1,6})(?:-([0-9a-z]{1,40})(?:-(.+))?)?", re.ASCII | re.I)
_ATOM_SAFE = re.compile(r"[^A-Za-z0-9@._+-]")


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


class ImapClaim:
    """One claim key's state on one letter, read from its IMAP flags; what to add to claim it.

    ``holder`` strings are the spool's: ``"<mailbox> <reply id>"``; the reply id (a ULID) says
    whose a claim is, the mailbox only who to name to a loser (cut to fit the keyword)."""

    def __init__(self, key: str, flags: object, *, now: float, stale_after: float = STALE_AFTER) -> None:
        self.part = sha256(key.strip().encode("utf-8", "replace")).hexdigest()[:10]
        self.now, self.stale_after = now, stale_after
        self.claims: dict[int, tuple[float, str]] = {}  # generation -> (claimed at, mailbox)
        self.holders: dict[int, str] = {}  # generation -> reply id
        self.sent: set[int] = set()
        self.freed: set[int] = set()
        for flag in flags if isinstance(flags, list | tuple | set | frozenset) else ():
            text = flag.decode("ascii", "replace") if isinstance(flag, bytes) else str(flag)
            m = _KEYWORD.fullmatch(text)
            if not m or m[2].lower() != self.part:
                continue
            kind, gen = m[1].lower(), int(m[3])
            if kind == "c" and m[4] and len(m[4]) <= 10:
                self.claims[gen] = (float(int(m[4], 36)), m[5] or "")
            elif kind == "h" and m[4] and not m[5]:
                self.holders[gen] = m[4].upper()
            elif kind == "s" and not m[4]:
                self.sent.add(gen)
            elif kind == "f" and not m[4]:
                self.freed.add(gen)

    @property
    def generation(self) -> int:
        """The current generation (-1: never claimed)."""
        return max([*self.claims, *self.holders, *self.sent, *self.freed], default=-1)

    def who(self, gen: int | None = None) -> str:
        """The holder of a generation as the spool names one: "<mailbox> <reply id>"."""
        gen = self.generation if gen is None else gen
        mailbox = self.claims.get(gen, (0.0, ""))[1] or "another machine"
        return f"{mailbox} {self.holders.get(gen, '?')}"

    def decide(self, holder: str) -> tuple[str | None, list[str]]:
        """(who holds the claim, []) when it is another's or answered; (None, []) when it is
        ``holder``'s already; (None, keywords) to add, conditionally, to take it."""
        reply_id = holder.rpartition(" ")[2].upper()
        gen = self.generation
        if gen >= 0:
            if gen in self.sent:
                return self.who(gen), []  # answered, by this holder too: never twice
            if gen in self.freed:
                return None, self.keywords(gen + 1, holder)  # given up by its holder
            if self.holders.get(gen) == reply_id:
                return None, []
            at = self.claims.get(gen, (0.0, ""))[0]
            if not at or self.now - at < self.stale_after:
                return self.who(gen), []  # in flight (half a claim is in flight too)
        return None, self.keywords(gen + 1, holder)

    def keywords(self, gen: int, holder: str) -> list[str]:
        mailbox, _, reply_id = holder.rpartition(" ")
        claim = f"$amc-{self.part}-{gen}-{_base36(int(self.now))}-"
        mailbox = _ATOM_SAFE.sub("_", mailbox)[: MAX_KEYWORD - len(claim)]
        return [claim + mailbox if mailbox else claim.rstrip("-"), f"$amh-{self.part}-{gen}-{reply_id.lower()}"]

    def sent_keyword(self, holder: str, kind: str = "s") -> str | None:
        """The keyword that marks ``holder``'s reply sent (``kind`` "f": given up); None when the
        claim is no longer its (taken over: the reply went out late), or is marked already."""
        gen = self.generation
        if gen < 0 or self.holders.get(gen) != holder.rpartition(" ")[2].upper() or gen in self.freed:
            return None
        if kind == "f" and gen in self.sent:
            return None
        return f"$am{kind}-{self.part}-{gen}"


def keeps_keywords(select_info: Mapping[bytes, Any]) -> bool:
    """Does the mailbox keep keywords a client makes up (PERMANENTFLAGS holds ``\\*``)?"""
    return b"\\*" in tuple(select_info.get(b"PERMANENTFLAGS") or ())
