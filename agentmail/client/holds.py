"""Held letters: waiting for a person, announced to the approvers, released or rejected (DESIGN §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    AgentmailError,
    BadInput,
    NotFound,
    Refused,
)
from ..model import (
    Letter,
)
from ..spool.filed import Filed
from ..text import one_line
from . import guard_changes
from .mailbox import Stage
from .outbox import envelope_of

if TYPE_CHECKING:
    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from .mailbox import Mailbox
    from .outbox import Outbox
    from .to_people import ToPeople


class Holds(Stage):
    """Letters that wait for a person: held, announced to the approvers, released or rejected (by the operator's key or an approver's answer)."""

    def __init__(self, box: Mailbox, outbox: Outbox, people: ToPeople) -> None:
        super().__init__(box)
        self.outbox = outbox
        self.people = people

    def _mails_people(self) -> bool:
        """``Transport.mails_people`` of this bus, without opening it (a held letter is bound to
        its envelope before anything is submitted, credentials unread)."""
        from ..transport import transport_class

        return transport_class(self.registry).mails_people

    def file(self, letter: Letter, raw: bytes, reason: str) -> Letter:
        """File a signed letter in held/ with why it waits for a person, and tell the approvers."""
        from ..people import approval

        self.spool.ensure()
        # Before the letter: never a held letter without why, nor without the digest of exactly
        # what would leave (its bytes and every RCPT TO), which any approval is bound to.
        digest = approval.digest_of(raw, envelope_of(letter, self._mails_people()))
        self.spool.write.annotate(letter.id, held_reason=reason, held_digest=digest)
        stored = self.spool.write.store("held", letter, raw, extra=letter.extra)
        self.announce_held(self.box.show(stored.id), reason)
        return self.box.show(stored.id)

    def held(self) -> list[Letter]:
        """Does ``AgentMail.held``."""
        return self.spool.read.letters("held")

    def approve(self, letter_id: str | Letter, *, key_file: str | None = None) -> Letter:
        """``AgentMail.approve``: the operator's key checked against the pin, then the letter released and sent."""
        from ..people import approval

        approval.check_key(self.registry, key_file)
        return self.release(self.box.id_of(letter_id), "the operator's approval key")

    def release(self, letter_id: str, approved_by: str) -> Letter:
        """Held → outbox with one rename, then sent: a crash after the rename leaves it in the
        outbox (the next flush sends it once); a second release finds it no longer held.
        Refused unless the letter is still exactly what was announced (``bound``)."""
        self.bound(letter_id)
        if not self.box.move(letter_id, "held", "outbox"):
            state = self.spool.read.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        self.spool.write.annotate(letter_id, approved="true", approved_by=approved_by)
        return self.outbox.send_now(self.spool.read.letter(letter_id, "outbox"))[0]

    def bound(self, letter_id: str) -> None:
        """The one check before any release (the operator's key or an approver's answer): the held
        letter's bytes and envelope still hash to the digest recorded when it was held and
        announced, and no two answers disagree. Refused otherwise: the letter stays held."""
        from ..people import approval

        if self.spool.read.locate(letter_id) != "held":
            state = self.spool.read.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        letter = self.spool.read.letter(letter_id, "held")
        if letter.extra.get("answers_disagree"):
            raise Refused(f"letter {letter_id} is not sent: {letter.extra['answers_disagree']}")
        try:
            raw = self.spool.read.path("held", letter_id).read_bytes()
        except OSError:
            raise NotFound(f"letter {letter_id} is not held (its file is gone)") from None
        bound = letter.extra.get("held_digest")
        now = approval.digest_of(raw, envelope_of(letter, self._mails_people()))
        if not bound:
            raise Refused(f"letter {letter_id} was held without a digest of what would leave, so no approval "
                          f"can be bound to it: 'agentmail reject {letter_id} -r ...' and send it again")  # fmt: skip
        if now != bound:
            raise Refused(f"letter {letter_id} changed after it was announced (its bytes or recipients are not "
                          f"the ones approved): not sent; 'agentmail reject {letter_id} -r ...' and send it again")  # fmt: skip

    def announce_held(self, letter: Letter, reason: str) -> None:
        """Mail the platform's approvers that ``letter`` waits (never raises: the letter stays
        held whatever happens to its announcement; a failure is recorded on it)."""
        from ..people import approval

        to = approval.approvers(self.registry, self.me.platform)
        if not to:
            return
        try:
            held = self.spool.read.path("held", letter.id).read_bytes()
            envelope = envelope_of(letter, self._mails_people())
            message_id, raw = approval.announcement(
                self.registry, self.home, self.me.platform, letter, reason, held, envelope
            )
        except (AgentmailError, OSError) as exc:  # e.g. the platform's key cannot sign it
            failed = str(exc) or type(exc).__name__
            self.spool.write.annotate(letter.id, announce_failed=failed)
            return
        self.people.announce_held(letter.id, message_id, raw, to)

    def every_approver(self) -> tuple[str, ...]:
        """Every approver of every platform of the bus (a change of the guards is theirs to decide)."""
        from ..people import approval

        return approval.every_approver(self.registry)

    def deciders(self, platform: str | None) -> tuple[str, ...]:
        """Who decides a change of ``platform``'s guards: its approvers, else this platform's,
        else every approver of the bus."""
        from ..people import approval

        for name in (platform, self.me.platform):
            found = approval.approvers(self.registry, name) if name else ()
            if found:
                return found
        return approval.every_approver(self.registry)

    def approvers_by_platform(self) -> dict[str, tuple[str, ...]]:
        """Every platform with approvers, and its approvers: who must each agree to a change of
        the whole bus's guards (one of each platform's)."""
        from ..people import approval

        found = {name: approval.approvers(self.registry, name) for name in sorted(self.registry.platforms)}
        return {name: who for name, who in found.items() if who}

    def change_request(self, change: str, effect: str, to: tuple[str, ...]) -> tuple[str, bytes]:
        """The Message-ID and signed bytes of the announcement asking ``to`` for ``change``."""
        from ..people import approval

        return approval.change_request(self.registry, self.home, self.me.platform, change, effect, to)

    def decide_by_mail(self, filed: Filed | list[str]) -> None:
        """Act on approvers' answers among the letters just filed, and among the unread ones a
        crash kept from being acted on: a person's letter answering a held letter's
        announcement, from one of this platform's approvers (authenticated as any person's
        letter: DESIGN §5), releases or rejects it. Anything else decides nothing and is
        recorded on the letter (``approval_ignored``)."""
        held = {x.extra.get("announced"): x for x in self.held() if x.extra.get("announced")}
        held_by_id = {x.id: x for x in held.values()}
        changes = guard_changes.pending(self.spool)  # changes of the guards asked of every approver
        if not held and not changes:
            return  # before the import: a waiting CLI process would load it after the wake
        from ..people import approval

        accepted = filed.ids if isinstance(filed, Filed) else filed  # listed only while a letter is held
        allowed = approval.approvers(self.registry, self.me.platform)
        everyone = approval.every_approver(self.registry)
        # An answer filed by a sync that died before acting on it is still unread and carries no
        # approval_ignored: it is taken up now (only while a held letter waits for one).
        fresh = set(accepted)
        waiting = [
            i for i in self.spool.read.ids_of_type("unread", "human") if i not in fresh
        ]  # only a person's decides
        answers: dict[str, list[tuple[str, str, str, str]]] = {}  # held id: (answer id, who, verb, reason)
        for letter_id in [*accepted, *waiting]:
            letter = self.spool.read.letter(letter_id)
            target = held.get(letter.in_reply_to or "")
            change = changes.get(letter.in_reply_to or "")
            if letter.type != "human" or letter.extra.get("person") != letter.sender_address:
                continue
            if target is None and change is None:
                continue
            if letter_id not in accepted and "approval_ignored" in self.spool.read.annotations(letter_id):
                continue  # weighed before: it decided nothing (a person's letter's extra is its own record)
            decided = approval.decision(letter.body)
            if target is None and change is not None:
                deciding = guard_changes.deciders(change)
                allowed_here = everyone if deciding is None else deciding
            else:
                allowed_here = allowed
            if letter.sender_address not in allowed_here:
                self.spool.write.annotate(
                    letter_id, approval_ignored=f"{letter.sender_address} does not approve {self.me.platform}"
                )
            elif decided is None:
                self.spool.write.annotate(
                    letter_id, approval_ignored='the first word is neither "approve" nor "reject"'
                )
            elif target is not None:
                answers.setdefault(target.id, []).append((letter_id, letter.sender_address, *decided))
            elif change is not None:
                guard_changes.record(change, letter.sender_address, *decided)
                self.box.move(letter_id, "unread", "read")
        for target_id, given in answers.items():
            self._decide(held_by_id[target_id], given)
            for letter_id, *_ in given:
                self.box.move(letter_id, "unread", "read")  # the answer was acted on: it needs nothing from the agent

    def _decide(self, target: Letter, given: list[tuple[str, str, str, str]]) -> None:
        """Act on the approvers' answers to one held letter, weighed together with the ones
        recorded before: all "approve" releases it, all "reject" drops it; answers that disagree
        never release it, and every one is kept on the letter (``answers``) for ``held``."""
        said = [line for line in (target.extra.get("answers") or "").splitlines() if line]
        said += [f"{who} {verb}" + (f": {why}" if why else "") for _, who, verb, why in given]
        verbs = {line.split(" ", 2)[1].rstrip(":") for line in said}
        if len(verbs) > 1:
            self.spool.write.annotate(target.id, answers="\n".join(said), answers_disagree=(
                "the approvers disagree (" + "; ".join(said) + "): it is never sent by mail; "
                f"'agentmail reject {target.id} -r ...' and send it again if it should go"))  # fmt: skip
            return
        _, who, verb, why = given[0]
        if verb == "approve":
            try:
                self.release(target.id, who)
            except NotFound:
                for letter_id, *_ in given:
                    self.spool.write.annotate(letter_id, approval_ignored=f"{target.id} is no longer held")
            except Refused as exc:
                for letter_id, *_ in given:
                    self.spool.write.annotate(letter_id, approval_ignored=exc.reason)
            except AgentmailError:
                pass  # released: it waits in the outbox and the next flush sends it (once)
        else:
            self.reject_by(target.id, why, who)

    def reject(self, letter_id: str | Letter, reason: str) -> Letter:
        """Does ``AgentMail.reject``."""
        letter_id = self.box.id_of(letter_id)
        reason = one_line(reason or "").strip()
        if not reason:
            raise BadInput("say why (-r REASON): the agent reads it")
        return self.reject_by(letter_id, reason, "")

    def reject_by(self, letter_id: str, reason: str, by: str) -> Letter:
        if self.spool.read.locate(letter_id) != "held":
            state = self.spool.read.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        who = f"by {by}" if by else "by a person"
        self.spool.write.annotate(letter_id, rejected=reason, failed_reason=f"rejected {who}: {reason}")
        if not self.box.move(letter_id, "held", "failed"):
            raise NotFound(f"letter {letter_id} is not held")
        return self.box.show(letter_id)
