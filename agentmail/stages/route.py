"""Routing: where a judged letter goes, from its verdict and what this mailbox already holds.

``authenticity.judge`` answers what a letter *is* from its bytes alone; ``route`` adds the
facts only the spool knows (is it a copy of a filed letter, does a bounce name a letter this
mailbox sent, does it answer a letter of another thread, is it a sibling's note) and returns
one Filing. Pure: the client gathers the Facts and carries the Filing out.
"""

from __future__ import annotations

from typing import Literal

from .._value import Frozen
from ..letter import wire
from ..model import HUMAN
from ..trust.authenticity import Verdict

Action = Literal["file", "quarantine", "bounce", "duplicate", "skip"]


class Facts(Frozen):
    """What the spool says about one judged letter (gathered by the client)."""

    me_agent: str | None = None  # this mailbox's agent (None: the platform's own mailbox)
    bytes_filed: bool = False  # these exact bytes are filed already (a refetch)
    bounced_id: str | None = None  # the id of the sent letter a bounce reports on, if this mailbox sent it
    bounced_to: tuple[str, ...] = ()  # the addresses that sent letter went to
    filed_as: str | None = None  # the id of a filed letter with the same (sender, Message-ID)
    parent_thread: str | None = None  # the thread of the filed letter it answers (In-Reply-To)


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
    if letter.type == "note" and letter.to_agent and letter.to_agent != facts.me_agent:
        return Filing("skip")  # a sibling's note: not ours to read or to mark
    if facts.filed_as:
        return Filing("duplicate")
    if letter.type == HUMAN and facts.parent_thread and letter.thread == wire.derived_thread(letter.message_id):
        # A person's reply without a plus tag (a client that ignored Reply-To): the thread of the
        # known letter it answers (DESIGN §5).
        letter = letter.replace(thread=facts.parent_thread)
        return Filing("file", verdict.replace(letter=letter))
    if facts.parent_thread is not None and facts.parent_thread != letter.thread:
        return Filing(
            "quarantine",
            Verdict(
                "quarantine",
                letter=letter,
                reason="thread-mismatch",
                detail=f"it answers a letter of {facts.parent_thread} but is tagged {letter.thread}",
            ),
        )
    return Filing("file", verdict)
