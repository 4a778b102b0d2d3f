"""The spool: one mailbox's letters on disk, crash-safe (DESIGN §7).

    spool/<platform>[@agent]/
      letters/<id>.eml   the raw RFC-822 letter, written once and never moved or changed
      tmp/               where every letter file is born (leftovers older than an hour are swept)
      spool.db           SQLite (WAL): each letter's state, what was learnt about it later, the
                         checkpoints — the truth — and the caches rebuilt from the letter files
                         (parsed fields and depth, the (sender, Message-ID) and bytes indexes,
                         threads, open threads; the platform's reply claims in its own spool.db)

``Spool`` is the one object a caller opens: ``spool.read`` answers every query and has no method
that changes a letter; ``spool.write.store`` files a letter, ``spool.write.move`` changes its
state (a conditional UPDATE: false when another process moved it first);
``spool.home_claims.claim_reply`` claims the one reply of a platform to a letter in this home. A
spool of the per-file layout before it (state folders, meta/, index/, threads/, annotations/,
checkpoint.json) is converted on first use (``migrate``).
"""

from __future__ import annotations

from .filing import SpoolWriter
from .store import ANSWERING, LEAVING, MIN_PREFIX, OUTGOING, STATES, Spool
from .views import SpoolReader

__all__ = ["ANSWERING", "LEAVING", "MIN_PREFIX", "OUTGOING", "STATES", "Spool", "SpoolReader", "SpoolWriter"]
