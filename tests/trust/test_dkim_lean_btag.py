"""``dkim_lean`` empties a signature's b= value with one character class where dkimpy's RE_BTAG
(kept here as dkimpy writes it) tries a group per character: on hostile signature values the two
leave exactly the same bytes to hash."""

from __future__ import annotations

import re

import dkim
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.trust import dkim_lean

from ..depth import examples

_FWS = rb"(?:(?:\s*\r?\n)?\s+)?"
_RE_BTAG = re.compile(rb"([;\s]b" + _FWS + rb"=)(?:" + _FWS + rb"[a-zA-Z0-9+/=])*(?:\r?\n\Z)?")

_PIECES = st.one_of(
    st.sampled_from(
        [b"b", b"b=", b" b=", b";b=", b"; b =", b"\tb\r\n =", b"bh=", b"=", b"==", b"AgpK", b"+/9",
         b"\r\n", b"\n", b"\r", b" ", b"\t", b"\r\n ", b";", b"\x0b", b"\x0c", b"-", b"\xff"]
    ),
    st.binary(max_size=6),
)  # fmt: skip


@settings(max_examples=examples(800), deadline=None)
@given(st.lists(_PIECES, max_size=24).map(b"".join))
def test_the_same_bytes_as_dkimpys_pattern(value: bytes) -> None:
    assert dkim_lean._B_VALUE.sub(rb"\1", value) == _RE_BTAG.sub(rb"\1", value)


def test_dkimpy_still_writes_the_pattern_kept_here() -> None:
    assert dkim.RE_BTAG.pattern == _RE_BTAG.pattern  # were it to change, this file's oracle would too


def test_a_folded_value_and_its_trailing_line_end() -> None:
    value = b" v=1; a=ed25519-sha256; bh=x=; b=AgpK\r\n +2Pg/==\r\n"
    assert dkim_lean._B_VALUE.sub(rb"\1", value) == b" v=1; a=ed25519-sha256; bh=x=; b="
    assert (
        dkim_lean._B_VALUE.sub(rb"\1", b" b = ab \r\n ;c")
        == _RE_BTAG.sub(rb"\1", b" b = ab \r\n ;c")
        == b" b = \r\n ;c"
    )
