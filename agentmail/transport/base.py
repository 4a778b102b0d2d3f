"""The transport interface: how letters leave and arrive, nothing else.

A transport moves exact RFC-822 bytes. It knows nothing of letters, guards or the spool:
the client hands it signed bytes to submit, and pulls raw messages past a checkpoint that
the spool stores only after it has committed what was fetched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence

from .._value import Frozen
from ..model import opener_key
from ..protocol import opens_thread


class Envelope(Frozen):
    """SMTP envelope: who pays for bounces, who receives."""

    mail_from: str
    rcpt_to: tuple[str, ...]


class Outgoing(Frozen):
    """One message to submit; ``key`` is the outbox id, echoed back in the result."""

    key: str
    raw: bytes
    envelope: Envelope
    # A file on this machine holding exactly ``raw`` (the spool's copy: path, st_dev, st_ino),
    # which the local post office hard-links instead of writing the bytes again. None elsewhere.
    copy: tuple[str, int, int] | None = None
    # Its copy to a sent folder may wait for the client's next ``copy_sent``, batched with the
    # others (one MULTIAPPEND): a letter that answers none, which no other machine must see to
    # keep from answering it twice. False: copied as it is submitted.
    copy_later: bool = False


class Claimed(Frozen):
    """What a reply claim on the server came to: ``holder`` None when the reply is ours, else
    who answered first; ``warning``: ours, but held on this machine only, and why (a server
    that cannot keep the claim, or could not be asked now), for the writer to be told."""

    holder: str | None = None
    warning: str | None = None


class SubmitResult(Frozen):
    """What happened to one message.

    ``status``: "sent" (the server took responsibility: SMTP 250), "queued" (transient
    failure, try again later), or "failed" (permanent refusal; ``detail`` has the reason).
    ``refused`` lists recipients the server refused while accepting others.
    """

    key: str
    status: str
    detail: str = ""
    refused: tuple[tuple[str, str], ...] = ()
    # "sent" with the sender's own file (``Outgoing.copy``) linked into the server's store and
    # flushed there: that inode's bytes are on disk, the spool need not flush them again.
    flushed_copy: bool = False
    # The server's files holding exactly these bytes (absolute paths: each recipient's name in
    # ``new/``, then the sent record's), for the spool to find its copy again (``SpoolReader``).
    copies: tuple[str, ...] = ()


class Incoming(Frozen):
    """One message pulled from the mailbox.

    ``raw`` is None when the message is larger than the limit: the transport did not
    download it and ``size`` tells how big it claimed to be. ``raw`` is None too when the
    mailbox's entry is no letter to read (``problem`` says why: a FIFO, a directory, a symbolic
    link, a file that cannot be read); it is left where it is.
    """

    key: str
    raw: bytes | None
    size: int
    # Where these exact bytes already lie durable on this machine (the local post office's
    # file, and its st_dev/st_ino when they were read): the spool hard-links it rather than
    # creating a copy (a link costs a fraction of a new file). None elsewhere.
    copy: tuple[str, int, int] | None = None
    problem: str | None = None


OnResult = Callable[[SubmitResult], None]


class Checkpoint(Frozen):
    """Where a mailbox's fetch stopped: its UIDVALIDITY and the last UID committed, stored as
    ``"validity:uid"`` (the same for the local post office and IMAP)."""

    validity: str = ""
    last: int = 0

    @classmethod
    def parse(cls, value: str | None) -> Checkpoint:
        """A stored checkpoint; none, or one that does not parse, starts from the beginning."""
        if not value or ":" not in value:
            return cls()
        validity, _, last = value.partition(":")
        return cls(validity, int(last) if last.isascii() and last.isdigit() else 0)

    def under(self, validity: str) -> Checkpoint:
        """This checkpoint in a mailbox whose UIDVALIDITY is ``validity``: a renumbered (rebuilt)
        mailbox is read from the start again, and the spool drops what it already holds."""
        return self if self.validity == validity else Checkpoint(validity, 0)

    def past(self, committed: Sequence[Incoming]) -> Checkpoint:
        """Moved past the UIDs of ``committed`` (never backwards)."""
        return Checkpoint(self.validity, max([self.last, *(int(item.key) for item in committed)]))

    def through(self, uidnext: int) -> Checkpoint:
        """Past every UID below ``uidnext``, for the close of a fetch that read them all: one it
        found no message for (deleted or expunged before anyone read it) is never given again,
        and left above the checkpoint it would look pending forever. Never backwards."""
        return self if self.last >= uidnext - 1 else Checkpoint(self.validity, uidnext - 1)

    def __str__(self) -> str:
        return f"{self.validity}:{self.last}"


class Transport(ABC):
    """``submit`` out, ``fetch``/``advance`` in, ``wait`` for news."""

    name: str  # for display only: what a transport can do is said by the capabilities below
    # "sent" means the letter is already on disk where its recipient reads it (the local post
    # office fsyncs it before submit returns): the sender's outbox copy then need not be made
    # durable before submitting, only if the letter stays queued. An SMTP server's 250 is the
    # server's promise, kept durable here as before.
    sent_is_durable: bool = False
    # ``Outgoing.copy`` is taken: a file on this machine holding the bytes is hard-linked, not
    # written again (the local post office, on the spool's filesystem).
    links_copies: bool = False
    # A person copied (a follower in Cc) has a mailbox this transport delivers to: the envelope
    # names them. The local post office has mailboxes for platforms only.
    mails_people: bool = False

    @property
    def keeps_sent_copy(self) -> bool:
        """Does a sent letter get a copy in a sent folder (``copy_sent``, ``Outgoing.copy_later``)?"""
        return False

    @abstractmethod
    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        """Submit every message, over one connection where the transport has one.

        ``on_result`` hears each outcome the moment it is known, so a crash half-way through
        a long submission loses the record of nothing that was already delivered."""

    @abstractmethod
    def fetch(self, checkpoint: str | None, max_size: int) -> Iterator[list[Incoming]]:
        """Yield batches of messages that arrived after ``checkpoint``, oldest first."""

    @abstractmethod
    def advance(self, checkpoint: str | None, committed: Sequence[Incoming]) -> str | None:
        """The checkpoint to store once ``committed`` is safely in the spool."""

    def pending(self, checkpoint: str | None) -> bool:
        """Is there anything after ``checkpoint``? A cheap look, so a no-op sync costs little."""
        return True

    @abstractmethod
    def wait(self, checkpoint: str | None, timeout: float) -> str | None:
        """Block until something may have arrived after ``checkpoint``.

        Returns the mechanism that noticed it (e.g. "inotify", "poll", "idle"), or None
        when ``timeout`` seconds passed with nothing new.
        """

    def settle(self) -> None:  # noqa: B027  (optional: a no-op by default)
        """Return once what ``fetch`` handed out keeps the name it was read under after a power
        cut: called before a commit names it. A transport that flushed before handing out (or
        has nothing to flush) does nothing."""

    def mark(self, outcomes: Mapping[str, str]) -> None:  # noqa: B027  (optional: a no-op by default)
        """Tell a person reading the same mailbox what became of committed messages: ``outcomes``
        maps a message's key to ``verified`` or ``quarantined``. Best effort, never raises, never
        touches \\Seen; a transport with no place for such marks (the local post office) does nothing."""

    def claim_reply(self, message_id: str, key: str, holder: str) -> Claimed:
        """Claim, where every machine of the platform sees it, the one reply under ``key`` (the
        answered Message-ID, or it and a counterpart) to the letter ``message_id``, for
        ``holder`` ("<mailbox> <reply id>"): ``Claimed.holder`` None when the claim is ours (or
        this transport has no shared place: the per-home claim alone holds), else who holds it.
        Applied for exactly one of several racing machines; a claim whose reply never went out
        is taken over after ``claims.STALE_AFTER`` seconds, again for exactly one."""
        return Claimed()

    def reply_sent(self, message_id: str, key: str, holder: str) -> bool:
        """Mark ``holder``'s claim answered, so it is never taken over. False when the claim is
        no longer ``holder``'s (taken over: this reply went out late). Best effort otherwise."""
        return True

    def release_reply(self, message_id: str, key: str, holder: str) -> None:  # noqa: B027  (optional: a no-op by default)
        """``holder``'s reply will never go (rejected, failed for good): its claim is free at
        once. Best effort: a claim not freed is taken over after the stated time."""

    def copy_failures(self) -> dict[str, str]:
        """Letters the last ``submit`` sent but could not copy to a sent folder (key -> why).
        They were delivered all the same; the client records why. Only IMAP keeps copies."""
        return {}

    def copy_sent(self, sent: Sequence[Outgoing], *, look_first: bool = False) -> dict[str, str]:
        """Copy letters submitted earlier (``copy_later``) to the sent folder, all in one
        command where the server takes several; the ones not copied, key -> why. ``look_first``:
        a crash may have come after their copy, so one already there (by Message-ID) is not
        copied again. A TransportError: the server cannot be reached now, and any of them may
        have been copied before the connection broke (the caller keeps them due, looks first
        next time). Only IMAP keeps copies."""
        return {}

    def openers_since(self, cutoff_ms: int) -> dict[str, int] | None:
        """The threads this *platform* opened on any machine since ``cutoff_ms`` (ms since the
        epoch), as the server holds them: Message-ID -> when (ms). None: this transport keeps
        no such record (the quota is then counted from this home alone). Costs what was sent in
        the window, never the history; a failure to look answers None, never raises."""
        return None

    def opener_keys_since(self, cutoff_ms: int) -> dict[str, int] | None:
        """``openers_since`` keyed by ``model.opener_key`` of each Message-ID (what the quota
        merges by). A transport that can name them without reading them overrides this."""
        found = self.openers_since(cutoff_ms)
        return None if found is None else {opener_key(message_id): when for message_id, when in found.items()}

    def sent_copies(self, checkpoint: str | None, max_size: int) -> Iterator[tuple[list[Incoming], str]]:
        """The letters this *platform* sent from any machine, as the server keeps them (the IMAP
        sent folder, the post office's sent record), past ``checkpoint``: batches, each with the
        checkpoint to store once it is filed. Nothing when this transport keeps no such record."""
        return iter(())

    def sent_pending(self, checkpoint: str | None) -> bool:
        """Is there anything in the sent record past ``checkpoint``? (A cheap look.)"""
        return False

    def close(self) -> None:  # noqa: B027  (optional: a no-op by default)
        """Release connections; the default transport holds none."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fields(header: bytes) -> dict[str, str]:
    """A header block's fields, names lowercased, the first of each kept, a folded value
    joined with one space (no email package: the local post office's send path stays lean,
    tests/system/test_lean_paths.py)."""
    found: dict[str, str] = {}
    name = ""
    for line in header.decode("utf-8", "replace").replace("\r\n", "\n").split("\n"):
        if line[:1] in (" ", "\t"):
            if name:
                found[name] = f"{found[name]} {line.strip()}".strip()
            continue
        head, colon, value = line.partition(":")
        head = head.strip().lower()
        name = ""
        if colon and head and " " not in head and head not in found:
            name = head
            found[name] = value.strip()
    return found


def opener_id(header: bytes) -> str | None:
    """The Message-ID when a letter's header block says it opens a thread (``protocol.opens_thread``:
    a type that opens one, no In-Reply-To). None for anything else (a person's letter, a reply)."""
    fields = _fields(header)
    message_id = fields.get("message-id", "")
    if not message_id or not opens_thread(fields.get("x-agentmail-type", ""), "in-reply-to" in fields):
        return None
    return message_id


def opener_header(header: bytes) -> tuple[str, int] | None:
    """(Message-ID, Date in ms) of an opener (``opener_id``); None for anything else or a Date
    that does not parse."""
    import email.utils

    message_id = opener_id(header)
    if message_id is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(_fields(header).get("date", ""))
    except (ValueError, TypeError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return message_id, int(when.timestamp() * 1000)
