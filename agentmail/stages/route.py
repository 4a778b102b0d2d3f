"""Routing: where a judged letter goes, from its verdict and what this mailbox already holds.

``authenticity.judge`` answers what a letter *is* from its bytes alone; ``route`` adds the
facts only the spool knows (is it a copy of a filed letter, does a bounce name a letter this
mailbox sent, does it answer a letter of another thread, is it a sibling's note) and returns
one Filing. Pure: the client gathers the Facts and carries the Filing out.

Two rules hold here for every path that files a letter (sync, ``quarantine recheck``,
``rebuild``): a letter is filed only by a platform its signed recipients name (else
``misaddressed``: anyone holding its bytes can deliver them anywhere), and only a party of a
thread known here writes into it (else ``not-a-party``: a thread id is no secret).
"""

from __future__ import annotations

from typing import Literal

from .._value import Frozen
from ..letter import wire
from ..model import HUMAN, Letter, bound_to, is_bound
from ..text import one_line
from ..trust.authenticity import Verdict
from .facts import Facts, answered

Action = Literal["file", "quarantine", "bounce", "duplicate", "skip"]

__all__ = ["Action", "Facts", "Filing", "route"]


class Filing(Frozen):
    """What to do with the letter: ``file`` it unread, ``quarantine`` it (``verdict`` says why),
    note a ``bounce`` on sent letter ``letter_id``, drop a ``duplicate``, ``skip`` a sibling's note."""

    action: Action
    verdict: Verdict | None = None
    letter_id: str | None = None


def _base(address: str) -> str:
    """An address without its plus tag: a thread's address is its platform's mailbox."""
    local, _, domain = address.lower().rpartition("@")
    return f"{local.split('+', 1)[0]}@{domain}"


def _doubted(verdict: Verdict, facts: Facts) -> str | None:
    """Why a delivery report marks no letter undeliverable (None: it does). Believed only when
    the bus's own mail system vouches for it (``Verdict.unvouched``, from the judge) and it
    names a letter this mailbox sent to the recipient it says failed."""
    if verdict.unvouched:
        return f"a delivery report not believed: {verdict.unvouched}"
    if not facts.bounced_id:
        return "a delivery report about a letter this mailbox did not send"
    sent_to = {_base(address) for address in facts.bounced_to}
    if not any(_base(address) in sent_to for address in verdict.failed_recipients):
        failed = ", ".join(verdict.failed_recipients)
        return f"a delivery report not believed: the letter it names was not sent to {failed}"
    return None


def route(verdict: Verdict | None, facts: Facts) -> Filing:
    """The one decision after judging. ``verdict`` None: not judged (``facts.bytes_filed``)."""
    if facts.bytes_filed:
        return Filing("duplicate")  # the same bytes are filed already: no need to judge them again
    if verdict is None:
        raise ValueError("a letter whose bytes are not filed needs a verdict")
    if verdict.route == "bounce":
        doubt = _doubted(verdict, facts)
        if doubt is None:
            return Filing("bounce", verdict, facts.bounced_id)
        return Filing("quarantine", Verdict("quarantine", reason="automated", detail=doubt))
    if verdict.route != "accept" or verdict.letter is None:
        return Filing("quarantine", verdict)
    letter = verdict.letter
    if facts.me_address is not None and facts.me_address not in verdict.addressed:
        return Filing("quarantine", _misaddressed(verdict, letter, facts.me_address))
    if letter.type == "note" and facts.me_address is not None and letter.sender_address.lower() != facts.me_address:
        # A note is one agent's handover to a sibling: another platform's reaches an agent of
        # this one past every other mailbox here (each skips a note for another agent).
        return Filing("quarantine", _misaddressed(verdict, letter, facts.me_address, note=True))
    if letter.type == "note" and letter.to_agent and letter.to_agent != facts.me_agent:
        return Filing("skip")  # a sibling's note: not ours to read or to mark
    if facts.filed_as:
        return Filing("duplicate")
    if letter.type == HUMAN and facts.parent_thread and letter.thread == wire.derived_thread(letter.message_id):
        # A person's reply without a plus tag (a client that ignored Reply-To): the thread of the
        # known letter it answers (DESIGN §5).
        letter = letter.replace(thread=facts.parent_thread)
        verdict = verdict.replace(letter=letter)
    elif facts.parent_thread is not None and facts.parent_thread != letter.thread:
        return Filing(
            "quarantine",
            Verdict(
                "quarantine",
                letter=letter,
                reason="thread-mismatch",
                detail=f"it answers a letter of {facts.parent_thread} but is tagged {letter.thread}",
            ),
        )
    parties = (facts.parties or {}).get(letter.thread)
    if not parties and facts.parent_thread is None and facts.may_wait and _waits(letter):
        return Filing("quarantine", _awaiting_parent(letter))
    if not parties and facts.opener_due and _not_its_opener(letter):
        return Filing("quarantine", _awaiting_opener(letter))
    if bound_to(letter):
        parties = None  # a bound thread's opener is its own: no letter that came first locks it out
    if parties and not (facts.speaks_for or {letter.sender}) & parties:
        return Filing("quarantine", _not_a_party(letter, facts.speaks_for, parties))
    if parties and letter.sender not in parties:
        # A person listed by a party and by an outsider too speaks here for the party: filed as
        # the outsider's, their letter would make it a party (anyone may list any person).
        speaking = facts.speaks_for & parties
        writer = min(speaking - {letter.to} or speaking)  # not the addressee where one can (human.writes_for)
        verdict = verdict.replace(letter=letter.replace(sender=writer))
    return Filing("file", verdict)


def _misaddressed(verdict: Verdict, letter: Letter, me: str, *, note: bool = False) -> Verdict:
    """A letter signed for other mailboxes, delivered here (any holder of its bytes can re-aim it),
    or another platform's note (a note goes only between the agents of one platform)."""
    named = ", ".join(verdict.addressed) or "no recipient"
    detail = (
        f"a note goes between the agents of one platform, and this one is {letter.sender_address}'s, not {me}'s"
        if note
        else f"its signature names {named} as recipients, not {me}: someone else delivered it here"
    )
    return Verdict("quarantine", letter=letter, reason="misaddressed", detail=one_line(detail)[:400])


def _not_a_party(letter: Letter, speaks_for: frozenset[str], parties: frozenset[str]) -> Verdict:
    """A letter into a thread its sender is no party to: it would change a state that is not its own."""
    who = letter.extra.get("person") or letter.sender
    detail = (
        f"{who} writes into {letter.thread}, whose parties are {', '.join(sorted(parties))}: "
        f"{'/'.join(sorted(speaks_for or {letter.sender}))} is none of them"
    )
    return Verdict("quarantine", letter=letter, reason="not-a-party", detail=one_line(detail)[:400])


def _waits(letter: Letter) -> bool:
    """An answer that would open its thread here: it waits for the letter it answers. Not a note
    (between one platform's agents), nor a person's untagged letter (a thread of its own, which
    no one else's letter can take)."""
    if letter.type == "note" or not any(answered(letter)):
        return False
    return not (letter.type == HUMAN and letter.thread == wire.derived_thread(letter.message_id))


def _not_its_opener(letter: Letter) -> bool:
    """A letter into a bound thread (model.bound_thread_id) that is not the letter the thread's id
    is bound to: it would open that thread here for its sender, so it waits for the opener. Not a
    note (between one platform's agents), nor a person's untagged letter (a thread of its own)."""
    if letter.type == "note" or not is_bound(letter.thread):
        return False
    return not bound_to(letter)


def _awaiting_opener(letter: Letter) -> Verdict:
    """A letter into a bound thread whose opener is not filed here yet: it waits, unshown, for
    it, as an answer waits for the letter it answers (``_awaiting_parent``)."""
    detail = (
        f"it writes into {letter.thread}, whose opener is not filed here yet: it waits for it "
        f"(a thread is its opener's, never its first answer's)"
    )
    return Verdict("quarantine", letter=letter, reason="awaiting-parent", detail=one_line(detail)[:400])


def _awaiting_parent(letter: Letter) -> Verdict:
    """An answer whose letter is not filed here yet: it waits, unshown, for that letter (filed
    again, in order, once it is: client/recheck.settle), or for bounds.ANSWER_WAIT_MS."""
    detail = (
        f"it answers {letter.in_reply_to or letter.references[-1]}, not filed here yet: it waits for it "
        f"(a thread is its opener's, never its first answer's)"
    )
    return Verdict("quarantine", letter=letter, reason="awaiting-parent", detail=one_line(detail)[:400])
