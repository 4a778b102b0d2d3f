"""Sending: new threads, replies, follow-ups, notes — each through the one guard, claimed once per platform (DESIGN §6)."""

from __future__ import annotations

import datetime
import time
from typing import TYPE_CHECKING

from .._value import Frozen, field
from ..errors import (
    AgentmailError,
    BadInput,
    ConfigError,
    NotFound,
    Refused,
)
from ..model import (
    Letter,
    check_name,
    check_outcome,
    check_sendable,
    check_severity,
    check_thread,
    check_type,
    reply_subject,
    thread_id,
)
from ..protocol import default_reply
from ..spool.layout import reply_key
from ..stages.compose import NEW_THREAD, Draft
from . import sibling_letters
from .mailbox import Stage

if TYPE_CHECKING:
    from ..letter.attach import Attachment
    from ..stages.guards import Outbound
    from ..transport import Claimed, Transport

    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from .holds import Holds
    from .mailbox import Mailbox
    from .outbox import Outbox
    from .receiver import Receiver
    from .threads import Threads


MAX_REFERENCES = 20


class Request(Frozen):
    """What a caller asked to write, as given to ``AgentMail.send``, ``reply``, ``follow_up`` or
    ``note``: built once by the facade and handed down whole, each path reading what it needs
    (``to``/``subject``/``severity``/``ref``/``thread`` open or continue a thread, ``to_agent``
    and ``new_agent`` are a note's; ``type`` None: a reply's default for its parent)."""

    body: str
    type: str | None = None
    to: str | tuple[str, ...] = ()
    subject: str = ""
    severity: str | None = None
    ref: str | None = None
    thread: str | None = None
    force: bool = False
    hold: bool = False
    attachments: tuple[Attachment, ...] = ()
    outcome: str | None = None
    to_agent: str | None = None
    new_agent: bool = True


class Sent(Letter):
    """What a send, reply, follow-up or note did: the letter as it is now (a ``Letter``), the
    ``advice`` for an opener (its gaps: ``guards.opener_warnings``), the ``warnings`` for its
    writer (a thread that is with another platform than asked; a reply claimed on this machine
    only, or not yet on the server, and why) and ``flushed``: how many letters queued earlier
    left with it. Those three are told, not part of the letter: a ``Sent`` equals the ``Letter``
    it is (``show`` of its id), and hashes as it."""

    advice: tuple[str, ...] = field(default=(), compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)
    flushed: int = field(default=0, compare=False)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Letter):
            return self._values(self._compare) == other._values(other._compare)
        return NotImplemented

    __hash__ = Letter.__hash__

    @classmethod
    def of(cls, letter: Letter, flushed: int = 0, *, advice: tuple[str, ...] = (),
           warnings: tuple[str, ...] = ()) -> Sent:  # fmt: skip
        """``letter`` as ``outbox.send_now`` answered it (with its ``flushed``), and what its writer is told."""
        fields = {name: getattr(letter, name) for name in Letter._fields}
        return cls(**fields, advice=advice, warnings=warnings, flushed=flushed)

    @property
    def notices(self) -> list[str]:
        """The advice and warnings as one list (MCP's ``warnings``): each piece of advice
        prefixed ``opener: ``, then the warnings."""
        return [*(f"opener: {advice}" for advice in self.advice), *self.warnings]


class Sender(Stage):
    """What an agent sends: new threads, replies, follow-ups and notes, each through the one guard, claimed once per platform, then handed to the outbox."""

    def __init__(self, box: Mailbox, outbox: Outbox, holds: Holds, threads: Threads, receiver: Receiver) -> None:
        super().__init__(box)
        self.outbox, self.holds, self.threads, self.receiver = outbox, holds, threads, receiver
        self._refusals: dict[str, str] = {}
        self.last_filed: str | None = None  # the id of the letter handed to be filed last

    def _file_outgoing(self, letter: Letter, raw: bytes, held: str | None) -> Letter:
        """File a signed letter in the outbox, or in held/ with why it waits for a person."""
        self.last_filed = letter.id  # before: an interruption while filing finds it, or finds it not filed
        return self.outbox.file(letter, raw) if held is None else self.holds.file(letter, raw, held)

    def send(self, req: Request) -> Sent:
        """Does ``AgentMail.send``: a new thread, or (``req.thread``) a follow-up in one."""
        from ..config.recipients import resolve
        from ..stages import guards

        type, body = req.type or "report", req.body
        _check_body(body, req.force)
        check_outcome(req.outcome, type)  # ``outcome``: a verify-result's (model.OUTCOMES)
        if req.thread:
            return self._send_in_thread(req.replace(type=type), thread_id(req.thread))
        check_sendable(type)
        check_severity(req.severity)
        names = resolve(self.registry, req.to, self.me.platform)
        recipient, others = self.registry.get(names[0]), names[1:]
        # Counting and filing under one platform-wide lock: two sends at the quota's edge (two
        # agents, two processes) never both see room for one more thread.
        with self.spool.platform_locked("quota"):
            opened, quota, frees = self._quota()
            self._check(guards.Outbound(type, body, self.me.platform, force=req.force, opened_last_hour=opened,
                                        quota=quota, quota_frees=frees, attachments=req.attachments,
                                        subject=req.subject, ref=req.ref or ""))  # fmt: skip
            # Advice is for reports that open a thread, not for a one-line question.
            one_liner = type == "question" and len(body.strip().splitlines()) <= 1
            advice = () if one_liner else tuple(guards.opener_warnings(type, body))
            letter, raw = self.box.compose(
                Draft(recipient.name, type, NEW_THREAD, req.subject, body, severity=req.severity, ref=req.ref,
                      also_to=others, attachments=req.attachments, outcome=req.outcome)
            )  # fmt: skip
            stored = self._file_outgoing(letter, raw, self._hold(letter, req.hold))
        return Sent.of(*self.outbox.send_now(stored, raw), advice=advice)

    def _send_in_thread(self, req: Request, thread: str) -> Sent:
        """``send --thread``: a follow-up. In a fan-out thread this platform opened, ``req.to``
        picks the counterparts (one letter to those whose part of the thread stands at the same letter)."""
        check_thread(thread)
        try:
            parties = self.box.parties(self.threads.thread(thread))  # synced: the counterparts' latest letters count
        except NotFound:
            parties = []  # follow_up says what is wrong
        if len(parties) > 1:
            if req.outcome is not None:
                raise BadInput("an outcome is for a verify-result between two platforms, not a fan-out follow-up")
            return self._fan_out_follow_up(req, thread, parties)
        sent = self.follow_up(thread, req)
        wanted = ",".join(req.to) if not isinstance(req.to, str) else req.to
        if sent.to == wanted:
            return sent
        return sent.replace(warnings=(f"thread {thread} is with {sent.to}; sent there", *sent.warnings))

    def _fan_out_follow_up(self, req: Request, thread: str, parties: list[str]) -> Sent:
        """A follow-up in a fan-out thread: the guards judge each counterpart's part of the thread
        (its letters and mine to it) on its own, as they would a two-party thread."""
        from ..config.recipients import resolve
        from ..stages import guards

        type, body = req.type or "report", req.body
        check_sendable(type)
        try:
            chosen = resolve(self.registry, req.to, self.me.platform)
        except (BadInput, ConfigError):
            chosen = ()  # said below, with the platforms the thread is with
        strangers = [n for n in chosen if n not in parties]
        if not chosen or strangers:
            raise BadInput(f"thread {thread} is with {', '.join(parties)}; name one or several of them "
                           f"(e.g. 'send {parties[0]} --thread {thread}')")  # fmt: skip
        letters = self.threads.thread(thread, sync=False)
        lasts: dict[str, Letter] = {}
        for name in chosen:
            last = self._last_of_platform_thread(thread, letters, party=name)
            answered = self.spool.home_claims.replied_by(_fan_out_key(last, name)) or self._answered_to(
                thread, last, name
            )
            reason = guards.refusal(guards.Outbound(type, body, self.me.platform, parent=last, follow_up=True,
                                                    force=req.force, answered_by=answered, depth=last.depth + 1,
                                                    attachments=req.attachments,
                                                    subject=reply_subject(letters[0].subject)))  # fmt: skip
            if reason is not None:
                raise Refused(f"{name}: {reason}")
            lasts[name] = last
        if len({x.id for x in lasts.values()}) > 1:
            stands = ", ".join(f"{n} at {x.id}" for n, x in lasts.items())
            raise BadInput(f"thread {thread} stands at different letters ({stands}); follow up with each on its own")
        last = next(iter(lasts.values()))
        composed = self.box.compose(Draft(chosen[0], type, thread, reply_subject(letters[0].subject), body,
                                       in_reply_to=last.message_id, references=_references(last),
                                       also_to=chosen[1:], attachments=req.attachments))  # fmt: skip
        letter, raw = composed
        held = self._hold(letter, req.hold)
        keys = [_fan_out_key(last, n) for n in chosen]
        stored, warnings = self._claim_all(keys, letter, raw, held)
        if stored is None:
            raise Refused(f"letter {last.id} was already followed up for one of {', '.join(chosen)} meanwhile")
        return Sent.of(*self.outbox.send_now(stored, raw), warnings=warnings)

    def _claim_all(self, keys: list[str], letter: Letter, raw: bytes, held: str | None,
                   taken: tuple[str, ...] = ()) -> tuple[Letter | None, tuple[str, ...]]:  # fmt: skip
        """Claim every key (one per counterpart) and file the letter inside all claims; None when
        another mailbox of this platform holds one of them (nothing is filed then). With what the
        claim on the server could not do (``Sent.warnings``)."""
        if not keys:  # every per-home claim is ours: now the one on the server
            claimed = [(k.partition(" ")[0], k) for k in taken]
            got = self._server_claim(letter.id, claimed)
            if got.holder is not None:
                return None, ()
            return self._file_outgoing(letter, raw, held), _said(got.warning)
        with self.spool.home_claims.claim_reply(keys[0], letter.id) as holder:
            if holder is not None:
                return None, ()
            return self._claim_all(keys[1:], letter, raw, held, (*taken, keys[0]))

    def _server_claim(self, letter_id: str, claimed: list[tuple[str, str]]) -> Claimed:
        """The claim on the server (spool/server_claims.py): ``holder`` None when ours, else who answered."""
        from ..spool import server_claims

        return server_claims.claim(self.spool, self.transport, letter_id, claimed)

    def _answered_to(self, thread: str, parent: Letter, party: str) -> str | None:
        """Did a mailbox of this platform already send ``party`` a letter after ``parent``? (From
        the letter files: the claim index is a cache.)"""
        for spool in (self.spool, *self.spool.siblings()):
            for letter_id in spool.read.thread_ids(thread):
                state = spool.read.locate(letter_id)
                if state in ("outbox", "held", "sent"):
                    sent = spool.read.letter(letter_id, state)
                    if sent.in_reply_to == parent.message_id and party in self.box.counterparts(sent):
                        return f"{spool.mailbox} {letter_id}"
        return None

    def note(self, req: Request) -> Sent:
        """Does ``AgentMail.note``; the agents of the platform known from agent_names.py."""
        from ..stages import guards

        body, to_agent, force = req.body, req.to_agent, req.force
        _check_body(body, force)
        if to_agent is not None and to_agent == self.me.agent:
            raise BadInput(f"a note to {self.me.mailbox} is to yourself and would be read by nobody else; "
                           "name a sibling (agentmail whoami lists them) or leave --to out")  # fmt: skip
        if to_agent is not None and not req.new_agent:
            from .agent_names import check_known, known_agents

            check_known(to_agent, known_agents(self.home, self.me.platform, self.spool, self.me.agent))
        self._check(
            guards.Outbound("note", body, self.me.platform, force=force, attachments=req.attachments,
                            subject=req.subject)
        )  # fmt: skip
        if to_agent is not None and to_agent != self.me.agent:
            self.receiver.register_sibling(check_name("agent", to_agent))
        composed = self.box.compose(Draft(self.platform.name, "note", NEW_THREAD, req.subject, body,
                                       to_agent=to_agent, attachments=req.attachments))  # fmt: skip
        # A note copies the platform's own followers: a hold rule naming one holds it too.
        letter, raw = composed
        stored = self._file_outgoing(letter, raw, held := self._hold(letter, False))
        return Sent.of(stored) if held else Sent.of(*self.outbox.send_now(stored, raw))

    def reply(self, to: str | Letter, req: Request, *, raise_refused: bool = False) -> Sent | None:
        """Does ``AgentMail.reply``: the one guard, the per-home then the server claim, the file, the
        submission."""
        sent = self._reply(to, req)
        if sent is None and raise_refused:
            raise Refused(self.why_refused(to) or "refused")
        return sent

    def _reply(self, to: str | Letter, req: Request) -> Sent | None:
        _check_body(req.body, req.force)
        parent_id = self.box.id_of(to)
        parent = self.spool.read.letter(parent_id)
        letter_type = check_type(req.type or default_reply(parent.type))
        check_outcome(req.outcome, letter_type)
        reason = self._refusal(
            parent, req.replace(type=letter_type), subject=reply_subject(parent.subject or "(no subject)")
        )
        recipient = self.registry.platforms.get(parent.sender)
        if reason is None and recipient is None:
            reason = f"the sender of {parent_id} is no longer in the registry"
        if reason is None and parent.extra.get("person") and parent.sender == self.me.platform:
            reason = (f"letter {parent_id} is from {parent.extra['person']}, a person of {parent.sender} itself: "
                      "there is no other platform to answer; write to them from a mail client")  # fmt: skip
        if reason is not None:
            self._refusals[parent_id] = reason
            return None
        assert recipient is not None
        person = str(parent.extra.get("person") or "")  # a person's letter: they read the answer too
        composed = self.box.compose(Draft(recipient.name, letter_type, parent.thread, reply_subject(parent.subject or "(no subject)"),
                                       req.body, in_reply_to=parent.message_id, references=_references(parent),
                                       attachments=req.attachments, cc=(person,) if person else (),
                                       outcome=req.outcome))  # fmt: skip
        stored, warnings = self._file_answer(parent, composed, self._hold(composed[0], req.hold))
        if stored is None:
            return None
        self._refusals.pop(parent_id, None)
        self.box.move(parent_id, "unread", "read")
        return Sent.of(*self.outbox.send_now(stored, composed[1]), warnings=warnings)

    def follow_up(self, thread: str, req: Request) -> Sent:
        """Does ``AgentMail.follow_up`` (``req.type`` None: a report's)."""
        type, body = req.type or "report", req.body
        _check_body(body, req.force)
        check_sendable(type)
        check_outcome(req.outcome, type)
        thread = thread_id(thread)
        letters = self.threads.thread(thread)
        last = self._last_of_platform_thread(thread, letters)
        # After the other side's ack of my own letter, the reporter may add evidence or withdraw
        # (protocol.AFTER_ACK): the letter continues my acknowledged letter, never answers the ack.
        acked = self._acked_own(last, letters)
        reason = self._refusal(last, req.replace(type=type), follow_up=True, acked=acked,
                               subject=reply_subject(letters[0].subject))  # fmt: skip
        if reason is not None:
            raise Refused(reason)
        counterpart = next((x.to if x.sender == self.me.platform else x.sender for x in letters), "")
        recipient = self.registry.get(counterpart)
        answered = acked or last
        composed = self.box.compose(Draft(recipient.name, type, thread, reply_subject(letters[0].subject), body,
                                       in_reply_to=answered.message_id, references=_references(last),
                                       attachments=req.attachments, outcome=req.outcome))  # fmt: skip
        stored, warnings = self._file_answer(answered, composed, self._hold(composed[0], req.hold))
        if stored is None:
            raise Refused(self._refusals.pop(answered.id, "refused"))
        return Sent.of(*self.outbox.send_now(stored, composed[1]), warnings=warnings)

    def why_refused(self, letter: str | Letter) -> str | None:
        """Does ``AgentMail.why_refused``."""
        letter_id = self.box.id_of(letter)
        if letter_id in self._refusals:
            return self._refusals[letter_id]
        parent = self.spool.read.letter(letter_id)
        return self._refusal(parent, Request("", default_reply(parent.type), force=True))

    def _refusal(self, parent: Letter, req: Request, *, follow_up: bool = False, acked: Letter | None = None,
                 subject: str = "") -> str | None:  # fmt: skip
        """The one guard, with the facts it needs gathered the same way for every path.
        ``req.type``: the letter's type, settled; ``acked``: this platform's own letter that
        ``parent`` (the other side's ack) answers."""
        from ..stages import guards

        return guards.refusal(
            guards.Outbound(
                req.type or "",
                req.body,
                self.me.platform,
                parent=parent,
                follow_up=follow_up,
                force=req.force,
                answered_by=self._answered_by(acked or parent),
                depth=parent.depth + 1,
                attachments=req.attachments,
                acks_mine=acked is not None,
                subject=subject,
            )
        )

    def _answered_by(self, parent: Letter) -> str | None:
        """Who of this platform answered ``parent``: a claim here, or a letter a sibling sent from
        another machine (client/sibling_letters.py), even where no claim on the server says so."""
        return self.spool.home_claims.replied_by(
            reply_key(parent.message_id, parent.sender)
        ) or sibling_letters.answered_by(self.box, parent)

    def _acked_own(self, last: Letter, letters: list[Letter]) -> Letter | None:
        """This platform's letter that ``last`` acknowledges, when ``last`` is the other side's ack."""
        if last.type != "ack" or last.sender == self.me.platform or not last.in_reply_to:
            return None
        return next((x for x in letters if x.message_id == last.in_reply_to and x.sender == self.me.platform), None)

    def _check(self, out: Outbound) -> None:
        from ..stages import guards

        reason = guards.refusal(out)
        if reason:
            raise Refused(reason)

    def _last_of_platform_thread(self, thread: str, letters: list[Letter], party: str | None = None) -> Letter:
        """The thread's last letter as this *platform* sees it: the letters here, and those the
        platform's other agents sent in it. Last = deepest (ties: the latest filed). ``party``:
        only the part of a fan-out thread with that platform."""
        candidates = list(letters)
        for sibling in self.spool.siblings():
            for letter_id in sibling.read.thread_ids(thread):
                state = sibling.read.locate(letter_id)
                if state in ("outbox", "held", "sent", "failed"):
                    candidates.append(sibling.read.letter(letter_id, state))
        if party is not None:
            candidates = [x for x in candidates if party in self.box.counterparts(x)]
        return max(candidates, key=lambda x: (x.depth, x.id))

    def _file_answer(self, parent: Letter, composed: tuple[Letter, bytes],
                     held: str | None = None) -> tuple[Letter | None, tuple[str, ...]]:  # fmt: skip
        """Claim ``parent`` for this platform and file the answer in the outbox (or in held/:
        a held reply answers the letter, pending approval), as one step, with what the claim on
        the server could not do (``Sent.warnings``). None (with the reason remembered) when
        another agent of the platform answered first."""
        letter, raw = composed
        key = reply_key(parent.message_id, parent.sender)  # the real letter's, not a reused Message-ID's
        with self.spool.home_claims.claim_reply(key, letter.id) as holder:
            if holder is None:  # ours here: now on the server, for every machine
                got = self._server_claim(letter.id, [(parent.message_id, key)])
                if got.holder is None:
                    return self._file_outgoing(letter, raw, held), _said(got.warning)
                holder = got.holder
        from ..stages import guards

        self._refusals[parent.id] = (
            guards.refusal(
                guards.Outbound(
                    letter.type,
                    "",
                    self.me.platform,
                    parent=parent,
                    answered_by=holder,
                    force=True,
                    follow_up=parent.sender == self.me.platform,
                )
            )
            or "already answered"
        )
        return None, ()

    def _hold(self, letter: Letter, asked: bool) -> str | None:
        """Why ``letter`` waits for a person: asked, or a bus ``hold`` rule naming any of its
        envelope recipients (every To, every Cc: a follower, the person a reply answers)."""
        from ..stages import guards

        return guards.letter_hold_reason(letter, self.registry.bus.hold, asked)

    def _quota(self) -> tuple[int, int | None, str]:
        """This platform's new threads in the last hour (this home's letters and the server's, client/quota.py), the cap (None:
        ``new_threads_per_hour = 0``, no cap), and when the oldest leaves the window (UTC)."""
        if self.registry.bus.new_threads_per_hour == 0:
            return 0, None, ""
        from .quota import opened_count

        now_ms = time.time_ns() // 1_000_000
        try:
            transport: Transport | None = self.transport
        except AgentmailError:  # e.g. credentials unreadable: the send says so, once, when it submits
            transport = None
        opened, oldest = opened_count(self.spool, transport, now_ms)  # every machine of the platform
        frees = ""
        if oldest is not None:
            at = datetime.datetime.fromtimestamp((oldest + 3_600_000) / 1000, datetime.UTC)
            frees = at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return opened, self.registry.bus.new_threads_per_hour, frees


def _said(warning: str | None) -> tuple[str, ...]:
    return () if warning is None else (warning,)


def _references(parent: Letter) -> tuple[str, ...]:
    return tuple([*parent.references, parent.message_id][-MAX_REFERENCES:])


def _check_body(body: str, force: bool) -> None:
    """An empty letter is bad input (exit 2), said before any guard is asked (``--force``, which
    the guard honours for an empty body too, still sends one)."""
    if not force and not body.strip():
        raise BadInput("the body is empty: write what the reader needs (-b TEXT, -b @FILE or -b - for standard input)")


def _fan_out_key(last: Letter, party: str) -> str:
    """What a follow-up in a fan-out thread claims: the letter it follows, per counterpart."""
    return f"{reply_key(last.message_id, last.sender)} to {party}"
