"""The client: what an agent does with its mail, on any transport (DESIGN §1, §6, §7).

    am = AgentMail.from_env("tokengate")
    for letter in am.inbox():
        if letter.type == "report":
            am.reply(letter, "Reproduced. Fixing.", type="ack")

It composes, guards, signs and queues outgoing letters, and pulls, judges and files incoming
ones. The CLI and the MCP server are thin shells over this class.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timezone
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import identity, registry as registry_mod
from .credentials import read_private_key_with_source
from .errors import BadInput, ConfigError, NotFound, Refused, Timeout
from .home import agentmail_home
from .identity import Identity
from .model import HUMAN, Letter, check_severity, check_thread, check_type, new_thread_id, new_ulid, reply_subject
from .registry import Registry
from .spool import Spool
from .transport import Envelope, Incoming, Outgoing, SubmitResult, Transport, open_transport

if TYPE_CHECKING:
    from .authenticity import Verdict
    from .guards import Outbound

MAX_REFERENCES = 20
_LETTER_FIELDS = set(Letter.__dataclass_fields__) - {"sender", "extra"}


def letter_from_meta(data: dict[str, Any]) -> Letter:
    """A Letter from a spool meta record (the ``--json`` shape)."""
    known = {k: v for k, v in data.items() if k in _LETTER_FIELDS}
    known["references"] = tuple(known.get("references") or ())
    extra = {k: v for k, v in data.items() if k not in _LETTER_FIELDS and k != "from"}
    for name, default in (("message_id", ""), ("sender_address", ""), ("to", ""), ("to_address", ""),
                          ("type", ""), ("thread", ""), ("subject", ""), ("body", ""), ("date", "")):  # fmt: skip
        known.setdefault(name, default)
    return Letter(sender=data.get("from") or "", extra=extra, **known)


@dataclass
class SyncReport:
    """What one sync did with every letter it fetched: accepted + quarantined + duplicates +
    bounces + skipped == fetched. ``internal_errors`` counts letters quarantined because judging
    or filing them raised something unexpected (an agentmail bug; they are in ``quarantined``)."""

    accepted: list[Letter] = field(default_factory=list)
    quarantined: list[Letter] = field(default_factory=list)
    duplicates: int = 0
    bounces: int = 0
    skipped: int = 0  # notes for a sibling agent
    fetched: int = 0
    internal_errors: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"accepted": len(self.accepted), "quarantined": len(self.quarantined),
                "duplicates": self.duplicates, "bounces": self.bounces, "skipped": self.skipped,
                "fetched": self.fetched, "internal_errors": self.internal_errors}  # fmt: skip


# The stage a letter was in when something raised: the module of the deepest agentmail frame.
_STAGES = {"agentmail.wire": "parsing", "agentmail.signing": "DKIM verification",
           "agentmail.verdicts": "Authentication-Results", "agentmail.matter": "front matter",
           "agentmail.authenticity": "judging"}  # fmt: skip


def _class_name(exc: BaseException) -> str:
    module = exc.__class__.__module__
    return exc.__class__.__qualname__ if module == "builtins" else f"{module}.{exc.__class__.__qualname__}"


def _failed_stage(exc: BaseException) -> str:
    import traceback

    stage = "filing"  # client and spool: deciding where the letter goes and writing it there
    for frame, _line in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("agentmail."):
            stage = _STAGES.get(module, "filing")
    return stage


def _references(parent: dict[str, Any]) -> tuple[str, ...]:
    return tuple([*parent.get("references", []), parent["message_id"]][-MAX_REFERENCES:])


def _default_reply_type(parent_type: str) -> str:
    return {"report": "ack", "fix-notice": "verify-result", "note": "note"}.get(parent_type, "question")


class AgentMail:
    """One platform[@agent]'s mailbox on one bus."""

    def __init__(self, registry: Registry, me: Identity, home: Path, transport: Transport | None = None) -> None:
        self.registry = registry
        self.me = me
        self.home = home
        self.platform = registry.get(me.platform)
        self.spool = Spool(home / "spool" / me.mailbox, platform_root=home / "spool" / me.platform,
                           name_of=self._platform_name)  # fmt: skip
        self._transport = transport
        self._refusals: dict[str, str] = {}
        self.last_warnings: list[str] = []
        self.flushed = 0  # letters queued by an earlier command that this client has sent since
        self._dispatching: str | None = None

    def _platform_name(self, address: str) -> str | None:
        platform = self.registry.by_address(address)
        return platform.name if platform else None

    @classmethod
    def from_env(cls, platform: str | None = None, *, agent: str | None = None, home: str | Path | None = None,
                 registry: str | Path | None = None, cwd: str | Path | None = None) -> AgentMail:  # fmt: skip
        """Resolve home, registry and identity the way the CLI does (DESIGN §4, §8)."""
        home_path = Path(home).expanduser() if home else agentmail_home()
        reg = registry_mod.load(registry_mod.registry_dir(str(registry) if registry else None, home_path))
        me = identity.resolve(reg, platform, agent, Path(cwd) if cwd else Path.cwd())
        return cls(reg, me, home_path)

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            self._transport = open_transport(self.registry, self.me.platform, self.home)
        return self._transport

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> AgentMail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- receiving -------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Pull what is new, judge it, file it; the checkpoint moves only after the commit."""
        report = SyncReport()
        self.flush()  # talking to the server anyway: retry what waits in the outbox
        transport = self.transport
        if not transport.pending(self.spool.checkpoint(transport.name)):
            return report  # nothing new: no lock, and none of the parsing and checking code loaded
        from . import authenticity

        with self.spool.locked():
            self.spool.sweep_tmp()
            checkpoint = self.spool.checkpoint(transport.name)
            for batch in transport.fetch(checkpoint, self.registry.bus.max_size):
                try:
                    for item in batch:
                        report.fetched += 1
                        self._file_isolated(item, report)
                except BaseException:
                    self.spool.discard()
                    raise
                self.spool.commit()
                checkpoint = transport.advance(checkpoint, batch)
                self.spool.set_checkpoint(transport.name, checkpoint)
            settled = transport.advance(checkpoint, [])  # e.g. record a new UIDVALIDITY with nothing new
            if settled != checkpoint:
                self.spool.set_checkpoint(transport.name, settled)
        return report

    def _file_isolated(self, item: Incoming, report: SyncReport) -> None:
        """The one boundary around a letter: whatever judging or filing it raises stays with it.
        The letter is quarantined as malformed and committed with its batch, so the checkpoint
        passes it and the next letter is judged; only the machine failing (OSError: a full
        disk, a lost permission) stops the sync, and then the batch is fetched again."""
        from . import authenticity, wire

        try:
            self._file(item, report)
        except OSError:
            raise
        except Exception as exc:
            report.internal_errors += 1
            quick = wire.quick_identity(item.raw) if item.raw is not None else None
            verdict = authenticity.Verdict("quarantine", reason="malformed",
                                           detail=f"agentmail failed on this letter in {_failed_stage(exc)} "
                                                  f"({_class_name(exc)}); it is kept here for a bug report",
                                           summary={"from": quick[0], "message_id": quick[1]} if quick else None)  # fmt: skip
            self._quarantine(verdict, item.raw if item.raw is not None else self._placeholder(item), report)

    def _placeholder(self, item: Incoming) -> bytes:
        """Stands in for a letter not downloaded: its bytes name the mailbox slot, so a refetch is a duplicate."""
        return f"X-Agentmail-Not-Downloaded: {item.size} bytes ({self.transport.name} {item.key})\r\n\r\n".encode()

    def _file(self, item: Incoming, report: SyncReport) -> None:
        from . import authenticity  # already loaded by sync(); a dictionary lookup here

        if item.raw is None:
            limit = self.registry.bus.max_size
            verdict = authenticity.Verdict("quarantine", reason="too-large",
                                           detail=f"the letter is {item.size} bytes; this bus takes at most {limit} (not downloaded)")  # fmt: skip
            placeholder = self._placeholder(item)
            if self.spool.has_bytes(placeholder):
                report.duplicates += 1
            else:
                self._quarantine(verdict, placeholder, report)
            return
        if self._filed_already(item.raw):
            report.duplicates += 1  # the same bytes are filed already: no need to judge them again
            return
        verdict = authenticity.judge(item.raw, self.registry)
        if verdict.route == "bounce":
            sent_id = self.spool.known(self.me.platform, verdict.bounced_message_id or "")
            if sent_id:
                self.spool.annotate(sent_id, undeliverable="true", undeliverable_reason=verdict.detail or "")
                report.bounces += 1
                return
            verdict = authenticity.Verdict("quarantine", reason="automated",
                                           detail="a delivery report about a letter this mailbox did not send")  # fmt: skip
        if verdict.route == "quarantine":
            self._quarantine(verdict, item.raw, report)
            return
        letter = verdict.letter
        assert letter is not None  # an accepted verdict always carries its letter
        if letter.type == "note" and letter.to_agent and letter.to_agent != self.me.agent:
            report.skipped += 1  # a sibling's note: not ours to read or to mark
            return
        if self.spool.known(letter.sender, letter.message_id):
            report.duplicates += 1
            return
        if letter.in_reply_to:
            parent_id = self.spool.known(self.me.platform, letter.in_reply_to) or self.spool.known(letter.sender, letter.in_reply_to)
            if parent_id:
                parent = self.spool.meta(parent_id)
                if parent.get("thread") != letter.thread:
                    bad = authenticity.Verdict("quarantine", letter=letter, reason="thread-mismatch",
                                               detail=f"it answers a letter of {parent.get('thread')} but is tagged {letter.thread}")  # fmt: skip
                    self._quarantine(bad, item.raw, report)
                    return
        report.accepted.append(self.spool.store("unread", letter, item.raw, defer=True))  # depth: from the chain

    def _filed_already(self, raw: bytes) -> bool:
        from . import wire

        quick = wire.quick_identity(raw)
        platform = self.registry.by_address(quick[0]) if quick else None
        if quick and platform:
            return self.spool.has_bytes(raw, platform.name, quick[1])
        return self.spool.has_bytes(raw)

    def _quarantine(self, verdict: Verdict, raw: bytes, report: SyncReport) -> None:
        summary = verdict.summary or {}
        base: Letter = verdict.letter or Letter(
            message_id=summary.get("message_id", ""), sender="", sender_address=summary.get("from", ""),
            to=self.me.platform, to_address=self.platform.address, type="", thread="",
            subject=summary.get("subject", ""), body="", date=summary.get("date", ""),
        )  # fmt: skip
        letter = replace(base, id="", reason=verdict.reason, detail=verdict.detail)
        report.quarantined.append(self.spool.store("quarantine", letter, raw, index=False, defer=True))

    def inbox(self, *, sync: bool = True, consume: bool = False, limit: int | None = None) -> list[Letter]:
        """Unread authenticated letters, oldest first. They stay unread until ``done`` or a reply,
        unless ``consume`` (at-most-once: only the letters this call claimed are returned)."""
        if sync:
            self.sync()
        ids = self.spool.ids("unread")
        letters: list[Letter] = []
        for letter_id in ids:
            if limit is not None and len(letters) >= limit:
                break
            try:
                meta = self.spool.meta(letter_id, "unread")
            except NotFound:
                continue
            if consume:
                if not self.spool.move(letter_id, "unread", "read"):
                    continue  # another consumer claimed it first
                meta["state"] = "read"
            letters.append(letter_from_meta(meta))
        return letters

    def show(self, letter_id: str) -> Letter:
        return letter_from_meta(self.spool.meta(self._id(letter_id)))

    def raw(self, letter_id: str) -> bytes:
        return self.spool.raw(self._id(letter_id))

    def authentication(self, letter: Letter) -> str:
        """How ``letter`` was authenticated: which key, which trusted verdicts (for ``show``)."""
        from .provenance import describe

        return describe(self.raw(letter.id), self.registry, letter.state, letter.sender, letter.type)

    def done(self, *letter_ids: str) -> list[str]:
        """Mark letters consumed; returns the ids this call moved. Unknown ids raise NotFound."""
        moved = []
        for letter_id in letter_ids:
            letter_id = self._id(letter_id)  # ids are accepted in any case
            state = self.spool.locate(letter_id)
            if state is None:
                raise NotFound(f"no letter {letter_id}")
            if state == "unread" and self.spool.move(letter_id, "unread", "read"):
                moved.append(letter_id)
        return moved

    def _id(self, ref: str | Letter) -> str:
        letter_id = ref.id if isinstance(ref, Letter) else str(ref).strip().lower()  # ids in any case
        if not (letter_id.isascii() and letter_id.isalnum()):
            raise BadInput(f"{letter_id!r} is not a letter id")
        return letter_id

    # --- sending ---------------------------------------------------------------------------

    def send(self, to: str, subject: str, body: str, *, type: str = "report", severity: str | None = None,
             ref: str | None = None, force: bool = False) -> Letter:  # fmt: skip
        """Open a thread. Returns the letter: state ``sent``, ``outbox`` (queued: the transport
        could not take it now; ``flush`` retries) or ``failed``. Opener advice lands in
        ``last_warnings``."""
        from . import guards

        check_type(type)
        check_severity(severity)
        recipient = self.registry.get(to)
        if type == "note":
            raise BadInput("use note() for a note to a sibling agent")
        self._check(guards.Outbound(type, body, self.me.platform, force=force))
        # Advice is for reports that open a thread, not for a one-line question.
        one_liner = type == "question" and len(body.strip().splitlines()) <= 1
        self.last_warnings = [] if one_liner else guards.opener_warnings(type, body)
        composed = self._compose(recipient.address, recipient.name, type, new_thread_id(), subject, body,
                               severity=severity, ref=ref)  # fmt: skip
        return self._dispatch(composed)

    def note(self, subject: str, body: str, *, to_agent: str | None = None, force: bool = False) -> Letter:
        """A letter to this platform itself, for a sibling agent (``to_agent``) or whoever reads next."""
        from . import guards

        self._check(guards.Outbound("note", body, self.me.platform, force=force))
        composed = self._compose(self.platform.address, self.platform.name, "note", new_thread_id(), subject, body,
                               to_agent=to_agent)  # fmt: skip
        return self._dispatch(composed)

    def reply(self, to: str | Letter, body: str, *, type: str | None = None, force: bool = False) -> Letter | None:
        """Answer a letter. Returns None when a guard refuses; ``why_refused`` says why.

        One reply per letter per platform: the first agent of the platform to answer claims
        the letter (across processes); the others are refused, told who answered."""
        parent_id = self._id(to)
        parent = self.spool.meta(parent_id)
        kind = check_type(type or _default_reply_type(parent.get("type", "")))
        reason = self._refusal(parent, kind, body, force=force)
        recipient = self.registry.platforms.get(parent.get("from") or "")
        if reason is None and recipient is None:
            reason = f"the sender of {parent_id} is no longer in the registry"
        if reason is not None:
            self._refusals[parent_id] = reason
            return None
        assert recipient is not None
        composed = self._compose(recipient.address, recipient.name, kind, parent["thread"],
                                 reply_subject(parent.get("subject") or "(no subject)"), body,
                                 in_reply_to=parent["message_id"], references=_references(parent))  # fmt: skip
        stored = self._file_answer(parent, composed)
        if stored is None:
            return None
        self._refusals.pop(parent_id, None)
        self.spool.move(parent_id, "unread", "read")
        return self._sent(stored)

    def follow_up(self, thread: str, body: str, *, type: str, force: bool = False) -> Letter:
        """A new letter in an existing thread, to its counterpart (e.g. the fixer's fix-notice
        after its ack). It answers this platform's own last letter of the thread, under the
        same guards as a reply (never after the other side's ack or close; the same depth cap;
        one letter after each letter per platform). Raises Refused otherwise."""
        check_type(type)
        check_thread(thread)
        if type == "note":
            raise BadInput("use note() for a note to a sibling agent")
        letters = self.thread(thread)
        last = self._last_of_platform_thread(thread, letters)
        reason = self._refusal(last, type, body, force=force, follow_up=True)
        if reason is not None:
            raise Refused(reason)
        counterpart = next((x.to if x.sender == self.me.platform else x.sender for x in letters), "")
        recipient = self.registry.get(counterpart)
        composed = self._compose(recipient.address, recipient.name, type, thread, reply_subject(letters[0].subject),
                                 body, in_reply_to=last["message_id"], references=_references(last))  # fmt: skip
        stored = self._file_answer(last, composed)
        if stored is None:
            raise Refused(self._refusals.pop(str(last["id"]), "refused"))
        return self._sent(stored)

    def why_refused(self, letter: str | Letter) -> str | None:
        """Why the last ``reply`` to this letter was refused, or why one would be (None: it may go)."""
        letter_id = self._id(letter)
        if letter_id in self._refusals:
            return self._refusals[letter_id]
        parent = self.spool.meta(letter_id)
        return self._refusal(parent, _default_reply_type(parent.get("type", "")), "", force=True)

    # --- the guards ------------------------------------------------------------------------

    def _refusal(self, parent: dict[str, Any], kind: str, body: str, *, force: bool, follow_up: bool = False) -> str | None:
        """The one guard, with the facts it needs gathered the same way for every path."""
        from . import guards

        return guards.refusal(guards.Outbound(
            kind, body, self.me.platform, parent=parent, follow_up=follow_up, force=force,
            answered_by=self.spool.replied_by(str(parent.get("message_id") or "")),
            depth=int(parent.get("depth", 0)) + 1,
        ))  # fmt: skip

    def _check(self, out: Outbound) -> None:
        from . import guards

        reason = guards.refusal(out)
        if reason:
            raise Refused(reason)

    def _last_of_platform_thread(self, thread: str, letters: list[Letter]) -> dict[str, Any]:
        """The thread's last letter as this *platform* sees it: the letters here, and those the
        platform's other agents sent in it. Last = deepest (ties: the latest filed)."""
        candidates = [self.spool.meta(x.id, x.state) for x in letters]
        for sibling in self.spool.siblings():
            for letter_id in sibling.thread_ids(thread):
                state = sibling.locate(letter_id)
                if state in ("outbox", "sent", "failed"):
                    candidates.append({**sibling.meta(letter_id, state), "mailbox": sibling.mailbox})
        return max(candidates, key=lambda m: (int(m.get("depth", 0)), str(m.get("id"))))

    def _file_answer(self, parent: dict[str, Any], composed: tuple[Letter, bytes]) -> Letter | None:
        """Claim ``parent`` for this platform and file the answer in the outbox, as one step.
        None (with the reason remembered) when another agent of the platform answered first."""
        letter, raw = composed
        with self.spool.claim_reply(str(parent["message_id"]), letter.id) as holder:
            if holder is None:
                return self.spool.store("outbox", letter, raw, extra=letter.extra)
        from . import guards

        self._refusals[str(parent["id"])] = guards.refusal(guards.Outbound(
            letter.type, "", self.me.platform, parent=parent, answered_by=holder, force=True,
            follow_up=parent.get("from") == self.me.platform)) or "already answered"  # fmt: skip
        return None

    def _compose(self, to_address: str, to_name: str, kind: str, thread: str, subject: str, body: str, *,
                 severity: str | None = None, ref: str | None = None, in_reply_to: str | None = None,
                 references: tuple[str, ...] = (), to_agent: str | None = None) -> tuple[Letter, bytes]:  # fmt: skip
        from email.utils import format_datetime

        from . import signing, wire

        now = datetime.now(timezone.utc)
        outline = wire.Outline(
            sender_address=self.platform.address, sender_name=self.platform.display_name,
            to_address=to_address, type=kind, thread=thread, subject=subject, body=body,
            severity=severity, ref=ref, in_reply_to=in_reply_to, references=references,
            to_agent=to_agent, message_id=wire.new_message_id(self.platform.name, self.platform.domain), date=now,
        )  # fmt: skip
        try:
            unsigned = wire.render(outline)
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
        key, source = read_private_key_with_source(self.home, self.platform.name)
        self._check_key_matches_pin(key, source)
        try:
            raw = signing.sign(unsigned, self.platform.dkim_domain or self.platform.domain, self.platform.selector, key)
        except Exception as exc:  # dkimpy raises its own types for a bad key
            raise ConfigError(f"cannot sign with the key of {self.platform.name}: {exc.__class__.__name__}") from None
        letter = Letter(
            message_id=outline.message_id, sender=self.platform.name, sender_address=outline.sender_address,
            sender_name=outline.sender_name or None, to=to_name, to_address=to_address, type=kind, thread=thread,
            subject=subject, body=body.strip(), date=format_datetime(now), severity=severity, ref=ref,
            in_reply_to=in_reply_to, references=references, to_agent=to_agent, id=new_ulid(),
        )  # what render() wrote, without parsing it back  # fmt: skip
        # The depth from the same chain a rebuilt cache would walk, so it never changes.
        return replace(letter, extra={"depth": self.spool.depth_for(letter.id, letter)}), raw

    def _check_key_matches_pin(self, key: str, source: str) -> None:
        """A letter signed with a key other than the pinned one lands in the reader's quarantine
        while this side says "sent": refuse before signing instead."""
        from . import signing

        if self.platform.key_lookup != "pinned":
            return
        try:
            matches = signing.public_key_of(key) == self.platform.public_key
        except Exception:
            matches = False
        if not matches:
            raise ConfigError(
                f"the private key of {self.platform.name} ({source}) does not match the public key pinned in "
                f"{self.registry.root / 'platforms' / (self.platform.name + '.toml')} (s={self.platform.selector}): "
                f"every reader would quarantine the letter. Restore the key that belongs to this registry, or use "
                f"the registry that belongs to this key; to start over with a new key run 'agentmail keygen --as "
                f"{self.platform.name}' and commit the new entry")  # fmt: skip

    def _dispatch(self, composed: tuple[Letter, bytes]) -> Letter:
        """Outbox first (durable), then the transport; the letter moves to sent/ only on success.
        Letters still queued from earlier ride along on the same connection.

        A configuration error (login refused, untrusted certificate, no AUTH, wrong TLS mode,
        unreadable credentials) is not transient: the new letter is moved to failed/ rather than
        left queued, so fixing the configuration and sending again never delivers it twice."""
        letter, raw = composed
        return self._sent(self.spool.store("outbox", letter, raw, extra=letter.extra))

    def _sent(self, stored: Letter) -> Letter:
        """Submit what the outbox holds (``stored`` among it) and return ``stored`` as it is now."""
        self._dispatching = stored.id
        try:
            self.flush()
        except ConfigError as exc:
            self.spool.annotate(stored.id, failed_reason=f"not sent, not queued: {exc}")
            self.spool.move(stored.id, "outbox", "failed")  # a failed reply holds no claim: it may be sent again
            raise ConfigError(f"{exc} — the letter was not sent and not queued; send it again once this is fixed") from exc
        finally:
            self._dispatching = None
        return self.show(stored.id)

    def _outgoing(self, letter_id: str) -> Outgoing | None:
        from . import wire

        try:
            meta = self.spool.meta(letter_id, "outbox")
            raw = self.spool.path("outbox", letter_id).read_bytes()
        except (FileNotFoundError, NotFound):
            return None  # another process sent it meanwhile
        rcpt = wire.tagged_address(meta["to_address"], meta["thread"])
        return Outgoing(letter_id, raw, Envelope(self.platform.address, (rcpt,)))

    def flush(self) -> list[SubmitResult]:
        """Submit every queued letter: same bytes, same Message-ID. One flusher per mailbox at a
        time, so two processes never submit one letter twice."""
        from .errors import TransportError

        if not self.spool.ids("outbox"):
            return []
        with self.spool.locked("outbox"):
            items = [o for o in map(self._outgoing, self.spool.ids("outbox")) if o is not None]
            if not items:
                return []
            try:
                results = self.transport.submit(items, on_result=self._record)
            except TransportError as exc:
                results = [SubmitResult(i.key, "queued", str(exc)) for i in items]
                for result in results:
                    self._record(result)
            for key, why in self.transport.copy_failures().items():  # delivered all the same: noted
                self.spool.annotate(key, sent_copy_failed=why, durable=False)
        return results

    def _record(self, result: SubmitResult) -> None:
        if result.status == "sent" and result.key != self._dispatching:
            self.flushed += 1
        if result.status == "sent":
            if result.refused:
                self.spool.annotate(result.key, refused="; ".join(f"{a}: {w}" for a, w in result.refused))
            self.spool.move(result.key, "outbox", "sent", durable=False)
        elif result.status == "failed":
            self.spool.annotate(result.key, failed_reason=result.detail)
            self.spool.move(result.key, "outbox", "failed")
        else:
            self.spool.annotate(result.key, queued_reason=result.detail, durable=False)  # informational

    # --- views -----------------------------------------------------------------------------

    def thread(self, thread: str, *, sync: bool = True) -> list[Letter]:
        """Both directions of one thread, in the order they were filed here."""
        if sync:
            self.sync()
        letters = []
        for letter_id in self.spool.thread_ids(thread):
            state = self.spool.locate(letter_id)
            if state and state != "quarantine":
                letters.append(letter_from_meta(self.spool.meta(letter_id, state)))
        if not letters:
            raise NotFound(f"no thread {thread}")
        return letters

    def sent(self) -> list[Letter]:
        return [letter_from_meta(m) for state in ("outbox", "failed", "sent") for m in self.spool.letters(state)]

    def quarantined(self, *, sync: bool = True) -> list[Letter]:
        if sync:
            self.sync()
        return [letter_from_meta(m) for m in self.spool.letters("quarantine")]

    def notes(self, *, sync: bool = True) -> list[Letter]:
        """Notes for me (addressed to my agent name, or to nobody in particular); not consumed."""
        if sync:
            self.sync()
        found = []
        for state in ("unread", "read"):
            for meta in self.spool.letters(state):
                if meta.get("type") == "note" and meta.get("to_agent") in (None, self.me.agent):
                    found.append(letter_from_meta(meta))
        return sorted(found, key=lambda letter: letter.id)

    def status(self, *, sync: bool = True, closed: bool = False) -> list[dict[str, Any]]:
        """Per open thread: where it stands in report → ack → fix-notice → verify-result → close.
        ``closed`` adds the closed threads too (that walks the whole history)."""
        if sync:
            self.sync()
        rows = []
        undelivered = {state: set(self.spool.ids(state)) for state in ("outbox", "failed")}
        for thread in self.spool.threads() if closed else self.spool.open_threads():
            ids = self.spool.thread_ids(thread)
            first, last = self._filed(ids), self._filed(reversed(ids))
            if first is None or last is None:
                continue
            if last.get("type") == "note" or first.get("type") == "note":
                continue
            mine = last.get("from") == self.me.platform
            other = str(last.get("to") if mine else last.get("from"))
            if last.get("type") == "close":
                move = "nobody"
            elif last.get("type") == "ack":
                move = "me" if mine else other  # whoever acknowledged owes the fix
            else:
                move = other if mine else "me"
            delivery, delivery_detail = self._delivery(ids, undelivered, mine or first.get("from") == self.me.platform)
            if delivery == "failed" and mine:
                move = "me"  # my letter never reached them: sending it again is my move
            rows.append({
                "delivery": delivery, "delivery_detail": delivery_detail,
                "thread": thread, "subject": str(first.get("subject") or ""), "state": _lifecycle(last.get("type", "")),
                "last_type": last.get("type"), "whose_move": move, "letters": len(ids),
                "with": other, "last_id": last["id"], "undeliverable": any(
                    self.spool.annotations(i).get("undeliverable") for i in ids),
            })  # fmt: skip
        return rows

    def _delivery(self, ids: list[str], undelivered: dict[str, set[str]], mine: bool) -> tuple[str, str]:
        """How far my letters in a thread got: "queued" (in the outbox), "failed" (refused, with
        the server's words), else "sent"; "received" when the thread holds none of mine.
        ``undelivered``: the ids in outbox/ and failed/, listed once per ``status``."""
        for state, label, key in (("outbox", "queued", "queued_reason"), ("failed", "failed", "failed_reason")):
            for letter_id in ids:
                if letter_id in undelivered[state]:
                    return label, str(self.spool.meta(letter_id, state).get(key) or "")
        return ("sent" if mine else "received"), ""

    def _filed(self, ids: Iterable[str]) -> dict[str, Any] | None:
        """The meta of the first id in ``ids`` that is filed (a crash can leave a listed id absent)."""
        for letter_id in ids:
            state = self.spool.locate(letter_id)
            if state not in (None, "quarantine"):
                return self.spool.meta(letter_id, state)
        return None

    def wait(self, timeout: float = 60.0, *, type: str | None = None, thread: str | None = None) -> tuple[Letter, str]:
        """Block until an unread letter matching the filters is in the spool; (letter, mechanism).

        Raises Timeout. A matching letter already unread returns at once ("spool")."""
        from . import authenticity  # noqa: F401  (loaded before blocking, not after the letter lands)

        deadline = time.monotonic() + timeout
        mechanism = "spool"
        while True:
            self.sync()
            for letter in self.inbox(sync=False):
                if (type is None or letter.type == type) and (thread is None or letter.thread == thread):
                    return letter, mechanism
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"no matching letter within {timeout:g}s")
            woke = self.transport.wait(self.spool.checkpoint(self.transport.name), left)
            if woke is None:
                raise Timeout(f"no matching letter within {timeout:g}s")
            mechanism = woke

def _lifecycle(kind: str) -> str:
    return {"report": "reported", "question": "asked", "ack": "acknowledged", "fix-notice": "fix announced",
            "verify-result": "verified", "close": "closed", HUMAN: "human letter"}.get(kind, kind)  # fmt: skip
