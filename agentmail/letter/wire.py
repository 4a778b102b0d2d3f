"""Wire format v1: a Letter to RFC-822 bytes and back. Pure functions, no I/O.

Rendering builds every header from validated values. Parsing is strict and bounded: one
From with one plain address, one Message-ID of a sane shape, a header section and a message
of limited size, a body shown only as its MIME headers declare it (``body_text``). Anything
else raises ``Malformed`` with a reason code from DESIGN §8, so the caller can quarantine it
with a sentence. The header fields themselves (who a letter is from and for, encoded words) are
read in ``headers``; its names readers use are offered here too.
"""

from __future__ import annotations

import base64
import functools
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from .. import bounds
from ..model import (
    HUMAN,
    MAX_REF,
    MAX_SUBJECT,
    THREAD_RE,
    Letter,
    check_header_text,
    check_name,
    check_outcome,
    check_severity,
    check_thread,
    check_type,
    new_ulid,
    sha256,
)
from ..text import describe, forbidden_in_header, one_line, visible, visible_line
from . import matter, mime
from .headers import _FOLD
from .headers import ADDRESS_HEADERS as ADDRESS_HEADERS  # the reading names wire always offered
from .headers import Malformed as Malformed
from .headers import address_headers as address_headers
from .headers import decoded as decoded
from .headers import header_values as header_values
from .mime import MIME_HEADERS, header_section

if TYPE_CHECKING:
    from email.message import Message  # a send never parses: the email package loads with the first letter read
    from email.parser import BytesParser

    from .attach import Attachment  # likewise attach

MAX_HEADER_BYTES = bounds.HEADER_BYTES
MAX_DATE = 200  # characters of a Date: far more than RFC 5322's form, never a page of text
MESSAGE_ID_RE = re.compile(r"^<[\x21-\x3b\x3d\x3f-\x7e]{1,250}@[\x21-\x3b\x3d\x3f-\x7e]{1,250}>$")
# Patterns kept as strings here and below: re compiles (and caches) each on first use, since
# a send never parses a letter and a read never renders one (start-up).
_ADDR_RE = r"^[a-z0-9][a-z0-9.+_-]{0,127}@[a-z0-9.-]{1,253}$"
_TAG_RE = r"^[a-z0-9][a-z0-9.-]*\+(thr-[0-9a-z]{6,26})@"
SIGNED_HEADERS = (
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "In-Reply-To",
    "References",
    "Auto-Submitted",
    "X-Agentmail-Type",
    "X-Agentmail-Thread",
    *MIME_HEADERS,
)
# Signed and over-signed on every letter since people follow threads (DESIGN §3): Cc says who
# else reads, Reply-To where a person's "Reply" goes, List-Id what a person's filter matches.
# A letter signed before them lacks them and still verifies; one that has them must have them
# signed (signing.verify), so a relay can neither add a Reply-To nor a Cc unnoticed.
PEOPLE_HEADERS = ("Cc", "Reply-To", "List-Id")
LIST_ID_RE = re.compile(r"^<agentmail\.[a-z0-9](?:[a-z0-9.-]{0,250}[a-z0-9])?>$")


def new_message_id(platform: str, domain: str) -> str:
    """``<ULID.platform@domain>``: sortable, unique, generated here and never from input."""
    return f"<{new_ulid()}.{platform}@{domain}>"


def list_id(domain: str) -> str:
    """The List-Id of a bus (RFC 2919): ``<agentmail.DOMAIN>``, one filter rule for its traffic."""
    value = f"<agentmail.{domain}>"
    if not LIST_ID_RE.fullmatch(value):
        raise ValueError(f"not a bus domain: {domain!r}")
    return value


def tagged_address(address: str, thread: str) -> str:
    """``name+thr-…@domain``; an existing tag is replaced, never stacked."""
    check_thread(thread)
    local, _, domain = address.partition("@")
    return f"{local.split('+', 1)[0]}+{thread}@{domain}"


def base_address(address: str) -> str:
    local, _, domain = address.partition("@")
    return f"{local.split('+', 1)[0]}@{domain}"


def thread_of_address(address: str) -> str | None:
    match = re.match(_TAG_RE, address.lower())
    return match.group(1) if match else None


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def format_date(when: datetime) -> str:
    """The RFC 2822 Date of ``when``, as ``email.utils.format_datetime`` writes it (its English
    names, never the locale's; ``-0000`` for a naive time): without the email package and the
    socket module it loads, which a send does not otherwise need."""
    zone = when.strftime("%z") if when.tzinfo is not None else "-0000"
    return (
        f"{_DAYS[when.weekday()]}, {when.day:02d} {_MONTHS[when.month - 1]} {when.year:04d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} {zone}"
    )


def draft_letter(
    sender_address: str,
    sender_name: str,
    to_address: str,
    type: str,
    thread: str,
    subject: str,
    body: str,
    *,
    severity: str | None = None,
    ref: str | None = None,
    in_reply_to: str | None = None,
    references: tuple[str, ...] = (),
    to_agent: str | None = None,
    message_id: str = "",
    date: datetime | None = None,
    outcome: str | None = None,
) -> Letter:
    """A Letter as a sender writes it, before it has a spool id: what ``render`` reads.
    (compose builds one from the registry; tests and tools that forge letters use this.)"""
    return Letter(
        message_id=message_id,
        sender="",
        sender_address=sender_address,
        sender_name=sender_name or None,
        to="",
        to_address=to_address,
        type=type,
        thread=thread,
        subject=subject,
        body=body,
        date=format_date(date) if date else "",
        severity=severity,
        ref=ref,
        in_reply_to=in_reply_to,
        references=references,
        to_agent=to_agent,
        extra={"outcome": outcome} if outcome is not None else {},
    )


def render(letter: Letter) -> bytes:
    """The unsigned RFC-822 bytes (CRLF) for ``letter``; refuses unsafe header text. An empty
    ``date`` is now."""
    check_type(letter.type)
    check_thread(letter.thread)
    check_severity(letter.severity)
    outcome = check_outcome(letter.extra.get("outcome"), letter.type)
    # The bound is the reader's (bounds.topic_length): a reply's "Re: " does not count against it.
    prefixes = len(letter.subject) - bounds.topic_length(letter.subject)
    check_header_text("subject", letter.subject, MAX_SUBJECT + prefixes)
    if letter.ref is not None:
        check_header_text("ref", letter.ref, MAX_REF)
    if letter.sender_name:
        check_header_text("display name", letter.sender_name, 100)
    if letter.to_agent is not None:
        check_name("agent", letter.to_agent)
    if letter.date:
        check_header_text("date", letter.date, 100)
    for mid in (letter.message_id, letter.in_reply_to, *letter.references):
        if mid is not None and not MESSAGE_ID_RE.fullmatch(mid):
            raise ValueError(f"not a Message-ID: {mid!r}")
    for person in letter.cc:
        if not re.fullmatch(_ADDR_RE, person):
            raise ValueError(f"not a plain address to copy: {person!r}")
    if letter.list_id is not None and not LIST_ID_RE.fullmatch(letter.list_id):
        raise ValueError(f"not a List-Id: {letter.list_id!r}")

    fields = {
        "type": letter.type,
        "thread": letter.thread,
        "severity": letter.severity,
        "ref": letter.ref,
        "to-agent": letter.to_agent,
        "outcome": outcome,
    }
    text = matter.join({k: v for k, v in fields.items() if v is not None}, letter.body.strip())

    date = letter.date or format_date(datetime.now(UTC))
    fast = _plain_header_block(letter, date)
    # text always holds the block's lines (matter.join), so max() always has a line to measure
    if fast is not None and text.isascii() and max(map(len, text.splitlines())) <= 900:
        # What EmailMessage would write for these plain values (tests/letter/test_render_fast.py holds
        # the two equal), without its header registry re-parsing each value.
        return fast.encode("ascii") + b"\r\n".join(text.encode("ascii").splitlines()) + b"\r\n"
    return _render_with_email(letter, text, date)


# Values the fast path writes as they are: printable ASCII words with single spaces, no encoded
# word ("=?"), nothing the email package would quote, encode or fold differently.
_PLAIN_TEXT = r"[!-~]+(?: [!-~]+)*"
_PLAIN_NAME = r"[A-Za-z0-9_-]+(?: [A-Za-z0-9_-]+)*"
_PLAIN_ID = r"<[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*>"
_PLAIN_ADDR = r"[a-z0-9_+-]+(?:\.[a-z0-9_+-]+)*@[a-z0-9-]+(?:\.[a-z0-9-]+)*"  # dot-atoms
_LINE = 78  # policy.SMTP's max_line_length


def _folded(name: str, words: list[str]) -> str | None:
    """``Name: w1 w2 ...`` folded greedily at the spaces, as the email package folds a list of
    ids; None when one word alone would overflow a line. Like the email package, a value too
    long for the name's line but short enough for a line of its own moves there whole."""
    whole = " ".join(words)
    if len(name) + 2 + len(whole) > _LINE and len(whole) + 1 <= _LINE:
        return f"{name}:\r\n {whole}\r\n"
    lines: list[str] = []
    line = f"{name}:"
    for word in words:
        piece = word
        if len(line) + 1 + len(piece) <= _LINE:
            line += " " + piece
        elif len(piece) + 1 > _LINE or line == f"{name}:":
            return None
        else:
            lines.append(line)
            line = " " + piece
    lines.append(line)
    return "\r\n".join(lines) + "\r\n"


def _plain_header_block(letter: Letter, date: str) -> str | None:
    """The header section (with the blank line) for a letter whose values are all plain, or None."""
    if letter.recipients:  # a fan-out letter's To names several thread addresses: the general path
        return None
    name = letter.sender_name or ""
    subject = letter.subject
    ids = [letter.message_id, *([letter.in_reply_to] if letter.in_reply_to else []), *letter.references]
    if (
        (name and not re.fullmatch(_PLAIN_NAME, name))
        or not re.fullmatch(_PLAIN_TEXT, subject)
        or "=?" in subject
        or not re.fullmatch(_PLAIN_TEXT, date)
        or not all(re.fullmatch(_PLAIN_ID, mid) for mid in ids)
        or not all(re.fullmatch(_PLAIN_ADDR, a) for a in (letter.sender_address, letter.to_address, *letter.cc))
    ):
        return None
    sender = f"{name} <{letter.sender_address}>" if name else letter.sender_address
    single = [
        ("From", sender),
        ("To", tagged_address(letter.to_address, letter.thread)),
    ]
    lines = [f"{k}: {v}\r\n" for k, v in single]
    if letter.cc:  # the email package folds an address list its own way: only a one-line Cc here
        lines.append(f"Cc: {', '.join(letter.cc)}\r\n")
    rest = [
        ("Reply-To", tagged_address(letter.sender_address, letter.thread)),
        ("Subject", subject),
        ("Date", date),
        ("Message-ID", letter.message_id),
    ]
    if letter.in_reply_to:
        rest.append(("In-Reply-To", letter.in_reply_to))
    lines += [f"{k}: {v}\r\n" for k, v in rest]
    if letter.references:
        refs = _folded("References", list(letter.references))
        if refs is None:
            return None
        lines.append(refs)
    tail = [("Auto-Submitted", "auto-generated")]
    if letter.list_id:
        tail.append(("List-Id", letter.list_id))
    tail += [
        ("X-Agentmail-Type", letter.type),
        ("X-Agentmail-Thread", letter.thread),
        ("Content-Type", 'text/plain; charset="utf-8"'),
        ("Content-Transfer-Encoding", "7bit"),
        ("MIME-Version", "1.0"),
    ]
    lines += [f"{k}: {v}\r\n" for k, v in tail]
    if any(len(line) > _LINE for line in "".join(lines).split("\r\n")):
        return None
    return "".join(lines) + "\r\n"


def _render_with_email(letter: Letter, text: str, date: str) -> bytes:
    """The general case (non-ASCII or long values): the email package encodes and folds."""
    # email.policy loads the header registry and its parser: only for letters that need it
    from email import policy
    from email.headerregistry import Address
    from email.message import EmailMessage

    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address((letter.sender_name or ""), addr_spec=letter.sender_address)
    for address in letter.recipients:
        if not re.fullmatch(_ADDR_RE, address):
            raise ValueError(f"not a plain recipient address: {address!r}")
    # A fan-out letter names every recipient platform, each at its thread address (DESIGN §6).
    msg["To"] = ", ".join(tagged_address(a, letter.thread) for a in letter.recipients or (letter.to_address,))
    if letter.cc:
        msg["Cc"] = ", ".join(letter.cc)
    msg["Reply-To"] = tagged_address(letter.sender_address, letter.thread)  # a person's plain Reply stays in the thread
    msg["Subject"] = letter.subject
    msg["Date"] = date
    msg["Message-ID"] = letter.message_id
    if letter.in_reply_to:
        msg["In-Reply-To"] = letter.in_reply_to
    if letter.references:
        msg["References"] = " ".join(letter.references)
    msg["Auto-Submitted"] = "auto-generated"
    if letter.list_id:
        msg["List-Id"] = letter.list_id
    msg["X-Agentmail-Type"] = letter.type
    msg["X-Agentmail-Thread"] = letter.thread
    cte = "7bit" if text.isascii() and max(map(len, text.splitlines())) <= 900 else "quoted-printable"
    msg.set_content(text, charset="utf-8", cte=cte)
    return msg.as_bytes()


# --- parsing ---------------------------------------------------------------------------------


# compat32 keeps headers as the raw strings they are; the default policy would re-parse a header
# on every access. Only the few headers we interpret are parsed, once, below.
@functools.cache
def _parser() -> BytesParser:
    """compat32, BytesParser's default (the email package loads when the first letter is read)."""
    from email.parser import BytesParser

    return BytesParser()


# Every line of a header section is a field (a name of printable ASCII but ':', then ':') or
# the continuation of one. dkimpy refuses anything else while the email package quietly starts
# the body there, so the two would judge different letters: refused here, before either runs.
_FIRST_HEADER_LINE = rb"[!-9;-~]+[ \t]*:"
_NOT_A_HEADER_LINE = rb"\n(?![ \t]|[!-9;-~]+[ \t]*:)"  # a literal first: the fast search


def bad_header_line(head: bytes) -> int | None:
    """The 1-based number of the first line of ``head`` that is neither a field nor a continuation."""
    if not re.match(_FIRST_HEADER_LINE, head):
        return 1
    found = re.search(_NOT_A_HEADER_LINE, head.rstrip(b"\r\n"))
    return None if found is None else head.count(b"\n", 0, found.start()) + 2


_QUICK_FROM = rb"(?im)^From:[^\r\n]*?<?([a-z0-9][a-z0-9.+_-]*@[a-z0-9.-]+)>?[ \t]*\r?$"
_QUICK_ID = rb"(?im)^Message-ID:[ \t]*(<[!-;=?-~]+@[!-;=?-~]+>)[ \t]*\r?$"


def quick_identity(raw: bytes) -> tuple[str, str] | None:
    """(From address, Message-ID) read straight off simple headers, or None when anything is
    unusual. Only for recognising a copy of a letter already filed; never for judging one.
    Both patterns match only at the start of a line naming their field and never past its end:
    each is tried at those lines alone, not at every byte of the section."""
    head = header_section(raw)
    lowered = head.lower()  # ASCII only, as the patterns' IGNORECASE on bytes
    froms = _lines_starting(lowered, b"from:")
    if len(froms) != 1:
        return None
    sender = re.compile(_QUICK_FROM).match(head, froms[0])
    ids = [m for at in _lines_starting(lowered, b"message-id:") if (m := re.compile(_QUICK_ID).match(head, at))]
    if sender is None or len(ids) != 1:
        return None
    return sender.group(1).decode().lower(), ids[0].group(1).decode()


def _lines_starting(lowered: bytes, name: bytes) -> list[int]:
    """Where the lines of ``lowered`` that start with ``name`` start (a line ends at LF, as ``$``)."""
    found = [0] if lowered.startswith(name) else []
    at = lowered.find(b"\n" + name)
    while at >= 0:
        found.append(at + 1)
        at = lowered.find(b"\n" + name, at + 1)
    return found


def parse_message(raw: bytes, max_size: int) -> Message:
    """Parse the envelope-level structure, enforcing the limits of DESIGN §5.1."""
    if len(raw) > max_size:
        raise Malformed("too-large", f"the letter is {len(raw)} bytes; this bus takes at most {max_size}")
    head = header_section(raw)
    if len(head) > MAX_HEADER_BYTES:
        raise Malformed("malformed", f"the header section is larger than {MAX_HEADER_BYTES} bytes")
    if b"\x00" in raw:
        raise Malformed("malformed", "the letter contains NUL bytes")
    if re.search(rb"\r(?!\n)", raw):
        # RFC 5322 allows CR only in CRLF. The email package ends a line at a lone CR, the header
        # split here and dkimpy do not: one letter would read two ways (which headers, which body).
        raise Malformed("malformed", "the letter contains a bare CR (a carriage return without its line feed)")
    bad_line = bad_header_line(head)
    if bad_line is not None:
        raise Malformed("malformed", f"header line {bad_line} is neither a field nor the continuation of one")
    try:
        msg = _parser().parsebytes(raw)
    except Exception as exc:  # the email package raises many types on hostile input
        raise Malformed("malformed", f"the letter does not parse as RFC-822 ({exc.__class__.__name__})") from exc
    if msg.is_multipart():  # its own split is lenient: attach.split reads the body as received
        rest = raw[len(head) :]
        gap = re.match(rb"\r?\n\r?\n", rest)
        setattr(msg, _RAW_BODY, rest[gap.end() :] if gap else b"")
    return msg


_RAW_BODY = "agentmail_raw_body"


def read_bounded(raw: bytes, max_size: int) -> Message:
    """``parse_message`` for a letter that arrived: the one place a reader holds it to the bounds
    of ``bounds.py`` (Malformed ``too-large`` naming the bound). What the parser's work depends
    on is counted before it runs; the rest is read off the parsed message."""
    if len(raw) > max_size:
        raise Malformed("too-large", f"the letter is {len(raw)} bytes; this bus takes at most {max_size}")
    try:
        head = header_section(raw)
        if len(head) <= MAX_HEADER_BYTES:  # larger: parse_message says so, as it always did
            bounds.check_header_fields(head)
            bounds.check_signatures(head)
        bounds.check_multiparts(raw)
    except bounds.Exceeded as exc:
        raise Malformed("too-large", str(exc)) from None
    msg = parse_message(raw, max_size)
    try:
        _check_bounds(msg)
    except bounds.Exceeded as exc:
        raise Malformed("too-large", str(exc), msg) from None
    return msg


def _check_bounds(msg: Message) -> None:
    """The bounds read off a parsed letter: its MIME depth, its Subject and References, and the
    quoted lines of its text parts (an attachment's are its own)."""
    subjects = header_values(msg, "Subject")
    if len(subjects) == 1:  # none or several: subject_of says what is wrong
        bounds.check_subject(decoded(re.sub(_FOLD, "", subjects[0]).strip(" \t"), "Subject"))
    bounds.check_references(sum(str(v).count("<") for v in msg.get_all("References") or ()))
    stack: list[tuple[Message, int]] = [(msg, 0)]
    while stack:
        part, depth = stack.pop()
        bounds.check_depth(depth)
        payload = part.get_payload()
        if isinstance(payload, list):
            stack.extend((cast("Message", child), depth + 1) for child in payload)  # a multipart's parts
        elif part.get_content_maintype() == "text" and part.get_content_disposition() != "attachment":
            bounds.check_quoted(bytes(part.get_payload(decode=True) or b"").decode("latin-1"))


def sender_of(msg: Message) -> tuple[str, str]:
    """(the one plain From address lowercased, its display name); Malformed otherwise."""
    name, addr = address_headers(msg)["From"][0]
    if not addr.isascii() or not re.fullmatch(_ADDR_RE, addr.lower()):
        raise Malformed("unregistered-sender", f"the From address {addr!r} is not a plain ASCII address")
    return addr.lower(), visible_line(name or "")[:100]


def message_id_of(msg: Message) -> str:
    values = header_values(msg, "Message-ID")
    if len(values) != 1:
        raise Malformed("malformed", f"the letter has {len(values)} Message-ID headers; exactly one is required")
    mid = values[0].strip()
    if not MESSAGE_ID_RE.fullmatch(mid):
        raise Malformed("malformed", "the Message-ID is not of the form <local@domain>")
    return mid


def _ids(value: object) -> tuple[str, ...]:
    found = re.findall(r"<[^<>\s]+>", str(value or ""))
    return tuple(m for m in found if MESSAGE_ID_RE.fullmatch(m))


def body_text(msg: Message) -> str:
    """The text an agent is shown (mime.shown_text), or Malformed saying what was refused."""
    try:
        return mime.shown_text(msg)
    except mime.Refused as exc:
        raise Malformed("malformed", str(exc)) from None


def body_and_attachments(msg: Message) -> tuple[str, tuple[Attachment, ...]]:
    """The shown text and the attachments: an agent's multipart/mixed letter (attach.split),
    else the single text part (``body_text``). Malformed saying what was refused."""
    from . import attach

    if not attach.is_mixed(msg):
        return body_text(msg), ()
    body = getattr(msg, _RAW_BODY, None)
    if not isinstance(body, bytes):
        raise Malformed("malformed", "the multipart letter cannot be read as sent")
    try:
        return attach.split(msg, body)
    except mime.Refused as exc:
        raise Malformed("malformed", str(exc)) from None


def recipient_thread(msg: Message, *, to_trusted: bool = True) -> str | None:
    """The thread id from the plus tags of the recipient headers (Delivered-To keeps it through
    an MTA). A fan-out letter has several To addresses: every tag must name the same thread, so
    an extra To (or a Delivered-To) tagged for another thread is Malformed ``thread-mismatch``.
    The To header is read as parsed (``address_headers``: its mailboxes, never a display name).
    ``to_trusted`` False (a person's letter whose To no vouching signature covers): no tag at all,
    since then nothing ties the envelope's to the letter its sender wrote (DESIGN §5)."""
    if not to_trusted:
        return None
    found: list[tuple[str, str]] = []
    for name in ("Delivered-To", "X-Original-To"):
        for value in header_values(msg, name):
            found += [(name, addr) for addr in re.findall(r"[A-Za-z0-9.+_-]+@[A-Za-z0-9.-]+", value)]
    found += [("To", a.addr_spec) for a in address_headers(msg).get("To", ())]
    tags: dict[str, str] = {}
    for name, addr in found:
        tag = thread_of_address(addr)
        if tag:
            tags.setdefault(tag, f"{name} {addr.lower()}")
    if len(tags) > 1:
        said = "; ".join(f"{where} says {tag}" for tag, where in tags.items())
        raise Malformed("thread-mismatch", f"the recipient addresses name different threads: {one_line(said)[:300]}")
    return next(iter(tags), None)


def derived_thread(message_id: str) -> str:
    """A stable thread id for a letter that carries none (a human's first letter)."""
    digest = sha256(message_id.encode()).digest()
    return "thr-" + base64.b32encode(digest).decode().lower()[:12]


def subject_of(msg: Message) -> str:
    """The Subject decoded (RFC 2047) and judged as a subject we send is; Malformed otherwise."""
    subjects = header_values(msg, "Subject")
    if len(subjects) > 1:
        raise Malformed("malformed", "the letter has more than one Subject")
    # Unfolded first (a long subject is folded on the wire, RFC 5322 §2.2.3); the decoded text is
    # judged before strip(), which would drop a trailing U+2028 or \x1f a sender could never send.
    subject = decoded(re.sub(_FOLD, "", subjects[0]).strip(" \t"), "Subject") if subjects else ""
    bad = forbidden_in_header(subject)
    if bad is not None:  # the same judgement as for a subject we send
        raise Malformed("malformed", f"the Subject decodes to text with control characters ({describe(bad)})")
    return subject.strip()


def date_of(msg: Message) -> str:
    """The Date as one line of shown text (it reaches ``--json`` and MCP as it is): Malformed for
    a control character or for more than MAX_DATE characters, as a subject would be."""
    date = " ".join(str(msg.get("Date", "")).split())
    bad = forbidden_in_header(date)
    if bad is not None:
        raise Malformed("malformed", f"the Date header carries a control character ({describe(bad)})")
    if len(date) > MAX_DATE:
        raise Malformed("malformed", f"the Date header is longer than {MAX_DATE} characters")
    return date


def to_address_of(msg: Message) -> str:
    """The first To address, lowercased and without its plus tag ("" when there is none)."""
    addresses = address_headers(msg).get("To", ())
    return base_address(addresses[0].addr_spec.lower()) if addresses else ""


def recipients_of(msg: Message) -> tuple[str, ...]:
    """Every plain To address, lowercased, untagged, once (a fan-out letter names several)."""
    recipients: list[str] = []
    for address in address_headers(msg).get("To", ()):
        spec = address.addr_spec.lower()
        if re.fullmatch(_ADDR_RE, spec) and base_address(spec) not in recipients:
            recipients.append(base_address(spec))
    return tuple(recipients)


def cc_of(msg: Message) -> tuple[str, ...]:
    """The plain addresses of the Cc header, each once (one that is no plain address is left out)."""
    cc: list[str] = []
    for address in address_headers(msg).get("Cc", ()):
        spec = address.addr_spec.lower()
        if re.fullmatch(_ADDR_RE, spec) and spec not in cc:
            cc.append(spec)
    return tuple(cc)


def answered_ids(msg: Message) -> tuple[str | None, tuple[str, ...]]:
    """(the In-Reply-To Message-ID, the References), only ids of a sane shape. Each header at
    most once (RFC 5322 §3.6): with two, a signature vouches for the lower and this would read
    the upper, so the letter's place would be read two ways — Malformed."""
    for name in ("In-Reply-To", "References"):
        count = len(msg.get_all(name) or [])
        if count > 1:
            raise Malformed("malformed", f"the letter has {count} {name} headers; at most one is allowed")
    in_reply_to = _ids(msg.get("In-Reply-To"))
    return (in_reply_to[0] if in_reply_to else None), _ids(msg.get("References"))


def to_letter(msg: Message) -> Letter:
    """The Letter a parsed message carries. Raises Malformed on a bad block or header."""
    message_id = message_id_of(msg)
    sender_address, sender_name = sender_of(msg)
    subject = subject_of(msg)
    date = date_of(msg)
    to_address = to_address_of(msg)
    recipients = recipients_of(msg)
    cc = cc_of(msg)
    list_ids = [v.strip() for v in header_values(msg, "List-Id")]
    text, attachments = body_and_attachments(msg)
    tag = recipient_thread(msg)
    fields: dict[str, str] = {}
    if matter.has_block(text.lstrip("\r\n")):
        try:
            fields, text = matter.split(text.lstrip("\r\n"))
        except matter.MatterError as exc:
            raise Malformed("malformed", str(exc)) from exc
    try:
        letter_type = check_type(fields["type"]) if "type" in fields else HUMAN
        severity = check_severity(fields.get("severity"))
        ref = fields.get("ref")
        if ref is not None:
            check_header_text("ref", ref, MAX_REF)
        to_agent = check_name("agent", fields["to-agent"]) if "to-agent" in fields else None
        block_thread = check_thread(fields["thread"]) if "thread" in fields else None
        outcome = check_outcome(fields.get("outcome"), letter_type)
    except ValueError as exc:
        raise Malformed("malformed", f"the agentmail block: {exc}") from exc
    if tag and block_thread and tag != block_thread:
        raise Malformed("thread-mismatch", f"the address tag says {tag} but the block says {block_thread}")
    thread = tag or block_thread or derived_thread(message_id)
    assert THREAD_RE.fullmatch(thread)
    in_reply_to, references = answered_ids(msg)
    return Letter(
        message_id=message_id,
        sender="",
        sender_address=sender_address,
        sender_name=sender_name or None,
        to="",
        to_address=to_address,
        type=letter_type,
        thread=thread,
        subject=subject,
        body=visible(text.strip("\n")),  # nothing invisible reaches an agent (text.py): <U+E0069>
        date=date,
        severity=severity,
        ref=ref,
        in_reply_to=in_reply_to,
        references=references,
        to_agent=to_agent,
        cc=cc,
        list_id=list_ids[0] if len(list_ids) == 1 and LIST_ID_RE.fullmatch(list_ids[0]) else None,
        extra={
            **({"attachments": [a.meta() for a in attachments]} if attachments else {}),
            **({"outcome": outcome} if outcome is not None else {}),
        },
        recipients=recipients if len(recipients) > 1 else (),
    )
