"""Quarantine review (``agentmail quarantine recheck``): quarantined letters judged again.

A registry fixed after letters were quarantined (a key rotated on one side first, a platform
added late) leaves them where they are until someone asks. ``recheck`` judges each again
against today's registry and routes it as a sync would: one that now passes becomes the
``unread`` letter it is (same id: the quarantine entry *is* the letter, so nothing is shown
twice); a copy of a letter filed already by its Message-ID is dropped, as a sync drops a
duplicate; the rest stay, with today's reason. Under the sync lock: never beside a sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotFound
from ..stages.route import route
from ..trust import authenticity

if TYPE_CHECKING:
    from .receiver import Receiver

_PLACEHOLDERS = (b"X-Agentmail-Not-Downloaded:", b"X-Agentmail-Not-Read:")


def recheck(client: Receiver, refs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One result per quarantined letter asked about (none asked: all of them), oldest first:
    ``{"id", "outcome": "filed" | "duplicate" | "quarantined", "reason", "detail", "filed_as"}``."""
    spool = client.spool
    results: list[dict[str, Any]] = []
    with spool.locked():
        ids = chosen(client, refs)
        for letter_id in ids:
            if spool.read.locate(letter_id) != "quarantine":
                continue  # another recheck took it meanwhile
            raw = spool.read.raw(letter_id)
            if raw.startswith(_PLACEHOLDERS):  # nothing was downloaded: nothing to judge
                old = spool.read.letter(letter_id)
                results.append(_result(letter_id, "quarantined", old.reason, old.detail))
                continue
            verdict = authenticity.judge(raw, client.registry)
            filing = route(verdict, client.facts(verdict))
            if filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None:
                if spool.write.release(letter_id, filing.verdict.letter):
                    results.append(_result(letter_id, "filed"))
            elif filing.action == "duplicate" and verdict.letter is not None:
                filed_as = spool.read.known(verdict.letter.sender, verdict.letter.message_id)
                spool.write.drop_quarantined(letter_id)
                results.append(_result(letter_id, "duplicate", filed_as=filed_as))
            else:
                why = filing.verdict or verdict
                results.append(_result(letter_id, "quarantined", why.reason, why.detail))
    return results


def chosen(client: Receiver, refs: tuple[str, ...]) -> list[str]:
    """The quarantined letters ``refs`` name (an id, a Message-ID, a prefix), or all of them."""
    spool = client.spool
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
