"""Wire format v1: a Letter to RFC-822 bytes and back. Pure functions, no I/O.

Rendering builds every header from validated values. Parsing is strict and bounded: one
From with one plain address, one Message-ID of a sane shape, a header section and a message
of limited size, a body shown only as its MIME headers declare it (``body_text``). Anything
else raises ``Malformed`` with a reason code from DESIGN §8, so the caller can quarantine it
with a sentence.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from email import policy
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.headerregistry import Address, HeaderRegistry
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import format_datetime

from . import matter, mime
from .mime import MIME_HEADERS, header_section
from .model import (
    HUMAN,
    MAX_REF,
    MAX_SUBJECT,
    THREAD_RE,
    Letter,
    check_header_text,
    check_name,
    check_severity,
    check_thread,
    check_type,
    new_ulid,
)
from .text import describe, forbidden_in_header, one_line

MAX_HEADER_BYTES = 65_536
MESSAGE_ID_RE = re.compile(r"^<[\x21-\x3b\x3d\x3f-\x7e]{1,250}@[\x21-\x3b\x3d\x3f-\x7e]{1,250}>$")
_ADDR_RE = re.compile(r"^[a-z0-9][a-z0-9.+_-]{0,127}@[a-z0-9.-]{1,253}$")
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*\+(thr-[0-9a-z]{6,26})@")
_FOLD = re.compile(r"\r?\n(?=[ \t])")  # a line break inside a header value that only folds it
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


class Malformed(ValueError):
    """A message agentmail will not hand to an agent: ``reason`` is a DESIGN §8 code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


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
    match = _TAG_RE.match(address.lower())
    return match.group(1) if match else None


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
        date=format_datetime(date) if date else "",
        severity=severity,
        ref=ref,
        in_reply_to=in_reply_to,
        references=references,
        to_agent=to_agent,
    )


def render(letter: Letter) -> bytes:
    """The unsigned RFC-822 bytes (CRLF) for ``letter``; refuses unsafe header text. An empty
    ``date`` is now."""
    check_type(letter.type)
    check_thread(letter.thread)
    check_severity(letter.severity)
    check_header_text("subject", letter.subject, MAX_SUBJECT)
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
        if not _ADDR_RE.fullmatch(person):
            raise ValueError(f"not a plain address to copy: {person!r}")
    if letter.list_id is not None and not LIST_ID_RE.fullmatch(letter.list_id):
        raise ValueError(f"not a List-Id: {letter.list_id!r}")

    fields = {
        "type": letter.type,
        "thread": letter.thread,
        "severity": letter.severity,
        "ref": letter.ref,
        "to-agent": letter.to_agent,
    }
    text = matter.join({k: v for k, v in fields.items() if v is not None}, letter.body.strip())

    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address((letter.sender_name or ""), addr_spec=letter.sender_address)
    for address in letter.recipients:
        if not _ADDR_RE.fullmatch(address):
            raise ValueError(f"not a plain recipient address: {address!r}")
    # A fan-out letter names every recipient platform, each at its thread address (DESIGN §6).
    msg["To"] = ", ".join(tagged_address(a, letter.thread) for a in letter.recipients or (letter.to_address,))
    if letter.cc:
        msg["Cc"] = ", ".join(letter.cc)
    msg["Reply-To"] = tagged_address(letter.sender_address, letter.thread)  # a person's plain Reply stays in the thread
    msg["Subject"] = letter.subject
    msg["Date"] = letter.date or format_datetime(datetime.now(UTC))
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
    cte = "7bit" if text.isascii() and max(map(len, text.splitlines() or [""])) <= 900 else "quoted-printable"
    msg.set_content(text, charset="utf-8", cte=cte)
    return msg.as_bytes()


# --- parsing ---------------------------------------------------------------------------------

# compat32 keeps headers as the raw strings they are; the default policy would re-parse a header
# on every access. Only the few headers we interpret are parsed, once, below.
_PARSER = BytesParser(policy=policy.compat32)
_REGISTRY = HeaderRegistry()


# Every line of a header section is a field (a name of printable ASCII but ':', then ':') or
# the continuation of one. dkimpy refuses anything else while the email package quietly starts
# the body there, so the two would judge different letters: refused here, before either runs.
_FIRST_HEADER_LINE = re.compile(rb"[!-9;-~]+[ \t]*:")
_NOT_A_HEADER_LINE = re.compile(rb"\n(?![ \t]|[!-9;-~]+[ \t]*:)")  # a literal first: the fast search


def bad_header_line(head: bytes) -> int | None:
    """The 1-based number of the first line of ``head`` that is neither a field nor a continuation."""
    if not _FIRST_HEADER_LINE.match(head):
        return 1
    found = _NOT_A_HEADER_LINE.search(head.rstrip(b"\r\n"))
    return None if found is None else head.count(b"\n", 0, found.start()) + 2


_QUICK_FROM = re.compile(
    rb"^From:[^\r\n]*?<?([a-z0-9][a-z0-9.+_-]*@[a-z0-9.-]+)>?[ \t]*\r?$", re.IGNORECASE | re.MULTILINE
)
_QUICK_ID = re.compile(rb"^Message-ID:[ \t]*(<[!-;=?-~]+@[!-;=?-~]+>)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)


def quick_identity(raw: bytes) -> tuple[str, str] | None:
    """(From address, Message-ID) read straight off simple headers, or None when anything is
    unusual. Only for recognising a copy of a letter already filed; never for judging one."""
    head = header_section(raw)
    froms, ids = _QUICK_FROM.findall(head), _QUICK_ID.findall(head)
    if len(froms) != 1 or len(ids) != 1 or len(re.findall(rb"^From:", head, re.IGNORECASE | re.MULTILINE)) != 1:
        return None
    return froms[0].decode().lower(), ids[0].decode()


def parse_message(raw: bytes, max_size: int) -> Message:
    """Parse the envelope-level structure, enforcing the limits of DESIGN §5.1."""
    if len(raw) > max_size:
        raise Malformed("too-large", f"the letter is {len(raw)} bytes; this bus takes at most {max_size}")
    head = header_section(raw)
    if len(head) > MAX_HEADER_BYTES:
        raise Malformed("malformed", f"the header section is larger than {MAX_HEADER_BYTES} bytes")
    if b"\x00" in raw:
        raise Malformed("malformed", "the letter contains NUL bytes")
    bad_line = bad_header_line(head)
    if bad_line is not None:
        raise Malformed("malformed", f"header line {bad_line} is neither a field nor the continuation of one")
    try:
        return _PARSER.parsebytes(raw)
    except Exception as exc:  # the email package raises many types on hostile input
        raise Malformed("malformed", f"the letter does not parse as RFC-822 ({exc.__class__.__name__})") from exc


def header_values(msg: Message, name: str) -> list[str]:
    """Every value of header ``name`` as text (8-bit junk is kept escaped, never decoded)."""
    return [str(v) for v in msg.get_all(name) or []]


def decoded(value: str, name: str) -> str:
    """An RFC 2047 header value decoded to text; Malformed for an unknown charset or bad encoding."""
    try:
        return str(make_header(decode_header(value)))
    except (LookupError, UnicodeError, ValueError, HeaderParseError) as exc:
        raise Malformed("malformed", f"the {name} header cannot be decoded ({exc.__class__.__name__})") from None


def _addresses(value: str, name: str) -> tuple[Address, ...]:
    try:
        return tuple(getattr(_REGISTRY(name, value), "addresses", ()))
    except Exception as exc:
        raise Malformed("malformed", f"the {name} header does not parse") from exc


def sender_of(msg: Message) -> tuple[str, str]:
    """(the one plain From address lowercased, its display name); Malformed otherwise."""
    values = header_values(msg, "From")
    if len(values) != 1:
        raise Malformed("malformed", f"the letter has {len(values)} From headers; exactly one is allowed")
    addresses = _addresses(values[0], "From")
    if len(addresses) != 1:
        raise Malformed("malformed", f"the From header holds {len(addresses)} addresses; exactly one is allowed")
    addr = addresses[0].addr_spec
    if not addr.isascii() or not _ADDR_RE.fullmatch(addr.lower()):
        raise Malformed("unregistered-sender", f"the From address {addr!r} is not a plain ASCII address")
    return addr.lower(), one_line(addresses[0].display_name or "")[:100]


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


def recipient_thread(msg: Message) -> str | None:
    """The thread id from the plus tags of the recipient headers (Delivered-To keeps it through
    an MTA). A fan-out letter has several To addresses: every tag must name the same thread, so
    an extra To (or a Delivered-To) tagged for another thread is Malformed ``thread-mismatch``."""
    tags: dict[str, str] = {}
    for name in ("Delivered-To", "X-Original-To", "To"):
        for value in header_values(msg, name):
            for addr in re.findall(r"[A-Za-z0-9.+_-]+@[A-Za-z0-9.-]+", value):
                tag = thread_of_address(addr)
                if tag:
                    tags.setdefault(tag, f"{name} {addr.lower()}")
    if len(tags) > 1:
        said = "; ".join(f"{where} says {tag}" for tag, where in tags.items())
        raise Malformed("thread-mismatch", f"the recipient addresses name different threads: {one_line(said)[:300]}")
    return next(iter(tags), None)


def derived_thread(message_id: str) -> str:
    """A stable thread id for a letter that carries none (a human's first letter)."""
    digest = hashlib.sha256(message_id.encode()).digest()
    return "thr-" + base64.b32encode(digest).decode().lower()[:12]


def to_letter(msg: Message) -> Letter:
    """The Letter a parsed message carries. Raises Malformed on a bad block or header."""
    message_id = message_id_of(msg)
    sender_address, sender_name = sender_of(msg)
    subjects = header_values(msg, "Subject")
    if len(subjects) > 1:
        raise Malformed("malformed", "the letter has more than one Subject")
    # Unfolded first (a long subject is folded on the wire, RFC 5322 §2.2.3); the decoded text is
    # judged before strip(), which would drop a trailing U+2028 or \x1f a sender could never send.
    subject = decoded(_FOLD.sub("", subjects[0]).strip(" \t"), "Subject") if subjects else ""
    bad = forbidden_in_header(subject)
    if bad is not None:  # the same judgement as for a subject we send
        raise Malformed("malformed", f"the Subject decodes to text with control characters ({describe(bad)})")
    subject = subject.strip()
    to_address = ""
    recipients: list[str] = []  # every plain To address, untagged, once (a fan-out names several)
    for value in header_values(msg, "To"):
        addresses = _addresses(value, "To")
        if addresses and addresses[0].addr_spec.isascii() and not to_address:
            to_address = base_address(addresses[0].addr_spec.lower())
        for address in addresses:
            spec = address.addr_spec.lower()
            if spec.isascii() and _ADDR_RE.fullmatch(spec) and base_address(spec) not in recipients:
                recipients.append(base_address(spec))
    cc: list[str] = []
    for value in header_values(msg, "Cc"):
        try:
            copied = _addresses(value, "Cc")
        except Malformed:
            continue  # a Cc is who else reads, never what an agent acts on: an odd one is ignored
        for address in copied:
            spec = address.addr_spec.lower()
            if spec.isascii() and _ADDR_RE.fullmatch(spec) and spec not in cc:
                cc.append(spec)
    list_ids = [v.strip() for v in header_values(msg, "List-Id")]
    text = body_text(msg)
    tag = recipient_thread(msg)
    fields: dict[str, str] = {}
    if matter.has_block(text.lstrip("\r\n")):
        try:
            fields, text = matter.split(text.lstrip("\r\n"))
        except matter.MatterError as exc:
            raise Malformed("malformed", str(exc)) from exc
    try:
        kind = check_type(fields["type"]) if "type" in fields else HUMAN
        severity = check_severity(fields.get("severity"))
        ref = fields.get("ref")
        if ref is not None:
            check_header_text("ref", ref, MAX_REF)
        to_agent = check_name("agent", fields["to-agent"]) if "to-agent" in fields else None
        block_thread = check_thread(fields["thread"]) if "thread" in fields else None
    except ValueError as exc:
        raise Malformed("malformed", f"the agentmail block: {exc}") from exc
    if tag and block_thread and tag != block_thread:
        raise Malformed("thread-mismatch", f"the address tag says {tag} but the block says {block_thread}")
    thread = tag or block_thread or derived_thread(message_id)
    assert THREAD_RE.fullmatch(thread)
    in_reply_to = _ids(msg.get("In-Reply-To"))
    return Letter(
        message_id=message_id,
        sender="",
        sender_address=sender_address,
        sender_name=sender_name or None,
        to="",
        to_address=to_address,
        type=kind,
        thread=thread,
        subject=subject,
        body=text.strip("\n"),
        date=" ".join(str(msg.get("Date", "")).split()),
        severity=severity,
        ref=ref,
        in_reply_to=in_reply_to[0] if in_reply_to else None,
        references=_ids(msg.get("References")),
        to_agent=to_agent,
        cc=tuple(cc),
        list_id=list_ids[0] if len(list_ids) == 1 and LIST_ID_RE.fullmatch(list_ids[0]) else None,
        recipients=tuple(recipients) if len(recipients) > 1 else (),
    )
