"""Attachments: an agent letter's evidence and patches as ``multipart/mixed`` parts. Pure
functions, no I/O (reading files, git and saving live in ``evidence``).

Outbound, ``mixed`` turns a rendered single-part letter into ``multipart/mixed``: the text part
(front matter first) as it was rendered, then one base64 part per attachment with
``Content-Disposition: attachment; filename=...`` — what a mail client shows as an ordinary
attachment. The part headers are body bytes, so the DKIM body hash (``c=*/simple``, no ``l=``)
covers them; the top-level MIME headers are signed and over-signed as before.

Inbound, ``split`` reads exactly that shape and refuses anything a parser and a mail client
could read differently (a line that looks like a boundary but is not one, content after the
closing boundary, a nested multipart, a part header twice, a boundary that is not RFC 2046's),
naming what it refused. Names are sanitised on both sides (``safe_name``).
"""

from __future__ import annotations

import base64
import os
import re
import unicodedata
from collections.abc import Sequence
from email.header import Header
from email.message import Message
from email.parser import BytesParser
from typing import Protocol

from .._value import Frozen
from ..model import sha256
from ..text import describe, forbidden_in_header, forbidden_in_text, visible
from . import mime
from .mime import Refused, header_section

MAX_NAME = 100
# Strings, compiled by re's cache on first use: most letters carry no attachment.
_TYPE_RE = r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$"
# RFC 2046 §5.1.1: bchars, 1-70 of them, not ending in a space (agentmail never writes one).
_BOUNDARY_RE = r"^[0-9A-Za-z'()+_,./:=? -]{0,69}[0-9A-Za-z'()+_,./:=?-]$"
_PART_HEADERS = ("content-type", "content-transfer-encoding", "content-disposition", "content-description")
_PARSER = BytesParser()  # compat32, its default: a send never imports email.policy


class Attachment(Frozen):
    """One attachment: its (sanitised) file name, MIME type, bytes, and a one-line description."""

    name: str
    type: str
    data: bytes
    description: str = ""

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return sha256(self.data).hexdigest()

    def meta(self) -> dict[str, object]:
        """What ``show``/``--json`` list: never the bytes."""
        data: dict[str, object] = {"name": self.name, "type": self.type, "size": self.size, "sha256": self.sha256}
        if self.description:
            data["description"] = self.description
        return data


class Limits(Frozen):
    """The bus's attachment settings (registry.Bus attach_*): decoded bytes per attachment and
    per letter, how many, which types."""

    max_bytes: int
    max_total: int
    max_count: int
    types: tuple[str, ...]


def safe_name(name: str, fallback: str = "attachment") -> str:
    """A file name that is only a name: the last path component (either slash), printable ASCII
    letters, digits and ``._+-`` (anything else becomes ``_``), no leading dots or dashes, at
    most MAX_NAME characters keeping the extension; ``fallback`` when nothing is left."""
    base = re.split(r"[/\\]", unicodedata.normalize("NFKC", name or ""))[-1]
    cleaned = re.sub(r"[^A-Za-z0-9._+-]", "_", base)
    cleaned = re.sub(r"_{2,}", "_", cleaned).lstrip(".-_")
    if len(cleaned) > MAX_NAME:
        stem, dot, ext = cleaned.rpartition(".")
        ext = ext[:20] if dot else ""  # never a dot first (lstrip): a dot always has a stem
        cleaned = cleaned[: MAX_NAME - len(ext) - (1 if ext else 0)].rstrip(".") + ("." + ext if ext else "")
    if not cleaned:  # nothing but dots, dashes and _ (lstrip took them all): "." and ".." too
        return fallback
    return cleaned


def unique_names(attachments: list[Attachment] | tuple[Attachment, ...]) -> list[str]:
    """The names to save ``attachments`` under: each safe, none twice (``name-2.ext``...)."""
    seen: set[str] = set()
    out: list[str] = []
    for number, item in enumerate(attachments, 1):
        name = safe_name(item.name, f"attachment-{number}")
        stem, dot, ext = name.rpartition(".")
        if not dot:  # a safe name never starts with a dot: one with a dot has a stem
            stem, ext = name, ""
        candidate, count = name, 1
        while candidate.lower() in seen:
            count += 1
            candidate = f"{stem}-{count}" + (f".{ext}" if ext else "")
        seen.add(candidate.lower())
        out.append(candidate)
    return out


class Listed(Protocol):
    """What the limits read of an attachment: an Attachment, or one a letter lists (``meta``)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def size(self) -> int: ...


class Settings(Protocol):
    """The bus settings the limits come from (registry.Bus)."""

    @property
    def attach_max_bytes(self) -> int: ...
    @property
    def attach_max_total(self) -> int: ...
    @property
    def attach_max_count(self) -> int: ...
    @property
    def attach_types(self) -> tuple[str, ...]: ...


def limits_of(bus: Settings) -> Limits:
    """The attachment limits a bus sets: what a sender refuses and a reader quarantines."""
    return Limits(bus.attach_max_bytes, bus.attach_max_total, bus.attach_max_count, bus.attach_types)


def limit_problem(attachments: Sequence[Listed], limits: Limits) -> str | None:
    """Why these attachments may not leave (or be taken in) under ``limits`` (one sentence), or None."""
    if len(attachments) > limits.max_count:
        return f"{len(attachments)} attachments; this bus takes at most {limits.max_count} (bus set attach_max_count)"
    for item in attachments:
        if item.type not in limits.types:
            return (
                f"{item.name}: type {item.type} is not in this bus's allow-list ({', '.join(limits.types)}; "
                "bus set attach_types)"
            )
        if item.size > limits.max_bytes:
            return (
                f"{item.name} is {item.size} bytes; an attachment may be {limits.max_bytes} (bus set attach_max_bytes)"
            )
    total = sum(item.size for item in attachments)
    if total > limits.max_total:
        return f"the attachments are {total} bytes together; a letter may carry {limits.max_total} (bus set attach_max_total)"
    return None


def check(item: Attachment) -> Attachment:
    """``item`` with its name sanitised, or Refused for a type or description that cannot be written."""
    if not re.fullmatch(_TYPE_RE, item.type) or item.type.startswith(("multipart/", "message/")):
        raise Refused(f"{item.name}: {item.type[:60]!r} is not a single-part MIME type")
    bad = forbidden_in_text(item.name)
    if bad is not None:  # the one character policy (text.py): nothing a person cannot see
        raise Refused(
            f"{safe_name(item.name)}: the file name contains an invisible or control character ({describe(bad)})"
        )
    description = " ".join(item.description.split())[:200]
    bad = forbidden_in_header(description)
    if bad is not None:
        raise Refused(f"{item.name}: the description contains an invisible or control character ({describe(bad)})")
    return Attachment(safe_name(item.name), item.type, item.data, description)


# --- outbound --------------------------------------------------------------------------------


def _wrap(data: bytes) -> bytes:
    encoded = base64.b64encode(data)
    return b"".join(encoded[i : i + 76] + b"\r\n" for i in range(0, len(encoded), 76))


def _part(item: Attachment) -> bytes:
    lines = [
        f'Content-Type: {item.type}; name="{item.name}"',
        f'Content-Disposition: attachment; filename="{item.name}"',
    ]
    if item.description:
        desc = item.description
        if not desc.isascii():  # RFC 2047, as a mail client decodes it; never a raw 8-bit header
            desc = Header(desc, "utf-8").encode(linesep="\r\n")
        lines.append(f"Content-Description: {desc}")
    lines.append("Content-Transfer-Encoding: base64")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + _wrap(item.data)


def mixed(rendered: bytes, attachments: tuple[Attachment, ...], boundary: str | None = None) -> bytes:
    """``rendered`` (a single-part letter of ``wire.render``) as ``multipart/mixed``: its text
    part first, with the MIME headers it had, then one part per attachment (checked, names
    sanitised). The boundary is random and checked not to occur in any part."""
    items = tuple(check(item) for item in attachments)
    head = header_section(rendered)
    body = rendered[len(head) :].removeprefix(b"\r\n\r\n")
    top: list[bytes] = []
    text_headers: list[bytes] = []
    for field in re.split(rb"\r\n(?![ \t])", head):
        name = field.split(b":", 1)[0].strip().lower()
        if name == b"mime-version":
            continue
        (text_headers if mime.is_mime_header(name) else top).append(field)
    parts = [b"\r\n".join(text_headers) + b"\r\n\r\n" + body, *(_part(item) for item in items)]
    boundary = boundary or "=_agentmail_" + os.urandom(16).hex()
    marker = b"--" + boundary.encode()
    if any(marker in part for part in parts):  # a random boundary in the text: astronomically rare
        raise Refused("the chosen MIME boundary occurs in the letter; send again")
    out = b"\r\n".join(top)
    out += f'\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="{boundary}"\r\n\r\n'.encode()
    for part in parts:  # the CRLF before a delimiter is the delimiter's: an empty body needs its own
        out += marker + b"\r\n" + part + (b"\r\n" if part.endswith(b"\r\n\r\n") or not part.endswith(b"\r\n") else b"")
    return out + marker + b"--\r\n"


# --- inbound ---------------------------------------------------------------------------------


def is_mixed(msg: Message) -> bool:
    """Does the letter declare itself ``multipart/mixed``? (Judged strictly by ``split``.)"""
    values = msg.get_all("Content-Type") or []
    return len(values) == 1 and str(values[0]).strip().lower().startswith("multipart/mixed")


def _boundary(msg: Message) -> str:
    value = mime.content_type_value(msg)
    ctype, params = mime.parse_content_type(value)
    if ctype != "multipart/mixed":
        raise Refused(f"the letter is {ctype[:60]}; agentmail reads multipart/mixed with a text part first")
    boundary = params.get("boundary", "")
    if not re.fullmatch(_BOUNDARY_RE, boundary):
        raise Refused("the multipart boundary is missing or not one RFC 2046 allows")
    return boundary


def _split_parts(body: bytes, boundary: str) -> list[bytes]:
    """The parts between the delimiter lines of ``body`` (LF line ends). Refuses a line that
    starts like a delimiter but is not exactly one, text before the first delimiter other than
    blank lines, no closing delimiter, and anything but blank lines after it."""
    dash = b"--" + boundary.encode()
    parts: list[bytes] = []
    current: list[bytes] | None = None
    closed = False
    lines = body.split(b"\n")
    for number, line in enumerate(lines, 1):
        if closed:
            if line.strip():
                raise Refused(f"the letter has content after its closing MIME boundary (line {number} of the body)")
            continue
        if line.startswith(dash):
            if line == dash + b"--":
                closed = True
            elif line != dash:
                raise Refused(f"body line {number} starts like the MIME boundary but is not one")
            if current is not None:
                parts.append(b"\n".join(current))
            current = None if closed else []
            continue
        if current is None:
            if line.strip():
                raise Refused("the letter has text before its first MIME part, which no part shows")
            continue
        current.append(line)
    if not closed:
        raise Refused("the multipart letter has no closing MIME boundary")
    if not parts:
        raise Refused("the multipart letter has no parts")
    return parts


def _part_message(part: bytes, number: int) -> Message:
    head_end = part.find(b"\n\n")
    head = part if head_end < 0 else part[:head_end]
    if head_end < 0 and part.strip():
        raise Refused(f"MIME part {number} has no empty line after its headers")
    seen: set[bytes] = set()
    if head:
        for field in re.split(rb"\n(?![ \t])", head):
            if not re.match(rb"[!-9;-~]+:", field):
                raise Refused(f"MIME part {number} has a header line that is not a field")
            name = field.split(b":", 1)[0].lower()
            if name not in {h.encode() for h in _PART_HEADERS}:
                raise Refused(f"MIME part {number} carries a {name.decode(errors='replace')[:40]} header")
            if name in seen:
                raise Refused(f"MIME part {number} carries its {name.decode()} header twice")
            seen.add(name)
    return _PARSER.parsebytes(b"MIME-Version: 1.0\n" + part)


def _attachment(msg: Message, number: int) -> Attachment:
    ctype_value = mime.content_type_value(msg) or "text/plain"
    try:
        ctype, params = mime.parse_content_type(ctype_value)
    except Refused as exc:
        raise Refused(f"MIME part {number}: {exc}") from None
    if ctype.startswith(("multipart/", "message/")):
        raise Refused(f"MIME part {number} is {ctype[:60]}; nested letters and multiparts are refused")
    name = params.get("name", "")
    disposition = msg.get("Content-Disposition")
    if disposition is not None:
        unfolded = re.sub(r"\r?\n(?=[ \t])", "", str(disposition))
        _kind, dparams = mime.parse_disposition(unfolded, f"the Content-Disposition of MIME part {number}")
        name = dparams.get("filename", name)
    name = mime.decode_words(name) if "=?" in name else name
    name = visible(name)  # an invisible character stays in sight as U_E0069_ (text.py), never dropped unseen
    cte = str(msg.get("Content-Transfer-Encoding", "7bit")).strip().lower()
    if cte not in mime.TRANSFER_ENCODINGS:
        raise Refused(f"MIME part {number} uses the transfer encoding {cte[:40]!r}")
    payload = getattr(msg, "_payload", None)
    if not isinstance(payload, str):
        raise Refused(f"MIME part {number} cannot be decoded")
    data = mime.decode_transfer(payload.encode("ascii", "surrogateescape").replace(b"\r\n", b"\n"), cte)
    description = str(msg.get("Content-Description", ""))
    description = " ".join(mime.decode_words(description).split())[:200] if description else ""
    description = visible(description)  # shown, never trusted: nothing in it hidden (text.py)
    return Attachment(safe_name(name, f"attachment-{number - 1}"), ctype, data, description)


def split(msg: Message, body: bytes) -> tuple[str, tuple[Attachment, ...]]:
    """(the text an agent is shown, the attachments) of a ``multipart/mixed`` letter whose first
    part is the text; ``body`` is the letter's body as received (the email package's own split
    is lenient, so it is not used). Refused, naming what was refused, for any other shape."""
    boundary = _boundary(msg)
    parts = _split_parts(body.replace(b"\r\n", b"\n"), boundary)
    first = _part_message(parts[0], 1)
    try:
        text = mime.shown_text(first)
    except Refused as exc:
        raise Refused(f"the letter is multipart/mixed and its first part, the text, is refused: {exc}") from None
    attachments = tuple(_attachment(_part_message(part, n), n) for n, part in enumerate(parts[1:], 2))
    return text, attachments
