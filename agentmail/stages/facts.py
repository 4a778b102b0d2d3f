"""What the spool knows that routing a judged letter needs (``route.Facts``), gathered in one place.

Every path that routes a letter (a sync, ``quarantine recheck``, ``rebuild``, the release of an
answer that waited for the letter it answers) asks ``gather``: the same facts, the same
decision. Light on purpose: a read path imports it without the judging code behind ``route``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .._value import Frozen
from ..model import Letter

if TYPE_CHECKING:
    from ..config.identity import Identity
    from ..config.registry import Registry
    from ..spool import SpoolReader
    from ..trust.authenticity import Verdict


class Facts(Frozen):
    """What the spool says about one judged letter (gathered by ``gather``)."""

    me_agent: str | None = None  # this mailbox's agent (None: the platform's own mailbox)
    bytes_filed: bool = False  # these exact bytes are filed already (a refetch)
    bounced_id: str | None = None  # the id of the sent letter a bounce reports on, if this mailbox sent it
    bounced_to: tuple[str, ...] = ()  # the addresses that sent letter went to
    filed_as: str | None = None  # the id of a filed letter with the same (sender, Message-ID)
    parent_thread: str | None = None  # the thread of the filed letter it answers (In-Reply-To)
    # This mailbox's platform address: a letter whose signed recipients do not name it is
    # ``misaddressed`` (None only where no mailbox judges: a table of rules in a test).
    me_address: str | None = None
    # The parties of each thread the letter may join, as filed here (the platforms that wrote in
    # it or were written to); a thread absent or empty is new here, and anyone may open it.
    parties: dict[str, frozenset[str]] | None = None
    # The platforms a person's letter speaks for (every one listing them as writing); empty for
    # an agent's letter, which speaks for its sender alone.
    speaks_for: frozenset[str] = frozenset()
    # No letter it answers is filed here, whoever wrote it: an answer into a thread new here then
    # waits for it (``awaiting-parent``), so it cannot decide the thread's parties before its
    # opener does. False where no mailbox judges, and for a letter that has waited its time
    # (bounds.ANSWER_WAIT_MS).
    may_wait: bool = False
    # The letter's thread holds no letter here and it has not waited its time: a letter into a
    # bound thread (model.is_bound) that is not its opener then waits for it (``awaiting-parent``),
    # whatever it answers. False where no mailbox judges.
    opener_due: bool = False


def gather(
    spool: SpoolReader,
    registry: Registry,
    me: Identity,
    address: str,
    verdict: Verdict,
    parties: Callable[[str], frozenset[str]] | None = None,
    *,
    may_wait: bool = True,
    seen: tuple[str, str, str | None] | None = None,
) -> Facts:
    """The facts for ``verdict`` at the mailbox ``me`` (platform address ``address``), looked up
    only where they matter. ``parties``: who a thread's parties are, where the spool cannot say
    (``rebuild``). ``may_wait``: False for a letter that has waited its time. ``seen``: (sender,
    Message-ID, what ``spool.known`` found for them) asked already with nothing filed since (the
    duplicate check's, in the same transaction): that look-up is not made twice."""

    def known_as(sender: str, message_id: str) -> str | None:
        if seen is not None and seen[0] == sender and seen[1] == message_id:
            return seen[2]
        return spool.known(sender, message_id)

    if verdict.route == "bounce":
        bounced = spool.known(me.platform, verdict.bounced_message_id or "")
        if bounced is None:
            return Facts(me.agent, me_address=address)
        sent = spool.letter(bounced)
        return Facts(
            me.agent, bounced_id=bounced, bounced_to=(sent.to_address, *sent.recipients, *sent.cc), me_address=address
        )
    letter = verdict.letter
    if verdict.route != "accept" or letter is None:
        return Facts(me.agent, me_address=address)
    parent_thread = None
    # A person's client may keep only References (or answer a letter it quotes further up).
    person = str(letter.extra.get("person") or "")
    for message_id in filter(None, answered(letter)):
        parent = spool.known_record(me.platform, message_id) or spool.known_record(letter.sender, message_id)
        if parent:  # its thread as Letter.from_json reads it
            parent_thread = parent.get("thread", "")
            break
    threads = {letter.thread, *([parent_thread] if parent_thread else [])}
    speaks_for = frozenset(writes_for(registry, person)) if person else frozenset()
    # route may file a person's letter for another platform she speaks for: a copy is found under
    # any, but only her own letter is her copy (a platform listing her may reuse her Message-ID)
    filed = (
        found
        for name in (letter.sender, *sorted(speaks_for))
        if (found := known_as(name, letter.message_id))
        and (not person or spool.letter(found).extra.get("person") == person)
    )
    known = {t: (parties or (lambda t: thread_parties(spool, registry, t)))(t) for t in threads}
    opener_due = may_wait and not known.get(letter.thread)
    if may_wait and parent_thread is None and not known.get(letter.thread):  # only then: a look per platform
        may_wait = not any(spool.known(p, m) for m in filter(None, answered(letter)) for p in registry.platforms)
    return Facts(
        me.agent,
        filed_as=next(filter(None, filed), None),
        parent_thread=parent_thread,
        me_address=address,
        parties=known,
        speaks_for=speaks_for,
        may_wait=may_wait and parent_thread is None and not known.get(letter.thread),
        opener_due=opener_due,
    )


def answered(letter: Letter) -> list[str | None]:
    """The Message-IDs a letter answers, nearest first: its In-Reply-To, and for a person's letter
    its References too (a client may keep only those, or answer a letter it quotes further up)."""
    if letter.extra.get("person"):
        return [letter.in_reply_to, *reversed(letter.references)]
    return [letter.in_reply_to]


def thread_parties(spool: SpoolReader, registry: Registry, thread: str) -> frozenset[str]:
    """The platforms of a thread as filed here: who wrote in it and to whom (none: a new thread)."""
    found: set[str] = set()
    for record in spool.thread_records(thread):  # the fields Letter.from_json would read, without building it
        found |= _parties(record.get("from") or "", record.get("to", ""), record.get("recipients") or (), registry)
    return frozenset(found)


def writes_for(registry: Registry, person: str) -> set[str]:
    """Every platform that lists ``person`` as one who writes (an approver writes too)."""
    return {
        platform.name
        for platform in registry.platforms.values()
        for listed in platform.people
        if listed.address == person and (listed.writes or listed.approves)
    }


def parties_of(letter: Letter, registry: Registry) -> set[str]:
    """The platforms a filed letter makes parties of its thread: its sender and every platform it went to."""
    return _parties(letter.sender, letter.to, letter.recipients, registry)


def _parties(sender: str, to: str, recipients: Iterable[str], registry: Registry) -> set[str]:
    named = {registry.by_address(a) for a in recipients}
    return {sender, to, *(p.name for p in named if p is not None)} - {""}
