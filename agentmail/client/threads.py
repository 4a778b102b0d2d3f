"""The views: a thread both ways, what this mailbox sent, where each open thread stands (DESIGN §6)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..ages import now_ms
from ..errors import (
    NotFound,
)
from ..model import (
    Letter,
    ThreadStatus,
    thread_id,
    ulid_ms,
)
from ..protocol import state_after, whose_move
from .mailbox import Stage

if TYPE_CHECKING:
    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from ..spool import SpoolReader
    from .mailbox import Mailbox


class Threads(Stage):
    """The views of what a mailbox holds: a thread both ways, what I sent, where each open thread stands, notes."""

    def __init__(self, box: Mailbox, sync: Callable[[], object]) -> None:
        super().__init__(box)
        self.sync = sync  # the mailbox's sync, run first by a view asked to
        self.read: SpoolReader = box.spool.read  # every view reads through it: a view cannot change a letter

    def thread(self, thread: str, *, sync: bool = True) -> list[Letter]:
        """Does ``AgentMail.thread``."""
        thread = thread_id(thread)
        if sync:
            self.sync()
        letters = []
        for letter_id in self.read.thread_ids(thread):
            state = self.read.locate(letter_id)
            if state and state != "quarantine":
                letters.append(self.box.addressed(self.read.letter(letter_id, state)))
        if not letters:
            raise NotFound(f"no thread {thread}")
        return letters

    def sent(self) -> list[Letter]:
        return [
            self.box.addressed(letter)
            for state in ("held", "outbox", "failed", "sent", "sibling")  # the platform's, from any mailbox
            for letter in self.read.letters(state)
        ]

    def quarantined(self, *, sync: bool = True) -> list[Letter]:
        if sync:
            self.sync()
        return [x for x in self.read.letters("quarantine") if not self.read.annotations(x.id).get("dismissed")]

    def notes(self, *, sync: bool = True) -> list[Letter]:
        """Does ``AgentMail.notes``."""
        if sync:
            self.sync()
        found = []
        for state in ("unread", "read"):
            for letter in self.read.letters(state):
                if letter.type == "note" and letter.to_agent in (None, self.me.agent):
                    found.append(letter)
        return sorted(found, key=lambda letter: letter.id)

    def status(self, *, sync: bool = True, closed: bool = False, stale: float | None = None) -> list[ThreadStatus]:
        """Does ``AgentMail.status``."""
        if stale is not None:
            return [r for r in self.status(sync=sync, closed=closed) if r.idle(now_ms()) > stale]
        if sync:
            self.sync()
        rows = []
        undelivered = {state: set(self.read.ids(state)) for state in ("held", "outbox", "failed")}
        dismissed = {i for i in undelivered["failed"] if self.read.annotations(i).get("dismissed")}
        for thread in self.read.threads() if closed else self.read.open_threads():
            ids = [i for i in self.read.thread_ids(thread) if i not in dismissed]
            first, last = self._filed(ids), self._filed(reversed(ids))
            if first is None or last is None:
                continue
            if last.type == "note" or first.type == "note":
                continue
            mine = last.sender == self.me.platform
            other = last.to if mine else last.sender
            move = self._whose_move(last, other)
            delivery, delivery_detail, delivery_id = self._delivery(
                ids, undelivered, mine or first.sender == self.me.platform
            )
            if delivery == "failed" and mine:
                move = "me"  # my letter never reached them: sending it again is my move
            parts: tuple[dict[str, Any], ...] = ()
            state = _state_of(last)
            if first.recipients and first.sender == self.me.platform:  # a fan-out I opened: per counterpart
                parts = self._parts(thread, ids)
                if len(parts) > 1:
                    going = [p for p in parts if p["state"] != "closed"]
                    if going and last.type == "close":  # one part closed, another still going
                        state = str(max(going, key=lambda p: str(p["last_id"]))["state"])
                    moves = [str(p["whose_move"]) for p in parts]
                    waiting = [m for m in dict.fromkeys(moves) if m != "nobody"]
                    move = "me" if "me" in moves else ",".join(waiting) or "nobody"
                    other = ",".join(str(p["with"]) for p in parts)
            rows.append(
                ThreadStatus(
                    thread=thread,
                    subject=first.subject,
                    state=state,
                    last_type=last.type,
                    whose_move=move,
                    letters=len(ids),
                    with_=other,
                    last_id=last.id,
                    undeliverable=any(self.read.annotations(i).get("undeliverable") for i in ids),
                    delivery=delivery,
                    delivery_detail=delivery_detail,
                    recipients=parts if len(parts) > 1 else (),
                    delivery_id=delivery_id,
                    opened_ms=ulid_ms(first.id),
                    moved_ms=ulid_ms(last.id),
                    outcome=last.outcome or "",
                )
            )
        return rows

    def closed_threads(self) -> int:
        """Does ``AgentMail.closed_threads``."""
        return self.read.closed_threads()

    @staticmethod
    def _whose_move(last: Letter, other: str, mine: bool | None = None) -> str:
        """Whose move it is after ``last`` between this platform and ``other``."""
        return whose_move(last.type, last.sender != other if mine is None else mine, other)

    def _parts(self, thread: str, ids: list[str]) -> tuple[dict[str, Any], ...]:
        """A fan-out thread, one row per counterpart: its part (its letters, and mine to it)."""
        letters = []
        for letter_id in ids:
            state = self.read.locate(letter_id)
            if state not in (None, "quarantine"):
                letters.append(self.read.letter(letter_id, state))
        rows = []
        for party in self.box.parties(letters):
            own = [x for x in letters if party in self.box.counterparts(x)]
            last = max(own, key=lambda x: (x.depth, x.id))
            mine = last.sender == self.me.platform
            move = self._whose_move(last, party, mine)
            if mine and last.state == "failed":
                move = "me"
            rows.append({"with": party, "whose_move": move, "state": _state_of(last),
                         "last_type": last.type, "last_id": last.id})  # fmt: skip
        return tuple(rows)

    def _delivery(self, ids: list[str], undelivered: dict[str, set[str]], mine: bool) -> tuple[str, str, str]:
        """How far my letters in a thread got: "queued" (in the outbox), "failed" (refused, with
        the server's words), else "sent"; "received" when the thread holds none of mine; with
        the detail and the id of the letter it is about.
        ``undelivered``: the ids in outbox/ and failed/, listed once per ``status``."""
        for state, label, key in (("held", "held", "held_reason"), ("outbox", "queued", "queued_reason"),
                                  ("failed", "failed", "failed_reason")):  # fmt: skip
            for letter_id in ids:
                if letter_id in undelivered[state]:
                    return label, str(self.read.letter(letter_id, state).extra.get(key) or ""), letter_id
        return ("sent" if mine else "received"), "", ""

    def _filed(self, ids: Iterable[str]) -> Letter | None:
        """The first letter of ``ids`` that is filed (a crash can leave a listed id absent)."""
        for letter_id in ids:
            state = self.read.locate(letter_id)
            if state not in (None, "quarantine"):
                return self.read.letter(letter_id, state)
        return None


def _state_of(last: Letter) -> str:
    """The lifecycle word for a thread whose last letter is ``last``: a verify-result that says
    ``still-broken`` is "still broken" (the fixer's move again); confirmed or unstated, "verified"."""
    if last.type == "verify-result" and last.outcome == "still-broken":
        return "still broken"
    return state_after(last.type)
