"""The outbox: a signed letter filed durably, then submitted; one flusher per mailbox (DESIGN §7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    ConfigError,
    NotFound,
    PermanentFailure,
    TransportError,
)
from ..model import (
    Letter,
)
from ..spool.db import reached
from ..spool.views import shown
from .mailbox import Stage

if TYPE_CHECKING:
    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from ..transport import Outgoing, SubmitResult
    from .mailbox import Mailbox


class Outbox(Stage):
    """What waits to leave, and its submission: filed durably first, sent once, one flusher at a time."""

    def __init__(self, box: Mailbox) -> None:
        super().__init__(box)
        # Sent-folder copies that no other machine needs at once (``_copy_may_wait``) wait for
        # ``copy_sent`` (the next sync, wait, flush or close): one MULTIAPPEND for all. The CLI,
        # one letter a process, copies each as it goes, so its send says when a copy failed.
        self.batch_copies = True
        self._queued: set[str] = set()  # the copies this process noted as due
        self._unflushed: set[str] = set()  # the letters ``send_now`` dispatches (a thread each), filed with no flush
        self._answering: set[str] = set()  # letters of this flush that answer one: claims to mark answered
        self._bytes: dict[str, bytes] = {}  # this flush's letters as submitted: their copies' key noted

    def file(self, letter: Letter, raw: bytes) -> Letter:
        """File a signed letter in the outbox. Submitted right after this (``send_now``): where
        "sent" is itself durable, the outbox copy is flushed only if the letter has to wait (the
        same order, one flush less per file)."""
        stored = self.spool.write.store("outbox", letter, raw, extra=letter.extra, durable=not self._sent_is_durable())
        return stored

    def send_now(self, stored: Letter, raw: bytes | None = None) -> tuple[Letter, int]:
        """Submit what the outbox holds (``stored`` among it): ``stored`` as it is now (sent: the
        letter as filed with what was noted of it since, not read back), and how many letters
        queued earlier left with it. A held letter is not in the outbox: returned as it is,
        waiting for a person. ``raw``: the bytes just filed for ``stored``, handed to the
        transport rather than read back."""
        if stored.state == "held":
            return stored, 0
        sent: str | None = None
        earlier = 0
        # Filed with no flush (``file``): made durable in the commit that records it sent (``_record``).
        if self._sent_is_durable():
            self._unflushed.add(stored.id)
        try:
            results = self.flush(stored, raw)
            sent = next((r.status for r in results if r.key == stored.id), None)
            earlier = sum(r.status == "sent" and r.key != stored.id for r in results)
        except ConfigError as exc:
            self.spool.write.annotate(stored.id, failed_reason=f"not sent, not queued: {exc}")
            self.box.move(stored.id, "outbox", "failed")  # a failed reply holds no claim: it may be sent again
            raise ConfigError(
                f"{exc} — the letter was not sent and not queued; send it again once this is fixed"
            ) from exc
        finally:
            self._unflushed.discard(stored.id)
            if sent != "sent":  # a sent letter was made durable as it was recorded
                self._keep(stored.id)
        if sent == "sent":  # as reading it back gives it (its record is what was filed), without the read
            notes = shown(self.spool.read.annotations(stored.id))  # what was learnt since: a claim, a refusal, a hash
            return self.box.addressed(stored.replace(state="sent", extra={**stored.extra, **notes})), earlier
        return self.box.show(stored.id), earlier

    def _keep(self, letter_id: str) -> None:
        """A letter filed without a flush (``file``) that did not leave (queued, failed, or the
        dispatch raised) is made durable now, before ``send`` returns or raises. One delivered
        was made as durable as the recipient's copy as it was recorded sent (``_record``: the
        move in one FULL commit, with the post-office names of its bytes, flushed by the
        delivery; the spool's own name for them is not flushed, ``SpoolReader.path`` finds them
        again)."""
        if self._sent_is_durable() and self.spool.read.locate(letter_id) in ("outbox", "failed", "sent"):
            self.spool.write.make_durable(letter_id)

    def _sent_is_durable(self) -> bool:
        """``Transport.sent_is_durable``, without opening a transport to ask: opening one for
        SMTP reads its credentials, and that failing is for ``flush`` to report."""
        if self.box._transport is not None:
            return self.box._transport.sent_is_durable
        from ..transport import transport_class

        return transport_class(self.registry).sent_is_durable

    def _outgoing(self, letter_id: str, fresh: Letter | None, fresh_raw: bytes | None) -> Outgoing | None:
        """What to submit for ``letter_id``; ``fresh`` and ``fresh_raw``: the letter being
        dispatched and its bytes as filed, handed over rather than read back."""
        from ..transport import Envelope, Outgoing

        copy = None
        if fresh is not None and fresh_raw is not None and fresh.id == letter_id:
            letter, raw = fresh, fresh_raw  # listed in the outbox under its lock: still there
            if self.transport.links_copies:  # its file holds these very bytes: linked, not rewritten
                copy = self.spool.read.file_of(letter_id)
        else:
            try:
                letter = self.spool.read.letter(letter_id, "outbox")
                raw = self.spool.read.path("outbox", letter_id).read_bytes()
            except (FileNotFoundError, NotFound):
                return None
        if letter.state != "outbox":
            return None  # another process sent it meanwhile
        from ..spool import server_claims

        try:  # claims are made only for a letter that answers one (``Sender``): none to confirm else
            answered = server_claims.confirm(self.spool, self.transport, letter_id) if letter.in_reply_to else None
        except TransportError:
            return None  # the server cannot say whose the claim is: the letter waits, queued
        if letter.in_reply_to:
            self._answering.add(letter_id)
        if answered is not None:
            self.spool.write.annotate(
                letter_id, failed_reason=f"not sent: the letter it answers was answered meanwhile (by {answered})"
            )
            self.box.move(letter_id, "outbox", "failed")
            return None
        if letter.message_id.encode() not in raw:
            # A letter filed without a flush, then a power cut: its row outlived its bytes.
            # Never submit what is left of it; say it did not go.
            self.spool.write.annotate(letter_id, failed_reason="not sent: its file was lost in a crash before it left")
            self.box.move(letter_id, "outbox", "failed")
            return None
        batched = self.transport.keeps_sent_copy and self.batch_copies and self._copy_may_wait(letter)
        envelope = Envelope(self.platform.address, envelope_of(letter, self.transport.mails_people))
        return Outgoing(letter_id, raw, envelope, copy, copy_later=batched)

    def _copy_may_wait(self, letter: Letter) -> bool:
        """May this letter's sent-folder copy wait for the batch? Not a reply's: on a server
        without CONDSTORE the platform's other machines learn from it that the letter is
        answered. Not an opener's under the new-thread quota: they count it there."""
        if letter.in_reply_to:
            return False
        return letter.type == "note" or self.registry.bus.new_threads_per_hour == 0

    def flush(self, fresh: Letter | None = None, raw: bytes | None = None) -> list[SubmitResult]:
        """Does ``AgentMail.flush``; ``fresh``: a letter just filed in the outbox (``raw``: its
        bytes, when at hand), which goes with them."""
        if fresh is None and not self.spool.read.ids("outbox"):
            return []  # (a letter being dispatched was filed in the outbox moments ago)
        with self.spool.locked("outbox"):
            self._answering.clear()
            items = [o for i in self.spool.read.ids("outbox") if (o := self._outgoing(i, fresh, raw)) is not None]
            if not items:
                return []
            self._bytes = {i.key: i.raw for i in items}
            later = [i.key for i in items if i.copy_later]
            if later:  # noted before they go: a process killed after submitting still copies them
                due = self.spool.read.copies_due()
                self.spool.write.set_copies_due(due + [k for k in later if k not in due])
                self._queued.update(later)
            try:
                results = self.transport.submit(items, on_result=self._record)
            except TransportError as exc:
                from ..transport import SubmitResult

                results = [SubmitResult(i.key, "queued", str(exc)) for i in items]
                for result in results:
                    self._record(result)
            finally:
                self._bytes = {}  # a long-lived process keeps no letter's bytes past its flush
            for key, why in self.transport.copy_failures().items():  # delivered all the same: noted
                self.spool.write.annotate(key, sent_copy_failed=why, durable=False)
        return results

    def copy_sent(self) -> int:
        """Copy the sent letters whose copy is due to the sent folder, in one command; how many
        were copied. One the server refuses is noted on the letter (``sent_copy_failed``) and
        not tried again, as a copy made at submission; one still queued stays due, and so do
        all while the server cannot be reached."""
        if not self.spool.read.copies_due():
            return 0
        from ..transport import Envelope, Outgoing

        with self.spool.locked("outbox"):
            items, queued, theirs = [], [], False
            for letter_id in self.spool.read.copies_due():
                state = self.spool.read.locate(letter_id)
                if state == "outbox":
                    queued.append(letter_id)
                    continue
                try:
                    raw = self.spool.read.path("sent", letter_id).read_bytes() if state == "sent" else None
                except FileNotFoundError:
                    raw = None
                if raw is None:
                    continue  # failed, held, dropped: nothing went, nothing to copy
                items.append(Outgoing(letter_id, raw, Envelope(self.platform.address, ()), copy_later=True))
                theirs = theirs or letter_id not in self._queued
            # A copy noted by a process that was killed may have been made before it died.
            try:
                failures = self.transport.copy_sent(items, look_first=theirs) if items else {}
            except TransportError:  # unreachable now: all stay due; some may be there, so look first
                self._queued.difference_update(item.key for item in items)
                return 0
            for key, why in failures.items():
                self.spool.write.annotate(key, sent_copy_failed=why, durable=False)
            self.spool.write.set_copies_due(queued)
            self._queued.intersection_update(queued)
        return len(items) - len(failures)

    def _record(self, result: SubmitResult) -> None:
        if result.status == "sent":
            reached("submitted")  # delivered, still in the outbox: a kill here makes flush send it again
            if result.refused:
                self.spool.write.annotate(result.key, refused="; ".join(f"{a}: {w}" for a, w in result.refused))
            if result.key in self._answering:
                from ..spool import server_claims

                # Its claim on the server answered before the spool says sent: a kill between the
                # two leaves it in the outbox, submitted again as our own answered claim allows
                # (``confirm``). Marked after the move, a kill there left the claim open for
                # another machine to take over once stale: a second reply to one letter.
                server_claims.sent(self.spool, self.transport, result.key)
                reached("claims-marked")
            if result.key in self._unflushed:  # as durable as the delivery, in the move's one commit
                raw = self._bytes.get(result.key) if result.flushed_copy else None
                self.spool.write.make_durable(
                    result.key,
                    moved=("outbox", "sent"),
                    flushed=result.flushed_copy,
                    copies=result.copies if raw is not None else (),
                    raw=raw,
                )
            else:  # durable since it was filed: a move lost in a power cut means a duplicate dropped
                self.box.move(result.key, "outbox", "sent", durable=False)
        elif result.status == "failed":
            self.spool.write.annotate(result.key, failed_reason=result.detail)
            self.box.move(result.key, "outbox", "failed")
        else:
            self.spool.write.annotate(result.key, queued_reason=result.detail, durable=False)  # informational


def envelope_of(letter: Letter, mails_people: bool) -> tuple[str, ...]:
    """Every RCPT TO of ``letter``: each recipient platform (several for a fan-out) at its thread
    address, and the followers where the transport ``mails_people``: one submission, one letter,
    one Message-ID. On the local post office a person has no mailbox: the Cc header names them,
    nobody delivers. What a person approves is bound to exactly this (``Holds``)."""
    from ..letter import wire

    rcpts = [wire.tagged_address(a, letter.thread) for a in letter.recipients or (letter.to_address,)]
    copies = letter.cc if mails_people else ()
    return tuple(dict.fromkeys([*rcpts, *copies]))


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
