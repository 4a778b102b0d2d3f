"""The client: what an agent does with its mail, on any transport (DESIGN §1, §6, §7).

    am = AgentMail.from_env("tokengate")
    for letter in am.inbox():
        if letter.type == "report":
            am.reply(letter, "Reproduced. Fixing.", type="ack")

``AgentMail`` is a facade: each method hands its arguments to one stage of the mailbox
(``Receiver``, ``Sender``, ``Outbox``, ``Holds``, ``Threads``, ``Letters``, all over one
``Mailbox``) and returns what it answers. Every rule a caller relies on lives in those stages
(``send(thread=)``, the refusal convention, ``raise_for_state``): the CLI, the MCP server, the
hooks and the watcher only translate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import ages
from .._fs import write_atomic
from ..config import identity
from ..config import registry as registry_mod
from ..errors import AgentmailError, TransportError
from ..frame import inline
from ..home import agentmail_home
from .consent import Consent
from .holds import Holds
from .letters import Letters
from .mailbox import Mailbox, Stage
from .outbox import Outbox, raise_for_state
from .receiver import Receiver, SyncReport
from .sender import Request, Sender, Sent
from .threads import Threads
from .to_people import ToPeople

if TYPE_CHECKING:
    from ..config.identity import Identity
    from ..config.registry import Registry
    from ..letter.attach import Attachment
    from ..model import Letter, ThreadStatus
    from ..people.digest import Digest
    from ..spool.search import Hit, Query, SearchIndex
    from ..stages.evidence import Applied
    from ..transport import SubmitResult, Transport

__all__ = ["AgentMail", "SyncReport", "raise_for_state"]


class AgentMail(Stage):
    """One platform[@agent]'s mailbox on one bus."""

    def __init__(self, registry: Registry, me: Identity, home: Path, transport: Transport | None = None) -> None:
        super().__init__(box := Mailbox(registry, me, home, transport))  # registry, me, spool, ...: Stage's
        self.outbox = Outbox(box)
        self.threads = Threads(box, self.sync)
        self.people = ToPeople(box, self.threads, self.sync)  # every letter for people leaves through it
        self.holds = Holds(box, self.outbox, self.people)
        self.receiver = Receiver(box, self.outbox, self.holds)
        self.letters = Letters(box, self.sync)
        self.sender = Sender(box, self.outbox, self.holds, self.threads, self.receiver)
        self.consent = Consent(box, self.holds, self.people, self.sync)
        # A reader (status, thread, search, digest) may show the spool as last synced when the
        # server cannot be reached: ``offline_ok`` lets a sync's TransportError pass, kept in ``offline``.
        self.offline_ok = False
        self.offline: str | None = None

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

    # --- what the mailbox is (registry, me, home, platform, spool, transport: ``Stage``) -----

    @property
    def search_index(self) -> SearchIndex:
        return self.box.search_index

    def opener_advice_due(self) -> bool:
        """Is the command line to say an opener's advice now? Once per mailbox per UTC day: it is
        for learning what a good report holds, not a line on every thread (``Sent.advice`` and
        MCP's warnings carry it every time). The day is noted in the mailbox's spool."""
        path = self.spool.root / "advised"
        today = ages.iso(ages.now_ms())[:10]
        try:
            if path.read_text(encoding="ascii", errors="replace") == today:
                return False
        except OSError:
            pass
        try:
            write_atomic(path, today.encode())
        except OSError:  # a note that cannot be kept: the advice is said again, nothing is lost
            pass
        return True

    def close(self) -> None:
        if self.outbox._queued:  # copies this process left due: made now, one command for all
            try:
                self.outbox.copy_sent()
            except (AgentmailError, OSError):  # still due: the next sync, wait or flush copies them
                pass
        self.box.close()

    def copy_sent(self) -> int:
        """Copy to the IMAP sent folder the letters sent since the last copy (one MULTIAPPEND);
        a sync, ``wait``, ``flush`` and ``close`` do it too. How many were copied."""
        return self.outbox.copy_sent()

    def __enter__(self) -> AgentMail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def escalated(self) -> list[dict[str, Any]]:
        """What this client announced to people (escalation), as recorded."""
        return self.people.escalated

    # --- what an agent does ----------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Pull what is new, judge it, file it; the checkpoint moves only after the commit.
        Then what is owed to people (``to_people``): a queued announcement sent again, and what
        needs a person announced to the followers (escalation.py), at most once a minute.
        Sent-folder copies still due are made first, so the platform's other machines see them."""
        try:
            self.outbox.copy_sent()
            report = self.receiver.sync()
        except TransportError as exc:
            if not self.offline_ok:
                raise
            self.offline = inline(exc)  # a server's words, on the one line that says so
            return SyncReport()
        report.escalation_problem = self.people.after_sync()
        return report

    def send_fate(self) -> str:
        """What became of the letter this client filed last, in words: a send stopped by Ctrl-C
        says whether its letter left."""
        letter_id = self.sender.last_filed
        state = None if letter_id is None else self.spool.read.locate(letter_id)
        if letter_id is None or state is None:
            return "no letter was filed: nothing was sent"
        return {
            "sent": f"letter {letter_id} had been sent",
            "held": f"letter {letter_id} is held for a person's approval, not sent",
            "failed": f"letter {letter_id} was not sent ('agentmail sent' says why)",
        }.get(
            state,
            f"letter {letter_id} is in the outbox and may not have left: it goes out with the next command "
            f"or 'agentmail flush' (do not send it again; a copy the server already had is dropped as a duplicate)",
        )

    def rebuild(self) -> dict[str, Any]:
        """Make this mailbox's spool.db again from its letter files, after it was lost or damaged
        (DESIGN §7). Every letter is judged again as a sync would; one this platform sent is
        ``sent`` (its reply claim taken again), one it answered ``read``, another ``unread`` or
        ``quarantine`` as judged now. What was there is kept aside. NotFound when spool.db is in
        order (nothing to rebuild)."""
        return self.receiver.rebuild()

    def inbox(self, *, sync: bool = True, consume: bool = False, limit: int | None = None,
              from_start: bool = False) -> list[Letter]:  # fmt: skip
        """Unread authenticated letters, oldest first. They stay unread until ``done`` or a reply,
        unless ``consume`` (at-most-once: only the letters this call claimed are returned).
        ``from_start``: fetch the mailbox's whole history first (``from_start()``)."""
        if from_start:
            self.receiver.from_start()
            sync = True
        if sync:
            self.sync()
        return self.receiver.inbox(consume=consume, limit=limit)

    def from_start(self) -> None:
        """Read this mailbox's whole history again with the next sync (the backlog a new agent
        skipped): the checkpoint goes back to the beginning; what is filed already is dropped
        as a duplicate, so nothing is filed twice."""
        self.receiver.from_start()

    def show(self, letter_id: str) -> Letter:
        return self.box.show(letter_id)

    def raw(self, letter_id: str) -> bytes:
        return self.box.raw(letter_id)

    def attachments(self, letter_id: str | Letter) -> tuple[Attachment, ...]:
        """The attachments of a filed letter, read from its signed bytes (never from a record).
        A quarantined letter's are refused: nothing vouches for them."""
        return self.letters.attachments(letter_id)

    def save(self, letter_id: str | Letter, directory: str | Path = ".", *, force: bool = False) -> list[Path]:
        """Write a letter's attachments into ``directory`` (0600, never outside it, never over a
        file without ``force``); nothing is opened or run. Returns the paths written."""
        return self.letters.save(letter_id, directory, force=force)

    def apply(self, letter_id: str | Letter, cwd: str | Path = ".", *, check: bool = False,
              series: bool = False) -> Applied:  # fmt: skip
        """``git am`` a letter's patches in the checkout at ``cwd``, tried first in a scratch
        worktree (``check``: only that), no hook run, refusing a dirty tree, a symlink that leaves
        the checkout and (unless ``series``) an attachment of several commits. Returns every
        commit (author, subject, paths) and a summary line (``str()`` prints both)."""
        return self.letters.apply(letter_id, cwd, check=check, series=series)

    def authentication(self, letter: Letter) -> str:
        """How ``letter`` was authenticated: which key, which trusted verdicts (for ``show``)."""
        return self.letters.authentication(letter)

    def done(self, *letter_ids: str) -> list[str]:
        """Mark letters consumed; returns the ids this call moved. Unknown ids raise NotFound.

        A failed letter of mine (refused for good, not sent and not queued, or rejected by a
        person) is dismissed instead: ``status`` stops showing it, ``sent`` still lists it. So is a
        quarantined letter: ``quarantined`` stops listing it; its file stays (a copy fetched again is
        known, and ``quarantine recheck ID`` still judges it). Those ids are returned too; their
        state stays what it was (a letter done is ``read``)."""
        return self.receiver.done(*letter_ids)

    def send(self, to: str | list[str] | tuple[str, ...], subject: str, body: str, *, type: str = "report",
             severity: str | None = None,
             ref: str | None = None, force: bool = False, thread: str | None = None,
             hold: bool = False, attachments: tuple[Attachment, ...] = (),
             outcome: str | None = None) -> Sent:  # fmt: skip
        """Open a thread, or with ``thread`` continue it after this platform's own last letter
        (``follow_up``; ``subject``, ``severity`` and ``ref`` are then the thread's own).
        Returns a ``Sent``, the letter as it is now: state ``sent``, ``outbox`` (queued: the
        transport could not take it now; ``flush`` retries) or ``failed`` — ``raise_for_state``
        turns the last two into errors — with its ``advice`` (an opener's gaps), ``warnings`` (a
        thread that is with another platform than ``to``; ``notices``: both as one list) and
        ``flushed`` (letters queued earlier that left with it). A guard that refuses raises
        Refused (the new-thread quota among them). ``hold`` (or a bus ``hold`` rule naming the recipient) keeps the signed
        letter in ``held/`` (state ``held``) until a person runs ``approve`` or ``reject``.
        ``attachments`` (``evidence.from_file``/``from_patches``) make it multipart/mixed.

        ``to`` may name several platforms (``"beta,gamma"``, a list) or a registry group
        (``"@consumers"``): a fan-out, one letter with one Message-ID to all of them, one thread
        (DESIGN §6); it counts as one new thread."""
        to = to if isinstance(to, str) else tuple(to)
        req = Request(body, type, to, subject, severity=severity, ref=ref, thread=thread, force=force, hold=hold,
                      attachments=attachments, outcome=outcome)  # fmt: skip
        return self.sender.send(req)

    def note(self, subject: str, body: str, *, to_agent: str | None = None, force: bool = False,
             attachments: tuple[Attachment, ...] = (), new_agent: bool = True) -> Sent:  # fmt: skip
        """A letter to this platform itself, for a sibling agent (``to_agent``) or whoever reads next.
        ``new_agent=False`` refuses a ``to_agent`` no agent of the platform has used (BadInput).
        Returns a ``Sent``, as ``send``."""
        return self.sender.note(Request(body, "note", subject=subject, force=force, attachments=attachments,
                                        to_agent=to_agent, new_agent=new_agent))  # fmt: skip

    def reply(self, to: str | Letter, body: str, *, type: str | None = None, force: bool = False,
              raise_refused: bool = False, hold: bool = False,
              attachments: tuple[Attachment, ...] = (), outcome: str | None = None) -> Sent | None:  # fmt: skip
        """Answer a letter; a ``Sent``, as ``send``. When a guard refuses: None, and ``why_refused``
        says why (the documented, compatible form); with ``raise_refused`` Refused, as every
        other sending method does (the convention; the CLI and MCP server use it).

        One reply per letter per platform: the first agent of the platform to answer claims
        the letter (across processes); the others are refused, told who answered."""
        req = Request(body, type, force=force, hold=hold, attachments=attachments, outcome=outcome)
        return self.sender.reply(to, req, raise_refused=raise_refused)

    def follow_up(self, thread: str, body: str, *, type: str, force: bool = False, hold: bool = False,
                  attachments: tuple[Attachment, ...] = (), outcome: str | None = None) -> Sent:  # fmt: skip
        """A new letter in an existing thread, to its counterpart (e.g. the fixer's fix-notice
        after its ack). It answers this platform's own last letter of the thread, under the
        same guards as a reply (never after the other side's ack or close; the same depth cap;
        one letter after each letter per platform). Raises Refused otherwise. A ``Sent``, as ``send``."""
        req = Request(body, type, force=force, hold=hold, attachments=attachments, outcome=outcome)
        return self.sender.follow_up(thread, req)

    def why_refused(self, letter: str | Letter) -> str | None:
        """Why the last ``reply`` to this letter was refused, or why one would be (None: it may go)."""
        return self.sender.why_refused(letter)

    def held(self) -> list[Letter]:
        """Letters waiting for a person's approval, oldest first (never sent until approved)."""
        return self.holds.held()

    def approve(self, letter_id: str | Letter, *, key_file: str | None = None) -> Letter:
        """The operator's decision: release a held letter to the outbox (one rename) and send it,
        as ``send`` does. Needs ``key_file``, the approval key the registry pins (the
        agent does not hold it; approvers answer by mail instead). Refused (exit 4) without it.
        Returns the letter as it is now (``sent``, or queued, or failed)."""
        return self.holds.approve(letter_id, key_file=key_file)

    def announce_hold_change(self, before: list[str], after: list[str]) -> str:
        """Mail every approver that the bus's hold rule changed; "" when it left (or nobody
        approves), else why not."""
        return self.people.announce_hold_change(before, after)

    def tell_hold_change(self, before: list[str], after: list[str]) -> bool:
        """The rule for a change of the bus's ``hold``: every approver is told before it is made
        (ConfigError when they cannot be: the change is not to be made); nothing is told when it
        changes nothing or nobody approves. ``admin.bus.change_setting`` calls it before it writes."""
        return self.people.tell_hold_change(before, after)

    def digest(self, since: str | None = None, *, sync: bool = True) -> Digest:
        """What a digest for people says now (``people/digest.render`` words it); ``since``: a
        duration back (``3d``), else since the last digest sent."""
        return self.people.digest(since, sync=sync)

    def send_digest(self, digest: Digest) -> dict[str, Any]:
        """Mail ``digest`` to the followers and remember it once it left: {message_id, to, status, detail}."""
        return self.people.send_digest(digest)

    def ask_approvers(self, change: str, effect: str, platform: str | None = None, *, whole_bus: bool = False) -> str:
        """With approvers listed, a change that loosens a guard against the agent (``change``: the
        command as shown to them, ``effect``: what it does) goes ahead only once one of them
        approved exactly it by mail: returns who; the first ask announces it and is Refused
        (exit 4), as is every ask until an answer came. "" when nobody approves on this bus.
        ``platform``: the platform whose guard it changes (its approvers decide; default: this one's);
        ``whole_bus``: a guard of every platform (bus.toml's): one approver of each platform decides."""
        return self.consent.ask(change, effect, platform, whole_bus=whole_bus)

    def reject(self, letter_id: str | Letter, reason: str) -> Letter:
        """A held letter never leaves: it moves to failed/ with the reason (``sent`` shows it
        to the agent); a rejected reply frees its claim on the letter. Anyone may drop a
        letter that has not left (the agent too): it releases nothing."""
        return self.holds.reject(letter_id, reason)

    def flush(self) -> list[SubmitResult]:
        """Submit every queued letter: same bytes, same Message-ID. One flusher per mailbox at a
        time, so two processes never submit one letter twice."""
        results = self.outbox.flush()
        self.outbox.copy_sent()
        return results

    def thread(self, thread: str, *, sync: bool = True) -> list[Letter]:
        """Both directions of one thread, in the order they were filed here (the id in any case)."""
        return self.threads.thread(thread, sync=sync)

    def sent(self) -> list[Letter]:
        return self.threads.sent()

    def quarantined(self, *, sync: bool = True) -> list[Letter]:
        return self.threads.quarantined(sync=sync)

    def recheck_quarantine(self, *refs: str, sync: bool = True) -> list[dict[str, Any]]:
        """Judge quarantined letters (those ``refs`` name; none: all) again against today's
        registry; one that passes now is filed ``unread`` (recheck.py). One result each."""
        if sync:
            self.sync()
        return self.receiver.recheck_quarantine(*refs)

    def dismiss_quarantined(self, *refs: str) -> list[str]:
        """Dismiss the quarantined letters ``refs`` name (ids, Message-IDs, prefixes): ``quarantined``
        stops listing them, their files stay. The ids dismissed now; NotFound for a ref naming none."""
        return self.receiver.dismiss_quarantined(*refs)

    def notes(self, *, sync: bool = True) -> list[Letter]:
        """Notes for me (addressed to my agent name, or to nobody in particular); not consumed."""
        return self.threads.notes(sync=sync)

    def status(self, *, sync: bool = True, closed: bool = False, stale: float | None = None) -> list[ThreadStatus]:
        """Per open thread: where it stands in report → ack → fix-notice → verify-result → close.
        ``closed`` adds the closed threads too (that walks the whole history); ``stale``: only the
        threads with no move for longer than that many seconds."""
        return self.threads.status(sync=sync, closed=closed, stale=stale)

    def closed_threads(self) -> int:
        """How many threads ``status --closed`` adds (counted, not read)."""
        return self.threads.closed_threads()

    def search(self, query: str | Query = "", *, sync: bool = True, **filters: Any) -> list[Hit]:
        """Letters of this mailbox (both directions; quarantine only with ``quarantine=True``)
        matching ``query``, best first. ``filters``: the fields of ``search.Query`` (``sender``,
        ``type``, ``thread``, ``since``, ``state``, ``limit``, ``quarantine``, ``syntax``)."""
        return self.letters.search(query, sync=sync, **filters)

    def wait(self, timeout: float = 60.0, *, type: str | None = None, thread: str | None = None) -> tuple[Letter, str]:
        """Block until an unread letter matching the filters is in the spool; (letter, mechanism).

        Raises Timeout. A matching letter already unread returns at once ("spool")."""
        self.outbox.copy_sent()
        return self.receiver.wait(timeout, type=type, thread=thread)
