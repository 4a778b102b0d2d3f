"""The one door for letters to people (DESIGN §6): the digest, "needs a person", the held letter's
announcement to the approvers, the hold rule's change and a change of the guards asked of them.
``people/`` writes them (inputs → signed bytes); every one leaves here, through the bus's
transport (on the local post office a listed person's Maildir ``postoffice/<address>/``, the
same submission every letter makes), and none enters the spool's letter table.

A letter whose failure fails the command that wrote it (the digest, a hold change, a change
asked) is sent once and the command says why; nothing keeps it, so running the command again
never sends it twice. The others (escalations, held letters' announcements) are *recorded
first* (``sending``, durable, under a lock), then sent; one the transport could not take now
(``queued``) keeps its bytes beside its record and is sent again by the next sync (``_retry``,
the one retry): at most once, never lost to a passing outage.

    spool/<mailbox>/digest.json                  the last sent digest: its time and Message-IDs
    spool/<platform>/escalations/<key>.json|.eml  one per "needs a person" (state claiming | sending | sent | queued | failed | elsewhere: people/escalation)
    spool/<platform>/escalations.lock            one announcer at a time among the platform's agents
    spool/<mailbox>/announcements/<id>.json|.eml a held letter's announcement until it has left
    spool/<mailbox>/announcements.lock
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import ages, bounds
from .._fs import locked, read_plain, write_atomic, write_new
from ..errors import AgentmailError, ConfigError, TransportError
from ..frame import inline
from ..model import new_ulid, ulid_ms
from ..transport.base import Envelope, Outgoing
from .mailbox import Stage

if TYPE_CHECKING:
    from ..model import Letter
    from ..people.digest import Digest
    from .mailbox import Mailbox
    from .threads import Threads

ESCALATIONS = "escalations"
ANNOUNCEMENTS = "announcements"
DIGEST = "digest.json"
_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes: more is no record of ours
INTERRUPTED = "interrupted inside its submission: it may not have reached the approvers (never sent twice)"


class ToPeople(Stage):
    """Letters for people, sent through the transport; escalation and the digest."""

    def __init__(self, box: Mailbox, threads: Threads, sync: Callable[[], object]) -> None:
        super().__init__(box)
        self.threads = threads
        self.sync = sync
        self.escalated: list[dict[str, Any]] = []  # what this client announced to people
        self._escalated_at = -(1 << 62)
        self._stall_problem: OSError | None = None  # a claim on the server that could not be made this run

    # --- the door ---------------------------------------------------------------------------

    def deliver(self, to: tuple[str, ...], message_id: str, raw: bytes) -> tuple[str, str]:
        """Submit ``raw`` to the people ``to`` (one submission, every one an RCPT TO). Returns
        (status, detail): sent | queued (not taken: try again) | failed (refused). Never raises."""
        results: list[Any] = []
        try:
            self.transport.submit([Outgoing(message_id, raw, Envelope(self.platform.address, to))], results.append)
        except (AgentmailError, OSError) as exc:  # unreachable, a configuration to fix, a Maildir that
            return "queued", str(exc) or exc.__class__.__name__  # cannot be written: not sent, tried later
        if not results:
            return "queued", "the transport gave no result"
        result = results[-1]
        detail = result.detail
        if result.refused:
            detail = (detail + "; " if detail else "") + "; ".join(f"{a}: {w}" for a, w in result.refused)
        return str(result.status), detail

    def why_not(self, to: tuple[str, ...], message_id: str, raw: bytes) -> str:
        """Send once, now: "" when it left, else why not (nothing is kept to send again)."""
        status, detail = self.deliver(to, message_id, raw)
        return "" if status == "sent" else detail or status

    # --- recorded first, sent again when queued (the one retry) ---------------------------------

    def _send(self, where: Path, record: dict[str, Any], raw: bytes) -> dict[str, Any]:
        status, detail = self.deliver(tuple(record["to"]), record["message_id"], raw)
        if status == "queued":
            (where / f"{record['key']}.eml").write_bytes(raw)  # before the record says queued: a retry has it
        record = {**record, "state": status, "detail": detail}
        write_record(where / f"{record['key']}.json", record)
        if status != "queued":
            (where / f"{record['key']}.eml").unlink(missing_ok=True)
        return record

    def _retry(
        self, where: Path, people: tuple[str, ...], still_ours: Callable[[Path, dict[str, Any]], bool] | None = None
    ) -> list[dict[str, Any]]:
        """Send again every queued letter of ``where`` (the caller holds its lock), to those of its
        recipients who are among ``people`` now (a record is a file: it names whom it likes), and
        for which ``still_ours`` (if given) says yes; returns their records as they are now."""
        done = []
        for record in records_in(where):
            to = [a for a in record.get("to") or () if a in people]
            if record.get("state") != "queued" or not to:
                continue
            if still_ours is not None and not still_ours(where, record):
                continue
            try:  # never through a link: the bytes that leave are the ones queued here
                raw, _ = read_plain(where / f"{record['key']}.eml")
            except OSError:
                continue
            done.append(self._send(where, {**record, "to": to}, raw or b""))  # (no limit: never None)
        return done

    # --- a held letter's announcement ----------------------------------------------------------

    def announce_held(self, letter_id: str, message_id: str, raw: bytes, to: tuple[str, ...]) -> None:
        """Tell the approvers that ``letter_id`` waits: recorded first, then sent; queued, it is
        sent again by the next sync while the letter is still held. Noted on the letter:
        ``announced`` once it left, ``announce_failed`` (why) until then or for good."""
        where = self.spool.root / ANNOUNCEMENTS
        record = {"key": letter_id, "letter": letter_id, "message_id": message_id, "to": list(to),
                  "at": ages.now_ms(), "state": "sending"}  # fmt: skip
        try:
            with locked(self.spool.root / f"{ANNOUNCEMENTS}.lock"):
                where.mkdir(mode=0o700, exist_ok=True)
                write_new(where / f"{letter_id}.json", _json(record))  # durable before the letter leaves
                self._settle(where, self._send(where, record, raw))
                _tidy(where)
        except OSError as exc:  # a spool that cannot keep the record: not sent (never unrecorded)
            self.spool.write.annotate(letter_id, announce_failed=str(exc) or type(exc).__name__)

    def retry_announcements(self) -> None:
        """After a sync: the held letters' announcements the transport could not take before."""
        where = self.spool.root / ANNOUNCEMENTS
        if not where.is_dir():
            return  # nothing was ever queued: one stat
        from ..people import approval

        with locked(self.spool.root / f"{ANNOUNCEMENTS}.lock"):
            held = {x.id for x in self.spool.read.letters("held")}
            for record in records_in(where):
                letter = record.get("letter")
                if letter not in held or letter != record["key"]:  # released or rejected meanwhile (or
                    _forget(where, str(record.get("key")))  # no record of ours): it has nothing to say
                elif self.spool.read.annotations(str(letter)).get("announced"):  # it left once: never twice
                    _forget(where, str(record.get("key")))
                elif record.get("state") == "sending":  # its sender died inside the submission (we hold the lock)
                    self.spool.write.annotate(str(record["letter"]), announce_failed=INTERRUPTED)
                    _forget(where, str(record.get("key")))
            for record in self._retry(where, approval.approvers(self.registry, self.me.platform)):
                self._settle(where, record)
            _tidy(where)

    def _settle(self, where: Path, record: dict[str, Any]) -> None:
        letter_id, state = str(record["letter"]), record["state"]
        if state == "sent":
            self.spool.write.annotate(letter_id, announced=str(record["message_id"]))
        elif state == "queued":
            self.spool.write.annotate(
                letter_id, announce_failed=f"queued, sent again by the next sync: {record['detail']}"
            )
        else:
            self.spool.write.annotate(letter_id, announce_failed=str(record["detail"] or state))
        if state != "queued":
            _forget(where, str(record["key"]))

    # --- the hold rule -------------------------------------------------------------------------

    def announce_hold_change(self, before: list[str], after: list[str]) -> str:
        """Mail every approver that the bus's hold rule changed from ``before`` to ``after``;
        "" when it left (or nobody approves), else why not."""
        from ..people import approval

        to = approval.every_approver(self.registry)
        if not to:
            return ""
        try:
            message_id, raw = approval.hold_change(self.registry, self.home, self.me.platform, before, after)
        except AgentmailError as exc:
            return str(exc)
        return self.why_not(to, message_id, raw)

    def tell_hold_change(self, before: list[str], after: list[str]) -> bool:
        """The rule for every change of the bus's ``hold`` (the CLI's and the API's): a change is
        told to every approver before it is made; one they cannot be told is not made
        (ConfigError). Nothing is told when the rule stays the same or nobody approves. True
        when they were told."""
        from ..people import approval

        after = [v.strip().lower() for v in after if v.strip()]
        if after == list(before) or not approval.every_approver(self.registry):
            return False
        failed = self.announce_hold_change(list(before), after)
        if failed:
            raise ConfigError(f"the hold rule is unchanged: the approvers could not be told ({failed})")
        return True

    # --- escalation (people/escalation.py decides and writes) -----------------------------------

    def after_sync(self) -> str | None:
        """What a sync owes people: queued announcements sent again; with followers, what needs a
        person announced (at most once a minute per process). Never raises: the sync went well.
        Returns why the followers could not be told, in one line (None: told, or nothing tried)."""
        self.retry_announcements()
        if not self.platform.followers:  # nobody to tell: nothing looked at (the hot path stays as it was)
            return None
        from ..people import escalation

        now = ages.now_ms()
        if now - self._escalated_at < escalation.EVERY_MS:
            return None
        self._escalated_at = now
        self._stall_problem = None
        try:
            self.escalated += self.escalate()
            if self._stall_problem is not None:
                raise self._stall_problem
        except (AgentmailError, OSError) as exc:  # the sync itself went well: said, never raised
            # one line: a server's reply (a relay's multi-line SMTP text) is said, never a line of its own
            return inline(f"could not announce to the followers: {str(exc) or exc.__class__.__name__}")
        return None

    def escalate(self) -> list[dict[str, Any]]:
        """Announce what is due and not yet announced; send again what was queued. Returns the
        records written or changed by this run (none when the platform has no followers).

        Once across the platform's machines: each stall is claimed on the server before its
        letter leaves (``people/escalation``); a stall another machine holds is recorded
        ``elsewhere`` here and not announced."""
        from ..people import escalation

        followers = self.platform.followers
        if not followers:
            return []
        now = ages.now_ms()
        where = self.spool.platform_root / ESCALATIONS
        where.mkdir(mode=0o700, exist_ok=True)
        done: list[dict[str, Any]] = []
        with locked(self.spool.platform_root / f"{ESCALATIONS}.lock"):
            for record in self._retry(where, followers, self._still_ours):
                if record["state"] != "queued":
                    escalation.settle(self.transport, record)
                done.append(record)
            recent = self._recent(now)
            announced = 0
            rows = self.threads.status(sync=False)
            for key, reason, row, last in escalation.due(rows, self.box.show, self.registry.bus.stale_after, now):
                record_path = where / f"{key}.json"
                kept: dict[str, Any] | None = None
                if os.path.lexists(record_path):
                    kept = read_record(record_path)
                    if kept.get("state") == escalation.SENDING and not kept.get("settled"):
                        escalation.settle(self.transport, kept)  # died inside the submission: never again
                        write_record(record_path, {**kept, "settled": True})
                    if not escalation.ask_again(kept, now):
                        continue  # announced already (by this home, a sibling or another machine), or retried
                # Bounded per run and per counterpart (bounds.py): many threads opened by one sender
                # never mail a person many times; the rest wait for a later run (the digest lists all).
                if announced >= bounds.ANNOUNCE_PER_RUN:
                    break
                if kept is None and recent.get(row.with_, 0) >= bounds.ANNOUNCE_PER_SENDER:
                    continue  # (a record kept here was counted when it was first written)
                letters = self.threads.thread(row.thread, sync=False)
                message_id, raw = escalation.letter(self.registry, self.home, self.platform.name, followers,
                                                    reason, row, last, letters, now)  # fmt: skip
                record = escalation.record(key, reason, row, message_id, followers, now)
                record.update(state=escalation.CLAIMING, claim_on=last.message_id,
                              holder=f"{self.spool.mailbox} {new_ulid()}")  # fmt: skip
                if kept is None:
                    try:
                        write_new(record_path, _json(record))  # durable before the server is asked
                    except FileExistsError:
                        continue
                    recent[row.with_] = recent.get(row.with_, 0) + 1
                elif not isinstance(kept.get("holder"), str):
                    write_record(record_path, record)  # a record that names no holder: made anew first
                else:  # the holder on disk already: the same claim asked again (ours if it was)
                    record.update(holder=kept["holder"], at=_at(kept) or now)
                try:
                    who = escalation.claim(self.transport, record)
                except TransportError as exc:  # the server cannot be asked now: the rest wait for a later run
                    self._stall_problem = exc
                    break
                except OSError as exc:  # this claim's files on the post office: the others are still asked
                    self._stall_problem = self._stall_problem or exc
                    continue
                if who is not None:
                    every = escalation.next_ask(kept or {}, who)
                    write_record(record_path, {**record, "state": escalation.ELSEWHERE, "by": who, "asked": now,
                                               "every": every})  # fmt: skip
                    continue
                write_record(record_path, {**record, "state": escalation.SENDING})  # the claim is ours
                announced += 1
                sent = self._send(where, {**record, "state": escalation.SENDING}, raw)
                if sent["state"] != "queued":
                    escalation.settle(self.transport, sent)
                done.append(sent)
        return done

    def _still_ours(self, where: Path, record: dict[str, Any]) -> bool:
        """Before a queued announcement is sent again: is its claim on the server still ours? One
        another machine took over is recorded ``elsewhere`` and never sent from here."""
        from ..people import escalation

        try:
            who = escalation.claim(self.transport, record)
        except (AgentmailError, OSError):
            return False  # the server cannot be asked now: it stays queued
        if who is None:
            return True
        write_record(where / f"{record['key']}.json", {**record, "state": escalation.ELSEWHERE, "by": who,
                                                         "asked": ages.now_ms()})  # fmt: skip
        (where / f"{record['key']}.eml").unlink(missing_ok=True)
        return False

    def _recent(self, now: int) -> dict[str, int]:
        """How many threads with each counterpart were announced within bounds.ANNOUNCE_WINDOW_MS."""
        counts: dict[str, int] = {}
        for record in self.escalations():
            at = record.get("at")
            if isinstance(at, int) and now - at < bounds.ANNOUNCE_WINDOW_MS:
                counterpart = str(record.get("with", ""))
                counts[counterpart] = counts.get(counterpart, 0) + 1
        return counts

    def escalations(self) -> list[dict[str, Any]]:
        """Every announcement this platform made, oldest first."""
        return records_in(self.spool.platform_root / ESCALATIONS)

    # --- the digest (people/digest.py words it) ---------------------------------------------

    def digest(self, since: str | None = None, *, sync: bool = True) -> Digest:
        """What the digest says now. ``since``: as ``--since`` (BadInput for a bad one, before any sync)."""
        from ..people import digest as digest_mod

        now = ages.now_ms()
        start = digest_mod.since_of(since, read_record(self.spool.root / DIGEST).get("at"), now)
        if sync:
            self.sync()
            now = max(now, ages.now_ms())
        stale_after = self.registry.bus.stale_after or digest_mod.DEFAULT_STALE
        rows = [
            r for r in self.threads.status(sync=False) if r.whose_move != "nobody" or r.delivery in ("held", "failed")
        ]
        rows.sort(
            key=lambda r: (not r.idle(now) > stale_after, r.moved_ms if r.idle(now) > stale_after else r.opened_ms)
        )
        quarantined = tuple(x for x in self.threads.quarantined(sync=False) if ulid_ms(x.id) > start)
        bounced: list[Letter] = []
        for letter in self.threads.sent():
            notes = self.spool.read.annotations(letter.id)
            if notes.get("undeliverable"):
                when = str(notes.get("undeliverable_at") or "")
                at = int(when) if when.isascii() and when.isdigit() else ulid_ms(letter.id)
                if at > start:
                    bounced.append(letter)
        announced = tuple(r for r in self.escalations() if _at(r) > start)  # a record is a file: any at
        return digest_mod.Digest(self.platform.name, now, start, stale_after, tuple(rows),
                                 tuple(self.spool.read.letters("held")), quarantined, tuple(bounced), announced)  # fmt: skip

    def send_digest(self, digest: Digest) -> dict[str, Any]:
        """Mail ``digest`` to the platform's followers (one letter, every one a recipient), threaded
        after the last digest, and remember it once it left; returns {message_id, to, status,
        detail}. Not kept when the transport cannot take it: the command says so and is run again."""
        from ..people import digest as digest_mod

        state = read_record(self.spool.root / DIGEST)
        earlier = [m for m in state.get("message_ids", []) if isinstance(m, str)][-2:]  # first and last: a thread
        to = self.platform.followers
        message_id, raw = digest_mod.letter(self.registry, self.home, digest, to, earlier)
        status, detail = self.deliver(to, message_id, raw)
        if status == "sent":
            write_record(self.spool.root / DIGEST, {"at": digest.now, "message_ids": [*earlier[:1], message_id]})
        return {"message_id": message_id, "to": list(to), "status": status, "detail": detail}


def records_in(where: Path) -> list[dict[str, Any]]:
    """The records of ``where``, oldest first."""
    if not where.is_dir():
        return []
    # The key is the file's own name, whatever the record says: forgetting one never reaches outside.
    found = [{**r, "key": p.stem} for p in where.glob("*.json") if (r := read_record(p))]
    return sorted(found, key=lambda r: (_at(r), str(r["key"])))


def _at(record: dict[str, Any]) -> int:
    at = record.get("at")
    return at if isinstance(at, int) and not isinstance(at, bool) else 0


def read_record(path: Path) -> dict[str, Any]:
    """A record as written; an unreadable one is an empty dict (it was never ours to trust more)."""
    try:
        raw, _ = read_plain(path, _RECORD_BYTES)
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_record(path: Path, record: dict[str, Any]) -> None:
    write_atomic(path, _json(record))


def _forget(where: Path, key: str) -> None:
    (where / f"{key}.eml").unlink(missing_ok=True)
    (where / f"{key}.json").unlink(missing_ok=True)


def _tidy(where: Path) -> None:
    """An empty folder goes: a sync with nothing queued looks no further than one stat."""
    try:
        where.rmdir()
    except OSError:
        pass  # something still waits


def _json(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True).encode()
