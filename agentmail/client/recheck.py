"""Quarantine review (``agentmail quarantine recheck``): quarantined letters judged again.

A registry fixed after letters were quarantined (a key rotated on one side first, a platform
added late) leaves them where they are until someone asks. ``recheck`` judges each again
against today's registry and routes it as a sync would: one that now passes becomes the
``unread`` letter it is (same id: the quarantine entry *is* the letter, so nothing is shown
twice); a copy of a letter filed already by its Message-ID is dropped, as a sync drops a
duplicate; the rest stay, with today's reason. Under the sync lock: never beside a sync.

``settle`` does the same, unasked, for the answers that waited for the letter they answer
(``awaiting-parent``, stages/route.py): after each sync and each rebuild, the oldest
``bounds.WAITING`` of them of each sender whose letter is filed now (or whose thread holds letters now, or that
have waited ``bounds.ANSWER_WAIT_MS``) are judged again, in filing order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import bounds
from ..ages import now_ms
from ..errors import NotFound
from ..model import Letter, ulid_ms
from ..stages.facts import answered, gather
from ..stages.route import Filing, route
from ..trust import authenticity

if TYPE_CHECKING:
    from ..spool import Spool
    from .mailbox import Mailbox

_PLACEHOLDERS = (b"X-Agentmail-Not-Downloaded:", b"X-Agentmail-Not-Read:")
WAITS = "awaiting-parent"


def recheck(box: Mailbox, refs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One result per quarantined letter asked about (none asked: all of them), oldest first:
    ``{"id", "outcome": "filed" | "duplicate" | "quarantined", "reason", "detail", "filed_as"}``."""
    spool = box.spool
    results: list[dict[str, Any]] = []
    with spool.locked():
        for letter_id in chosen(spool, refs):
            if spool.read.locate(letter_id) != "quarantine":
                continue  # another recheck took it meanwhile
            raw = spool.read.raw(letter_id)
            if raw.startswith(_PLACEHOLDERS):  # nothing was downloaded: nothing to judge
                old = spool.read.letter(letter_id)
                results.append(_result(letter_id, "quarantined", old.reason, old.detail))
                continue
            result = _again(box, letter_id, raw, may_wait=now_ms() - ulid_ms(letter_id) < bounds.ANSWER_WAIT_MS)
            if result is not None:
                results.append(result)
    return results


def settle(box: Mailbox) -> list[dict[str, Any]]:
    """The answers that waited for their letter and may go on now, judged again in filing order
    (the caller holds the sync lock); one result each, as ``recheck``'s. Bounded: the oldest
    ``bounds.WAITING`` waiting of each sender are looked at, whatever a flood of orphan answers
    left (one partner's flood never holds back another's answer); the window
    moves on as they leave it (a released answer may be the letter the next one waits for)."""
    spool, results = box.spool, []
    judged: set[str] = set()  # each at most once a call, whatever its record says
    moved = True
    while moved:
        moved = False
        for letter_id in spool.read.waiting(bounds.WAITING):
            if letter_id in judged:
                continue
            letter = spool.read.letter(letter_id, "quarantine")
            late = now_ms() - ulid_ms(letter_id) >= bounds.ANSWER_WAIT_MS
            if not late and not _ready(spool, box.registry.platforms, letter):
                continue
            judged.add(letter_id)
            result = _again(box, letter_id, spool.read.raw(letter_id), may_wait=not late, waited=True)
            if result is not None:
                results.append(result)
                moved = moved or result["reason"] != WAITS
    return results


def _ready(spool: Spool, platforms: Iterable[str], letter: Letter) -> bool:
    """A letter it answers is filed here now, or its thread holds letters now: it can be judged."""
    if spool.read.thread_ids(letter.thread):
        return True
    return any(spool.read.known(p, m) for m in filter(None, answered(letter)) for p in platforms)


def _again(box: Mailbox, letter_id: str, raw: bytes, *, may_wait: bool, waited: bool = False) -> dict[str, Any] | None:
    """One quarantined letter judged and routed again, as a sync would, and the outcome carried
    out. ``waited``: it is an answer that waited for its letter (else its record says whether)."""
    spool = box.spool
    verdict = authenticity.judge(raw, box.registry)
    filing: Filing = route(
        verdict, gather(spool.read, box.registry, box.me, box.platform.address, verdict, may_wait=may_wait)
    )
    if filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None:
        return _result(letter_id, "filed") if spool.write.release(letter_id, filing.verdict.letter) else None
    if filing.action == "duplicate" and verdict.letter is not None:
        filed_as = spool.read.known(verdict.letter.sender, verdict.letter.message_id)
        spool.write.drop_quarantined(letter_id)
        return _result(letter_id, "duplicate", filed_as=filed_as)
    why = filing.verdict or verdict
    old = spool.read.letter(letter_id, "quarantine")
    if (waited or old.reason == WAITS) and why.reason != WAITS:  # it waits no more: its verdict is today's
        spool.write.quarantine_again(letter_id, (why.letter or old).replace(reason=why.reason, detail=why.detail))
    return _result(letter_id, "quarantined", why.reason, why.detail)


def chosen(spool: Spool, refs: tuple[str, ...]) -> list[str]:
    """The quarantined letters ``refs`` name (an id, a Message-ID, a prefix), or all of them."""
    if not refs:  # all of them but the ones a person dismissed ('done ID'); an id names any
        return [i for i in spool.read.ids("quarantine") if not spool.read.annotations(i).get("dismissed")]
    picked: list[str] = []
    for ref in refs:
        found = [i for i in spool.read.named(ref, most=50) if spool.read.locate(i) == "quarantine"]
        if not found:  # a Message-ID a filed letter shares (a forgery's): named() prefers the filed one
            wanted = ref.strip().removeprefix("<").removesuffix(">")
            found = [q.id for q in spool.read.letters("quarantine") if q.message_id.strip("<>") == wanted and wanted]
        if not found:
            raise NotFound(f"no quarantined letter {ref!r} (see 'agentmail quarantine')")
        picked += [i for i in found if i not in picked]
    return sorted(picked)


def _result(
    letter_id: str, outcome: str, reason: str | None = None, detail: str | None = None, filed_as: str | None = None
) -> dict[str, Any]:
    return {"id": letter_id, "outcome": outcome, "reason": reason, "detail": detail, "filed_as": filed_as}
