"""One picture per platform (issue 25, DESIGN §7): the letters the platform's other mailboxes
sent — a sibling agent in this home, or any agent on another machine — filed here as
``sibling``, so ``status``, ``thread``, ``sent`` and the guards see every letter of the platform.

They come from the server's record of what the platform sent (``Transport.sent_copies``: the
IMAP sent folder, the post office's ``.sent/<platform>/``), read by every sync before the INBOX
(so a person's untagged answer to a sibling's letter finds its thread), past a checkpoint of its
own. Each is judged like any letter (the platform's DKIM signature, the registry) and kept only
when it is this platform's own agentmail letter that this mailbox does not hold already; a
note (read through the INBOX by the agent it is for), a letter for people (digest,
announcement) or anything that fails judgement is passed over, never quarantined: a sent
folder is not mail to this agent. A ``sibling`` letter is never in the inbox, never sent,
never answered, and counted by the quota once (merged by Message-ID with the server's count).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..model import HUMAN, Letter

if TYPE_CHECKING:
    from ..transport.base import Transport
    from .mailbox import Mailbox

STATE = "sibling"


def checkpoint_name(transport: Transport) -> str:
    """The checkpoint row of the sent record, beside the INBOX's (``<transport>-sent``)."""
    return f"{transport.name}-sent"


def pending(transport: Transport, start: Callable[[str], str | None]) -> bool:
    return transport.sent_pending(start(checkpoint_name(transport)))


def fetch(
    box: Mailbox, transport: Transport, start: Callable[[str], str | None], *, wait_for_parents: bool = False
) -> tuple[int, set[str], bool]:
    """File the sibling letters the record holds past this mailbox's checkpoint (the caller holds
    the sync lock). ``wait_for_parents``: stop before the first sibling letter that answers a
    letter of its thread not filed here yet (it is in the INBOX this sync reads next: filed after
    it, the thread reads in order); the checkpoint stays just before it, so a second call after
    the INBOX files it. Returns how many were filed, the threads they are in, and whether it stopped."""
    from ..letter import wire
    from ..transport.base import Checkpoint

    spool, me = box.spool, box.me.platform
    name = checkpoint_name(transport)
    checkpoint = start(name)
    filed, threads, stopped = 0, set(), False
    for batch, after in transport.sent_copies(checkpoint, box.registry.bus.max_size):
        try:
            for item in batch:
                quick = wire.quick_identity(item.raw) if item.raw is not None else None
                if item.raw is None or quick is None or box.platform_name(quick[0]) != me:
                    continue  # not the platform's own letter (a person's, a copy of anything else)
                if spool.known(me, quick[1]) or spool.has_bytes(item.raw, me, quick[1]):
                    continue  # this mailbox's own letter, or one filed already
                letter = _sibling_letter(item.raw, box)
                if letter is None:
                    continue
                if wait_for_parents and not _parent_filed(box, letter):
                    before = Checkpoint.parse(after)
                    after, stopped = str(Checkpoint(before.validity, int(item.key) - 1)), True
                    break
                spool.store(STATE, letter, item.raw, defer=True)
                filed += 1
                threads.add(letter.thread)
        except BaseException:
            spool.discard()
            raise
        spool.commit()
        if after != checkpoint:
            spool.set_checkpoint(name, after)
            checkpoint = after
        if stopped:
            break
    return filed, threads, stopped


def _parent_filed(box: Mailbox, letter: Letter) -> bool:
    """Is the letter ``letter`` answers filed here (or does it answer none)?"""
    if not letter.in_reply_to:
        return True
    spool = box.spool
    return any(
        spool.letter(i).message_id == letter.in_reply_to
        for i in spool.thread_ids(letter.thread)
        if spool.locate(i) not in (None, "quarantine")
    )


def _sibling_letter(raw: bytes, box: Mailbox) -> Letter | None:
    """The letter, when it is one the platform sent and it passes judgement; else None."""
    from ..trust import authenticity

    try:
        verdict = authenticity.judge_unguarded(raw, box.registry)
    except Exception:  # noqa: BLE001  (hostile bytes: a letter that breaks the judge is passed over)
        return None
    letter = verdict.letter
    if verdict.route != "accept" or letter is None or letter.sender != box.me.platform:
        return None
    if letter.type in ("note", HUMAN) or letter.extra.get("person"):
        return None
    return letter


def settle(box: Mailbox, threads: Iterable[str]) -> int:
    """A received letter a sibling answered is ``read``, as if this mailbox had answered it: the
    platform answered it (a fresh home is not shown what another machine answered). From the
    threads' letters; returns how many were moved."""
    spool = box.spool
    moved = 0
    for thread in set(threads):
        ids = spool.thread_ids(thread)
        states = {i: spool.locate(i) for i in ids}
        answered = {spool.letter(i, STATE).in_reply_to or "" for i in ids if states[i] == STATE} - {""}
        if not answered:
            continue
        for letter_id in ids:
            if states[letter_id] == "unread" and spool.letter(letter_id, "unread").message_id in answered:
                moved += box.move(letter_id, "unread", "read", durable=False)
    return moved


def answered_by(box: Mailbox, message_id: str, thread: str) -> str | None:
    """Which sibling letter filed here answers ``message_id`` ("<platform> <id>"): the platform
    already answered it on another machine, even where no claim on the server says so."""
    spool = box.spool
    for letter_id in spool.thread_ids(thread):
        if spool.locate(letter_id) == STATE and spool.letter(letter_id, STATE).in_reply_to == message_id:
            return f"{box.me.platform} {letter_id}"
    return None
