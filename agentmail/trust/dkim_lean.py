"""DKIM without dkimpy's overhead, for the one shape agentmail writes: an ed25519-sha256
signature, relaxed/simple, with the tags in dkimpy's order (standard library and ``model.sha256``; the
signature itself is the caller's, ``trust/signing``, which owns PyNaCl).

``signature_header`` writes the bytes ``dkim.sign`` writes, byte for byte (t= aside, which is
the clock's); ``pinned_pass`` says True only for a letter dkimpy would pass too, and None for
anything else: a failure, an unusual signature, more than one — the caller then asks dkimpy,
whose verdict stands. ``tests/trust/test_dkim_lean.py`` holds both against dkimpy.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

from ..model import sha256

_SEPARATOR = re.compile(rb"\r?\n")
_HEADER_END = re.compile(rb"\n\r?\n")
_FIELD_NAME = re.compile(rb"([\x21-\x7e]+?):")
_WSP = re.compile(rb"[\t ]+")
_TAG_NAME = re.compile(rb"[a-zA-Z]")
_H_SPLIT = re.compile(rb"\s*:\s*")
_SPACES = re.compile(rb"\s+")
_DOMAIN_SPECIALS = re.compile(rb"[\(\)<>\[\]:;@\\,]")
# dkimpy's RE_BTAG: the b= tag's value (with its folding), emptied before the header is hashed.
# Its folding white space, ``(?:(?:\s*\r?\n)?\s+)?``, matches any run of white space (\s holds
# CR and LF), and its value, ``(?:FWS[a-zA-Z0-9+/=])*``, takes the characters up to the last
# base64 one before anything else: written so, it is one scan instead of a group per character.
_B_VALUE = re.compile(rb"([;\s]b\s*=)(?:[\sa-zA-Z0-9+/=]*[a-zA-Z0-9+/=])?(?:\r?\n\Z)?")

ALGORITHM = b"ed25519-sha256"
CANONICALIZATION = b"relaxed/simple"
NAME = b"DKIM-Signature"
# The tags of a signature dkimpy writes for us, in its order; a signature with others is unusual.
_TAGS = frozenset((b"v", b"a", b"c", b"d", b"i", b"q", b"s", b"t", b"h", b"bh", b"b"))
_CLOCK_SLOP = 36000  # dkimpy's leeway for a t= ahead of the verifier's clock


class Unreadable(ValueError):
    """A header section dkimpy would refuse to read."""


def split(message: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """(header fields, body) as dkimpy's ``rfc822_parse`` reads them: each value with its
    folding and a CRLF at the end, the body's lines ended by CRLF."""
    end = _HEADER_END.search(message)
    if message[:1] == b"\n" or message[:2] == b"\r\n":  # the first line is empty: no headers
        head, rest = b"", message[message.index(b"\n") + 1 :]
    elif end is None:
        head, rest = message, None
    else:
        head, rest = message[: end.start() + 1], message[end.end() :]
    fields: list[list[bytes]] = []
    for line in _SEPARATOR.split(head)[:-1] if rest is not None else _SEPARATOR.split(head):
        if not line:  # only when there is no blank line: the message ended with its headers
            break
        if line[0] in (9, 32):
            if not fields:
                raise Unreadable("a continuation line with nothing to continue")
            fields[-1][1] += line + b"\r\n"
            continue
        match = _FIELD_NAME.match(line)
        if match is not None:
            fields.append([match.group(1), line[match.end() :] + b"\r\n"])
        elif not line.startswith(b"From "):
            raise Unreadable("a header line that is neither a field nor a continuation")
    if rest is None:
        body = b""
    elif rest.count(b"\n") == rest.count(b"\r\n"):  # every line ends in CRLF already
        body = rest
    else:
        body = b"\r\n".join(_SEPARATOR.split(rest))
    return [(name, value) for name, value in fields], body


def body_hash(body: bytes) -> bytes:
    """The sha256 of the body canonicalised ``simple``: every empty line at its end dropped,
    one CRLF kept."""
    end = len(body)
    while body.endswith(b"\r\n", 0, end):
        end -= 2
    return sha256(body[:end] + b"\r\n").digest()


def _relaxed(name: bytes, value: bytes) -> bytes:
    """``name:value`` canonicalised ``relaxed``: the name lowercased, the value unfolded, each run
    of white space one space, none at either end (dkimpy's steps; a value ``split`` read ends each
    of its lines with CRLF, so unfolding removes the CRLFs: no LF stands alone)."""
    text = value.replace(b"\r\n", b"")
    if b"\t" in text or b"  " in text:
        text = _WSP.sub(b" ", text)
    return name.lower() + b":" + text.strip()


def header_digest(fields: list[tuple[bytes, bytes]], include: list[bytes], signature_value: bytes) -> bytes:
    """The sha256 dkimpy signs: each header ``include`` names (lowercased; a name twice takes
    the next copy up; one absent adds nothing), then the signature's own field with b= empty."""
    copies: dict[bytes, list[int]] = {}
    for at, (name, _) in enumerate(fields):
        copies.setdefault(name.lower(), []).append(at)
    hasher = sha256()
    for wanted in include:
        left = copies.get(wanted)
        if left:  # the lowest copy not taken yet
            hasher.update(_relaxed(*fields[left.pop()]) + b"\r\n")
    hasher.update(_relaxed(NAME, _B_VALUE.sub(rb"\1", signature_value)))  # no CRLF after this one
    return hasher.digest()


def fold(header: bytes, namelen: int) -> bytes:
    """dkimpy's ``fold``, as it is: lines of at most 72 characters, broken at a space or, in a
    run without one, anywhere."""
    width = 72 - namelen
    if len(header) <= width:
        return header
    if len(header) - header.rfind(b"\r\n") == 2 and len(header) <= width + 2:
        return header
    at = header.rfind(b"\r\n ")
    if at == -1:
        pre = b""
    else:
        pre, header = header[: at + 3], header[at + 3 :]
    while len(header) > width:
        at = header[:width].rfind(b" ")
        if at == -1:
            pre += header[:width] + b"\r\n "
            header = header[width:]
        else:
            pre += header[:at] + b"\r\n "
            header = header[at + 1 :]
        width = 71
    return pre + header  # dkimpy's other ending compares a byte to b" ": never equal


def signature_header(
    message: bytes, domain: bytes, selector: bytes, include: list[bytes], now: int, sign: Callable[[bytes], bytes]
) -> bytes:
    """The DKIM-Signature field ``dkim.sign`` puts above ``message`` (ed25519-sha256,
    relaxed/simple, no l=, ``include`` lowercased), folded and ended by CRLF as it folds it;
    ``sign`` turns the header digest into the 64-byte signature."""
    if not message:  # dkimpy cannot sign nothing either
        raise Unreadable("an empty message")
    fields, body = split(message)
    tags = [
        (b"v", b"1"),
        (b"a", ALGORITHM),
        (b"c", CANONICALIZATION),
        (b"d", domain),
        (b"i", b"@" + domain),
        (b"q", b"dns/txt"),
        (b"s", selector),
        (b"t", str(now).encode()),
        (b"h", b" : ".join(include)),
        (b"bh", base64.b64encode(body_hash(body))),
    ]
    namelen = len(NAME)
    placeholder = fold(b"; ".join(b"=".join(tag) for tag in tags) + b"; b=" + b"0" * 60, namelen)
    signature = sign(header_digest(fields, include, b" " + placeholder))
    tags.append((b"b", base64.b64encode(signature)))
    return NAME + b": " + fold(b"; ".join(b"=".join(tag) for tag in tags) + b"\r\n", namelen)


def parse_tags(value: bytes) -> dict[bytes, bytes] | None:
    """A tag=value list read as dkimpy reads it (``parse_tag_value``), or None where dkimpy
    raises: a spec without ``=``, a name not starting with a letter, a name twice."""
    tags: dict[bytes, bytes] = {}
    specs = value.strip().split(b";")
    if not specs[-1]:  # a trailing semicolon is allowed
        specs.pop()
    for spec in specs:
        name, equals, tag = spec.partition(b"=")
        name = name.strip()
        if not equals or not _TAG_NAME.match(name) or name in tags:
            return None
        tags[name] = tag.strip()
    return tags


def _strict_b64(text: bytes, size: int) -> bytes | None:
    """``text`` (white space dropped) decoded, when it is canonical base64 of ``size`` bytes:
    then dkimpy's lenient decoding reads the same bytes."""
    try:
        raw = base64.b64decode(_SPACES.sub(b"", text), validate=True)
    except ValueError:
        return None
    return raw if len(raw) == size else None


def pinned_pass(
    message: bytes,
    domain: bytes,
    selector: bytes,
    now: int,
    acceptable: Callable[[dict[bytes, bytes], list[bytes]], bool],
    verify: Callable[[bytes, bytes], bool],
) -> bool | None:
    """True when ``message`` carries one DKIM-Signature, of the shape agentmail writes, by
    ``domain``/``selector``, that ``acceptable`` (the caller's policy, given the tags and the h=
    names) allows and ``verify`` (digest, signature) confirms; None for anything else."""
    try:
        fields, body = split(message)
    except Unreadable:
        return None
    found = [value for name, value in fields if name.lower() == b"dkim-signature"]
    if len(found) != 1:
        return None
    tags = parse_tags(found[0])
    if tags is None or tags.keys() != _TAGS:
        return None
    if (
        tags[b"v"] != b"1"
        or tags[b"a"] != ALGORITHM
        or tags[b"c"] != CANONICALIZATION
        or tags[b"q"] != b"dns/txt"
        or tags[b"d"].lower() != domain
        or _DOMAIN_SPECIALS.search(tags[b"d"])
        or tags[b"i"] != b"@" + tags[b"d"]
        or tags[b"s"] != selector
        or selector != selector.lower()  # dkimpy's key lookup would miss it (the registry's name is as written)
        or not tags[b"t"].isdigit()
        or int(tags[b"t"]) > now + _CLOCK_SLOP
    ):
        return None
    include = [name.lower() for name in _H_SPLIT.split(tags[b"h"])]
    signature = _strict_b64(tags[b"b"], 64)
    if signature is None or not acceptable(tags, include):
        return None
    if _SPACES.sub(b"", tags[b"bh"]) != base64.b64encode(body_hash(body)):
        return None
    if b"from" in include:  # dkimpy's verifier looks for a From above the signed ones, too
        include = [*include, b"from"]
    return True if verify(header_digest(fields, include, found[0]), signature) else None
