"""What an agent is shown of a letter's body, and the MIME headers that decide it. Pure
functions, no I/O.

A relay can change headers a signature does not cover, so the body is decoded only as signed
MIME headers declare it, in exactly one shape, and strictly: a single ``text/plain`` part in a
charset of ``TEXT_CHARSETS`` with a transfer encoding of ``TRANSFER_ENCODINGS``. Anything that
would need a guess (multipart, another charset, a comment or RFC 2231 parameter, a sloppy
encoding, a MIME header twice) is refused with a sentence naming what was refused.
"""

from __future__ import annotations

import binascii
import codecs
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from email.message import Message  # a send never parses: the email package loads with the first letter read

# The headers that decide how the body is decoded: signed (and over-signed) like the rest, so a
# relay cannot re-declare the charset, the transfer encoding or the structure of a signed body.
# A Content-* header agentmail writes later (e.g. for attachments) belongs here too: a receiver
# quarantines any MIME header present that the signature does not over-sign.
MIME_HEADERS = ("MIME-Version", "Content-Type", "Content-Transfer-Encoding")
# What the shown text may be declared as (README, "What an agent is shown"): nothing else is
# guessed at. A charset outside this set (utf-7 turns "+ADw-" into "<") is refused.
TEXT_CHARSETS = ("us-ascii", "utf-8")
TRANSFER_ENCODINGS = ("7bit", "8bit", "quoted-printable", "base64")


class Refused(ValueError):
    """The body cannot be shown as its MIME headers declare it; the message says why."""


def header_section(raw: bytes) -> bytes:
    """Everything before the first empty line (CRLF or LF, as dkimpy and the email package split)."""
    end, crlf = raw.find(b"\n\n"), raw.find(b"\n\r\n")  # bytes.find: far cheaper than a regex scan
    if crlf >= 0 and (end < 0 or crlf < end):
        end = crlf
    if end < 0:
        return raw
    return raw[: end - 1] if raw[end - 1 : end] == b"\r" else raw[:end]


def is_mime_header(name: str | bytes) -> bool:
    """MIME-Version and every Content-* header (RFC 2045): what a relay could re-declare."""
    low = (name.decode("ascii", "replace") if isinstance(name, bytes) else name).strip().lower()
    return low == "mime-version" or low.startswith("content-")


_HEADER_NAME = rb"(?m)^([!-9;-~]+)[ \t]*:"


def header_counts(raw: bytes) -> dict[bytes, int]:
    """How often each header name (lowercased) occurs, read the way DKIM reads names: a name
    followed by white space before its colon counts too."""
    counts: dict[bytes, int] = {}
    for match in re.finditer(_HEADER_NAME, header_section(raw)):
        name = match.group(1).lower()
        counts[name] = counts.get(name, 0) + 1
    return counts


def header_problem(raw: bytes, msg: Message, counts: dict[bytes, int] | None = None) -> str | None:
    """A sentence naming the MIME header that is duplicated or that the parser and DKIM would
    read differently; None when each MIME header occurs at most once, plainly written.
    ``counts``: ``header_counts(raw)``, when the caller has it already."""
    counts = header_counts(raw) if counts is None else counts
    mime = {name.decode("ascii", "replace"): count for name, count in counts.items() if is_mime_header(name)}
    for name, count in sorted(mime.items()):
        if count > 1:
            return f"the letter carries {count} {_display(name)} headers; a MIME header may occur once"
    for name, count in sorted(mime.items()):
        if len(msg.get_all(name) or []) != count:
            return (
                f"a mail parser and DKIM read the letter's {_display(name)} header differently "
                "(a malformed header line, e.g. a space before a colon)"
            )
    return None


def _display(lower_name: str) -> str:
    for known in MIME_HEADERS:
        if known.lower() == lower_name:
            return known
    return "-".join(part.capitalize() for part in lower_name.split("-"))


_TOKEN = r"[!#$%&'*+\-.0-9A-Z^_`a-z{|}~]+"
_QUOTED = r'"(?:[^"\\\r\n]|\\[\x20-\x7e])*"'
_PARAM = rf";[ \t]*({_TOKEN})[ \t]*=[ \t]*({_TOKEN}|{_QUOTED})[ \t]*"
# Strings, compiled by re's cache on first use: a send never parses MIME (start-up).
_CONTENT_TYPE = rf"[ \t]*({_TOKEN})/({_TOKEN})[ \t]*((?:{_PARAM})*);?[ \t]*"
_DISPOSITION = rf"[ \t]*({_TOKEN})[ \t]*((?:{_PARAM})*);?[ \t]*"
_MIME_VERSION = r"[ \t]*1\.0[ \t]*(?:\([^()\\]*\)[ \t]*)?"
_QP_LINE = rb"(?:[\t\x20-\x3c\x3e-\x7e]|=[0-9A-Fa-f]{2})*"
_QP_ESCAPE = rb"=([0-9A-Fa-f]{2})"


def _one(msg: Message, name: str) -> str | None:
    values = msg.get_all(name) or []
    if len(values) > 1:
        raise Refused(f"the letter carries {len(values)} {name} headers; a MIME header may occur once")
    if not values:
        return None
    value = str(values[0])
    if not value.isascii():
        raise Refused(f"the {name} header is not ASCII")
    return re.sub(r"\r?\n(?=[ \t])", "", value)


def _content_type(value: str) -> tuple[str, dict[str, str]]:
    """(type/subtype lowercased, parameters) of a plainly written Content-Type, or Malformed:
    no comments, no RFC 2231 continuations, no parameter twice."""
    match = re.fullmatch(_CONTENT_TYPE, value)
    if not match:
        raise Refused("the Content-Type header does not parse as type/subtype; parameters")
    ctype = f"{match.group(1)}/{match.group(2)}".lower()
    return ctype, _parameters(match.group(3), "the Content-Type", encoded=False)


def parse_disposition(value: str, what: str) -> tuple[str, dict[str, str]]:
    """(disposition lowercased, parameters) of a plainly written Content-Disposition (the same
    parameter grammar as a Content-Type's), or Refused naming ``what`` (where it was)."""
    match = re.fullmatch(_DISPOSITION, value)
    if not match:
        raise Refused(f"{what} does not parse")
    return match.group(1).lower(), _parameters(match.group(2), what, encoded=True)


def _parameters(text: str, what: str, encoded: bool) -> dict[str, str]:
    """The one MIME parameter grammar (RFC 2045 tokens and quoted strings, unquoted here): no
    parameter twice; an RFC 2231 name (``name*``) refused unless ``encoded`` (then kept as named)."""
    params: dict[str, str] = {}
    for pmatch in re.finditer(_PARAM, text):
        name, raw_value = pmatch.group(1).lower(), pmatch.group(2)
        if "*" in name and not encoded:
            raise Refused(f"{what} parameter {name[:40]!r} uses RFC 2231 encoding, which is refused")
        if name in params:
            raise Refused(f"{what} declares {name[:40]} twice")
        if raw_value.startswith('"'):
            raw_value = re.sub(r"\\(.)", r"\1", raw_value[1:-1])
        params[name] = raw_value
    return params


def _decode_quoted_printable(data: bytes) -> bytes:
    out: list[bytes] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines):
        soft = line.endswith(b"=")
        body = line[:-1] if soft else line
        if not re.fullmatch(_QP_LINE, body):
            raise Refused(f"the quoted-printable body is not strictly encoded (line {number + 1})")
        if not soft and body.endswith((b" ", b"\t")):
            raise Refused(f"the quoted-printable body has unencoded trailing white space (line {number + 1})")
        out.append(re.sub(_QP_ESCAPE, lambda m: bytes([int(m.group(1), 16)]), body))
        if not soft and number < len(lines) - 1:
            out.append(b"\n")
    return b"".join(out)


def _decode_transfer(data: bytes, cte: str) -> bytes:
    if cte == "base64":
        try:
            return binascii.a2b_base64(data.replace(b"\n", b""), strict_mode=True)
        except binascii.Error:
            raise Refused("the base64 body is not strictly encoded") from None
    if cte == "quoted-printable":
        return _decode_quoted_printable(data)
    if cte == "7bit" and not data.isascii():
        raise Refused("the body is declared 7bit but carries 8-bit bytes")
    return data


def shown_text(msg: Message) -> str:
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
        raise Refused("the letter declares its content without MIME-Version")
    if version is not None and not re.fullmatch(_MIME_VERSION, version):
        raise Refused(f"the letter declares MIME-Version {version.strip()[:20]!r}, not 1.0")
    ctype, params = _content_type(content_type) if content_type is not None else ("text/plain", {})
    if ctype.startswith("multipart/"):
        raise Refused(f"the letter is {ctype[:60]}; agentmail shows only single-part text/plain letters")
    if ctype != "text/plain":
        raise Refused(f"the letter is {ctype[:60]}, not text/plain")
    charset = params.get("charset", "us-ascii").lower()
    if charset not in TEXT_CHARSETS:
        try:
            codecs.lookup(charset)
        except LookupError:
            raise Refused(f"the letter uses an unknown charset {charset[:40]!r}") from None
        raise Refused(f"the letter's charset {charset[:40]!r} is not one agentmail shows ({', '.join(TEXT_CHARSETS)})")
    cte = (cte_value or "7bit").strip().lower()
    if cte not in TRANSFER_ENCODINGS:
        raise Refused(
            f"the Content-Transfer-Encoding {cte[:40]!r} is not one agentmail decodes ({', '.join(TRANSFER_ENCODINGS)})"
        )
    # The body as parsed, undecoded: get_payload() would re-decode 8-bit bytes with "replace".
    payload = getattr(msg, "_payload", None)
    if not isinstance(payload, str):
        raise Refused("the letter body cannot be decoded")
    data = payload.encode("ascii", "surrogateescape").replace(b"\r\n", b"\n")
    try:
        return _decode_transfer(data, cte).decode("ascii" if charset == "us-ascii" else charset)
    except UnicodeDecodeError:
        raise Refused(f"the letter body is not valid {charset}") from None


# --- for attach.py (agents' multipart/mixed letters): the same strict readers, by public names ---


def content_type_value(msg: Message) -> str:
    """The one Content-Type header of ``msg``, unfolded ("" when there is none); Refused twice."""
    return _one(msg, "Content-Type") or ""


def parse_content_type(value: str) -> tuple[str, dict[str, str]]:
    """(type/subtype lowercased, parameters) of a plainly written Content-Type, or Refused."""
    return _content_type(value)


def decode_transfer(data: bytes, cte: str) -> bytes:
    """``data`` decoded strictly from transfer encoding ``cte`` (one of TRANSFER_ENCODINGS)."""
    return _decode_transfer(data, cte)


def decode_words(value: str) -> str:
    """An RFC 2047 value (a part's file name or description) as text, or Refused."""
    from email.errors import HeaderParseError
    from email.header import decode_header, make_header

    try:
        return str(make_header(decode_header(value)))
    except (LookupError, UnicodeError, ValueError, HeaderParseError):
        raise Refused("an encoded word in a MIME part header cannot be decoded") from None
