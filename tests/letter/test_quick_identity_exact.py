"""``wire.quick_identity`` tries its two patterns only at the lines naming their fields: on
hostile header sections it answers exactly what the scan of every byte answered (kept here as
it was), the same identity or the same None."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.letter import wire
from agentmail.letter.mime import header_section

from ..depth import examples


def _scanned(raw: bytes) -> tuple[str, str] | None:
    head = header_section(raw)
    froms, ids = re.findall(wire._QUICK_FROM, head), re.findall(wire._QUICK_ID, head)
    if len(froms) != 1 or len(ids) != 1 or len(re.findall(rb"^From:", head, re.IGNORECASE | re.MULTILINE)) != 1:
        return None
    return froms[0].decode().lower(), ids[0].decode()


_NAMES = st.sampled_from(
    [b"From", b"FROM", b"from", b"fRoM", b"From ", b"X-From", b"Message-ID", b"message-id", b"MESSAGE-Id",
     b"Message-ID ", b"Subject", b" From", b"\tMessage-ID"]
)  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from(
        [b" Alpha <Alpha@Bus.Test>", b"alpha@bus.test", b" <a@b> ", b" <1.x@bus.test>", b"   <a@b>\t",
         b" <a@b", b" a@b> x", b" <<a@b>>", b" \xff@b", b"", b" <a b@c>", b" Name <a@b>\r"]
    ),
    st.binary(max_size=30),
)  # fmt: skip
_ENDS = st.sampled_from([b"\r\n", b"\n", b"\r", b"\r\n ", b"\n\t", b"\r\r\n"])
_LINES = st.lists(st.tuples(_NAMES, st.sampled_from([b":", b""]), _VALUES, _ENDS).map(b"".join), max_size=8)


@settings(max_examples=examples(600), deadline=None)
@given(_LINES, st.sampled_from([b"\r\n\r\nbody\r\n", b"\n\nbody", b"", b"\r\n"]))
def test_the_same_identity_as_the_scan_of_every_byte(lines: list[bytes], rest: bytes) -> None:
    raw = b"".join(lines) + rest
    assert wire.quick_identity(raw) == _scanned(raw)


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=200))
def test_the_same_on_any_bytes(raw: bytes) -> None:
    assert wire.quick_identity(raw) == _scanned(raw)


def test_a_second_message_id_line_of_another_shape_leaves_the_first() -> None:
    raw = b"From: a@b\r\nMessage-ID: <1@x>\r\nmessage-id: none\r\n\r\n"
    assert wire.quick_identity(raw) == _scanned(raw) == ("a@b", "<1@x>")
    raw = b"Subject: s\nfrom: A@B\nMessage-ID: <1@x>\n\n"  # From on a later line, LF only
    assert wire.quick_identity(raw) == _scanned(raw) == ("a@b", "<1@x>")
