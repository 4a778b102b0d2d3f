"""The client: what an agent does with its mail, on any transport (DESIGN §1, §6, §7).

    am = AgentMail.from_env("tokengate")
    for letter in am.inbox():
        if letter.type == "report":
            am.reply(letter, "Reproduced. Fixing.", type="ack")

It orchestrates the stages of a letter's path: outgoing, the guards, ``compose`` (render and
sign) and the outbox; incoming, ``authenticity.judge``, ``route`` and the spool. Every rule a
caller relies on lives here (``send(thread=)``, the refusal convention, ``raise_for_state``):
the CLI, the MCP server, the hooks and the watcher only translate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._value import Value
from ..ages import now_ms
from ..config import identity
from ..config import registry as registry_mod
from ..config.identity import Identity
from ..config.registry import Registry
from ..errors import (
    AgentmailError,
    BadInput,
    ConfigError,
    NotFound,
    PermanentFailure,
    Refused,
    Timeout,
    TransportError,
)
from ..home import agentmail_home
from ..model import (
    HUMAN,
    Letter,
    ThreadStatus,
    check_name,
    check_outcome,
    check_sendable,
    check_severity,
    check_thread,
    check_type,
    new_thread_id,
    reply_subject,
    thread_id,
    ulid_ms,
)
from ..spool import Spool
from ..spool.db import reached
from ..spool.filed import Filed
from ..stages.compose import Draft, compose

if TYPE_CHECKING:
    from ..letter.attach import Attachment
    from ..spool.search import Hit, Query, SearchIndex
    from ..stages.evidence import Applied
    from ..stages.guards import Outbound
    from ..stages.route import Facts

    # at run time imported where used: a read (inbox --no-sync) opens no transport (issue 11)
    from ..transport import Incoming, Outgoing, SubmitResult, Transport
    from ..trust.authenticity import Verdict

MAX_REFERENCES = 20
SEARCH_INDEX = "search.sqlite"  # search.INDEX_FILE, named here so filing never imports sqlite3


class SyncReport(Value):
    """What one sync did with every letter it fetched: accepted + quarantined + duplicates +
    bounces + skipped == fetched. ``internal_errors`` counts letters quarantined because judging
    or filing them raised something unexpected (an agentmail bug; they are in ``quarantined``).
    ``accepted`` and ``quarantined`` read like lists of letters but hold ids: each letter is read
    from the spool when asked for, so a sync of any size stays small in memory (``spool.filed.Filed``)."""

    __slots__ = ("accepted", "quarantined", "duplicates", "bounces", "skipped", "fetched", "internal_errors")

    accepted: Filed
    quarantined: Filed
    duplicates: int
    bounces: int
    skipped: int  # notes for a sibling agent
    fetched: int
    internal_errors: int

    def __init__(
        self,
        accepted: Filed | None = None,
        quarantined: Filed | None = None,
        duplicates: int = 0,
        bounces: int = 0,
        skipped: int = 0,
        fetched: int = 0,
        internal_errors: int = 0,
    ) -> None:
        self.accepted = Filed() if accepted is None else accepted
        self.quarantined = Filed() if quarantined is None else quarantined
        self.duplicates = duplicates
        self.bounces = bounces
        self.skipped = skipped
        self.fetched = fetched
        self.internal_errors = internal_errors
        self.__post_init__()

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": len(self.accepted),
            "quarantined": len(self.quarantined),
            "duplicates": self.duplicates,
            "bounces": self.bounces,
            "skipped": self.skipped,
            "fetched": self.fetched,
            "internal_errors": self.internal_errors,
        }

    def __post_init__(self) -> None:
        for name in ("accepted", "quarantined"):  # a list given by a caller, as before
            if not isinstance(getattr(self, name), Filed):
                setattr(self, name, Filed(getattr(self, name)))


def _references(parent: Letter) -> tuple[str, ...]:
    return tuple([*parent.references, parent.message_id][-MAX_REFERENCES:])


def _default_reply_type(parent_type: str) -> str:
    return {"report": "ack", "fix-notice": "verify-result", "note": "note"}.get(parent_type, "question")


class AgentMail:
    """One platform[@agent]'s mailbox on one bus."""

    def __init__(self, registry: Registry, me: Identity, home: Path, transport: Transport | None = None) -> None:
        self.registry = registry
        self.me = me
        self.home = home
        self.platform = registry.get(me.platform)
        self.spool = Spool(
            home / "spool" / me.mailbox, platform_root=home / "spool" / me.platform, name_of=self._platform_name
        )
        self._transport = transport
        self._refusals: dict[str, str] = {}
        self.last_warnings: list[str] = []
        self.flushed = 0  # letters queued by an earlier command that this client has sent since
        self.dismissed: list[str] = []  # the failed letters the last ``done`` dismissed
        self._dispatching: str | None = None
        self._fresh: tuple[Letter, bytes] | None = None  # the letter being dispatched, as filed
        self._search: SearchIndex | None = None
        # Escalation (issue 26, escalation.py): what this client announced to people, and why not
        self.escalated: list[dict[str, Any]] = []
        self.escalation_problem: str | None = None
        self._escalated_at = -(1 << 62)

    def _platform_name(self, address: str) -> str | None:
        platform = self.registry.by_address(address)
        return platform.name if platform else None

    @classmethod
    def from_env(
        cls,
        platform: str | None = None,
        *,
        agent: str | None = None,
        home: str | Path | None = None,
        registry: str | Path | None = None,
        cwd: str | Path | None = None,
    ) -> AgentMail:
        """Resolve home, registry and identity the way the CLI does (DESIGN §4, §8)."""
        home_path = Path(home).expanduser() if home else agentmail_home()
        reg = registry_mod.load(registry_mod.registry_dir(str(registry) if registry else None, home_path))
        me = identity.resolve(reg, platform, agent, Path(cwd) if cwd else Path.cwd())
        return cls(reg, me, home_path)

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            from ..transport import open_transport

            self._transport = open_transport(self.registry, self.me.platform, self.home)
        return self._transport

    def close(self) -> None:
        if self._search is not None:
            self._search.close()
            self._search = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> AgentMail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- receiving -------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Pull what is new, judge it, file it; the checkpoint moves only after the commit.
        Then announce to the followers what needs a person (escalation.py), at most once a minute."""
        report = self._sync()
        if self.platform.followers:  # nobody to tell: nothing looked at (the hot path stays as it was)
            self._escalate()
        return report

    def _escalate(self) -> None:
        from .. import ages
        from ..people import escalation

        now = ages.now_ms()
        if now - self._escalated_at < escalation.EVERY_MS:
            return
        self._escalated_at = now
        try:
            self.escalated += escalation.run(self)
            self.escalation_problem = None
        except (AgentmailError, OSError) as exc:  # the sync itself went well: said, never raised
            self.escalation_problem = f"could not announce to the followers: {exc or exc.__class__.__name__}"

    def _sync(self, *, woken: bool = False) -> SyncReport:
        """``woken``: the transport has just said something arrived (``wait``), so neither the
        outbox nor the cheap look first: straight to the fetch, the letter is waited for."""
        report = SyncReport(Filed(spool=self.spool), Filed(spool=self.spool))
        if not woken:
            self.flush()  # talking to the server anyway: retry what waits in the outbox
        transport = self.transport
        if not woken and not transport.pending(self._checkpoint(transport.name)):
            if self.spool.ids("held"):  # an approver's answer a dead sync filed but never acted on
                self._decide_by_mail([])
            return report  # nothing new: no lock, and none of the parsing and checking code loaded

        with self.spool.locked():
            self.spool.sweep_tmp()
            checkpoint = self._checkpoint(transport.name)
            for batch in transport.fetch(checkpoint, self.registry.bus.max_size):
                outcomes: dict[str, str] = {}
                filed_before = (len(report.accepted), len(report.quarantined))
                try:
                    for item in batch:
                        report.fetched += 1
                        before = (len(report.accepted), len(report.quarantined))
                        self._file_isolated(item, report)
                        if len(report.accepted) > before[0]:
                            outcomes[item.key] = "verified"
                        elif len(report.quarantined) > before[1]:
                            outcomes[item.key] = "quarantined"
                except BaseException:
                    self.spool.discard()
                    raise
                self.spool.commit()
                self._indexed(  # search index
                    *report.accepted.ids_since(filed_before[0]), *report.quarantined.ids_since(filed_before[1])
                )
                checkpoint = transport.advance(checkpoint, batch)
                self.spool.set_checkpoint(transport.name, checkpoint)
                transport.mark(outcomes)  # after the commit: a mark never stands for a letter not filed
            settled = transport.advance(checkpoint, [])  # e.g. record a new UIDVALIDITY with nothing new
            if settled != checkpoint:
                self.spool.set_checkpoint(transport.name, settled)
        self._decide_by_mail(report.accepted)  # approvers' answers, after the commit
        return report

    def _checkpoint(self, transport: str) -> str | None:
        """Where this mailbox's fetch stopped. A new mailbox of a platform whose other mailboxes
        already read (a new agent name) starts where they are, not at the platform's whole
        history (DESIGN §7; ``inbox --from-start`` reads the backlog). Stored at once, so the
        start never moves on with the siblings."""
        value = self.spool.checkpoint(transport)
        if value is not None:
            return value
        start = self._siblings_position(transport)
        if start is not None and not (self.spool.ids("unread") or self.spool.ids("read")):
            self.spool.ensure()
            self.spool.set_checkpoint(transport, start)
            return start
        return None

    def _siblings_position(self, transport: str) -> str | None:
        """The furthest checkpoint of this platform's other mailboxes on ``transport`` (None: none read yet)."""
        from ..transport import Checkpoint

        found = [c for c in (s.checkpoint(transport) for s in self.spool.siblings()) if c]
        return max(found, key=lambda c: Checkpoint.parse(c).last) if found else None

    def from_start(self) -> None:
        """Read this mailbox's whole history again with the next sync (the backlog a new agent
        skipped): the checkpoint goes back to the beginning; what is filed already is dropped
        as a duplicate, so nothing is filed twice."""
        from ..transport import Checkpoint

        with self.spool.locked():
            self.spool.set_checkpoint(self.transport.name, str(Checkpoint()))

    def _register_sibling(self, agent: str) -> None:
        """A note for an agent that has never read: its mailbox starts at this one's position,
        before the note, so the note is not skipped as history (``_checkpoint``)."""
        sibling = Spool(self.home / "spool" / f"{self.me.platform}@{agent}", platform_root=self.spool.platform_root)
        name = self.transport.name
        position = self._checkpoint(name)
        if position is not None and sibling.checkpoint(name) is None and not sibling.ids("unread"):
            sibling.ensure()
            sibling.set_checkpoint(name, position)

    def _file_isolated(self, item: Incoming, report: SyncReport) -> None:
        """The one boundary around a letter: whatever judging or filing it raises stays with it.
        The letter is quarantined as malformed and committed with its batch, so the checkpoint
        passes it and the next letter is judged; only the machine failing (OSError: a full
        disk, a lost permission) stops the sync, and then the batch is fetched again."""
        from ..letter import wire
        from ..trust import authenticity

        try:
            self._file(item, report)
        except OSError:
            raise
        except Exception as exc:
            report.internal_errors += 1
            quick = wire.quick_identity(item.raw) if item.raw is not None else None
            verdict = authenticity.Verdict(
                "quarantine",
                reason="malformed",
                detail=authenticity.failure_detail(exc),
                summary={"from": quick[0], "message_id": quick[1]} if quick else None,
            )
            self._quarantine(verdict, item.raw if item.raw is not None else self._placeholder(item), report, item.copy)

    def _placeholder(self, item: Incoming) -> bytes:
        """Stands in for a letter not downloaded (or an entry that is no letter): its bytes name
        the mailbox slot, so a refetch is a duplicate."""
        if item.problem is not None:
            return f"X-Agentmail-Not-Read: no letter ({self.transport.name} {item.key})\r\n\r\n".encode()
        return f"X-Agentmail-Not-Downloaded: {item.size} bytes ({self.transport.name} {item.key})\r\n\r\n".encode()

    def _file(self, item: Incoming, report: SyncReport) -> None:
        """Judge one letter (authenticity), route it (route), and carry the filing out."""
        from ..stages.route import Facts, route
        from ..trust import authenticity  # already loaded by sync(); a dictionary lookup here

        raw = item.raw
        if raw is None and item.problem is not None:
            from ..text import one_line  # a mail client's flags in the name are not ours to trust

            verdict: authenticity.Verdict | None = authenticity.Verdict(
                "quarantine",
                reason="malformed",
                detail=f"the post office entry {one_line(item.problem)[:300]}: not read, left where it is "
                "(once it is a readable letter, 'agentmail inbox --from-start' reads it)",
            )
            raw = self._placeholder(item)
            facts = Facts(self.me.agent, bytes_filed=self.spool.has_bytes(raw))
        elif raw is None:
            limit = self.registry.bus.max_size
            verdict = authenticity.Verdict(
                "quarantine",
                reason="too-large",
                detail=f"the letter is {item.size} bytes; this bus takes at most {limit} (not downloaded)",
            )
            raw = self._placeholder(item)
            facts = Facts(self.me.agent, bytes_filed=self.spool.has_bytes(raw))
        else:
            verdict, facts = self._judged(raw)
        filing = route(verdict, facts)
        if filing.action == "duplicate":
            report.duplicates += 1
        elif filing.action == "skip":
            report.skipped += 1
        elif filing.action == "bounce":
            assert filing.letter_id is not None and filing.verdict is not None
            self.spool.annotate(
                filing.letter_id,
                undeliverable="true",
                undeliverable_reason=filing.verdict.detail or "",
                undeliverable_at=str(now_ms()),  # when the bounce came: the digest's "since" (issue 26)
            )
            report.bounces += 1
        elif filing.action == "quarantine":
            assert filing.verdict is not None
            self._quarantine(filing.verdict, raw, report, item.copy if raw is item.raw else None)
        else:
            assert filing.verdict is not None and filing.verdict.letter is not None
            report.accepted.append(
                self.spool.store("unread", filing.verdict.letter, raw, defer=True, copy=item.copy)
            )  # depth: from the chain

    def _judged(self, raw: bytes) -> tuple[Verdict | None, Facts]:
        """The verdict on a fetched letter (None: its bytes are filed already) and what the
        spool knows that routing it needs; reads, never writes."""
        from ..stages.route import Facts
        from ..trust import authenticity

        if self._filed_already(raw):
            return None, Facts(self.me.agent, bytes_filed=True)
        verdict = authenticity.judge_unguarded(raw, self.registry)
        return verdict, self._facts(verdict)

    def _facts(self, verdict: Verdict) -> Facts:
        """What the spool knows that routing ``verdict`` needs (looked up only where it matters)."""
        from ..stages.route import Facts

        if verdict.route == "bounce":
            return Facts(self.me.agent, bounced_id=self.spool.known(self.me.platform, verdict.bounced_message_id or ""))
        letter = verdict.letter
        if verdict.route != "accept" or letter is None:
            return Facts(self.me.agent)
        parent_thread = None
        # A person's client may keep only References (or answer a letter it quotes further up).
        answered = (
            [letter.in_reply_to, *reversed(letter.references)] if letter.extra.get("person") else [letter.in_reply_to]
        )
        for message_id in filter(None, answered):
            parent_id = self.spool.known(self.me.platform, message_id) or self.spool.known(letter.sender, message_id)
            if parent_id:
                parent_thread = self.spool.letter(parent_id).thread
                break
        return Facts(
            self.me.agent, filed_as=self.spool.known(letter.sender, letter.message_id), parent_thread=parent_thread
        )

    def _filed_already(self, raw: bytes) -> bool:
        from ..letter import wire

        quick = wire.quick_identity(raw)
        platform = self.registry.by_address(quick[0]) if quick else None
        if quick and platform:
            return self.spool.has_bytes(raw, platform.name, quick[1])
        return self.spool.has_bytes(raw)

    def _quarantine(
        self, verdict: Verdict, raw: bytes, report: SyncReport, copy: tuple[str, int, int] | None = None
    ) -> None:
        letter = self._quarantined(verdict)
        report.quarantined.append(self.spool.store("quarantine", letter, raw, index=False, defer=True, copy=copy))

    def _quarantined(self, verdict: Verdict) -> Letter:
        """The letter a quarantine verdict files (what it saw of the letter, with why)."""
        summary = verdict.summary or {}
        base: Letter = verdict.letter or Letter(
            message_id=summary.get("message_id", ""),
            sender="",
            sender_address=summary.get("from", ""),
            to=self.me.platform,
            to_address=self.platform.address,
            type="",
            thread="",
            subject=summary.get("subject", ""),
            body="",
            date=summary.get("date", ""),
        )
        return base.replace(id="", reason=verdict.reason, detail=verdict.detail)

    def rebuild(self) -> dict[str, Any]:
        """Make this mailbox's spool.db again from its letter files, after it was lost or damaged
        (DESIGN §7). Every letter is judged again as a sync would; one this platform sent is
        ``sent`` (its reply claim taken again), one it answered ``read``, another ``unread`` or
        ``quarantine`` as judged now. What was there is kept aside. NotFound when spool.db is in
        order (nothing to rebuild)."""
        from ..errors import StorageError
        from ..stages.route import route
        from ..trust import authenticity

        try:
            self.spool.check()
        except StorageError:
            pass
        else:
            raise NotFound(f"{self.spool.db.path} is in order: nothing to rebuild")
        me = self.me

        def classify(letter_id: str, raw: bytes) -> tuple[str, Letter] | None:
            del letter_id
            if raw.startswith((b"X-Agentmail-Not-Downloaded:", b"X-Agentmail-Not-Read:")):
                return "quarantine", self._quarantined(
                    authenticity.Verdict(
                        "quarantine",
                        reason="too-large" if raw.startswith(b"X-Agentmail-Not-Downloaded:") else "malformed",
                        detail="not read when it arrived; the rest of its note was in the spool.db that was lost",
                    )
                )
            verdict = authenticity.judge(raw, self.registry)
            letter = verdict.letter
            if verdict.route == "accept" and letter is not None and _ours(letter, me):
                return "sent", letter
            filing = route(verdict, self._facts(verdict))
            if filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None:
                return "unread", filing.verdict.letter
            if filing.action == "quarantine" and filing.verdict is not None:
                return "quarantine", self._quarantined(filing.verdict)
            return None

        outcome = self.spool.recover(classify)
        (self.spool.root / SEARCH_INDEX).unlink(missing_ok=True)  # a cache of the old rows
        return outcome

    def inbox(self, *, sync: bool = True, consume: bool = False, limit: int | None = None,
              from_start: bool = False) -> list[Letter]:  # fmt: skip
        """Unread authenticated letters, oldest first. They stay unread until ``done`` or a reply,
        unless ``consume`` (at-most-once: only the letters this call claimed are returned).
        ``from_start``: fetch the mailbox's whole history first (``from_start()``)."""
        if from_start:
            self.from_start()
            sync = True
        if sync:
            self.sync()
        ids = self.spool.ids("unread")
        letters: list[Letter] = []
        for letter_id in ids:
            if limit is not None and len(letters) >= limit:
                break
            try:
                letter = self.spool.letter(letter_id, "unread")
            except NotFound:
                continue
            if consume:
                if not self._move(letter_id, "unread", "read"):
                    continue  # another consumer claimed it first
                letter = letter.replace(state="read")
            letters.append(letter)
        return letters

    def show(self, letter_id: str) -> Letter:
        return self._addressed(self.spool.letter(self._id(letter_id)))

    def raw(self, letter_id: str) -> bytes:
        return self.spool.raw(self._id(letter_id))

    def attachments(self, letter_id: str | Letter) -> tuple[Attachment, ...]:
        """The attachments of a filed letter, read from its signed bytes (never from a record).
        A quarantined letter's are refused: nothing vouches for them."""
        from ..letter import wire

        letter = self.show(self._id(letter_id))
        if letter.state == "quarantine":
            raise BadInput(f"letter {letter.id} is quarantined ({letter.reason}); its attachments are not handed out")
        raw = self.raw(letter.id)
        self._still_as_filed(letter, raw)
        try:
            return wire.body_and_attachments(wire.parse_message(raw, len(raw) + 1))[1]
        except wire.Malformed as exc:
            raise BadInput(f"letter {letter.id}: {exc.detail}") from None

    def _still_as_filed(self, letter: Letter, raw: bytes) -> None:
        """What save/apply hand out is what was verified: the bytes whose hash was noted at
        filing, or (a letter filed before agentmail noted one) bytes whose signature still
        verifies against the sender's pin. BadInput, one line, otherwise."""
        same = self.spool.unchanged(letter.id, raw)
        platform = self.registry.platforms.get(letter.sender)
        if same is None and platform is not None and not letter.extra.get("person"):
            from ..trust.authenticity import pinned_key
            from ..trust.signing import verify

            same = verify(raw, pinned_key(platform)).ok
        if same is False:
            raise BadInput(f"letter {letter.id}: its file changed after it was filed (not the bytes that were "
                           "verified); its attachments are not handed out ('show --raw' shows what is there now)")  # fmt: skip
        if same is None:
            raise BadInput(f"letter {letter.id}: filed without a record of its bytes and not signed by a pinned key, "
                           "so it cannot be re-verified; its attachments are not handed out")  # fmt: skip

    def save(self, letter_id: str | Letter, directory: str | Path = ".", *, force: bool = False) -> list[Path]:
        """Write a letter's attachments into ``directory`` (0600, never outside it, never over a
        file without ``force``); nothing is opened or run. Returns the paths written."""
        from ..stages import evidence

        return evidence.save(self.attachments(letter_id), directory, force=force)

    def apply(self, letter_id: str | Letter, cwd: str | Path = ".", *, check: bool = False,
              series: bool = False) -> Applied:  # fmt: skip
        """``git am`` a letter's patches in the checkout at ``cwd``, tried first in a scratch
        worktree (``check``: only that), no hook run, refusing a dirty tree, a symlink that leaves
        the checkout and (unless ``series``) an attachment of several commits. Returns every
        commit (author, subject, paths) and a summary line (``str()`` prints both)."""
        from ..stages import evidence

        return evidence.apply(self.attachments(letter_id), cwd, check_only=check, series=series)

    def authentication(self, letter: Letter) -> str:
        """How ``letter`` was authenticated: which key, which trusted verdicts (for ``show``)."""
        from ..trust.provenance import describe

        raw = self.raw(letter.id)
        how = describe(raw, self.registry, letter.state, letter.sender, letter.type)
        if self.spool.unchanged(letter.id, raw) is False:
            how += "; BUT its file changed after it was filed: what it shows now was never verified"
        return how

    def done(self, *letter_ids: str) -> list[str]:
        """Mark letters consumed; returns the ids this call moved. Unknown ids raise NotFound.

        A failed letter of mine (refused for good, not sent and not queued, or rejected by a
        person) is dismissed instead: ``status`` stops showing it, ``sent`` still lists it.
        Those ids are returned too, and listed in ``dismissed``."""
        moved: list[str] = []
        self.dismissed = []
        for letter_id in letter_ids:
            letter_id = self._id(letter_id)  # ids are accepted in any case
            state = self.spool.locate(letter_id)
            if state is None:
                raise NotFound(f"no letter {letter_id}")
            if state == "unread" and self._move(letter_id, "unread", "read"):
                moved.append(letter_id)
            elif state == "failed" and not self.spool.annotations(letter_id).get("dismissed"):
                self.spool.annotate(letter_id, dismissed="true")
                moved.append(letter_id)
                self.dismissed.append(letter_id)
        return moved

    def _id(self, ref: str | Letter) -> str:
        """THE place a letter a user names becomes its id here: the id (any case), the letter's
        Message-ID — the one name both sides share — or a unique prefix of either (``Spool.named``).
        An id that names nothing is returned for the caller to say "no letter"."""
        if isinstance(ref, Letter):
            return ref.id
        text = str(ref).strip()
        found = self.spool.named(text, tuple(self.registry.platforms))
        if len(found) == 1:
            return found[0]
        if found:
            shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
            raise BadInput(f"{text!r} names several letters ({shown}); give more of it")
        lowered = text.lower()
        if lowered.isascii() and lowered.isalnum():
            return lowered
        if ("@" in text or text.startswith("<")) and text.isprintable():
            raise NotFound(f"no letter with Message-ID {text}")
        raise BadInput(f"{text!r} is not a letter id or Message-ID")

    # --- sending ---------------------------------------------------------------------------

    def send(self, to: str | list[str] | tuple[str, ...], subject: str, body: str, *, type: str = "report",
             severity: str | None = None,
             ref: str | None = None, force: bool = False, thread: str | None = None,
             hold: bool = False, attachments: tuple[Attachment, ...] = (),
             outcome: str | None = None) -> Letter:  # fmt: skip
        """Open a thread, or with ``thread`` continue it after this platform's own last letter
        (``follow_up``; ``subject``, ``severity`` and ``ref`` are then the thread's own).
        Returns the letter: state ``sent``, ``outbox`` (queued: the transport could not take it
        now; ``flush`` retries) or ``failed`` — ``raise_for_state`` turns the last two into
        errors. Advice (an opener's gaps, a thread that is with another platform than ``to``)
        lands in ``last_warnings``. A guard that refuses raises Refused (the new-thread quota
        among them). ``hold`` (or a bus ``hold`` rule naming the recipient) keeps the signed
        letter in ``held/`` (state ``held``) until a person runs ``approve`` or ``reject``.
        ``attachments`` (``evidence.from_file``/``from_patches``) make it multipart/mixed.

        ``to`` may name several platforms (``"beta,gamma"``, a list) or a registry group
        (``"@consumers"``): a fan-out, one letter with one Message-ID to all of them, one thread
        (DESIGN §6); it counts as one new thread."""
        from ..config.recipients import resolve
        from ..stages import guards

        _check_body(body, force)
        check_outcome(outcome, type)  # ``outcome``: a verify-result's (model.OUTCOMES)
        if thread:
            thread = thread_id(thread)
            return self._send_in_thread(to, thread, body, type=type, force=force, hold=hold, attachments=attachments,
                                        outcome=outcome)  # fmt: skip
        check_sendable(type)
        check_severity(severity)
        names = resolve(self.registry, to, self.me.platform)
        recipient, others = self.registry.get(names[0]), names[1:]
        # Counting and filing under one platform-wide lock: two sends at the quota's edge (two
        # agents, two processes) never both see room for one more thread.
        with self.spool.platform_locked("quota"):
            opened, quota, frees = self._quota()
            self._check(guards.Outbound(type, body, self.me.platform, force=force, opened_last_hour=opened,
                                        quota=quota, quota_frees=frees, attachments=attachments))  # fmt: skip
            # Advice is for reports that open a thread, not for a one-line question.
            one_liner = type == "question" and len(body.strip().splitlines()) <= 1
            self.last_warnings = [] if one_liner else guards.opener_warnings(type, body)
            letter, raw = self._compose(
                Draft(recipient.name, type, new_thread_id(), subject, body, severity=severity, ref=ref,
                      also_to=others, attachments=attachments, outcome=outcome)
            )  # fmt: skip
            stored = self._file_outgoing(letter, raw, self._hold(letter, hold))
        return self._sent(stored, raw)

    def _send_in_thread(self, to: str | list[str] | tuple[str, ...], thread: str, body: str, *, type: str,
                        force: bool, hold: bool, attachments: tuple[Attachment, ...] = (),
                        outcome: str | None = None) -> Letter:  # fmt: skip
        """``send --thread``: a follow-up. In a fan-out thread this platform opened, ``to`` picks
        the counterparts (one letter to those whose part of the thread stands at the same letter)."""
        check_thread(thread)
        try:
            parties = self._parties(self.thread(thread))  # synced: the counterparts' latest letters count
        except NotFound:
            parties = []  # follow_up says what is wrong
        if len(parties) > 1:
            if outcome is not None:
                raise BadInput("an outcome is for a verify-result between two platforms, not a fan-out follow-up")
            return self._fan_out_follow_up(to, thread, parties, body, type=type, force=force, hold=hold,
                                           attachments=attachments)  # fmt: skip
        letter = self.follow_up(thread, body, type=type, force=force, hold=hold, attachments=attachments,
                                outcome=outcome)  # fmt: skip
        wanted = ",".join(to) if not isinstance(to, str) else to
        self.last_warnings = [] if letter.to == wanted else [f"thread {thread} is with {letter.to}; sent there"]
        return letter

    def _names(self, addresses: Iterable[str]) -> list[str]:
        return [self._platform_name(a) or a.partition("@")[0] for a in addresses]

    def _counterparts(self, letter: Letter) -> list[str]:
        """Whom ``letter`` is between this platform and: its recipients if it is mine, else its sender."""
        if letter.sender == self.me.platform:
            return self._names(letter.recipients) if letter.recipients else [letter.to]
        return [letter.sender]

    def _parties(self, letters: Iterable[Letter]) -> list[str]:
        """The platforms this one talks with in a thread, in order (several: a fan-out it opened)."""
        found = [p for x in letters for p in self._counterparts(x) if p and p != self.me.platform]
        return list(dict.fromkeys(found))

    def _fan_out_follow_up(self, to: str | list[str] | tuple[str, ...], thread: str, parties: list[str], body: str,
                           *, type: str, force: bool, hold: bool,
                           attachments: tuple[Attachment, ...] = ()) -> Letter:  # fmt: skip
        """A follow-up in a fan-out thread: the guards judge each counterpart's part of the thread
        (its letters and mine to it) on its own, as they would a two-party thread."""
        from ..config.recipients import resolve
        from ..stages import guards

        check_sendable(type)
        try:
            chosen = resolve(self.registry, to, self.me.platform)
        except (BadInput, ConfigError):
            chosen = ()  # said below, with the platforms the thread is with
        strangers = [n for n in chosen if n not in parties]
        if not chosen or strangers:
            raise BadInput(f"thread {thread} is with {', '.join(parties)}; name one or several of them "
                           f"(e.g. 'send {parties[0]} --thread {thread}')")  # fmt: skip
        letters = self.thread(thread, sync=False)
        lasts: dict[str, Letter] = {}
        for name in chosen:
            last = self._last_of_platform_thread(thread, letters, party=name)
            answered = self.spool.replied_by(_fan_out_key(last.message_id, name)) or self._answered_to(
                thread, last, name
            )
            reason = guards.refusal(guards.Outbound(type, body, self.me.platform, parent=last, follow_up=True,
                                                    force=force, answered_by=answered, depth=last.depth + 1,
                                                    attachments=attachments))  # fmt: skip
            if reason is not None:
                raise Refused(f"{name}: {reason}")
            lasts[name] = last
        if len({x.id for x in lasts.values()}) > 1:
            stands = ", ".join(f"{n} at {x.id}" for n, x in lasts.items())
            raise BadInput(f"thread {thread} stands at different letters ({stands}); follow up with each on its own")
        last = next(iter(lasts.values()))
        composed = self._compose(Draft(chosen[0], type, thread, reply_subject(letters[0].subject), body,
                                       in_reply_to=last.message_id, references=_references(last),
                                       also_to=chosen[1:], attachments=attachments))  # fmt: skip
        letter, raw = composed
        held = self._hold(letter, hold)
        keys = [_fan_out_key(last.message_id, n) for n in chosen]
        stored = self._claim_all(keys, letter, raw, held)
        if stored is None:
            raise Refused(f"letter {last.id} was already followed up for one of {', '.join(chosen)} meanwhile")
        return self._sent(stored, raw)

    def _claim_all(self, keys: list[str], letter: Letter, raw: bytes, held: str | None) -> Letter | None:
        """Claim every key (one per counterpart) and file the letter inside all claims; None when
        another mailbox of this platform holds one of them (nothing is filed then)."""
        if not keys:
            return self._file_outgoing(letter, raw, held)
        with self.spool.claim_reply(keys[0], letter.id) as holder:
            if holder is not None:
                return None
            return self._claim_all(keys[1:], letter, raw, held)

    def _answered_to(self, thread: str, parent: Letter, party: str) -> str | None:
        """Did a mailbox of this platform already send ``party`` a letter after ``parent``? (From
        the letter files: the claim index is a cache.)"""
        for spool in (self.spool, *self.spool.siblings()):
            for letter_id in spool.thread_ids(thread):
                state = spool.locate(letter_id)
                if state in ("outbox", "held", "sent"):
                    sent = spool.letter(letter_id, state)
                    if sent.in_reply_to == parent.message_id and party in self._counterparts(sent):
                        return f"{spool.mailbox} {letter_id}"
        return None

    def note(self, subject: str, body: str, *, to_agent: str | None = None, force: bool = False,
             attachments: tuple[Attachment, ...] = ()) -> Letter:  # fmt: skip
        """A letter to this platform itself, for a sibling agent (``to_agent``) or whoever reads next."""
        from ..stages import guards

        self.last_warnings = []
        _check_body(body, force)
        self._check(guards.Outbound("note", body, self.me.platform, force=force, attachments=attachments))
        if to_agent is not None and to_agent != self.me.agent:
            self._register_sibling(check_name("agent", to_agent))
        composed = self._compose(Draft(self.platform.name, "note", new_thread_id(), subject, body, to_agent=to_agent,
                                       attachments=attachments))  # fmt: skip
        # A note copies the platform's own followers: a hold rule naming one holds it too.
        return self._dispatch(composed, self._hold(composed[0], False))

    def reply(self, to: str | Letter, body: str, *, type: str | None = None, force: bool = False,
              raise_refused: bool = False, hold: bool = False,
              attachments: tuple[Attachment, ...] = (), outcome: str | None = None) -> Letter | None:  # fmt: skip
        """Answer a letter. When a guard refuses: None, and ``why_refused`` says why (the
        documented, compatible form); with ``raise_refused`` Refused, as every other sending
        method does (the convention; the CLI and MCP server use it).

        One reply per letter per platform: the first agent of the platform to answer claims
        the letter (across processes); the others are refused, told who answered."""
        letter = self._reply(to, body, type=type, force=force, hold=hold, attachments=attachments, outcome=outcome)
        if letter is None and raise_refused:
            raise Refused(self.why_refused(to) or "refused")
        return letter

    def _reply(
        self, to: str | Letter, body: str, *, type: str | None, force: bool, hold: bool = False,
        attachments: tuple[Attachment, ...] = (), outcome: str | None = None,
    ) -> Letter | None:  # fmt: skip
        self.last_warnings = []
        _check_body(body, force)
        parent_id = self._id(to)
        parent = self.spool.letter(parent_id)
        kind = check_type(type or _default_reply_type(parent.type))
        check_outcome(outcome, kind)
        reason = self._refusal(parent, kind, body, force=force, attachments=attachments)
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
        composed = self._compose(Draft(recipient.name, kind, parent.thread, reply_subject(parent.subject or "(no subject)"),
                                       body, in_reply_to=parent.message_id, references=_references(parent),
                                       attachments=attachments, cc=(person,) if person else (),
                                       outcome=outcome))  # fmt: skip
        stored = self._file_answer(parent, composed, self._hold(composed[0], hold))
        if stored is None:
            return None
        self._refusals.pop(parent_id, None)
        self._move(parent_id, "unread", "read")
        return self._sent(stored, composed[1])

    def follow_up(self, thread: str, body: str, *, type: str, force: bool = False, hold: bool = False,
                  attachments: tuple[Attachment, ...] = (), outcome: str | None = None) -> Letter:  # fmt: skip
        """A new letter in an existing thread, to its counterpart (e.g. the fixer's fix-notice
        after its ack). It answers this platform's own last letter of the thread, under the
        same guards as a reply (never after the other side's ack or close; the same depth cap;
        one letter after each letter per platform). Raises Refused otherwise."""
        self.last_warnings = []
        _check_body(body, force)
        check_sendable(type)
        check_outcome(outcome, type)
        thread = thread_id(thread)
        letters = self.thread(thread)
        last = self._last_of_platform_thread(thread, letters)
        # After the other side's ack of my own letter, the reporter may add evidence or withdraw
        # (guards.AFTER_ACK): the letter continues my acknowledged letter, never answers the ack.
        acked = self._acked_own(last, letters)
        reason = self._refusal(last, type, body, force=force, follow_up=True, attachments=attachments,
                               acked=acked)  # fmt: skip
        if reason is not None:
            raise Refused(reason)
        counterpart = next((x.to if x.sender == self.me.platform else x.sender for x in letters), "")
        recipient = self.registry.get(counterpart)
        answered = acked or last
        composed = self._compose(Draft(recipient.name, type, thread, reply_subject(letters[0].subject), body,
                                       in_reply_to=answered.message_id, references=_references(last),
                                       attachments=attachments, outcome=outcome))  # fmt: skip
        stored = self._file_answer(answered, composed, self._hold(composed[0], hold))
        if stored is None:
            raise Refused(self._refusals.pop(answered.id, "refused"))
        return self._sent(stored, composed[1])

    def why_refused(self, letter: str | Letter) -> str | None:
        """Why the last ``reply`` to this letter was refused, or why one would be (None: it may go)."""
        letter_id = self._id(letter)
        if letter_id in self._refusals:
            return self._refusals[letter_id]
        parent = self.spool.letter(letter_id)
        return self._refusal(parent, _default_reply_type(parent.type), "", force=True)

    # --- the guards ------------------------------------------------------------------------

    def _refusal(self, parent: Letter, kind: str, body: str, *, force: bool, follow_up: bool = False,
                 attachments: tuple[Attachment, ...] = (), acked: Letter | None = None) -> str | None:  # fmt: skip
        """The one guard, with the facts it needs gathered the same way for every path.
        ``acked``: this platform's own letter that ``parent`` (the other side's ack) answers."""
        from ..stages import guards

        return guards.refusal(
            guards.Outbound(
                kind,
                body,
                self.me.platform,
                parent=parent,
                follow_up=follow_up,
                force=force,
                answered_by=self.spool.replied_by((acked or parent).message_id),
                depth=parent.depth + 1,
                attachments=attachments,
                acks_mine=acked is not None,
            )
        )

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
            for letter_id in sibling.thread_ids(thread):
                state = sibling.locate(letter_id)
                if state in ("outbox", "held", "sent", "failed"):
                    candidates.append(sibling.letter(letter_id, state))
        if party is not None:
            candidates = [x for x in candidates if party in self._counterparts(x)]
        return max(candidates, key=lambda x: (x.depth, x.id))

    def _file_answer(self, parent: Letter, composed: tuple[Letter, bytes], held: str | None = None) -> Letter | None:
        """Claim ``parent`` for this platform and file the answer in the outbox (or in held/:
        a held reply answers the letter, pending approval), as one step. None (with the reason
        remembered) when another agent of the platform answered first."""
        letter, raw = composed
        with self.spool.claim_reply(parent.message_id, letter.id) as holder:
            if holder is None:
                return self._file_outgoing(letter, raw, held)
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
        return None

    def _compose(self, draft: Draft) -> tuple[Letter, bytes]:
        return compose(self.registry, self.home, self.me.platform, draft)

    def _hold(self, letter: Letter, asked: bool) -> str | None:
        """Why ``letter`` waits for a person: asked, or a bus ``hold`` rule naming any of its
        envelope recipients (every To, every Cc: a follower, the person a reply answers)."""
        from ..stages import guards

        return guards.letter_hold_reason(letter, self.registry.bus.hold, asked)

    def _quota(self) -> tuple[int, int | None, str]:
        """This platform's new threads in the last hour (from the letter files), the cap (None:
        ``new_threads_per_hour = 0``, no cap), and when the oldest leaves the window (UTC)."""
        import datetime

        if self.registry.bus.new_threads_per_hour == 0:
            return 0, None, ""
        now_ms = time.time_ns() // 1_000_000
        opened = self.spool.opened_since(now_ms - 3_600_000)
        frees = ""
        if opened:
            from ..model import ulid_ms

            at = datetime.datetime.fromtimestamp((ulid_ms(opened[0]) + 3_600_000) / 1000, datetime.UTC)
            frees = at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return len(opened), self.registry.bus.new_threads_per_hour, frees

    def _file_outgoing(self, letter: Letter, raw: bytes, held: str | None) -> Letter:
        """File a signed letter in the outbox, or in held/ with why it waits for a person."""
        if held is None:
            # Submitted right after this (``_sent``): where "sent" is itself durable, the outbox
            # copy is flushed only if the letter has to wait (the same order, one flush less per file).
            durable = not self._sent_is_durable()
            stored = self.spool.store("outbox", letter, raw, extra=letter.extra, durable=durable)
            self._indexed(stored.id)  # search index
            return stored
        self.spool.ensure()
        self.spool.annotate(letter.id, held_reason=held)  # before the letter: never a held letter without why
        stored = self.spool.store("held", letter, raw, extra=letter.extra)
        self._indexed(stored.id)  # search index
        self._announce_held(self.show(stored.id), held)
        return self.show(stored.id)

    def held(self) -> list[Letter]:
        """Letters waiting for a person's approval, oldest first (never sent until approved)."""
        return self.spool.letters("held")

    def approve(self, letter_id: str | Letter, *, key_file: str | None = None) -> Letter:
        """The operator's decision: release a held letter to the outbox (one rename) and send it,
        as ``send`` does. Needs ``key_file``, the approval key the registry pins (issue 26: the
        agent does not hold it; approvers answer by mail instead). Refused (exit 4) without it.
        Returns the letter as it is now (``sent``, or queued, or failed)."""
        from ..people import approval

        approval.check_key(self.registry, key_file)
        return self._release(self._id(letter_id), "the operator's approval key")

    def _release(self, letter_id: str, approved_by: str) -> Letter:
        """Held → outbox with one rename, then sent: a crash after the rename leaves it in the
        outbox (the next flush sends it once); a second release finds it no longer held."""
        if not self._move(letter_id, "held", "outbox"):
            state = self.spool.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        self.spool.annotate(letter_id, approved="true", approved_by=approved_by)
        return self._sent(self.spool.letter(letter_id, "outbox"))

    def _announce_held(self, letter: Letter, reason: str) -> None:
        """Mail the platform's approvers that ``letter`` waits (never raises: the letter stays
        held whatever happens to its announcement; a failure is recorded on it)."""
        from ..people import approval

        if not approval.approvers(self.registry, self.me.platform):
            return
        message_id, raw = approval.announcement(self.registry, self.me.platform, letter, reason)
        failed = self._mail_people(
            f"{letter.id}.announcement", raw, approval.approvers(self.registry, self.me.platform)
        )
        if failed:
            self.spool.annotate(letter.id, announce_failed=failed)
        else:
            self.spool.annotate(letter.id, announced=message_id)

    def _mail_people(self, key: str, raw: bytes, to: tuple[str, ...]) -> str:
        """Send an automatic letter to people; "" when it left, else why not. On the local
        transport a person's mailbox is the Maildir ``postoffice/<address>/`` (no platform
        name holds an ``@``), which a person's mail client can read."""
        from ..errors import AgentmailError
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
        _, raw = approval.hold_change(self.registry, self.me.platform, before, after)
        return self._mail_people("hold-change", raw, to)

    def _decide_by_mail(self, filed: Filed | list[str]) -> None:
        """Act on approvers' answers among the letters just filed, and among the unread ones a
        crash kept from being acted on: a person's letter answering a held letter's
        announcement, from one of this platform's approvers (authenticated as any person's
        letter: DESIGN §5), releases or rejects it. Anything else decides nothing and is
        recorded on the letter (``approval_ignored``)."""
        from ..errors import AgentmailError
        from ..people import approval

        held = {x.extra.get("announced"): x for x in self.held() if x.extra.get("announced")}
        if not held:
            return
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
                    self._release(target.id, letter.sender_address)
                except NotFound:
                    self.spool.annotate(letter_id, approval_ignored=f"{target.id} is no longer held")
                except AgentmailError:
                    pass  # released: it waits in the outbox and the next flush sends it (once)
            else:
                self._reject(target.id, decided[1], letter.sender_address)
            if decided is not None and letter.sender_address in allowed:
                self.done(letter_id)  # the answer was acted on: it needs nothing from the agent

    def reject(self, letter_id: str | Letter, reason: str) -> Letter:
        """A held letter never leaves: it moves to failed/ with the reason (``sent`` shows it
        to the agent); a rejected reply frees its claim on the letter. Anyone may drop a
        letter that has not left (the agent too): it releases nothing."""
        from ..text import one_line

        letter_id = self._id(letter_id)
        reason = one_line(reason or "").strip()
        if not reason:
            raise BadInput("say why (-r REASON): the agent reads it")
        return self._reject(letter_id, reason, "")

    def _reject(self, letter_id: str, reason: str, by: str) -> Letter:
        if self.spool.locate(letter_id) != "held":
            state = self.spool.locate(letter_id)
            raise NotFound(f"letter {letter_id} is not held" + (f" (it is {state})" if state else ""))
        who = f"by {by}" if by else "by a person"
        self.spool.annotate(letter_id, rejected=reason, failed_reason=f"rejected {who}: {reason}")
        if not self._move(letter_id, "held", "failed"):
            raise NotFound(f"letter {letter_id} is not held")
        return self.show(letter_id)

    def _dispatch(self, composed: tuple[Letter, bytes], held: str | None = None) -> Letter:
        """Outbox first (durable), then the transport; the letter moves to sent/ only on success.
        Letters still queued from earlier ride along on the same connection.

        A configuration error (login refused, untrusted certificate, no AUTH, wrong TLS mode,
        unreadable credentials) is not transient: the new letter is moved to failed/ rather than
        left queued, so fixing the configuration and sending again never delivers it twice."""
        letter, raw = composed
        stored = self._file_outgoing(letter, raw, held)
        return stored if held else self._sent(stored, raw)

    def _sent(self, stored: Letter, raw: bytes | None = None) -> Letter:
        """Submit what the outbox holds (``stored`` among it) and return ``stored`` as it is now.
        A held letter is not in the outbox: returned as it is, waiting for a person. ``raw``:
        the bytes just filed for ``stored``, handed to the transport rather than read back."""
        if stored.state == "held":
            return stored
        self._dispatching = stored.id
        self._fresh = (stored, raw) if raw is not None else None
        sent: str | None = None
        try:
            results = self.flush()
            sent = next((r.status for r in results if r.key == stored.id), None)
        except ConfigError as exc:
            self.spool.annotate(stored.id, failed_reason=f"not sent, not queued: {exc}")
            self._move(stored.id, "outbox", "failed")  # a failed reply holds no claim: it may be sent again
            raise ConfigError(
                f"{exc} — the letter was not sent and not queued; send it again once this is fixed"
            ) from exc
        finally:
            self._dispatching = None
            self._fresh = None
            if sent != "sent":
                self._keep_if_queued(stored.id)
        return self.show(stored.id)

    def _keep_if_queued(self, letter_id: str) -> None:
        """A letter filed without a flush (``_file_outgoing``) that did not leave (queued, or
        failed) is made durable now, before ``send`` returns or raises."""
        if self._sent_is_durable() and self.spool.locate(letter_id) in ("outbox", "failed"):
            self.spool.make_durable(letter_id)

    def _sent_is_durable(self) -> bool:
        """``Transport.sent_is_durable``, without opening a transport to ask: opening one for
        SMTP reads its credentials, and that failing is for ``flush`` to report."""
        if self._transport is not None:
            return self._transport.sent_is_durable
        return self.registry.bus.transport == "local"

    def _outgoing(self, letter_id: str) -> Outgoing | None:
        from ..letter import wire
        from ..transport import Envelope, Outgoing

        copy = None
        if self._fresh is not None and self._fresh[0].id == letter_id:
            letter, raw = self._fresh  # listed in the outbox under its lock: still there
            if self.registry.bus.transport == "local":  # its file holds these very bytes: linked, not rewritten
                copy = self.spool.file_of(letter_id)
        else:
            try:
                letter = self.spool.letter(letter_id, "outbox")
                raw = self.spool.path("outbox", letter_id).read_bytes()
            except (FileNotFoundError, NotFound):
                return None
        if letter.state != "outbox":
            return None  # another process sent it meanwhile
        if letter.message_id.encode() not in raw:
            # A letter filed without a flush, then a power cut: its row outlived its bytes.
            # Never submit what is left of it; say it did not go.
            self.spool.annotate(letter_id, failed_reason="not sent: its file was lost in a crash before it left")
            self._move(letter_id, "outbox", "failed")
            return None
        # Every recipient platform (several for a fan-out) at its thread address, and the
        # followers: one submission, one letter, one Message-ID. On the local post office a
        # person has no mailbox: the Cc header names them, nobody delivers.
        rcpts = [wire.tagged_address(a, letter.thread) for a in letter.recipients or (letter.to_address,)]
        copies = letter.cc if self.registry.bus.transport == "smtp+imap" else ()
        return Outgoing(letter_id, raw, Envelope(self.platform.address, tuple(dict.fromkeys([*rcpts, *copies]))), copy)

    def flush(self) -> list[SubmitResult]:
        """Submit every queued letter: same bytes, same Message-ID. One flusher per mailbox at a
        time, so two processes never submit one letter twice."""
        if self._dispatching is None and not self.spool.ids("outbox"):
            return []  # (a letter being dispatched was filed in the outbox moments ago)
        with self.spool.locked("outbox"):
            items = [o for o in map(self._outgoing, self.spool.ids("outbox")) if o is not None]
            if not items:
                return []
            try:
                results = self.transport.submit(items, on_result=self._record)
            except TransportError as exc:
                from ..transport import SubmitResult

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
            reached("submitted")  # delivered, still in the outbox: a kill here makes flush send it again
            if result.refused:
                self.spool.annotate(result.key, refused="; ".join(f"{a}: {w}" for a, w in result.refused))
            self._move(result.key, "outbox", "sent", durable=False)
        elif result.status == "failed":
            self.spool.annotate(result.key, failed_reason=result.detail)
            self._move(result.key, "outbox", "failed")
        else:
            self.spool.annotate(result.key, queued_reason=result.detail, durable=False)  # informational

    # --- views -----------------------------------------------------------------------------

    def thread(self, thread: str, *, sync: bool = True) -> list[Letter]:
        """Both directions of one thread, in the order they were filed here (the id in any case)."""
        thread = thread_id(thread)
        if sync:
            self.sync()
        letters = []
        for letter_id in self.spool.thread_ids(thread):
            state = self.spool.locate(letter_id)
            if state and state != "quarantine":
                letters.append(self._addressed(self.spool.letter(letter_id, state)))
        if not letters:
            raise NotFound(f"no thread {thread}")
        return letters

    def sent(self) -> list[Letter]:
        return [
            self._addressed(letter)
            for state in ("held", "outbox", "failed", "sent")
            for letter in self.spool.letters(state)
        ]

    def _addressed(self, letter: Letter) -> Letter:
        """A fan-out letter with ``to_platforms``: every recipient's platform name, in To order
        (``to`` names the first, as it always did; ``recipients`` are the addresses)."""
        if not letter.recipients:
            return letter
        return letter.replace(extra={**letter.extra, "to_platforms": self._names(letter.recipients)})

    def quarantined(self, *, sync: bool = True) -> list[Letter]:
        if sync:
            self.sync()
        return self.spool.letters("quarantine")

    def recheck_quarantine(self, *refs: str, sync: bool = True) -> list[dict[str, Any]]:
        """Judge quarantined letters (those ``refs`` name; none: all) again against today's
        registry; one that passes now is filed ``unread`` (recheck.py). One result each."""
        from .recheck import recheck

        if sync:
            self.sync()
        return recheck(self, tuple(refs))

    def notes(self, *, sync: bool = True) -> list[Letter]:
        """Notes for me (addressed to my agent name, or to nobody in particular); not consumed."""
        if sync:
            self.sync()
        found = []
        for state in ("unread", "read"):
            for letter in self.spool.letters(state):
                if letter.type == "note" and letter.to_agent in (None, self.me.agent):
                    found.append(letter)
        return sorted(found, key=lambda letter: letter.id)

    def status(self, *, sync: bool = True, closed: bool = False, stale: float | None = None) -> list[ThreadStatus]:
        """Per open thread: where it stands in report → ack → fix-notice → verify-result → close.
        ``closed`` adds the closed threads too (that walks the whole history); ``stale``: only the
        threads with no move for longer than that many seconds."""
        if stale is not None:
            return [r for r in self.status(sync=sync, closed=closed) if r.idle(now_ms()) > stale]
        if sync:
            self.sync()
        rows = []
        undelivered = {state: set(self.spool.ids(state)) for state in ("held", "outbox", "failed")}
        dismissed = {i for i in undelivered["failed"] if self.spool.annotations(i).get("dismissed")}
        for thread in self.spool.threads() if closed else self.spool.open_threads():
            ids = [i for i in self.spool.thread_ids(thread) if i not in dismissed]
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
                    undeliverable=any(self.spool.annotations(i).get("undeliverable") for i in ids),
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
        """How many threads ``status --closed`` adds (counted, not read)."""
        return self.spool.closed_threads()

    @staticmethod
    def _whose_move(last: Letter, other: str, mine: bool | None = None) -> str:
        """Whose move it is after ``last`` between this platform and ``other``."""
        mine = last.sender != other if mine is None else mine
        if last.type == "close":
            return "nobody"
        if last.type == "ack":
            return "me" if mine else other  # whoever acknowledged owes the fix
        return other if mine else "me"

    def _parts(self, thread: str, ids: list[str]) -> tuple[dict[str, Any], ...]:
        """A fan-out thread, one row per counterpart: its part (its letters, and mine to it)."""
        letters = []
        for letter_id in ids:
            state = self.spool.locate(letter_id)
            if state not in (None, "quarantine"):
                letters.append(self.spool.letter(letter_id, state))
        rows = []
        for party in self._parties(letters):
            own = [x for x in letters if party in self._counterparts(x)]
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
                    return label, str(self.spool.letter(letter_id, state).extra.get(key) or ""), letter_id
        return ("sent" if mine else "received"), "", ""

    def _filed(self, ids: Iterable[str]) -> Letter | None:
        """The first letter of ``ids`` that is filed (a crash can leave a listed id absent)."""
        for letter_id in ids:
            state = self.spool.locate(letter_id)
            if state not in (None, "quarantine"):
                return self.spool.letter(letter_id, state)
        return None

    # --- search (issue 13) -----------------------------------------------------------------
    # The index is a cache beside the spool (search.py). The two calls below are the only places
    # it is fed: after a letter is filed (sync's commit, _file_outgoing) and after a state change
    # (_move). Whatever they miss, the staleness check of the next search finds.

    def search(self, query: str | Query = "", *, sync: bool = True, **filters: Any) -> list[Hit]:
        """Letters of this mailbox (both directions; quarantine only with ``quarantine=True``)
        matching ``query``, best first. ``filters``: the fields of ``search.Query`` (``sender``,
        ``type``, ``thread``, ``since``, ``state``, ``limit``, ``quarantine``, ``syntax``)."""
        from ..spool.search import Query, check_query

        wanted = query if isinstance(query, Query) else Query(text=query, **filters)
        if wanted.thread is not None:
            wanted = wanted.replace(thread=thread_id(wanted.thread))
        check_query(wanted)  # a bad filter is refused before the sync
        if sync:
            self.sync()
        return self.search_index.search(wanted)

    @property
    def search_index(self) -> SearchIndex:
        if self._search is None:
            from ..spool.search import SearchIndex

            self._search = SearchIndex(self.spool)
        return self._search

    def _indexed(self, *letter_ids: str) -> None:
        """SEARCH FEED: these letters were filed or changed state (best effort, never raises)."""
        if self._search is None and not os.path.exists(f"{self.spool.root}/{SEARCH_INDEX}"):
            return  # no index yet (the first search builds it): sqlite3 is not even imported
        try:
            self.search_index.update(letter_ids)
        except Exception:  # a cache: the next search's staleness check repairs it
            pass

    def _move(self, letter_id: str, source: str, target: str, *, durable: bool = True) -> bool:
        """``Spool.move``, then the search feed (SEARCH FEED: the one state-change call site)."""
        moved = self.spool.move(letter_id, source, target, durable=durable)
        if moved:
            self._indexed(letter_id)
        return moved

    def _warm_receiving(self) -> None:
        """Before blocking: judge and route one letter signed here for this platform (never
        filed), as ``_file`` would, so the first letter that lands pays no first-use costs
        (imports, the email and DKIM packages' compiled patterns, the duplicate check's, the
        database's first durable commit). Only with a pinned key: nothing here may reach a network."""
        from ..stages.route import route

        self.spool.warm()
        if self.platform.key_lookup != "pinned":
            return
        try:
            draft = Draft(self.platform.name, "question", new_thread_id(), "warm-up", "Is this warm?")
            route(*self._judged(self._compose(draft)[1]))
        except Exception:  # a missing key, say: the letter that lands says so when it is judged
            pass

    def wait(self, timeout: float = 60.0, *, type: str | None = None, thread: str | None = None) -> tuple[Letter, str]:
        """Block until an unread letter matching the filters is in the spool; (letter, mechanism).

        Raises Timeout. A matching letter already unread returns at once ("spool")."""
        thread = None if thread is None else thread_id(thread)
        deadline = time.monotonic() + timeout
        mechanism = "spool"
        while True:
            self._sync(woken=mechanism != "spool")
            for letter in self.inbox(sync=False):
                if (type is None or letter.type == type) and (thread is None or letter.thread == thread):
                    return letter, mechanism
            if mechanism == "spool":
                self._warm_receiving()
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"no matching letter within {timeout:g}s")
            woke = self.transport.wait(self._checkpoint(self.transport.name), left)
            if woke is None:
                raise Timeout(f"no matching letter within {timeout:g}s")
            mechanism = woke


def _ours(letter: Letter, me: Identity) -> bool:
    """A letter this mailbox wrote, among its files (rebuild): from its platform, not a person's,
    and not a sibling's note to this agent (the only letters from its platform a mailbox files)."""
    to_me = letter.type == "note" and letter.to_agent is not None and letter.to_agent == me.agent
    return letter.sender == me.platform and not letter.extra.get("person") and not to_me


def _check_body(body: str, force: bool) -> None:
    """An empty letter is bad input (exit 2), said before any guard is asked (``--force``, which
    the guard honours for an empty body too, still sends one)."""
    if not force and not body.strip():
        raise BadInput("the body is empty: write what the reader needs (-b TEXT, -b @FILE or -b - for standard input)")


def _fan_out_key(message_id: str, party: str) -> str:
    """What a follow-up in a fan-out thread claims: the letter it follows, per counterpart."""
    return f"{message_id} to {party}"


def raise_for_state(letter: Letter) -> Letter:
    """The one rule for what a sent letter's state means to whoever asked for it to go: ``sent``
    is returned; ``outbox`` (queued: it goes out with the next sync or send) raises
    TransportError; ``failed`` (the server refused it for good) raises PermanentFailure.
    Both exit 5 from the CLI and are tool errors from the MCP server."""
    if letter.state == "outbox":
        why = letter.extra.get("queued_reason") or "the server is unreachable"
        raise TransportError(
            f"queued, not sent yet: {why}; it goes out with the next sync or send — do not send it again"
        )
    if letter.state == "failed":
        raise PermanentFailure(f"refused by the server: {letter.extra.get('failed_reason')}")
    return letter


def _state_of(last: Letter) -> str:
    """The lifecycle word for a thread whose last letter is ``last``: a verify-result that says
    ``still-broken`` is "still broken" (the fixer's move again); confirmed or unstated, "verified"."""
    if last.type == "verify-result" and last.outcome == "still-broken":
        return "still broken"
    return _lifecycle(last.type)


def _lifecycle(kind: str) -> str:
    return {
        "report": "reported",
        "question": "asked",
        "ack": "acknowledged",
        "fix-notice": "fix announced",
        "verify-result": "verified",
        "close": "closed",
        HUMAN: "human letter",
    }.get(kind, kind)
