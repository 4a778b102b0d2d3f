"""An IMAP folder read by UID, past the last UID a checkpoint holds, in batches: each batch's sizes
(RFC822.SIZE) first, then the bodies of the letters not over ``max_size`` (``BODY.PEEK[]``, so no
\\Seen is set). The INBOX pull (``smtpimap``) and the sent record (``sent_record``) both read so;
what a batch's letters are is theirs to decide."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def uid_batches(
    client: Any, last: int, max_size: int, batch: int
) -> Iterator[tuple[list[int], dict[int, Any], dict[int, Any]]]:
    """The selected folder's UIDs above ``last``, ``batch`` at a time: (UIDs, sizes, bodies)."""
    # "UID n:*" always returns at least the last message (RFC 3501 §6.4.8): filter, and sort
    # ourselves rather than trusting the server's order.
    uids = sorted(u for u in client.search(["UID", f"{last + 1}:*"]) if u > last)
    for start in range(0, len(uids), batch):
        chunk = uids[start : start + batch]
        sizes = client.fetch(chunk, ["RFC822.SIZE"])
        small = [u for u in chunk if int(sizes.get(u, {}).get(b"RFC822.SIZE", 0)) <= max_size]
        bodies = client.fetch(small, ["BODY.PEEK[]"]) if small else {}
        yield chunk, sizes, bodies
