"""IMAP4rev1 syntax for the test server: command tokens, sequence sets, dates, quoting.

Pure functions over bytes and strings; no I/O.
"""

from __future__ import annotations

import datetime as dt
import re

Token = str | bytes | list["Token"]
"""An atom or quoted string (``str``), a literal (``bytes``) or a parenthesised list."""

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# A command line ending in a literal announcement: {12} (synchronising) or {12+}.
LITERAL_AT_END = re.compile(rb"\{(\d+)(\+?)\}$")


class ParseError(ValueError):
    """The client sent something this server cannot parse (answered with BAD)."""


def literal_marker(index: int) -> bytes:
    """Stand-in for the ``index``-th literal inside a command line.

    NUL can never occur in an IMAP command line, so it cannot collide with real text.
    """
    return b"\x00%d\x00" % index


def tokenize(line: bytes, literals: list[bytes]) -> list[Token]:
    """Split a command line (literals replaced by :func:`literal_marker`) into tokens.

    ``[...]`` inside an atom is kept whole, spaces and parentheses included, so a
    fetch item such as ``BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.100>`` is one atom.
    """
    tokens, pos = _parse_list(line, 0, literals, nested=False)
    return tokens


def _parse_list(text: bytes, pos: int, literals: list[bytes], *, nested: bool) -> tuple[list[Token], int]:
    out: list[Token] = []
    n = len(text)
    while pos < n:
        c = text[pos]
        if c == 0x20:
            pos += 1
        elif c == 0x28:  # (
            sub, pos = _parse_list(text, pos + 1, literals, nested=True)
            out.append(sub)
        elif c == 0x29:  # )
            if not nested:
                raise ParseError("unbalanced ')'")
            return out, pos + 1
        elif c == 0x22:  # "
            value, pos = _parse_quoted(text, pos + 1)
            out.append(value)
        elif c == 0x00:
            end = text.index(b"\x00", pos + 1)
            out.append(literals[int(text[pos + 1 : end])])
            pos = end + 1
        else:
            value, pos = _parse_atom(text, pos)
            out.append(value)
    if nested:
        raise ParseError("unbalanced '('")
    return out, pos


def _parse_quoted(text: bytes, pos: int) -> tuple[str, int]:
    buf = bytearray()
    while pos < len(text):
        c = text[pos]
        if c == 0x5C and pos + 1 < len(text):  # backslash escapes the next char
            buf.append(text[pos + 1])
            pos += 2
        elif c == 0x22:
            return buf.decode("utf-8", "replace"), pos + 1
        else:
            buf.append(c)
            pos += 1
    raise ParseError("unterminated quoted string")


def _parse_atom(text: bytes, pos: int) -> tuple[str, int]:
    start = pos
    depth = 0
    while pos < len(text):
        c = text[pos]
        if c == 0x5B:  # [
            depth += 1
        elif c == 0x5D and depth:  # ]
            depth -= 1
        elif depth == 0 and c in b' ()"\x00':
            break
        pos += 1
    if depth:
        raise ParseError("unbalanced '['")
    return text[start:pos].decode("utf-8", "replace"), pos


def quote(value: str) -> bytes:
    """A quoted string (or a literal when it cannot be quoted)."""
    raw = value.encode("utf-8")
    if b"\r" in raw or b"\n" in raw or not raw.isascii():
        return b"{%d}\r\n%s" % (len(raw), raw)
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def parse_sequence_set(text: str, largest: int) -> list[tuple[int, int]]:
    """``1:3,7,9:*`` -> inclusive ranges; ``*`` is ``largest``.

    As RFC 3501 says, ``n:*`` always includes ``largest``, even when ``n`` is higher:
    a client asking ``UID 50:*`` of a mailbox whose last UID is 42 gets message 42.
    """
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        first, colon, last = part.partition(":")
        lo = _set_number(first, largest)
        hi = _set_number(last, largest) if colon else lo
        ranges.append((min(lo, hi), max(lo, hi)))
    return ranges


def _set_number(text: str, largest: int) -> int:
    if text == "*":
        return largest
    if not text.isdigit() or int(text) == 0:
        raise ParseError(f"bad sequence number {text!r}")
    return int(text)


def in_ranges(value: int, ranges: list[tuple[int, int]]) -> bool:
    return any(lo <= value <= hi for lo, hi in ranges)


def is_sequence_set(token: Token) -> bool:
    return isinstance(token, str) and re.fullmatch(r"[0-9*:,]+", token) is not None


def format_internaldate(when: dt.datetime) -> bytes:
    """``"17-Jul-1996 02:44:25 -0700"`` (RFC 3501 date-time, quoted)."""
    when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    return (f'"{when.day:2d}-{MONTHS[when.month - 1]}-{when.year:04d} {when:%H:%M:%S} {when:%z}"').encode()


def parse_internaldate(text: str) -> dt.datetime:
    """Inverse of :func:`format_internaldate` (without the quotes)."""
    m = re.fullmatch(r" ?(\d{1,2})-([A-Za-z]{3})-(\d{4}) (\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)", text)
    if not m:
        raise ParseError(f"bad date-time {text!r}")
    offset = dt.timedelta(hours=int(m[8]), minutes=int(m[9]))
    return dt.datetime(
        int(m[3]),
        _month(m[2]),
        int(m[1]),
        int(m[4]),
        int(m[5]),
        int(m[6]),
        tzinfo=dt.timezone(offset if m[7] == "+" else -offset),
    )


def parse_date(text: str) -> dt.date:
    """A SEARCH date such as ``1-Feb-1994``."""
    m = re.fullmatch(r"(\d{1,2})-([A-Za-z]{3})-(\d{4})", text)
    if not m:
        raise ParseError(f"bad date {text!r}")
    return dt.date(int(m[3]), _month(m[2]), int(m[1]))


def _month(name: str) -> int:
    try:
        return [m.lower() for m in MONTHS].index(name.lower()) + 1
    except ValueError:
        raise ParseError(f"bad month {name!r}") from None


def flag_list(flags: frozenset[str] | set[str]) -> bytes:
    return b"(" + " ".join(sorted(flags)).encode() + b")"
