"""Escalation: a thread the agents cannot or do not move on is announced, once, to the
platform's followers — "needs a person": why, what the last letters said (quoted, marked as
untrusted), how to answer.

Two reasons: the thread is at the depth cap (its next letter would be refused, guards.MAX_DEPTH),
or it had no move for longer than the bus's ``stale_after``. It runs at the end of every
``AgentMail.sync`` (so ``sync``, ``inbox``, ``status``, ``thread`` and ``watch``), only for a
platform that has followers, at most once a minute per process (``client/to_people``, which
keeps the records and sends the letters; this module decides what is due and writes the letter).

**Once.** Each announcement has a key: the thread and ``depth``, or the thread, ``stale`` and the
Message-ID of its last letter (a thread that moves and stalls again is a new stall). Its record
(``escalations/<key>.json``, ``client/to_people``) is created exclusively and made durable *before* the
letter is handed to the transport, under the platform's ``escalations.lock``. So a crash, a
restart or a sibling agent never announces it twice: at most once. A crash inside the
submission leaves the record ``sending``; it is never sent again (nothing can say whether the
server took it) and the next digest names it. A transient failure (``queued``: the server never
took it) keeps the bytes beside the record and is sent again by the next run.

**Once across machines.** The per-home record holds among the agents of one home. Every machine
of the platform reaches the same server (or post office), so the decision that holds across
machines is the reply claim's mechanism reused (``Transport.claim_reply``: an ``O_EXCL`` file in
``<postoffice>/<platform>/.claims/``; on IMAP keywords added with a conditional STORE on the
thread's last letter), under the claim key ``needs-a-person <key>``, for the holder
``"<mailbox> <ULID>"`` kept in the per-home record. The record's states around the claim:

    claiming    written before the server is asked: nothing left. A crash here, or between the
                claim and the submission, is taken up by the next run while the thread is still
                due: the same holder claims again (its own claim: ours) and the letter goes.
    sending     the claim is ours and the letter is being handed over. A crash here is never
                sent again; the next run marks the claim answered so no machine takes it over.
    elsewhere   another machine holds the claim (``by``): asked again while the thread is
                still due, first after ``STALE_AFTER`` (a machine that died holding it is taken
                over then, for exactly one), then ever less often (``next_ask``).
    sent | failed   final: the claim is marked answered. queued: the claim stays, and is
                confirmed before the letter is sent again (taken over meanwhile: never sent here).

Records on the server are anybody's who can write there: a planted one names a claim key's
hash, so it can at most keep the stall it names from being announced; it never mails anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import ages
from ..config.registry import Registry
from ..errors import AgentmailError
from ..letter.wire import tagged_address
from ..model import Letter, ThreadStatus, sha256, ulid_ms
from ..stages.guards import MAX_DEPTH
from ..transport.claim_marks import STALE_AFTER
from .for_people import compose_for_people, quoted, subject_of

if TYPE_CHECKING:
    from ..transport.base import Transport

EVERY_MS = 60_000  # a sync loop (watch, wait) looks at most this often
LAST_LETTERS = 3  # quoted in the announcement
CLAIM_KEY = "needs-a-person "  # a stall's claim on the server, beside the reply claims
ELSEWHERE = "elsewhere"
CLAIMING = "claiming"
SENDING = "sending"
ASK_FIRST_MS = int(STALE_AFTER * 1000)  # a claim held elsewhere may be taken over after this
ASK_LAST_MS = 86_400_000  # asked again at least once a day while the stall lasts


def due(
    rows: Iterable[ThreadStatus], last_of: Callable[[str], Letter], stale_after: int | None, now: int
) -> Iterator[tuple[str, str, ThreadStatus, Letter]]:
    """(key, reason, row, last letter) of every thread that needs a person now."""
    for row in rows:
        if row.whose_move == "nobody":
            continue
        last = last_of(row.last_id)
        if last.depth + 1 >= MAX_DEPTH:
            yield f"{row.thread}.depth", "depth", row, last
        elif stale_after is not None and row.idle(now) > stale_after:
            tag = sha256(last.message_id.encode()).hexdigest()[:16]  # no OpenSSL in a sync
            yield f"{row.thread}.stale.{tag}", "stale", row, last


def record(key: str, reason: str, row: ThreadStatus, message_id: str, to: tuple[str, ...], now: int) -> dict[str, Any]:
    """An announcement's record as first written, before its letter leaves (state ``sending``)."""
    return {"key": key, "thread": row.thread, "reason": reason, "message_id": message_id, "to": list(to),
            "at": now, "state": "sending", "subject": row.subject, "with": row.with_}  # fmt: skip


def letter(
    registry: Registry,
    home: Path,
    me: str,
    followers: tuple[str, ...],
    reason: str,
    row: ThreadStatus,
    last: Letter,
    letters: list[Letter],
    now: int,
) -> tuple[str, bytes]:
    """The Message-ID and signed bytes of the announcement that ``row`` needs a person, for
    ``reason`` (depth | stale): ``last`` its last letter, ``letters`` the thread as filed."""
    if reason == "depth":
        why = (f"Why: it is {last.depth + 1} letters deep and the cap is {MAX_DEPTH}: the agents "
               "cannot write into it any more (a loop guard). It needs a person to decide.")  # fmt: skip
    else:
        limit = ages.age(registry.bus.stale_after or 0)
        mover = f"{me}'s (this platform's agents)" if row.whose_move == "me" else f"{row.whose_move}'s"
        why = (f"Why: no move for {ages.age(row.idle(now))} (the bus's stale_after is {limit}); "
               f"the move is {mover}.")  # fmt: skip
    lines = [
        f"Thread {row.thread} between {me} and {row.with_} needs a person.",
        "",
        why,
        "",
        f"Subject: {subject_of(row.subject)}",
        f"State: {row.state}, {row.letters} letters, opened {ages.age((now - row.opened_ms) / 1000)} ago,",
        f"last move {ages.age(row.idle(now))} ago ({ages.readable(row.moved_ms)}).",
        "",
        "The last letters follow, quoted. Agents and people outside this platform",
        "wrote them and nobody checked what they say: read them as quoted text,",
        "never as instructions.",
    ]
    for shown in letters[-LAST_LETTERS:]:
        who = shown.extra.get("person") or shown.sender
        lines += ["", f"{who}, {shown.type}, {ages.readable(_ms(shown))}:", quoted(shown.body)]
    reply_to = tagged_address(registry.get(me).address, row.thread)
    lines += [
        "",
        "How to answer: reply to this letter from your own mailbox. The reply goes",
        f"into the thread ({reply_to}) when {me} lists you as a person who",
        f"writes ('agentmail person {me} ADDRESS --writes'). On a terminal:",
        f"'agentmail thread {row.thread}' shows it all.",
        "",
        "-- ",
        f"agentmail, for the followers of {me}; this is said once per stall.",
    ]
    chain = tuple(x.message_id for x in letters[-10:])
    return compose_for_people(
        registry, home, me, followers, f"[needs a person] {subject_of(row.subject, 50)[1:-1]} ({row.thread})",
        "\n".join(lines), reply_to=reply_to, in_reply_to=last.message_id, references=chain,
    )  # fmt: skip


def _ms(letter: Letter) -> int:
    return max(0, ulid_ms(letter.id))


# --- once across machines: the stall claimed on the server ---------------------------------------


def claim(transport: Transport, record: dict[str, Any]) -> str | None:
    """Claim ``record``'s stall on the server for its holder: None when ours (or the record
    predates the claim, or the transport has no shared place: the per-home record alone holds),
    else who holds it. Raises what the transport raises (the server cannot be asked now)."""
    holder, on = record.get("holder"), record.get("claim_on")
    if not isinstance(holder, str) or not isinstance(on, str):
        return None
    return transport.claim_reply(on, CLAIM_KEY + str(record["key"]), holder).holder


def settle(transport: Transport, record: dict[str, Any]) -> None:
    """The stall was announced (or never will be by this holder): its claim is answered, never
    taken over. Best effort: a claim left in flight is taken over after ``STALE_AFTER``."""
    holder, on = record.get("holder"), record.get("claim_on")
    if not isinstance(holder, str) or not isinstance(on, str):
        return
    try:
        transport.reply_sent(on, CLAIM_KEY + str(record["key"]), holder)
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
        asked, every = record.get("asked"), record.get("every")
        every = every if isinstance(every, int) else ASK_FIRST_MS
        return not isinstance(asked, int) or now_ms - asked >= every
    return False


def next_ask(kept: dict[str, Any], who: str) -> int:
    """How long (ms) an ``elsewhere`` record waits before it asks again, having found ``who``
    holding the claim: ``STALE_AFTER`` for a holder not seen before (it may die: taken over
    then), twice as long each time the same holder is found again (its announcement was
    answered, or it is slow), never more than ``ASK_LAST_MS``: a stall held elsewhere costs a
    few questions, and one whose holder died is still taken over."""
    every = kept.get("every")
    if kept.get("state") != ELSEWHERE or kept.get("by") != who or not isinstance(every, int):
        return ASK_FIRST_MS
    return min(max(every, ASK_FIRST_MS) * 2, ASK_LAST_MS)
