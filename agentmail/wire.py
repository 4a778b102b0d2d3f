"""Wire format v1: a Letter to RFC-822 bytes and back. Pure functions, no I/O.

Rendering builds every header from validated values. Parsing is strict and bounded: one
From with one plain address, one Message-ID of a sane shape, a known charset, a header
section and a message of limited size. Anything else raises ``Malformed`` with a reason
code from DESIGN §8, so the caller can quarantine it with a sentence.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import re
from dataclasses import dataclass
from email import policy
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.headerregistry import Address, HeaderRegistry
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import format_datetime
from datetime import datetime, timezone

from . import matter
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

MAX_HEADER_BYTES = 65_536
MESSAGE_ID_RE = re.compile(r"^<[\x21-\x3b\x3d\x3f-\x7e]{1,250}@[\x21-\x3b\x3d\x3f-\x7e]{1,250}>$")
_ADDR_RE = re.compile(r"^[a-z0-9][a-z0-9.+_-]{0,127}@[a-z0-9.-]{1,253}$")
_TAG_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*\+(thr-[0-9a-z]{6,26})@")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# The headers that decide how the body is decoded: signed (and over-signed) like the rest, so a
# relay cannot re-declare the charset, the transfer encoding or the structure of a signed body.
MIME_HEADERS = ("MIME-Version", "Content-Type", "Content-Transfer-Encoding")
SIGNED_HEADERS = (
    "From", "To", "Subject", "Date", "Message-ID", "In-Reply-To", "References",
    "Auto-Submitted", "X-Agentmail-Type", "X-Agentmail-Thread", *MIME_HEADERS,
)  # fmt: skip
# What the shown text may be declared as (DESIGN §3, "what an agent is shown"): nothing else is
# guessed at. A charset outside this set (utf-7 turns "+ADw-" into "<") is refused.
TEXT_CHARSETS = ("us-ascii", "utf-8")
TRANSFER_ENCODINGS = ("7bit", "8bit", "quoted-printable", "base64")


class Malformed(ValueError):
    """A message agentmail will not hand to an agent: ``reason`` is a DESIGN §8 code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def new_message_id(platform: str, domain: str) -> str:
    """``<ULID.platform@domain>``: sortable, unique, generated here and never from input."""
    return f"<{new_ulid()}.{platform}@{domain}>"


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


@dataclass(frozen=True)
class Outline:
    """What a sender chooses; render() turns it into bytes with generated headers."""

    sender_address: str
    sender_name: str
    to_address: str  # the recipient platform's plain address
    type: str
    thread: str
    subject: str
    body: str
    severity: str | None = None
    ref: str | None = None
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()
    to_agent: str | None = None
    message_id: str = ""
    date: datetime | None = None


def render(outline: Outline) -> bytes:
    """The unsigned RFC-822 bytes (CRLF) for ``outline``; refuses unsafe header text."""
    check_type(outline.type)
    check_thread(outline.thread)
    check_severity(outline.severity)
    check_header_text("subject", outline.subject, MAX_SUBJECT)
    if outline.ref is not None:
        check_header_text("ref", outline.ref, MAX_REF)
    if outline.sender_name:
        check_header_text("display name", outline.sender_name, 100)
    if outline.to_agent is not None:
        check_name("agent", outline.to_agent)
    for mid in (outline.message_id, outline.in_reply_to, *outline.references):
        if mid is not None and not MESSAGE_ID_RE.fullmatch(mid):
            raise ValueError(f"not a Message-ID: {mid!r}")

    fields = {
        "type": outline.type,
        "thread": outline.thread,
        "severity": outline.severity,
        "ref": outline.ref,
        "to-agent": outline.to_agent,
    }
    text = matter.join({k: v for k, v in fields.items() if v is not None}, outline.body.strip())

    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address(outline.sender_name, addr_spec=outline.sender_address)
    msg["To"] = tagged_address(outline.to_address, outline.thread)
    msg["Subject"] = outline.subject
    msg["Date"] = format_datetime(outline.date or datetime.now(timezone.utc))
    msg["Message-ID"] = outline.message_id
    if outline.in_reply_to:
        msg["In-Reply-To"] = outline.in_reply_to
    if outline.references:
        msg["References"] = " ".join(outline.references)
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Agentmail-Type"] = outline.type
    msg["X-Agentmail-Thread"] = outline.thread
    cte = "7bit" if text.isascii() and max(map(len, text.splitlines() or [""])) <= 900 else "quoted-printable"
    msg.set_content(text, charset="utf-8", cte=cte)
    return msg.as_bytes()


# --- parsing ---------------------------------------------------------------------------------

# compat32 keeps headers as the raw strings they are; the default policy would re-parse a header
# on every access. Only the few headers we interpret are parsed, once, below.
_PARSER = BytesParser(policy=policy.compat32)
_REGISTRY = HeaderRegistry()


def header_section(raw: bytes) -> bytes:
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        end = raw.find(b"\n\n")
    return raw if end < 0 else raw[:end]


_QUICK_FROM = re.compile(rb"^From:[^\r\n]*?<?([a-z0-9][a-z0-9.+_-]*@[a-z0-9.-]+)>?[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
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
    if len(header_section(raw)) > MAX_HEADER_BYTES:
        raise Malformed("malformed", f"the header section is larger than {MAX_HEADER_BYTES} bytes")
    if b"\x00" in raw:
        raise Malformed("malformed", "the letter contains NUL bytes")
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
    return addr.lower(), _CONTROL_RE.sub(" ", addresses[0].display_name or "")[:100]


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


def is_mime_header(name: str | bytes) -> bool:
    """MIME-Version and every Content-* header (RFC 2045): what a relay could re-declare."""
    low = (name.decode("ascii", "replace") if isinstance(name, bytes) else name).strip().lower()
    return low == "mime-version" or low.startswith("content-")


_HEADER_NAME = re.compile(rb"^([!-9;-~]+)[ \t]*:", re.MULTILINE)


def header_counts(raw: bytes) -> dict[bytes, int]:
    """How often each header name (lowercased) occurs, read the way DKIM reads names: a name
    followed by white space before its colon counts too."""
    counts: dict[bytes, int] = {}
    for match in _HEADER_NAME.finditer(header_section(raw)):
        name = match.group(1).lower()
        counts[name] = counts.get(name, 0) + 1
    return counts


def mime_header_problem(raw: bytes, msg: Message) -> str | None:
    """A sentence naming the MIME header that is duplicated or that the parser and DKIM would
    read differently; None when each MIME header occurs at most once, plainly written."""
    mime = {name.decode("ascii", "replace"): count for name, count in header_counts(raw).items() if is_mime_header(name)}
    for name, count in sorted(mime.items()):
        if count > 1:
            return f"the letter carries {count} {_display(name)} headers; a MIME header may occur once"
    for name, count in sorted(mime.items()):
        if len(msg.get_all(name) or []) != count:
            return (f"a mail parser and DKIM read the letter's {_display(name)} header differently "
                    "(a malformed header line, e.g. a space before a colon)")
    return None


def _display(lower_name: str) -> str:
    for known in MIME_HEADERS:
        if known.lower() == lower_name:
            return known
    return "-".join(part.capitalize() for part in lower_name.split("-"))


_TOKEN = r"[!#$%&'*+\-.0-9A-Z^_`a-z{|}~]+"
_QUOTED = r'"(?:[^"\\\r\n]|\\[\x20-\x7e])*"'
_PARAM = rf";[ \t]*({_TOKEN})[ \t]*=[ \t]*({_TOKEN}|{_QUOTED})[ \t]*"
_CONTENT_TYPE = re.compile(rf"[ \t]*({_TOKEN})/({_TOKEN})[ \t]*((?:{_PARAM})*);?[ \t]*")
_MIME_VERSION = re.compile(r"[ \t]*1\.0[ \t]*(?:\([^()\\]*\)[ \t]*)?")
_QP_LINE = re.compile(rb"(?:[\t\x20-\x3c\x3e-\x7e]|=[0-9A-Fa-f]{2})*")
_QP_ESCAPE = re.compile(rb"=([0-9A-Fa-f]{2})")


def _one(msg: Message, name: str) -> str | None:
    values = msg.get_all(name) or []
    if len(values) > 1:
        raise Malformed("malformed", f"the letter carries {len(values)} {name} headers; a MIME header may occur once")
    if not values:
        return None
    value = str(values[0])
    if not value.isascii():
        raise Malformed("malformed", f"the {name} header is not ASCII")
    return re.sub(r"\r?\n(?=[ \t])", "", value)


def _content_type(value: str) -> tuple[str, dict[str, str]]:
    """(type/subtype lowercased, parameters) of a plainly written Content-Type, or Malformed:
    no comments, no RFC 2231 continuations, no parameter twice."""
    match = _CONTENT_TYPE.fullmatch(value)
    if not match:
        raise Malformed("malformed", "the Content-Type header does not parse as type/subtype; parameters")
    ctype = f"{match.group(1)}/{match.group(2)}".lower()
    params: dict[str, str] = {}
    for pmatch in re.finditer(_PARAM, match.group(3)):
        name, raw_value = pmatch.group(1).lower(), pmatch.group(2)
        if "*" in name:
            raise Malformed("malformed", f"the Content-Type parameter {name[:40]!r} uses RFC 2231 encoding, which is refused")
        if name in params:
            raise Malformed("malformed", f"the Content-Type declares {name[:40]} twice")
        if raw_value.startswith('"'):
            raw_value = re.sub(r"\\(.)", r"\1", raw_value[1:-1])
        params[name] = raw_value
    return ctype, params


def _decode_quoted_printable(data: bytes) -> bytes:
    out: list[bytes] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines):
        soft = line.endswith(b"=")
        body = line[:-1] if soft else line
        if not _QP_LINE.fullmatch(body):
            raise Malformed("malformed", f"the quoted-printable body is not strictly encoded (line {number + 1})")
        if not soft and body.endswith((b" ", b"\t")):
            raise Malformed("malformed", f"the quoted-printable body has unencoded trailing white space (line {number + 1})")
        out.append(_QP_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), body))
        if not soft and number < len(lines) - 1:
            out.append(b"\n")
    return b"".join(out)


def _decode_transfer(data: bytes, cte: str) -> bytes:
    if cte == "base64":
        try:
            return binascii.a2b_base64(data.replace(b"\n", b""), strict_mode=True)
        except binascii.Error:
            raise Malformed("malformed", "the base64 body is not strictly encoded") from None
    if cte == "quoted-printable":
        return _decode_quoted_printable(data)
    if cte == "7bit" and not data.isascii():
        raise Malformed("malformed", "the body is declared 7bit but carries 8-bit bytes")
    return data


def body_text(msg: Message) -> str:
    """The text an agent is shown, decoded only as the (signed) MIME headers declare.

    Exactly one shape is shown: a single text/plain part, charset us-ascii or utf-8, transfer
    encoding 7bit, 8bit, quoted-printable or base64, each decoded strictly. A letter with no
    MIME headers at all is us-ascii 7bit (RFC 2045's default). Multipart and anything else
    that would need a guess is refused, naming what was refused.
    """
    version = _one(msg, "MIME-Version")
    content_type = _one(msg, "Content-Type")
    cte_value = _one(msg, "Content-Transfer-Encoding")
    if version is None and (content_type is not None or cte_value is not None):
        raise Malformed("malformed", "the letter declares its content without MIME-Version")
    if version is not None and not _MIME_VERSION.fullmatch(version):
        raise Malformed("malformed", f"the letter declares MIME-Version {version.strip()[:20]!r}, not 1.0")
    ctype, params = _content_type(content_type) if content_type is not None else ("text/plain", {})
    if ctype.startswith("multipart/"):
        raise Malformed("malformed", f"the letter is {ctype[:60]}; agentmail shows only single-part text/plain letters")
    if ctype != "text/plain":
        raise Malformed("malformed", f"the letter is {ctype[:60]}, not text/plain")
    charset = params.get("charset", "us-ascii").lower()
    if charset not in TEXT_CHARSETS:
        try:
            codecs.lookup(charset)
        except LookupError:
            raise Malformed("malformed", f"the letter uses an unknown charset {charset[:40]!r}") from None
        raise Malformed("malformed", f"the letter's charset {charset[:40]!r} is not one agentmail shows ({', '.join(TEXT_CHARSETS)})")
    cte = (cte_value or "7bit").strip().lower()
    if cte not in TRANSFER_ENCODINGS:
        raise Malformed("malformed", f"the Content-Transfer-Encoding {cte[:40]!r} is not one agentmail decodes ({', '.join(TRANSFER_ENCODINGS)})")
    # The body as parsed, undecoded: get_payload() would re-decode 8-bit bytes with "replace".
    payload = getattr(msg, "_payload", None)
    if not isinstance(payload, str):
        raise Malformed("malformed", "the letter body cannot be decoded")
    data = payload.encode("ascii", "surrogateescape").replace(b"\r\n", b"\n")
    try:
        return _decode_transfer(data, cte).decode("ascii" if charset == "us-ascii" else charset)
    except UnicodeDecodeError:
        raise Malformed("malformed", f"the letter body is not valid {charset}") from None


def recipient_thread(msg: Message) -> str | None:
    """The thread id from the plus tag of any recipient header (Delivered-To keeps it through an MTA)."""
    for name in ("Delivered-To", "X-Original-To", "To"):
        for value in header_values(msg, name):
            for addr in re.findall(r"[A-Za-z0-9.+_-]+@[A-Za-z0-9.-]+", value):
                tag = thread_of_address(addr)
                if tag:
                    return tag
    return None


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
    subject = decoded(subjects[0], "Subject").strip() if subjects else ""
    if _CONTROL_RE.search(subject.replace("\t", " ")):
        raise Malformed("malformed", "the Subject decodes to text with control characters")
    to_address = ""
    for value in header_values(msg, "To"):
        addresses = _addresses(value, "To")
        if addresses and addresses[0].addr_spec.isascii():
            to_address = base_address(addresses[0].addr_spec.lower())
            break
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
    )
