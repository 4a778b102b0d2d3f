"""judge40's receipt cuts attacked beside the code they replaced (kept here as it was): the header
bounds with the bounds made small, so that short hostile sections cross them (a count that
proves too much would show at once), ``quick_identity`` on sections built of the lines and line
ends a relay can make, ``decoded`` on values the email package hands back, and the lean DKIM's
b= blanking against dkimpy's pattern as it was written. Same refusal, identity, text or bytes."""

from __future__ import annotations

import re
from collections.abc import Callable
from email.header import decode_header, make_header
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import bounds
from agentmail.letter import headers, wire
from agentmail.letter.mime import header_section
from agentmail.trust import dkim_lean

from ..depth import examples
from .test_bounds_precheck import _scan_fields, _scan_multiparts, _scan_signatures

_PIECES = st.sampled_from(
    [b"A:", b"a :", b"X\t:", b"DKIM-Signature:", b"dkim-signature :", b"DKIM-SIGNATURE\t:", b"dKiM-SiGnAtUrE",
     b"Content-Type:", b"content-type: ", b"CONTENT-TYPE:\t", b"multipart/", b"MULTIPART/", b"Multipart /",
     b"\r\n ", b"\n\t", b" ", b"\r", b"\n", b"\r\n", b"\r\r\n", b"xxxxxxxxxx", b":", b">", b"\xff", b"\x00", b"\xc5\xbf"]
)  # fmt: skip


def _refusal(check: Callable[[Any], None], value: object) -> str | None:
    try:
        check(value)
    except bounds.Exceeded as exc:
        return str(exc)
    return None


def _scan_quoted(text: str) -> None:
    found = len(re.findall(bounds._QUOTED, text))
    if found > bounds.QUOTED_LINES:
        raise bounds._over("QUOTED_LINES", "the number of quoted lines ('>')", found, bounds.QUOTED_LINES)


@settings(max_examples=examples(2000), deadline=None)
@given(st.lists(_PIECES, max_size=16).map(b"".join), st.integers(1, 4), st.integers(8, 40))
def test_each_bound_made_small_refuses_what_the_full_scan_refuses(section: bytes, most: int, chars: int) -> None:
    small = {"HEADER_FIELDS": most, "SIGNATURES": most, "SIGNATURE_CHARS": chars, "MULTIPARTS": most}
    with mock.patch.multiple(bounds, QUOTED_LINES=most, **small):
        assert _refusal(bounds.check_header_fields, section) == _refusal(_scan_fields, section)
        assert _refusal(bounds.check_signatures, section) == _refusal(_scan_signatures, section)
        assert _refusal(bounds.check_multiparts, section) == _refusal(_scan_multiparts, section)
        text = section.decode("latin-1")
        assert _refusal(bounds.check_quoted, text) == _refusal(_scan_quoted, text)
        assert bounds.quoted_lines(text) == len(re.findall(bounds._QUOTED, text))


def _scanned_identity(raw: bytes) -> tuple[str, str] | None:
    head = header_section(raw)
    froms, ids = re.findall(wire._QUICK_FROM, head), re.findall(wire._QUICK_ID, head)
    if len(froms) != 1 or len(ids) != 1 or len(re.findall(rb"^From:", head, re.IGNORECASE | re.MULTILINE)) != 1:
        return None
    return froms[0].decode().lower(), ids[0].decode()


_IDENTITY_PIECES = st.sampled_from(
    [b"From:", b"from:", b"FROM:", b"fRom:", b"From :", b"Message-ID:", b"message-id:", b"MESSAGE-ID:", b"Message-Id :",
     b" ", b"\t", b"\r", b"\n", b"\r\n", b"\n\n", b"\r\n\r\n", b"\r\n ", b"a@b.c", b"<a@b>", b"<A@B.C>", b"x", b">",
     b"<", b"@", b"\x00", b"\xff", b"\xe2\x84\xaa", b"\x0b", b"Ab"]
)  # fmt: skip


@settings(max_examples=examples(2000), deadline=None)
@given(st.lists(_IDENTITY_PIECES, max_size=14).map(b"".join))
def test_the_duplicate_checks_identity_is_the_scans_on_relay_made_sections(raw: bytes) -> None:
    assert wire.quick_identity(raw) == _scanned_identity(raw)


_TEXT = st.lists(
    st.sampled_from(
        ["a", "=", "?", "\r", "\n", " ", "\t", "\udcff", "é", "\x00", "Q", "\u2028", "?=", "\x85", "ſ", "K"]
    ),
    max_size=14,
).map("".join)


@settings(max_examples=examples(1000), deadline=None)
@given(_TEXT)
def test_a_value_without_an_encoded_word_is_what_the_email_package_makes_of_it(value: str) -> None:
    if "=?" not in value:
        assert headers.decoded(value, "Subject") == str(make_header(decode_header(value)))


_FWS = rb"(?:(?:\s*\r?\n)?\s+)?"
_DKIMPY_BTAG = re.compile(rb"([;\s]b" + _FWS + rb"=)(?:" + _FWS + rb"[a-zA-Z0-9+/=])*(?:\r?\n\Z)?")


@settings(max_examples=examples(2000), deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                b"b",
                b"=",
                b";",
                b" ",
                b"\t",
                b"\r",
                b"\n",
                b"A",
                b"/",
                b"+",
                b"\x0b",
                b"\x0c",
                b"\x1c",
                b"-",
                b"B",
                b"\x00",
                b"\xa0",
                b"\x85",
                b"bh=",
            ]
        ),  # fmt: skip
        max_size=16,
    ).map(b"".join)
)
def test_the_b_value_is_blanked_where_dkimpys_pattern_blanks_it(value: bytes) -> None:
    assert dkim_lean._B_VALUE.sub(rb"\1", value) == _DKIMPY_BTAG.sub(rb"\1", value)
