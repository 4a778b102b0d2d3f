"""Reply claims shared by several homes through one post office (issue 25, step 1).

One reply per letter must hold across every home (machine) of a platform, not only inside one
``spool.db``. A claim is a file created with ``O_EXCL`` in ``<postoffice>/<platform>/.claims/``,
so the file system applies it for exactly one of several racing homes:

    <key>.<generation>        "<holder>\\n<claimed at, ms since the epoch>\\n"   (O_EXCL)
    <key>.<generation>.sent   the holder's reply went out                    (O_EXCL)

``key`` is the SHA-256 of the answered letter's Message-ID (first 32 hex digits). The current
claim is the highest generation. A claim with no ``.sent`` older than ``stale_after`` seconds is
taken over by creating the next generation, again with ``O_EXCL``: of several homes taking over
at once exactly one wins. The clock is injectable (``now``), so tests never sleep.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from .._fs import write_new

STALE_AFTER = 600.0
"""Seconds after which a claim whose reply never went out (the home died) may be taken over."""


class Claims:
    """The reply claims of one platform, in a folder every home of the platform reaches."""

    def __init__(self, root: Path, *, stale_after: float = STALE_AFTER,
                 now: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.root, self.stale_after, self.now = root, stale_after, now

    @staticmethod
    def key(message_id: str) -> str:
        return hashlib.sha256(message_id.strip().encode("utf-8", "replace")).hexdigest()[:32]

    def _current(self, key: str) -> int:
        """The highest generation of ``key`` (-1: never claimed)."""
        best = -1
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return -1
        for name in names:
            stem, _, gen = name.partition(".")
            if stem == key and gen.isdigit():
                best = max(best, int(gen))
        return best

    def _read(self, key: str, gen: int) -> tuple[str, float]:
        """(holder, claimed at in seconds) of one generation; ("", 0) while it is being written."""
        try:
            text = (self.root / f"{key}.{gen}").read_text("utf-8", "replace")
        except FileNotFoundError:
            return "", 0.0
        holder, _, rest = text.partition("\n")
        at = rest.strip()
        return holder, (int(at) / 1000 if at.isdigit() else 0.0)

    def claim(self, message_id: str, holder: str) -> str | None:
        """Claim the one reply to ``message_id`` for ``holder``: None when the claim is ours
        (send the reply, then call ``sent``), else who holds it."""
        key = self.key(message_id)
        self.root.mkdir(parents=True, exist_ok=True)
        for _ in range(64):  # each round either wins, loses, or sees a newer generation
            gen = self._current(key)
            if gen >= 0:
                owner, at = self._read(key, gen)
                if (self.root / f"{key}.{gen}.sent").exists():
                    return owner or "another home"  # answered, by this holder too: never twice
                if owner == holder:
                    return None
                if not at or self.now() - at < self.stale_after:
                    return owner or "another home"  # in flight (a claim half-written is in flight too)
            try:
                write_new(self.root / f"{key}.{gen + 1}", f"{holder}\n{int(self.now() * 1000)}\n".encode())
            except FileExistsError:
                continue  # another home took this generation first: read it
            return None
        return "another home"

    def holder(self, message_id: str) -> str | None:
        """Who holds the claim on ``message_id`` now (None: nobody)."""
        key = self.key(message_id)
        gen = self._current(key)
        return self._read(key, gen)[0] or None if gen >= 0 else None

    def sent(self, message_id: str, holder: str) -> bool:
        """Mark ``holder``'s reply sent, so the claim is never taken over. False when the claim
        is no longer ``holder``'s (it was taken over: the reply went out late, say so)."""
        key = self.key(message_id)
        gen = self._current(key)
        if gen < 0 or self._read(key, gen)[0] != holder:
            return False
        try:
            write_new(self.root / f"{key}.{gen}.sent", b"")
        except FileExistsError:
            pass
        return True
