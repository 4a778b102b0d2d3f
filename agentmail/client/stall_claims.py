""" "Needs a person" once across the machines of a platform: the escalation's claim on the server.

The per-home record (``spool/<platform>/escalations/<key>.json``, ``client/to_people``) keeps a
stall announced once among the agents of one home. Every machine of the platform reaches the
same server (or post office), so the decision that holds across machines is the reply claim's
mechanism reused (``Transport.claim_reply``: an ``O_EXCL`` file in ``<postoffice>/<platform>/.claims/``,
keywords added with a conditional STORE on the thread's last letter on IMAP), under the claim
key ``needs-a-person <key>``, for the holder ``"<mailbox> <ULID>"`` kept in the per-home record.

The record's states around the claim:

    claiming    written before the server is asked: nothing left. A crash here, or between the
                claim and the submission, is taken up by the next run while the thread is still
                due: the same holder claims again (its own claim: ours) and the letter goes.
    sending     the claim is ours and the letter is being handed over. A crash here is never
                sent again (nothing says whether the server took it); the next run marks the
                claim answered so no other machine takes it over.
    elsewhere   another machine of the platform holds the claim (``by``); asked again once
                ``STALE_AFTER`` passed since ``asked`` while the thread is still due, so a
                machine that died holding it is taken over (after that time, for exactly one).
    sent | failed   final: the claim is marked answered. queued: the claim stays, confirmed
                before the letter is sent again.

Records on the server are anybody's who can write there: a planted one names a claim key's
hash, so it can at most keep the stall it names from being announced; it never mails anyone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import AgentmailError
from ..transport.claim_marks import STALE_AFTER

if TYPE_CHECKING:
    from ..transport.base import Transport

KEY = "needs-a-person "
ELSEWHERE = "elsewhere"
CLAIMING = "claiming"
SENDING = "sending"


def claim(transport: Transport, record: dict[str, Any]) -> str | None:
    """Claim ``record``'s stall on the server for its holder: None when ours (or the record
    predates the claim, or the transport has no shared place: the per-home record alone holds),
    else who holds it. Raises what the transport raises (the server cannot be asked now)."""
    holder, on = record.get("holder"), record.get("claim_on")
    if not isinstance(holder, str) or not isinstance(on, str):
        return None
    return transport.claim_reply(on, KEY + str(record["key"]), holder).holder


def settle(transport: Transport, record: dict[str, Any]) -> None:
    """The stall was announced (or never will be by this holder): its claim is answered, never
    taken over. Best effort: a claim left in flight is taken over after ``STALE_AFTER``."""
    holder, on = record.get("holder"), record.get("claim_on")
    if not isinstance(holder, str) or not isinstance(on, str):
        return
    try:
        transport.reply_sent(on, KEY + str(record["key"]), holder)
    except (AgentmailError, OSError):
        pass


def ask_again(record: dict[str, Any], now_ms: int) -> bool:
    """Is an existing record of a still-due stall to be claimed again now? A ``claiming`` one
    (its run died before it had an answer, or before the letter left), and an ``elsewhere`` one
    asked longer ago than ``STALE_AFTER`` (its holder may have died)."""
    state = record.get("state")
    if state == CLAIMING:
        return isinstance(record.get("holder"), str)
    if state == ELSEWHERE:
        asked = record.get("asked")
        return not isinstance(asked, int) or now_ms - asked >= STALE_AFTER * 1000
    return False
