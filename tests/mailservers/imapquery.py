"""FETCH items and SEARCH keys evaluated against stored messages (pure functions)."""

from __future__ import annotations

import datetime as dt
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from email.policy import compat32

from .imapwire import (
    ParseError,
    Token,
    flag_list,
    format_internaldate,
    in_ranges,
    is_sequence_set,
    parse_date,
    parse_sequence_set,
)
from .store import StoredMessage

_BODY_ITEM = re.compile(r"(BODY(?:\.PEEK)?)\[([^\]]*)\](?:<(\d+)(?:\.(\d+))?>)?")
_SIMPLE = {"UID", "FLAGS", "MODSEQ", "INTERNALDATE", "RFC822.SIZE", "RFC822", "RFC822.HEADER", "RFC822.TEXT"}
_MACROS = {"FAST": ["FLAGS", "INTERNALDATE", "RFC822.SIZE"]}


@dataclass(frozen=True)
class FetchItem:
    """One requested data item; ``name`` is what the response calls it."""

    name: str
    section: str | None = None  # None for non-body items
    partial: tuple[int, int | None] | None = None
    sets_seen: bool = False


NUMBER_MAX = 2**32 - 1  # RFC 3501's number: an unsigned 32-bit integer


def parse_fetch_items(arg: Token) -> list[FetchItem]:
    """``(UID RFC822.SIZE BODY.PEEK[])`` or a single atom -> items, in order."""
    atoms = arg if isinstance(arg, list) else [arg]
    names: list[str] = []
    for atom in atoms:
        if not isinstance(atom, str):
            raise ParseError("fetch items must be atoms")
        names.extend(_MACROS.get(atom.upper(), [atom]))
    return [_fetch_item(n) for n in names]


def _fetch_item(text: str) -> FetchItem:
    upper = text.upper()
    if upper in _SIMPLE:
        return FetchItem(upper, sets_seen=upper in ("RFC822", "RFC822.TEXT"))
    m = _BODY_ITEM.fullmatch(upper)
    if not m:
        # ENVELOPE, BODYSTRUCTURE, BINARY...: agentmail never asks, so neither do we.
        raise ParseError(f"fetch item {text!r} not supported by the test server")
    kind, section, start, length = m.groups()
    section = " ".join(section.split())
    if section not in ("", "HEADER", "TEXT") and not section.startswith("HEADER.FIELDS"):
        raise ParseError(f"body section {section!r} not supported by the test server")
    partial = (int(start), int(length) if length else None) if start else None
    if partial is not None and max(partial[0], partial[1] or 0) > NUMBER_MAX:
        raise ParseError(f"partial <{start}.{length}>: RFC 3501's numbers are 32-bit")
    return FetchItem(f"BODY[{section}]", section, partial, sets_seen=kind == "BODY")


def render_fetch_item(item: FetchItem, msg: StoredMessage) -> bytes:
    """``NAME value`` for one message; byte payloads as ``{n}`` literals."""
    if item.name == "UID":
        return b"UID %d" % msg.uid
    if item.name == "FLAGS":
        return b"FLAGS " + flag_list(msg.flags)
    if item.name == "MODSEQ":
        return b"MODSEQ (%d)" % msg.modseq
    if item.name == "INTERNALDATE":
        return b"INTERNALDATE " + format_internaldate(msg.internaldate)
    if item.name == "RFC822.SIZE":
        return b"RFC822.SIZE %d" % len(msg.data)
    if item.name in ("RFC822", "RFC822.HEADER", "RFC822.TEXT"):
        section = {"RFC822": "", "RFC822.HEADER": "HEADER", "RFC822.TEXT": "TEXT"}[item.name]
        return item.name.encode() + b" " + _literal(extract_section(msg.data, section))
    assert item.section is not None
    data = extract_section(msg.data, item.section)
    name = item.name.encode()
    if item.partial is not None:
        start, length = item.partial
        data = data[start:] if length is None else data[start : start + length]
        name += b"<%d>" % start
    return name + b" " + _literal(data)


def _literal(data: bytes) -> bytes:
    return b"{%d}\r\n%s" % (len(data), data)


def split_message(data: bytes) -> tuple[bytes, bytes]:
    """(header block including the blank line, body)."""
    for sep in (b"\r\n\r\n", b"\n\n"):
        at = data.find(sep)
        if at >= 0:
            return data[: at + len(sep)], data[at + len(sep) :]
    return data, b""


def _header_lines(header: bytes) -> list[tuple[str, bytes]]:
    """(lower-case field name, raw field incl. continuation lines) per header field."""
    fields: list[tuple[str, bytes]] = []
    for line in header.splitlines(keepends=True):
        if line in (b"\r\n", b"\n"):
            break
        if line[:1] in (b" ", b"\t") and fields:
            name, raw = fields[-1]
            fields[-1] = (name, raw + line)
        else:
            fields.append((line.split(b":", 1)[0].strip().decode("ascii", "replace").lower(), line))
    return fields


def extract_section(data: bytes, section: str) -> bytes:
    """The bytes of ``BODY[section]`` for the sections this server supports."""
    if section == "":
        return data
    header, body = split_message(data)
    if section == "HEADER":
        return header
    if section == "TEXT":
        return body
    m = re.fullmatch(r"HEADER\.FIELDS(\.NOT)? \((.*)\)", section)
    if not m:
        raise ParseError(f"bad section {section!r}")
    wanted = {n.lower().strip('"') for n in m[2].split()}
    keep = [raw for name, raw in _header_lines(header) if (name in wanted) != bool(m[1])]
    return b"".join(keep) + b"\r\n"


# -- SEARCH ---------------------------------------------------------------------------

Predicate = Callable[[int, StoredMessage], bool]
"""Called with (sequence number, message)."""

_FLAG_KEYS = {
    "ANSWERED": ("\\Answered", True),
    "DELETED": ("\\Deleted", True),
    "DRAFT": ("\\Draft", True),
    "FLAGGED": ("\\Flagged", True),
    "SEEN": ("\\Seen", True),
    "UNANSWERED": ("\\Answered", False),
    "UNDELETED": ("\\Deleted", False),
    "UNDRAFT": ("\\Draft", False),
    "UNFLAGGED": ("\\Flagged", False),
    "UNSEEN": ("\\Seen", False),
}
_HEADER_KEYS = {"SUBJECT", "FROM", "TO", "CC", "BCC"}


def compile_search(tokens: list[Token], *, largest_uid: int, largest_seq: int) -> Predicate:
    """All keys ANDed, as RFC 3501 says. A leading ``CHARSET x`` is accepted and ignored."""
    if len(tokens) >= 2 and isinstance(tokens[0], str) and tokens[0].upper() == "CHARSET":
        tokens = tokens[2:]
    if not tokens:
        raise ParseError("SEARCH needs a key")
    parser = _SearchParser(tokens, largest_uid, largest_seq)
    preds = []
    while parser.pos < len(tokens):
        preds.append(parser.key())
    return lambda seq, m: all(p(seq, m) for p in preds)


class _SearchParser:
    def __init__(self, tokens: list[Token], largest_uid: int, largest_seq: int) -> None:
        self.tokens = tokens
        self.pos = 0
        self.largest_uid = largest_uid
        self.largest_seq = largest_seq

    def _next(self) -> Token:
        if self.pos >= len(self.tokens):
            raise ParseError("SEARCH key is missing an argument")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _text(self) -> str:
        token = self._next()
        if isinstance(token, list):
            raise ParseError("expected a string")
        return token.decode("utf-8", "replace") if isinstance(token, bytes) else token

    def key(self) -> Predicate:
        token = self._next()
        if isinstance(token, list):  # a parenthesised group: AND of its keys
            sub = _SearchParser(token, self.largest_uid, self.largest_seq)
            preds = []
            while sub.pos < len(token):
                preds.append(sub.key())
            return lambda seq, m: all(p(seq, m) for p in preds)
        if is_sequence_set(token):
            ranges = parse_sequence_set(str(token), self.largest_seq)
            return lambda seq, m: in_ranges(seq, ranges)
        if not isinstance(token, str):
            raise ParseError("bad SEARCH key")
        word = token.upper()
        if word == "ALL":
            return lambda seq, m: True
        if word in _FLAG_KEYS:
            flag, present = _FLAG_KEYS[word]
            return lambda seq, m: (flag in m.flags) == present
        if word in ("NEW", "RECENT"):  # this server never reports \Recent
            return lambda seq, m: False
        if word == "OLD":
            return lambda seq, m: True
        if word in ("KEYWORD", "UNKEYWORD"):
            kw, present = self._text(), word == "KEYWORD"
            return lambda seq, m: (kw in m.flags) == present
        if word == "NOT":
            inner = self.key()
            return lambda seq, m: not inner(seq, m)
        if word == "OR":
            a, b = self.key(), self.key()
            return lambda seq, m: a(seq, m) or b(seq, m)
        if word == "UID":
            ranges = parse_sequence_set(self._text(), self.largest_uid)
            return lambda seq, m: in_ranges(m.uid, ranges)
        if word in ("LARGER", "SMALLER"):
            size = int(self._text())
            if word == "LARGER":
                return lambda seq, m: len(m.data) > size
            return lambda seq, m: len(m.data) < size
        if word in ("BEFORE", "ON", "SINCE"):
            day = parse_date(self._text())
            compare: Callable[[dt.date, dt.date], bool] = {
                "BEFORE": operator.lt,
                "ON": operator.eq,
                "SINCE": operator.ge,
            }[word]
            return lambda seq, m: compare(m.internaldate.date(), day)
        if word in _HEADER_KEYS or word == "HEADER":
            field = self._text() if word == "HEADER" else word
            needle = self._text().lower()
            return lambda seq, m: _header_contains(m.data, field, needle)
        if word == "BODY":
            body_needle = self._text().encode().lower()
            return lambda seq, m: body_needle in split_message(m.data)[1].lower()
        if word == "TEXT":
            text_needle = self._text().encode().lower()
            return lambda seq, m: text_needle in m.data.lower()
        raise ParseError(f"SEARCH key {token!r} not supported by the test server")


def _header_contains(data: bytes, field: str, needle: str) -> bool:
    header, _ = split_message(data)
    values = BytesHeaderParser(policy=compat32).parsebytes(header).get_all(field) or []
    if not needle:  # HEADER x "" matches any message that has the field
        return bool(values)
    return any(needle in str(v).lower() for v in values)
