"""Receiving: fetch from the checkpoint, judge, route, file, one letter isolated from the next (DESIGN §1, §7)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._value import Value, field
from ..ages import now_ms
from ..config.identity import Identity
from ..errors import (
    BadInput,
    NotFound,
    StorageError,
    Timeout,
)
from ..model import (
    Letter,
    check_filter_type,
    thread_id,
    ulid_ms,
)
from ..spool import Spool, ledger
from ..spool.filed import Filed
from ..spool.layout import same_bytes
from ..stages.compose import NEW_THREAD, Draft
from ..stages.facts import Facts, gather, parties_of
from ..text import one_line
from . import guard_changes, sibling_letters
from .mailbox import Stage

if TYPE_CHECKING:
    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from ..transport import Incoming
    from ..trust.authenticity import Verdict
    from .holds import Holds
    from .mailbox import Mailbox
    from .outbox import Outbox


class SyncReport(Value):
    """What one sync did with every letter it fetched: accepted + quarantined + duplicates +
    bounces + skipped == fetched. ``internal_errors`` counts letters quarantined because judging
    or filing them raised something unexpected (an agentmail bug; they are in ``quarantined``).
    ``accepted`` and ``quarantined`` read like lists of letters but hold ids: each letter is read
    from the spool when asked for, so a sync of any size stays small in memory (``spool.filed.Filed``)."""

    accepted: Filed = field(default_factory=Filed)
    quarantined: Filed = field(default_factory=Filed)
    duplicates: int = 0
    bounces: int = 0
    skipped: int = 0  # notes for a sibling agent
    fetched: int = 0
    internal_errors: int = 0
    siblings: int = 0  # the platform's letters from its other mailboxes, filed as ``sibling`` (not fetched)
    flushed: int = 0  # letters queued earlier that left with this sync (said on stderr, not in to_json)
    escalation_problem: str | None = None  # why the followers were not told what needs them (stderr)

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": len(self.accepted),
            "quarantined": len(self.quarantined),
            "duplicates": self.duplicates,
            "bounces": self.bounces,
            "skipped": self.skipped,
            "fetched": self.fetched,
            "internal_errors": self.internal_errors,
            "siblings": self.siblings,
        }

    def __post_init__(self) -> None:
        for name in ("accepted", "quarantined"):  # a list given by a caller, as before
            if not isinstance(getattr(self, name), Filed):
                setattr(self, name, Filed(getattr(self, name)))


class Receiver(Stage):
    """What arrives: fetched from the checkpoint, judged, routed and filed, one letter isolated from the next; read and consumed."""

    def __init__(self, box: Mailbox, outbox: Outbox, holds: Holds) -> None:
        super().__init__(box)
        self.outbox, self.holds = outbox, holds
        self._waiting: sibling_letters.Waiting | None = None  # during a sync: siblings' answers to what it files
        self._warmed: set[int] = set()  # the threads whose waits warmed up (a connection per thread)

    def sync(self, *, woken: bool = False) -> SyncReport:
        """``woken``: the transport has just said something arrived (``wait``), so neither the
        outbox nor the cheap look first: straight to the fetch, the letter is waited for."""
        report = SyncReport(Filed(spool=self.spool.read), Filed(spool=self.spool.read))
        if not woken:
            # talking to the server anyway: retry what waits in the outbox
            report.flushed = sum(r.status == "sent" for r in self.outbox.flush())
        transport = self.transport
        if (
            not woken
            and not transport.pending(self._checkpoint(transport.name))
            and not sibling_letters.pending(transport, self.spool.read.checkpoint)
        ):
            if self.spool.read.ids("held") or guard_changes.pending(
                self.spool
            ):  # an approver's answer a dead sync filed, not acted on
                self.holds.decide_by_mail([])
            if self.spool.read.waiting(1):  # an answer waiting for its letter may have waited its time
                with self.spool.locked():
                    self._settle()
            return report  # nothing new: no lock, and none of the parsing and checking code loaded

        with self.spool.locked():
            self.spool.write.sweep_tmp()
            # The platform's letters from its other mailboxes first: a person's untagged answer
            # to one of them then finds its thread (client/sibling_letters.py).
            self._waiting = kept = sibling_letters.Waiting()
            report.siblings, threads, waiting = sibling_letters.fetch(
                self.box, transport, self.spool.read.checkpoint, waiting=kept
            )
            checkpoint = self._checkpoint(transport.name)
            for batch in transport.fetch(checkpoint, self.registry.bus.max_size):
                outcomes: dict[str, str] = {}
                self.spool.write.begin_filing()  # no WAL flush: the checkpoint follows it (DESIGN §7)
                try:
                    for item in batch:
                        report.fetched += 1
                        before = (len(report.accepted), len(report.quarantined))
                        self._file_isolated(item, report)
                        if len(report.accepted) > before[0]:
                            outcomes[item.key] = "verified"
                        elif len(report.quarantined) > before[1]:
                            outcomes[item.key] = "quarantined"
                    transport.settle()  # the letters' post-office names are durable before a row names them
                except BaseException:
                    self.spool.write.discard()
                    raise
                self.spool.write.commit()
                checkpoint = transport.advance(checkpoint, batch)
                self.spool.write.set_checkpoint(transport.name, checkpoint)
                transport.mark(outcomes)  # after the commit: a mark never stands for a letter not filed
            settled = transport.advance(checkpoint, [])  # e.g. record a new UIDVALIDITY with nothing new
            if settled != checkpoint:
                self.spool.write.set_checkpoint(transport.name, settled)
            if self.spool.read.waiting(1):  # answers that waited for a letter this sync may have filed
                self._settle()
            threads |= kept.threads
            self._waiting = None
            if waiting:  # the sibling letters still waiting (their letter was not in the INBOX): now
                more, later, _ = sibling_letters.fetch(self.box, transport, self.spool.read.checkpoint)
                report.siblings += more
                threads |= later
            if report.siblings or threads:  # what a sibling answered is read here too
                sibling_letters.settle(self.box, threads | {x.thread for x in report.accepted})
            elif report.accepted and self.spool.read.ids(sibling_letters.STATE):
                sibling_letters.settle(self.box, {x.thread for x in report.accepted})
        self.holds.decide_by_mail(report.accepted)  # approvers' answers, after the commit
        return report

    def _checkpoint(self, transport: str) -> str | None:
        """Where this mailbox's fetch stopped. A new mailbox of a platform whose other mailboxes
        already read (a new agent name) starts where they are, not at the platform's whole
        history (DESIGN §7; ``inbox --from-start`` reads the backlog). Stored at once, so the
        start never moves on with the siblings."""
        value = self.spool.read.checkpoint(transport)
        if value is not None:
            return value
        start = self._siblings_position(transport)
        if start is not None and not (self.spool.read.ids("unread") or self.spool.read.ids("read")):
            self.spool.ensure()
            self.spool.write.set_checkpoint(transport, start)
            return start
        return None

    def _siblings_position(self, transport: str) -> str | None:
        """The furthest checkpoint of this platform's other mailboxes on ``transport`` (None: none read yet)."""
        from ..transport import Checkpoint

        found = [c for c in (s.read.checkpoint(transport) for s in self.spool.siblings()) if c]
        return max(found, key=lambda c: Checkpoint.parse(c).last) if found else None

    def from_start(self) -> None:
        """Does ``AgentMail.from_start``."""
        from ..transport import Checkpoint

        with self.spool.locked():
            self.spool.write.set_checkpoint(self.transport.name, str(Checkpoint()))
            self.spool.write.set_checkpoint(sibling_letters.checkpoint_name(self.transport), str(Checkpoint()))

    def register_sibling(self, agent: str) -> None:
        """A note for an agent that has never read: its mailbox starts at this one's position,
        before the note, so the note is not skipped as history (``_checkpoint``)."""
        sibling = Spool(self.home / "spool" / f"{self.me.platform}@{agent}", platform_root=self.spool.platform_root)
        name = self.transport.name
        position = self._checkpoint(name)
        if position is not None and sibling.read.checkpoint(name) is None and not sibling.read.ids("unread"):
            sibling.ensure()
            sibling.write.set_checkpoint(name, position)

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
        from ..stages.route import route
        from ..trust import authenticity  # already loaded by sync(); a dictionary lookup here

        raw = item.raw
        if raw is None and item.problem is not None:
            verdict: authenticity.Verdict | None = authenticity.Verdict(
                "quarantine",
                reason="malformed",
                detail=f"the post office entry {one_line(item.problem)[:300]}: not read, left where it is "
                "(once it is a readable letter, 'agentmail inbox --from-start' reads it)",
            )
            raw = self._placeholder(item)
            facts = Facts(self.me.agent, bytes_filed=self.spool.read.has_bytes(raw))
        elif raw is None:
            limit = self.registry.bus.max_size
            verdict = authenticity.Verdict(
                "quarantine",
                reason="too-large",
                detail=f"the letter is {item.size} bytes; this bus takes at most {limit} (not downloaded)",
            )
            raw = self._placeholder(item)
            facts = Facts(self.me.agent, bytes_filed=self.spool.read.has_bytes(raw))
        else:
            verdict, facts = self._judged(raw)
        filing = route(verdict, facts)
        # The names of what was fetched are durable before the first write of the batch (the
        # local post office flushed cur/ in its fetch; a transport may flush here instead).
        self.transport.settle()
        if filing.action == "duplicate":
            report.duplicates += 1
        elif filing.action == "skip":
            report.skipped += 1
        elif filing.action == "bounce":
            assert filing.letter_id is not None and filing.verdict is not None
            # When the first report came (the digest's "since"): a report read again (a rebuild,
            # --from-start) is the bounce already noted, never a new one to tell people of.
            first = self.spool.read.annotations(filing.letter_id).get("undeliverable_at")
            self.spool.write.annotate(
                filing.letter_id,
                undeliverable="true",
                undeliverable_reason=filing.verdict.detail or "",
                undeliverable_at=first if isinstance(first, str) and first else str(now_ms()),
            )
            report.bounces += 1
        elif filing.action == "quarantine":
            assert filing.verdict is not None
            self._quarantine(filing.verdict, raw, report, item.copy if raw is item.raw else None)
        else:
            assert filing.verdict is not None and filing.verdict.letter is not None
            report.accepted.append(
                self.spool.write.store("unread", filing.verdict.letter, raw, defer=True, copy=item.copy)
            )  # depth: from the chain
            if self._waiting is not None:  # a sibling's answer to it follows it (client/sibling_letters.py)
                try:
                    report.siblings += self._waiting.file_after(self.box, filing.verdict.letter.message_id)
                except Exception:  # noqa: BLE001  (never the letter's fault: the second read files them)
                    self._waiting = None

    def _judged(self, raw: bytes) -> tuple[Verdict | None, Facts]:
        """The verdict on a fetched letter (None: its bytes are filed already) and what the
        spool knows that routing it needs; reads, never writes."""
        from ..trust import authenticity

        seen, hashed = self._seen(raw)
        if self.spool.read.holds_bytes(raw, seen[2] if seen else None, hashed):
            return None, Facts(self.me.agent, bytes_filed=True)
        verdict = authenticity.judge_unguarded(raw, self.registry)
        return verdict, self.facts(verdict, seen=seen)

    def facts(
        self,
        verdict: Verdict,
        parties: Callable[[str], frozenset[str]] | None = None,
        *,
        seen: tuple[str, str, str | None] | None = None,
    ) -> Facts:
        """What the spool knows that routing ``verdict`` needs (stages/facts.py: every path asks the
        same). ``parties``: who a thread's parties are, where the spool cannot say (``rebuild``).
        ``seen``: a (sender, Message-ID) look-up made already in this reading (``_seen``)."""
        return gather(self.spool.read, self.registry, self.me, self.platform.address, verdict, parties, seen=seen)

    def _seen(self, raw: bytes) -> tuple[tuple[str, str, str | None] | None, bool | None]:
        """The duplicate check's look-ups, in one statement: (platform, Message-ID, the letter
        filed under them) for the platform the From address names, and whether these bytes'
        hash is filed; (None, None) where the letter names none (then its bytes are found by
        their hash alone). Judging reads only, so the facts reuse the first."""
        from ..letter import wire

        quick = wire.quick_identity(raw)
        platform = self.registry.by_address(quick[0]) if quick else None
        if quick and platform and platform.name and quick[1]:
            existing, hashed = self.spool.read.known_and_hashed(platform.name, quick[1], raw)
            return (platform.name, quick[1], existing), hashed
        return None, None

    def _quarantine(
        self, verdict: Verdict, raw: bytes, report: SyncReport, copy: tuple[str, int, int] | None = None
    ) -> None:
        letter = self._quarantined(verdict)
        report.quarantined.append(self.spool.write.store("quarantine", letter, raw, index=False, defer=True, copy=copy))

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
        """``AgentMail.rebuild``: spool.db made again from the letter files, each judged as a sync would."""
        from ..stages.route import route
        from ..trust import authenticity

        try:
            self.spool.check()
        except StorageError:
            pass
        else:
            raise NotFound(f"{self.spool.db.path} is in order: nothing to rebuild")
        me = self.me
        # The spool.db is being made again: a thread's parties are those of the letters restored before.
        restored: dict[str, set[str]] = {}
        sent_here: set[str] = set()  # the Message-IDs of the letters of mine restored
        # (sender, Message-ID) of each letter restored: a second file of one is a duplicate, as
        # at sync (a dropped copy whose unlink a crash undid); the ledger's letters come first,
        # the last filed first.
        filed: dict[tuple[str, str], str] = {}

        def parties(thread: str) -> frozenset[str]:
            return frozenset(restored.get(thread, ()))

        def classify(letter_id: str, raw: bytes, was: ledger.Entry | None) -> tuple[str, Letter] | None:
            judged = _classify(letter_id, raw, was)
            if judged is not None and judged[0] != "quarantine":
                restored.setdefault(judged[1].thread, set()).update(parties_of(judged[1], self.registry))
                filed.setdefault((judged[1].sender, judged[1].message_id), letter_id)
            return judged

        def _classify(letter_id: str, raw: bytes, was: ledger.Entry | None) -> tuple[str, Letter] | None:
            recorded = _recorded(was)
            if raw.startswith((b"X-Agentmail-Not-Downloaded:", b"X-Agentmail-Not-Read:")):
                return "quarantine", recorded or self._quarantined(
                    authenticity.Verdict(
                        "quarantine",
                        reason="too-large" if raw.startswith(b"X-Agentmail-Not-Downloaded:") else "malformed",
                        detail="not read when it arrived; the rest of its note was in the spool.db that was lost",
                    )
                )
            # With the keys valid when it was filed: its id is the time (a rotation's window may be over).
            filed_ms = ulid_ms(letter_id)
            verdict = authenticity.judge(raw, self.registry, at=filed_ms / 1000 if filed_ms >= 0 else None)
            if was is not None and was.state:  # the ledger says how it stood: restored so
                if was.state == "quarantine":
                    then = authenticity.Verdict(
                        "quarantine",
                        reason="malformed",
                        detail="quarantined when it arrived; its verdict was in the spool.db that was lost",
                    )
                    return "quarantine", recorded or self._quarantined(
                        verdict if verdict.route == "quarantine" else then
                    )
                if verdict.route != "accept" and same_bytes(was.notes, raw) is False:
                    # Its file changed after it was filed (a sent letter's is the recipients' file on
                    # the local post office): what it holds now was never verified, nor sent.
                    return "quarantine", self._quarantined(verdict)
                letter = recorded or (verdict.letter if verdict.route == "accept" else None)
                letter = letter or authenticity.as_filed(raw, self.registry)  # its key retired since
                received = was.state in ("unread", "read")
                if letter is not None and received and (letter.sender, letter.message_id) in filed:
                    return None  # filed again after a power cut took this filing from spool.db only
                if letter is not None:
                    return was.state, letter
            letter = verdict.letter
            # A copy of a letter of mine to others, delivered here after it, is judged as a sync judged it.
            if (
                verdict.route == "accept"
                and letter is not None
                and _ours(letter, me)
                and (self.platform.address in verdict.addressed or letter.message_id not in sent_here)
            ):
                sent_here.add(letter.message_id)
                return sibling_letters.STATE if sibling_letters.is_sibling_file(letter_id, letter) else "sent", letter
            facts = self.facts(verdict, parties)
            if letter is not None and facts.filed_as is None:
                facts = facts.replace(filed_as=filed.get((letter.sender, letter.message_id)))
            filing = route(verdict, facts)
            if filing.action == "file" and filing.verdict is not None and filing.verdict.letter is not None:
                return "unread", filing.verdict.letter
            if filing.action == "quarantine" and filing.verdict is not None:
                return "quarantine", self._quarantined(filing.verdict)
            return None

        counts = self.spool.recover(classify)
        with self.spool.locked():  # an answer restored as waiting whose letter was restored after it
            for result in self._settle():
                counts["quarantine"] -= result["outcome"] != "quarantined"
                counts["unread"] += result["outcome"] == "filed"
        return counts

    def _settle(self) -> list[dict[str, Any]]:
        """The answers that waited for their letter, judged again where they may go on (recheck.py)."""
        from .recheck import settle

        return settle(self.box)

    def inbox(self, *, consume: bool = False, limit: int | None = None) -> list[Letter]:
        """Unread authenticated letters as filed now, oldest first (the facade syncs first).
        ``consume``: at-most-once, only the letters this call moved to read are returned."""
        ids = self.spool.read.ids("unread")
        letters: list[Letter] = []
        for letter_id in ids:
            if limit is not None and len(letters) >= limit:
                break
            try:
                letter = self.spool.read.letter(letter_id, "unread")
            except NotFound:
                continue
            if consume:
                if not self.box.move(letter_id, "unread", "read"):
                    continue  # another consumer claimed it first
                letter = letter.replace(state="read")
            letters.append(letter)
        return letters

    def done(self, *letter_ids: str) -> list[str]:
        """Does ``AgentMail.done``."""
        moved: list[str] = []
        for ref in letter_ids:
            letter_id, state = self._located(ref)
            if state is None:
                raise NotFound(f"no letter {letter_id}")
            if state == "unread" and self.box.move(letter_id, "unread", "read"):
                moved.append(letter_id)
            elif state in ("failed", "quarantine") and not self.spool.read.annotations(letter_id).get("dismissed"):
                self.spool.write.annotate(letter_id, dismissed="true")
                moved.append(letter_id)
        return moved

    def _located(self, ref: str) -> tuple[str, str | None]:
        """The id ``ref`` names (``Mailbox.id_of``: ids in any case) and its state: one lookup
        for an id, which is what ``id_of`` tries first and then ``locate`` asked again."""
        lowered = ref.strip().lower() if isinstance(ref, str) else ""
        state = self.spool.read.locate(lowered) if lowered.isascii() and lowered.isalnum() else None
        if state is not None:
            return lowered, state
        letter_id = self.box.id_of(ref)
        return letter_id, self.spool.read.locate(letter_id)

    def recheck_quarantine(self, *refs: str) -> list[dict[str, Any]]:
        """Does ``AgentMail.recheck_quarantine``."""
        from .recheck import recheck

        return recheck(self.box, tuple(refs))

    def dismiss_quarantined(self, *refs: str) -> list[str]:
        """``quarantine drop ID...``: the quarantined letters ``refs`` name, dismissed as ``done``
        dismisses one (NotFound for a ref that names none); the ids dismissed now."""
        from .recheck import chosen

        if not refs:
            raise BadInput("name the quarantined letters to drop (their ids: 'agentmail quarantine')")
        return self.done(*chosen(self.spool, refs))

    def _warm_receiving(self) -> None:
        """Before blocking: judge and route one letter signed here for this platform (never
        filed), as ``_file`` would, so the first letter that lands pays no first-use costs
        (imports, the email and DKIM packages' compiled patterns, the duplicate check's, the
        database's first durable commit). Only with a pinned key: nothing here may reach a network.
        Once per thread (its database connection): a waiter that wakes on a timeout and waits
        again (a ``wait()`` loop) would otherwise sign, judge and fsync twice a second while idle."""
        from ..stages.route import route

        if threading.get_ident() in self._warmed:
            return
        self._warmed.add(threading.get_ident())
        self.spool.write.warm()
        if self.platform.key_lookup != "pinned":
            return
        try:
            draft = Draft(self.platform.name, "question", NEW_THREAD, "warm-up", "Is this warm?")
            route(*self._judged(self.box.compose(draft)[1]))
        except Exception:  # a missing key, say: the letter that lands says so when it is judged
            pass

    def wait(self, timeout: float = 60.0, *, type: str | None = None, thread: str | None = None) -> tuple[Letter, str]:
        """Does ``AgentMail.wait``."""
        thread = None if thread is None else thread_id(thread)
        check_filter_type(type)  # a misspelt type is refused now, not waited out
        deadline = time.monotonic() + timeout
        mechanism = "spool"
        while True:
            self.sync(woken=mechanism != "spool")
            for letter in self.inbox():
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


def _recorded(was: ledger.Entry | None) -> Letter | None:
    """The letter as filed, where its notes keep it (a quarantine's verdict, a person's letter
    as it was read): the file alone does not say it. None when they keep none (or a broken one)."""
    if was is None:
        return None
    for fact in ("quarantined", "person_letter"):
        data = was.notes.get(fact)
        if isinstance(data, dict):
            try:
                return Letter.from_json(data).replace(id="")
            except Exception:  # noqa: BLE001  (a damaged ledger line: judged from the file instead)
                return None
    return None


def _ours(letter: Letter, me: Identity) -> bool:
    """A letter this mailbox wrote, among its files (rebuild): from its platform, not a person's,
    and not a sibling's note to this agent (the only letters from its platform a mailbox files)."""
    to_me = letter.type == "note" and letter.to_agent is not None and letter.to_agent == me.agent
    return letter.sender == me.platform and not letter.extra.get("person") and not to_me
