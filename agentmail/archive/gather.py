"""What the archive shows, read from one mailbox or every mailbox of a bus on this machine: plain
values (``ThreadView``, ``LetterView``) with every text from a letter already as the agents see
it (``text.visible``: invisible and bidi characters written out as ``<U+…>``). The pages escape
them again (``pages``); nothing here is markup.

A thread seen by several mailboxes (both ends of a thread on one bus) is one thread: its letters
are joined by Message-ID. "whose move" is said with the platform's name, never "me"."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

from .._value import Frozen
from ..client.facade import AgentMail
from ..config.identity import Identity
from ..config.registry import Registry
from ..errors import AgentmailError
from ..letter.attach import safe_name
from ..letter.mime import header_section
from ..model import HUMAN, Letter, ThreadStatus, ulid_ms
from ..text import visible, visible_line

# What a letter's front matter says, in the order the header table shows it.
_FRONT = ("type", "severity", "ref", "outcome", "to_agent")
PATCH_TYPES = ("text/x-diff", "text/x-patch")
MAX_DIFF = 256 * 1024  # a longer patch is listed, not shown
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]{0,199}")


class AttachmentView(Frozen):
    name: str  # safe_name: only a name, never a path or markup
    type: str
    size: int
    sha256: str
    diff: str = ""  # a patch's text (visible), "" for anything else


class LetterView(Frozen):
    id: str  # the spool id (a ULID) in the mailbox it was read from
    message_id: str
    sender: str
    to: str
    type: str
    date: str
    epoch: float  # its Date in seconds (0 when unreadable): the timeline and the feeds
    subject: str
    body: str
    headers: tuple[tuple[str, str], ...]
    attachments: tuple[AttachmentView, ...]
    auth: str  # verified | vouched | sent | quarantined | changed (its file, since it was filed)
    auth_detail: str
    raw: bytes
    reused: int = 0  # letters of the page with its Message-ID filed before it (another sender's reuse)

    @property
    def anchor(self) -> str:
        """The letter's place on its thread page and its permalink folder: from its Message-ID,
        so every mailbox of a bus (each with its own spool ids) points at the same letter; a
        later letter reusing the Message-ID gets ``-2``, ``-3``: it never takes the first's place."""
        return permalink_name(self.message_id) + (f"-{self.reused + 1}" if self.reused else "")


class ThreadView(Frozen):
    id: str
    subject: str
    state: str
    last_type: str
    whose_move: str
    opened_ms: int
    moved_ms: int
    parties: tuple[str, ...]
    severity: str
    ref: str
    letters: tuple[LetterView, ...]
    outcome: str = ""
    count: int = 0  # how many letters (kept when ``letters`` is not: a thread read from the manifest)

    def summary(self) -> dict[str, object]:
        """What the index needs of the thread, kept in the archive's manifest between runs."""
        fields = ("id", "subject", "state", "last_type", "whose_move", "opened_ms", "moved_ms", "severity", "ref",
                  "outcome")  # fmt: skip
        return {**{name: getattr(self, name) for name in fields}, "parties": list(self.parties),
                "count": len(self.letters) or self.count}  # fmt: skip


def permalink_name(message_id: str) -> str:
    """The folder of a Message-ID's permalink page: the id without its brackets when it is a plain
    name (letters, digits, ``._+=@-``), else ``h-`` and a hash of it."""
    bare = message_id.strip().removeprefix("<").removesuffix(">")
    if _SAFE_ID.fullmatch(bare) and ".." not in bare:
        return bare
    return "h-" + hashlib.sha256(message_id.encode("utf-8", "replace")).hexdigest()[:32]


def epoch_of(date: str) -> float:
    try:
        parsed = parsedate_to_datetime(date)
        return parsed.timestamp() if parsed.tzinfo is not None else 0.0
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0


def _attachments(client: AgentMail, letter: Letter, raw: bytes) -> tuple[AttachmentView, ...]:
    if letter.state == "quarantine":  # never handed out: the client refuses a quarantined letter's
        return ()
    if b"multipart/" not in header_section(raw).lower():  # one text part: nothing to list, nothing to check
        return ()
    try:
        items = client.attachments(letter)
    except AgentmailError:  # a file changed since it was filed: its badge says so, nothing is handed out
        return ()
    found = []
    for number, item in enumerate(items, 1):
        is_patch = item.type.lower() in PATCH_TYPES or item.name.lower().endswith((".patch", ".diff"))
        diff = ""
        if is_patch and item.size <= MAX_DIFF:
            diff = visible(item.data.decode("utf-8", errors="replace"))
        found.append(AttachmentView(safe_name(item.name, f"attachment-{number}"), visible_line(item.type)[:100],
                                    item.size, item.sha256, diff))  # fmt: skip
    return tuple(found)


def _auth(client: AgentMail, letter: Letter, raw: bytes) -> tuple[str, str]:
    if letter.state == "quarantine":
        return "quarantined", visible_line(f"{letter.reason or 'quarantined'}: {letter.detail or ''}")
    how = visible_line(client.authentication(letter))
    if client.spool.read.unchanged(letter.id, raw) is False:
        return "changed", how  # what it shows now was never verified
    if letter.state in ("sent", "held", "outbox", "failed"):
        return "sent", how
    if letter.type == HUMAN or letter.extra.get("person"):
        person = letter.extra.get("person")
        return "vouched", (f"written by {visible_line(str(person))}; " if person else "") + how
    return "verified", how


def letter_view(client: AgentMail, letter: Letter) -> LetterView:
    headers = [("From", letter.sender_address), ("To", ", ".join(letter.recipients) or letter.to_address),
               ("Subject", letter.subject), ("Date", letter.date), ("Message-ID", letter.message_id)]  # fmt: skip
    if letter.in_reply_to:
        headers.append(("In-Reply-To", letter.in_reply_to))
    for name in _FRONT:
        value = getattr(letter, name, None) if name != "outcome" else letter.outcome
        if value:
            headers.append((name, str(value)))
    if letter.cc:
        headers.append(("Cc", ", ".join(letter.cc)))
    raw = client.raw(letter.id)
    auth, detail = _auth(client, letter, raw)
    body = letter.body
    if letter.state == "quarantine":  # never parsed as a letter: the bytes as received, as text
        body = raw[:MAX_DIFF].decode("utf-8", errors="replace")
    return LetterView(
        id=letter.id,
        message_id=visible_line(letter.message_id),
        sender=visible_line(letter.sender or letter.sender_address),
        to=visible_line(letter.to or letter.to_address),
        type=visible_line(letter.type),
        date=visible_line(letter.date),
        epoch=epoch_of(letter.date),
        subject=visible_line(letter.subject),
        body=visible(body),
        headers=tuple((name, visible_line(value)) for name, value in headers),
        attachments=_attachments(client, letter, raw),
        auth=auth,
        auth_detail=detail,
        raw=raw,
    )


def fingerprint(client: AgentMail, thread: str, quarantine: Iterable[Letter] = ()) -> str:
    """What a thread page depends on, read from the spool without reading a letter: its ids and
    their states. The same fingerprint: the page need not be written again."""
    spool = client.spool
    parts = [f"{i}:{spool.read.locate(i)}" for i in spool.read.thread_ids(thread)]
    parts += [f"{x.id}:q" for x in quarantine]
    return f"{client.me.platform}|" + ",".join(parts)


def _move(whose: str, platform: str) -> str:
    return ",".join(platform if part == "me" else part for part in whose.split(","))


Held = list[tuple[AgentMail, Letter]]


class Found(Frozen):
    """One thread to archive: what its pages depend on, and where its status row came from."""

    thread: str
    fingerprint: str
    held: Held  # its quarantined letters to show, each with its mailbox
    status: ThreadStatus | None  # the row of the first mailbox that has one
    owner: AgentMail | None  # that mailbox ("me" in its row is its platform)


def threads(clients: list[AgentMail], quarantine: bool) -> Iterator[Found]:
    """Every thread across ``clients``, once, with what its pages depend on."""
    held: dict[str, Held] = {}
    if quarantine:
        for client in clients:
            for letter in client.quarantined(sync=False):
                held.setdefault(letter.thread or "", []).append((client, letter))
    seen: set[str] = set()
    for client in clients:
        rows = {row.thread: row for row in client.status(sync=False, closed=True)}
        for thread in [*rows, *held]:
            if thread in seen or (thread not in rows and client is not clients[-1]):
                continue  # a thread of quarantined letters only: after every mailbox's rows
            seen.add(thread)
            mine = held.get(thread, [])
            marks = [fingerprint(c, thread, [x for o, x in mine if o is c]) for c in clients]
            row = rows.get(thread)
            yield Found(thread, "\n".join(marks), mine, row, client if row is not None else None)


def thread_view(clients: list[AgentMail], found: Found) -> ThreadView | None:
    """The whole thread across ``clients`` (letters joined by Message-ID, in date order), with its
    quarantined letters when asked for; None when nothing of it is left to show."""
    # One letter is one Message-ID from one sender: another sender reusing the id (a partner
    # copying a letter's Message-ID) is another letter, shown beside it, never in its place.
    by_id: dict[tuple[str, str], LetterView] = {}
    thread, status, owner = found.thread, found.status, found.owner
    for client in clients:
        if not client.spool.read.thread_ids(thread):
            continue
        try:
            letters = client.thread(thread, sync=False)
        except LookupError:
            letters = []
        for letter in letters:
            if letter.state in ("held", "outbox"):
                continue
            key = (letter.message_id, letter.sender)
            known = by_id.get(key)
            # both ends hold it: the receiver's judgement says more than "signed here"
            if known is None or (known.auth == "sent" and letter.state not in ("sent", "failed", "sibling")):
                by_id[key] = letter_view(client, letter)
    for holder, letter in found.held:
        if (letter.message_id, letter.sender) not in by_id:
            by_id[(letter.message_id, letter.sender)] = letter_view(holder, letter)
    if not by_id:
        return None
    shown = _numbered(sorted(by_id.values(), key=lambda x: (x.epoch, x.id)))
    first = shown[0]
    parties = tuple(dict.fromkeys(p for x in shown for p in (x.sender, x.to) if p))
    front = dict(first.headers)
    if status is None or owner is None:  # quarantined letters only
        state, last_type, move, opened, moved, outcome = ("quarantined" if first.auth == "quarantined" else "note",
                                                          shown[-1].type, "nobody", ulid_ms(first.id),
                                                          ulid_ms(shown[-1].id), "")  # fmt: skip
    else:
        state, last_type, move = status.state, status.last_type, _move(status.whose_move, owner.me.platform)
        opened, moved, outcome = status.opened_ms, status.moved_ms, status.outcome
    return ThreadView(
        id=thread or "quarantine",
        subject=first.subject if thread else "Quarantined letters (in no thread)",
        state=state,
        last_type=last_type,
        whose_move=visible_line(move),
        opened_ms=opened,
        moved_ms=moved,
        parties=parties,
        severity=front.get("severity", ""),
        ref=front.get("ref", ""),
        letters=tuple(shown),
        outcome=outcome,
        count=len(shown),
    )


def _numbered(letters: list[LetterView]) -> list[LetterView]:
    """``letters`` with ``reused`` set: the first filed (lowest spool id, a ULID) of each Message-ID
    keeps the plain anchor, whatever Date a later one claims."""
    count: dict[str, int] = {}
    reused = [0] * len(letters)
    for n in sorted(range(len(letters)), key=lambda n: letters[n].id):
        reused[n] = count.get(letters[n].message_id, 0)
        count[letters[n].message_id] = reused[n] + 1
    return [x.replace(reused=again) if again else x for x, again in zip(letters, reused, strict=True)]


def bus_mailboxes(registry: Registry, home: Path) -> list[AgentMail]:
    """A client of every mailbox of the bus whose spool is on this machine (``archive --bus``),
    each platform's and each of its agents', in name order."""
    found = []
    for folder in sorted((home / "spool").glob("*")):
        platform, _, agent = folder.name.partition("@")
        if platform in registry.platforms and folder.is_dir():
            found.append(AgentMail(registry, Identity(platform, agent or None), home))
    return found
