"""Held letters: waiting for a person, announced to the approvers, released or rejected (issue 26, DESIGN §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    AgentmailError,
    BadInput,
    NotFound,
)
from ..model import (
    Letter,
)
from ..spool.filed import Filed
from ..text import one_line
from .mailbox import Stage

if TYPE_CHECKING:
    # at run time imported where used: a read (inbox --no-sync) opens no transport (issue 11)
    from .mailbox import Mailbox
    from .outbox import Outbox


class Holds(Stage):
    """Letters that wait for a person: held, announced to the approvers, released or rejected (by the operator's key or an approver's answer)."""

    def __init__(self, box: Mailbox, outbox: Outbox) -> None:
        super().__init__(box)
        self.outbox = outbox

    def file(self, letter: Letter, raw: bytes, reason: str) -> Letter:
        """File a signed letter in held/ with why it waits for a person, and tell the approvers."""
        self.spool.ensure()
        self.spool.annotate(letter.id, held_reason=reason)  # before the letter: never a held letter without why
        stored = self.spool.store("held", letter, raw, extra=letter.extra)
        self.announce_held(self.box.show(stored.id), reason)
        return self.box.show(stored.id)

    def held(self) -> list[Letter]:
        """Letters waiting for a person's approval, oldest first (never sent until approved)."""
        return self.spool.letters("held")

    def approve(self, letter_id: str | Letter, *, key_file: str | None = None) -> Letter:
        """``AgentMail.approve``: the operator's key checked against the pin, then the letter released and sent."""
        from ..people import approval

        approval.check_key(self.registry, key_file)
        return self.release(self.box.id_of(letter_id), "the operator's approval key")

    def release(self, letter_id: str, approved_by: str) -> Letter:
        """Held → outbox with one rename, then sent: a crash after the rename leaves it in the
        outbox (the next flush sends it once); a second release finds it no longer held."""
        if not self.box.move(letter_id, "held", "outbox"):
            state = self.spool.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        self.spool.annotate(letter_id, approved="true", approved_by=approved_by)
        return self.outbox.send_now(self.spool.letter(letter_id, "outbox"))

    def announce_held(self, letter: Letter, reason: str) -> None:
        """Mail the platform's approvers that ``letter`` waits (never raises: the letter stays
        held whatever happens to its announcement; a failure is recorded on it)."""
        from ..people import approval

        to = approval.approvers(self.registry, self.me.platform)
        if not to:
            return
        try:
            message_id, raw = approval.announcement(self.registry, self.home, self.me.platform, letter, reason)
        except AgentmailError as exc:  # e.g. the platform's key cannot sign it
            failed = str(exc)
        else:
            failed = self.mail_people(f"{letter.id}.announcement", raw, to)
        if failed:
            self.spool.annotate(letter.id, announce_failed=failed)
        else:
            self.spool.annotate(letter.id, announced=message_id)

    def mail_people(self, key: str, raw: bytes, to: tuple[str, ...]) -> str:
        """Send an automatic letter to people; "" when it left, else why not. On the local
        transport a person's mailbox is the Maildir ``postoffice/<address>/`` (no platform
        name holds an ``@``), which a person's mail client can read."""
        from ..transport.base import Envelope, Outgoing

        try:
            if self.registry.bus.transport == "local":
                from ..transport.local import deliver

                for address in to:
                    deliver(self.home / "postoffice" / address, raw)
                return ""
            (result,) = self.transport.submit([Outgoing(key, raw, Envelope(self.platform.address, to))])
            return "" if result.status == "sent" else result.detail or result.status
        except (AgentmailError, OSError) as exc:
            return str(exc) or type(exc).__name__

    def announce_hold_change(self, before: list[str], after: list[str]) -> str:
        """Mail every approver that the bus's hold rule changed; "" when it left (or nobody
        approves), else why not."""
        from ..people import approval

        to = approval.every_approver(self.registry)
        if not to:
            return ""
        try:
            _, raw = approval.hold_change(self.registry, self.home, self.me.platform, before, after)
        except AgentmailError as exc:
            return str(exc)
        return self.mail_people("hold-change", raw, to)

    def decide_by_mail(self, filed: Filed | list[str]) -> None:
        """Act on approvers' answers among the letters just filed, and among the unread ones a
        crash kept from being acted on: a person's letter answering a held letter's
        announcement, from one of this platform's approvers (authenticated as any person's
        letter: DESIGN §5), releases or rejects it. Anything else decides nothing and is
        recorded on the letter (``approval_ignored``)."""
        held = {x.extra.get("announced"): x for x in self.held() if x.extra.get("announced")}
        if not held:
            return  # before the import: a waiting CLI process would load it after the wake (~0.4 ms)
        from ..people import approval

        accepted = filed.ids if isinstance(filed, Filed) else filed  # listed only while a letter is held
        allowed = approval.approvers(self.registry, self.me.platform)
        # An answer filed by a sync that died before acting on it is still unread and carries no
        # approval_ignored: it is taken up now (only while a held letter waits for one).
        fresh = set(accepted)
        waiting = [i for i in self.spool.ids_of_type("unread", "human") if i not in fresh]  # only a person's decides
        for letter_id in [*accepted, *waiting]:
            letter = self.spool.letter(letter_id)
            target = held.get(letter.in_reply_to or "")
            if letter.type != "human" or letter.extra.get("person") != letter.sender_address or target is None:
                continue
            if letter_id not in accepted and "approval_ignored" in letter.extra:
                continue  # weighed before: it decided nothing
            decided = approval.decision(letter.body)
            if letter.sender_address not in allowed:
                self.spool.annotate(
                    letter_id, approval_ignored=f"{letter.sender_address} does not approve {self.me.platform}"
                )
            elif decided is None:
                self.spool.annotate(letter_id, approval_ignored='the first word is neither "approve" nor "reject"')
            elif decided[0] == "approve":
                try:
                    self.release(target.id, letter.sender_address)
                except NotFound:
                    self.spool.annotate(letter_id, approval_ignored=f"{target.id} is no longer held")
                except AgentmailError:
                    pass  # released: it waits in the outbox and the next flush sends it (once)
            else:
                self.reject_by(target.id, decided[1], letter.sender_address)
            if decided is not None and letter.sender_address in allowed:
                self.box.move(letter_id, "unread", "read")  # the answer was acted on: it needs nothing from the agent

    def reject(self, letter_id: str | Letter, reason: str) -> Letter:
        """A held letter never leaves: it moves to failed/ with the reason (``sent`` shows it
        to the agent); a rejected reply frees its claim on the letter. Anyone may drop a
        letter that has not left (the agent too): it releases nothing."""
        letter_id = self.box.id_of(letter_id)
        reason = one_line(reason or "").strip()
        if not reason:
            raise BadInput("say why (-r REASON): the agent reads it")
        return self.reject_by(letter_id, reason, "")

    def reject_by(self, letter_id: str, reason: str, by: str) -> Letter:
        if self.spool.locate(letter_id) != "held":
            state = self.spool.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        who = f"by {by}" if by else "by a person"
        self.spool.annotate(letter_id, rejected=reason, failed_reason=f"rejected {who}: {reason}")
        if not self.box.move(letter_id, "held", "failed"):
            raise NotFound(f"letter {letter_id} is not held")
        return self.box.show(letter_id)
