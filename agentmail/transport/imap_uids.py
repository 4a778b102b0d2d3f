"""An IMAP folder read by UID, past the last UID a checkpoint holds, in batches: each batch's sizes
(RFC822.SIZE) first, then the bodies of the letters not over ``max_size`` (``BODY.PEEK[]``, so no
\\Seen is set); a gap of at most one batch below the look's UIDNEXT in one FETCH of both. The
INBOX pull (``smtpimap``) and the sent record (``sent_record``) both read so; what a batch's
letters are is theirs to decide."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_NUMBER_MAX = 2**32 - 1  # RFC 3501's number (a partial fetch's length): an unsigned 32-bit integer


def uid_batches(
    client: Any, last: int, max_size: int, batch: int, uidnext: int = 0
) -> Iterator[tuple[list[int], dict[int, Any], dict[int, Any]]]:
    """The selected folder's UIDs above ``last``, ``batch`` at a time: (UIDs, sizes, bodies).
    ``uidnext``: the folder's UIDNEXT from the look just taken (0: not known)."""
    if 0 < uidnext - last - 1 <= batch and max_size < _NUMBER_MAX:  # the partial's length is one
        yield from _bounded(client, last, max_size, uidnext)
        return
    # "UID n:*" always returns at least the last message (RFC 3501 §6.4.8): filter, and sort
    # ourselves rather than trusting the server's order.
    uids = sorted(u for u in client.search(["UID", f"{last + 1}:*"]) if u > last)
    for start in range(0, len(uids), batch):
        chunk = uids[start : start + batch]
        sizes = client.fetch(chunk, ["RFC822.SIZE"])
        yield chunk, sizes, _bodies(client, chunk, sizes, max_size)


def _bodies(client: Any, chunk: list[int], sizes: dict[int, Any], max_size: int) -> dict[int, Any]:
    small = [u for u in chunk if int(sizes.get(u, {}).get(b"RFC822.SIZE", 0)) <= max_size]
    return client.fetch(small, ["BODY.PEEK[]"]) if small else {}


def _bounded(
    client: Any, last: int, max_size: int, uidnext: int
) -> Iterator[tuple[list[int], dict[int, Any], dict[int, Any]]]:
    """At most one batch of UIDs lies between the checkpoint and UIDNEXT: one FETCH of them all
    by UID lists the ones that exist (absent UIDs are passed over, RFC 3501 §6.4.8: no SEARCH)
    with their sizes and, in the same round trip, at most ``max_size`` + 1 octets of each body:
    a body that comes back no longer than ``max_size`` is the whole letter; a longer one is left
    undownloaded as the separate size FETCH would leave it. A letter that came after the look
    (UID >= UIDNEXT) is read by the next sync, whose look sees it pending."""
    rows = client.fetch(list(range(last + 1, uidnext)), ["RFC822.SIZE", f"BODY.PEEK[]<0.{max_size + 1}>"])
    chunk = sorted(u for u in rows if isinstance(u, int) and last < u < uidnext)
    sizes: dict[int, Any] = {}
    bodies: dict[int, Any] = {}
    unanswered = []
    for uid in chunk:
        size = int(rows[uid].get(b"RFC822.SIZE", 0))
        body = rows[uid].get(b"BODY[]<0>", rows[uid].get(b"BODY[]"))
        if size > max_size:
            sizes[uid] = {b"RFC822.SIZE": size}
        elif isinstance(body, bytes | bytearray) and len(body) > max_size:
            sizes[uid] = {b"RFC822.SIZE": len(body)}  # larger than it said: not taken, as a large one
        else:
            sizes[uid] = {b"RFC822.SIZE": size}
            if body is None:
                unanswered.append(uid)
            else:
                bodies[uid] = {b"BODY[]": body}
    if unanswered:  # a server that did not answer the partial fetch: the bodies asked as before
        bodies.update(client.fetch(unanswered, ["BODY.PEEK[]"]))
    if chunk:
        yield chunk, sizes, bodies
