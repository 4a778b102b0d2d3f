"""The new-thread quota of a platform across its machines (DESIGN §6).

A platform's agents may live in several homes (a laptop, CI runners), each with its own
``spool.db``. The quota counts what the *platform* opened in the last hour: this home's
letters (sent, queued, held: from the spool's id index, the window only) merged by Message-ID
with what the server holds from every machine (the IMAP sent folder, the local post office's
markers), so two homes sending N threads each see 2N. A server that cannot be asked now leaves
this home's count: the quota may then be exceeded by what other machines sent meanwhile,
never by this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import AgentmailError
from ..model import ulid_ms

if TYPE_CHECKING:
    from ..spool.store import Spool
    from ..transport.base import Transport

HOUR_MS = 3_600_000


def opened_times(spool: Spool, transport: Transport | None, now_ms: int) -> list[int]:
    """When (ms) each thread the platform opened in the hour before ``now_ms`` was opened, oldest first."""
    cutoff = now_ms - HOUR_MS
    merged = {message_id: ulid_ms(letter_id) for message_id, letter_id in spool.read.openers_since(cutoff).items()}
    try:
        remote = transport.openers_since(cutoff) if transport is not None else None
    except AgentmailError:  # the server cannot be asked now (down, a login refused): this home's count
        remote = None
    for message_id, when in (remote or {}).items():
        merged.setdefault(message_id, when)
    return sorted(merged.values())
