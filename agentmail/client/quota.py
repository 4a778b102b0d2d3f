"""The new-thread quota of a platform across its machines (DESIGN §6).

A platform's agents may live in several homes (a laptop, CI runners), each with its own
``spool.db``. The quota counts what the *platform* opened in the last hour: this home's
letters (sent, queued, held: the spool's openers rows of the window only) merged by Message-ID
(``model.opener_key``, the name of the post office's marker)
with what the server holds from every machine (the IMAP sent folder, the local post office's
markers), so two homes sending N threads each see 2N. A server that cannot be asked now leaves
this home's count: the quota may then be exceeded by what other machines sent meanwhile,
never by this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import AgentmailError

if TYPE_CHECKING:
    from ..spool.store import Spool
    from ..transport.base import Transport

HOUR_MS = 3_600_000


def opened_times(spool: Spool, transport: Transport | None, now_ms: int) -> list[int]:
    """When (ms) each thread the platform opened in the hour before ``now_ms`` was opened, oldest first."""
    cutoff = now_ms - HOUR_MS
    merged = spool.read.opener_keys_since(cutoff)  # keyed by model.opener_key: the server's markers' names
    try:
        remote = transport.opener_keys_since(cutoff) if transport is not None else None
    except AgentmailError:  # the server cannot be asked now (down, a login refused): this home's count
        remote = None
    return sorted({**(remote or {}), **merged}.values())  # one letter counted once: this home's time for it


def opened_count(spool: Spool, transport: Transport | None, now_ms: int) -> tuple[int, int | None]:
    """``opened_times`` as what the quota needs of it: how many, and when the oldest was opened
    (None: none). This home's keys come as one set and the server's as one dict: the union is
    taken by set operations, no letter of the hour handled one by one in Python."""
    cutoff = now_ms - HOUR_MS
    mine, oldest = spool.read.opener_key_set(cutoff)
    try:
        remote = (transport.opener_keys_since(cutoff) if transport is not None else None) or {}
    except AgentmailError:  # the server cannot be asked now: this home's count
        remote = {}
    others = remote.keys() - mine  # another machine's letters (a letter both know: this home's time)
    times = [remote[key] for key in others] + ([] if oldest is None else [oldest])
    return len(mine) + len(others), min(times, default=None)
