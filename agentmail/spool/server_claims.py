"""The reply claim on the mail server, around a letter that answers a letter: the server claim,
beside the per-home claim (``home_claims``).

The per-home claim (``HomeClaims.claim_reply``) keeps one reply per letter among the agents of one
home. Every machine of a platform reaches the server (or one post office), so the claim that
holds across machines is made there, through the transport (``Transport.claim_reply``: an
``O_EXCL`` file on the post office, a conditional STORE on IMAP):

1. inside the per-home claim, before the reply is filed: ``claim`` takes each key on the
   server and notes them on the letter (``server_claims``); a loser files nothing;
2. right before any submission of the letter (now, or a later flush after a crash or while
   queued or held): ``confirm`` takes the claims again. Still ours (or free again): it goes. Taken over
   by another machine after ``STALE_AFTER`` (this one died, or waited that long): it does not
   go, and fails naming who answered;
3. once the server took the letter: ``sent`` marks the claims answered, never taken over;
   a letter that will never go (rejected by a person, failed for good): ``release`` frees them.

A crash between 1 and 3 leaves a claim that another machine takes over after the stated time;
the letter left behind here is then refused at 2. Two replies need a machine that confirmed,
then stalled for ``STALE_AFTER`` before its SMTP server took the letter (DESIGN §10).
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import TransportError
from ..transport.base import Claimed

if TYPE_CHECKING:
    from ..transport.base import Transport
    from .store import Spool

NOTE = "server_claims"
"""The annotation naming a letter's claims on the server: JSON [[Message-ID, key], ...]."""

FRESH = 60.0
"""Seconds during which a claim made through this transport needs no confirming before it is
submitted (far below STALE_AFTER: nobody may take it over yet)."""

# Per transport (one process's connection): (mailbox, letter id) -> when it made the claim.
_fresh: weakref.WeakKeyDictionary[Transport, dict[tuple[str, str], float]] = weakref.WeakKeyDictionary()


def claim(spool: Spool, transport: Transport, letter_id: str, claims: Sequence[tuple[str, str]]) -> Claimed:
    """Claim every (answered Message-ID, key) on the server for ``letter_id``: ``holder`` None
    when all are ours (noted on the letter, so a later submission confirms them), else who holds
    one. The server unreachable: noted all the same, the letter waits in the outbox, the claim
    is made when it is submitted (``confirm``), and the ``warning`` says so."""
    holder = f"{spool.mailbox} {letter_id}"
    warning: str | None = None
    made = True
    for message_id, key in claims:
        try:
            got = transport.claim_reply(message_id, key, holder)
        except TransportError as exc:
            made = False
            warning = f"the reply is not claimed on the server yet ({exc}): it is claimed when it is submitted"
            break
        if got.holder is not None:
            return got
        warning = warning or got.warning
    spool.write.annotate(letter_id, durable=False, **{NOTE: json.dumps([list(c) for c in claims])})
    if made:
        fresh, now = _fresh.setdefault(transport, {}), time.monotonic()
        for stale in [k for k, at in fresh.items() if now - at >= FRESH]:
            del fresh[stale]  # never submitted through this transport (held, say): confirmed when it is
        fresh[(spool.mailbox, letter_id)] = now
    return Claimed(None, warning)


def noted(spool: Spool, letter_id: str) -> list[tuple[str, str]]:
    """The claims ``letter_id`` made on the server (none: it made none, or it answers nothing)."""
    try:
        found = json.loads(str(spool.read.annotations(letter_id).get(NOTE) or "[]"))
    except ValueError:
        return []
    return [(str(c[0]), str(c[1])) for c in found if isinstance(c, list) and len(c) == 2]


def confirm(spool: Spool, transport: Transport, letter_id: str) -> str | None:
    """Before ``letter_id`` is submitted: None when its claims are (still, or again) its own,
    else who answered meanwhile (the letter must not go). Raises TransportError when the server
    cannot be asked (the letter stays queued)."""
    at = _fresh.get(transport, {}).pop((spool.mailbox, letter_id), None)
    if at is not None and time.monotonic() - at < FRESH:
        return None  # claimed through this very transport moments ago
    holder = f"{spool.mailbox} {letter_id}"
    for message_id, key in noted(spool, letter_id):
        who = transport.claim_reply(message_id, key, holder).holder
        # Held by this very letter and marked answered: it went out before a kill cut its record
        # (``Outbox._record`` marks the claim, then moves it to sent); submitted again, a duplicate.
        if who is not None and who.rpartition(" ")[2].upper() != letter_id.upper():
            return who
    return None


def sent(spool: Spool, transport: Transport, letter_id: str) -> None:
    """The server took ``letter_id``: its claims are answered (never taken over)."""
    holder = f"{spool.mailbox} {letter_id}"
    for message_id, key in noted(spool, letter_id):
        try:
            transport.reply_sent(message_id, key, holder)
        except (OSError, TransportError):  # the reply is out: unmarked, taken over after the stated time
            continue


def release(spool: Spool, transport: Transport, letter_id: str) -> None:
    """``letter_id`` will never go (rejected, failed for good): its claims are free at once."""
    holder = f"{spool.mailbox} {letter_id}"
    for message_id, key in noted(spool, letter_id):
        try:
            transport.release_reply(message_id, key, holder)
        except TransportError:
            return  # not freed: taken over after the stated time
