"""One picture per platform (DESIGN §7): the letters the platform's other mailboxes
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

from ..model import HUMAN, Letter, new_ulid

if TYPE_CHECKING:
    from ..transport.base import Transport
    from .mailbox import Mailbox

STATE = "sibling"


def checkpoint_name(transport: Transport) -> str:
    """The checkpoint row of the sent record, beside the INBOX's (``<transport>-sent``)."""
    return f"{transport.name}-sent"


def pending(transport: Transport, start: Callable[[str], str | None]) -> bool:
    return transport.sent_pending(start(checkpoint_name(transport)))


class Waiting:
    """Sibling letters the first read of a sync left because the letter they answer was not filed
    yet: each is filed right after that letter when the INBOX files it (``file_after``), so a
    thread reads in the order it happened. At most ``MOST`` kept in memory (a fresh home's long
    history): the rest are filed by the second read, after the INBOX."""

    MOST = 1000

    def __init__(self) -> None:
        self.by_parent: dict[str, list[tuple[Letter, bytes]]] = {}
        self.kept = 0
        self.threads: set[str] = set()

    def keep(self, letter: Letter, raw: bytes) -> None:
        if self.kept < self.MOST and letter.in_reply_to:
            self.by_parent.setdefault(letter.in_reply_to, []).append((letter, raw))
            self.kept += 1

    def file_after(self, box: Mailbox, message_id: str) -> int:
        """File (in the caller's batch) the kept letters that answer ``message_id``, and theirs."""
        filed, ready = 0, list(self.by_parent.pop(message_id, []))
        while ready:
            letter, raw = ready.pop(0)
            if box.spool.read.known(box.me.platform, letter.message_id):
                continue
            box.spool.write.store(STATE, letter.replace(id=sibling_id(box, letter.message_id)), raw, defer=True)
            filed += 1
            self.threads.add(letter.thread)
            ready += self.by_parent.pop(letter.message_id, [])
        return filed


def fetch(
    box: Mailbox, transport: Transport, start: Callable[[str], str | None], *, waiting: Waiting | None = None
) -> tuple[int, set[str], bool]:
    """File the sibling letters the record holds past this mailbox's checkpoint (the caller holds
    the sync lock). A mailbox that never read it reads it from the start, also a new agent's
    mailbox in a home whose siblings read (its INBOX starts where they stand): every letter the
    platform sent is part of the picture. ``waiting``: a sibling letter that answers a letter of
    its thread not filed here yet (it is in the INBOX this sync reads next) is left there, to be
    filed right after that letter; the others are filed now, and the checkpoint stays just before
    the first letter left, so a second call after the INBOX files whatever is still missing. Returns how many were filed, the
    threads they are in, and whether any was left."""
    from ..transport.base import Checkpoint

    spool = box.spool
    name = checkpoint_name(transport)
    checkpoint = start(name)
    filed, threads, left, stop = 0, set(), False, ""
    for batch, after in transport.sent_copies(checkpoint, box.registry.bus.max_size):
        try:
            for item in batch:
                raw = item.raw
                letter = _new_sibling_letter(box, raw) if raw is not None else None
                if letter is None or raw is None:
                    continue
                if waiting is not None and not _parent_filed(box, letter):
                    waiting.keep(letter, raw)
                    if not left:  # the checkpoint goes no further than just before it
                        stop = str(Checkpoint(Checkpoint.parse(after).validity, int(item.key) - 1))
                    left = True
                    continue
                spool.write.store(STATE, letter.replace(id=sibling_id(box, letter.message_id)), raw, defer=True)
                filed += 1
                threads.add(letter.thread)
        except BaseException:
            spool.write.discard()
            raise
        spool.write.commit()
        position = stop if left else after
        if position != checkpoint:
            spool.write.set_checkpoint(name, position)
            checkpoint = position
    return filed, threads, left


def sibling_id(box: Mailbox, message_id: str) -> str:
    """A sibling letter's id here: the ULID its Message-ID begins with (``<ULID.platform@domain>``,
    made where it was composed), so the letter file alone says it is a sibling's — this
    mailbox's own letters have ids of their own — and ages count from when it was written.
    A new ULID when that one is taken or the Message-ID has no ULID."""
    head = message_id.removeprefix("<").partition(".")[0]
    if (
        len(head) == 26
        and head.isascii()
        and head.isalnum()
        and head == head.lower()
        and not box.spool.read.locate(head)
    ):
        return head
    return new_ulid()


def is_sibling_file(letter_id: str, letter: Letter) -> bool:
    """Was the filed ``letter_id`` a sibling's letter (``sibling_id``)? For ``rebuild``."""
    return letter_id == letter.message_id.removeprefix("<").partition(".")[0]


def _parent_filed(box: Mailbox, letter: Letter) -> bool:
    """Is the letter ``letter`` answers filed here (or does it answer none)?"""
    if not letter.in_reply_to:
        return True
    spool = box.spool
    return any(
        spool.read.letter(i).message_id == letter.in_reply_to
        for i in spool.read.thread_ids(letter.thread)
        if spool.read.locate(i) not in (None, "quarantine")
    )


def _new_sibling_letter(box: Mailbox, raw: bytes) -> Letter | None:
    """The letter, when it is one the platform sent, passes judgement and is not filed here
    yet; else None. Hostile bytes that break the judge are passed over, never stop the sync."""
    from ..letter import wire
    from ..trust import authenticity

    spool, me = box.spool, box.me.platform
    try:
        quick = wire.quick_identity(raw)
        if quick is None or box.platform_name(quick[0]) != me:
            return None  # not the platform's own letter (a person's, a copy of anything else)
        if spool.read.known(me, quick[1]) or spool.read.has_bytes(raw, me, quick[1]):
            return None  # this mailbox's own letter, or one filed already
        verdict = authenticity.judge_unguarded(raw, box.registry)
    except OSError:
        raise  # the machine failing: the sync stops, as for the INBOX
    except Exception:  # noqa: BLE001
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
        ids = spool.read.thread_ids(thread)
        states = {i: spool.read.locate(i) for i in ids}
        answered = _answered(box, [spool.read.letter(i, STATE) for i in ids if states[i] == STATE])
        if not answered:
            continue
        for letter_id in ids:
            if states[letter_id] != "unread":
                continue
            letter = spool.read.letter(letter_id, "unread")
            if (letter.sender, letter.message_id) in answered:
                moved += box.move(letter_id, "unread", "read", durable=False)
    return moved


def answered_by(box: Mailbox, parent: Letter) -> str | None:
    """Which sibling letter filed here answers ``parent`` ("<platform> <id>"): the platform
    already answered it on another machine, even where no claim on the server says so."""
    spool = box.spool
    for letter_id in spool.read.thread_ids(parent.thread):
        if spool.read.locate(letter_id) == STATE:
            sibling = spool.read.letter(letter_id, STATE)
            if (parent.sender, parent.message_id) in _answered(box, [sibling]):
                return f"{box.me.platform} {letter_id}"
    return None


def _answered(box: Mailbox, letters: Iterable[Letter]) -> set[tuple[str, str]]:
    """The letters ``letters`` (this platform's) answer, each as (its sender, its Message-ID): a
    reply answers its addressee's letter, a follow-up the platform's own. Never a Message-ID
    alone: another sender reusing it wrote another letter."""
    found: set[tuple[str, str]] = set()
    for letter in letters:
        if letter.in_reply_to:
            for sender in (*box.counterparts(letter), box.me.platform):
                found.add((sender, letter.in_reply_to))
    return found
