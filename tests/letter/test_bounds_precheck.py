"""The header counts of ``bounds.py`` skip their regex scan when a plain count proves the bound
holds: each check, on hostile header sections near and over its bound, says exactly what the
full scan says (the same refusal, or none). The full scans are kept here as they were."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import bounds

from ..depth import examples


def _scan_fields(head: bytes) -> None:
    fields = len(re.findall(bounds._FIELD, head))
    if fields > bounds.HEADER_FIELDS:
        raise bounds._over("HEADER_FIELDS", "the number of header fields", fields, bounds.HEADER_FIELDS)


def _scan_signatures(head: bytes) -> None:
    signatures = [f for f in re.split(bounds._FIELD_END, head) if re.match(bounds._SIGNATURE, f)]
    if len(signatures) > bounds.SIGNATURES:
        raise bounds._over("SIGNATURES", "the number of DKIM-Signature fields", len(signatures), bounds.SIGNATURES)
    for field in signatures:
        if len(field) > bounds.SIGNATURE_CHARS:
            raise bounds._over("SIGNATURE_CHARS", "a DKIM-Signature field's length", len(field), bounds.SIGNATURE_CHARS)


def _scan_multiparts(raw: bytes) -> None:
    found = len(re.findall(bounds._MULTIPART, raw))
    if found > bounds.MULTIPARTS:
        raise bounds._over("MULTIPARTS", "the number of multipart entities", found, bounds.MULTIPARTS)


def _scan_quoted(text: str) -> None:
    found = bounds.quoted_lines(text)
    if found > bounds.QUOTED_LINES:
        raise bounds._over("QUOTED_LINES", "the number of quoted lines ('>')", found, bounds.QUOTED_LINES)


def _outcome(check: object, data: bytes | str) -> str | None:
    assert callable(check)
    try:
        check(data)
    except bounds.Exceeded as exc:
        return f"{exc.bound}: {exc}"
    return None


# Lines a hostile sender writes: the names the scans look for in every case and spacing, folded
# and unfolded, inside other names and values, and long values; each repeated to cross a bound.
_NAMES = st.sampled_from(
    [b"DKIM-Signature", b"dkim-signature", b"DKIM-SIGNATURE", b"DkIm-SiGnAtUrE", b"X-DKIM-Signature",
     b"Content-Type", b"content-type", b"CONTENT-TYPE", b"X-Content-Type", b"Subject", b"X-F", b"a", b"!~"]
)  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from([b"multipart/mixed", b"MULTIPART/x", b"text/plain", b"v=1; dkim-signature:", b"", b"a"]),
    st.integers(0, 5000).map(lambda n: b"a" * n),
    st.binary(max_size=40),
)
_SEPARATORS = st.sampled_from([b"\r\n", b"\n", b"\r", b"\r\n ", b"\n\t", b" \r\n"])
_LINE = st.tuples(
    _NAMES, st.sampled_from([b":", b" :", b"\t:", b"", b": "]), _VALUES, _SEPARATORS, st.integers(1, 40)
).map(lambda t: (t[0] + t[1] + t[2] + t[3]) * t[4])
_HEADS = st.one_of(
    st.lists(_LINE, max_size=30).map(b"".join),
    st.binary(max_size=300),
    st.tuples(st.integers(240, 260), _SEPARATORS, st.booleans()).map(
        lambda t: t[1].join(b"X-F%d: v" % i for i in range(t[0])) + (t[1] if t[2] else b"")
    ),
)


@settings(max_examples=examples(400), deadline=None)
@given(_HEADS)
def test_each_count_says_what_the_full_scan_says(head: bytes) -> None:
    assert _outcome(bounds.check_header_fields, head) == _outcome(_scan_fields, head)
    assert _outcome(bounds.check_signatures, head) == _outcome(_scan_signatures, head)
    assert _outcome(bounds.check_multiparts, head) == _outcome(_scan_multiparts, head)


@pytest.mark.parametrize("ending", [b"", b"\r\n"])
def test_the_plain_counts_at_their_edges(ending: bytes) -> None:
    """Where a plain count is one off its scan: the last field without its line end, a
    signature's name in another case, a section just longer than a signature may be."""
    over = bounds.HEADER_FIELDS + 1
    head = b"\r\n".join(b"X-F%d: v" % i for i in range(over)) + ending
    assert head.count(b"\n") in (over - 1, over)
    assert _outcome(bounds.check_header_fields, head) == _outcome(_scan_fields, head) is not None
    one = b"dKiM-sIgNaTuRe: v=1\r\n"
    head = one * (bounds.SIGNATURES + 1)
    assert _outcome(bounds.check_signatures, head) == _outcome(_scan_signatures, head) is not None
    long = b"DKIM-Signature: " + b"a" * bounds.SIGNATURE_CHARS + ending
    assert _outcome(bounds.check_signatures, long) == _outcome(_scan_signatures, long) is not None
    parts = b"Content-Type: MultiPart/mixed\r\n" * (bounds.MULTIPARTS + 1)
    assert _outcome(bounds.check_multiparts, parts) == _outcome(_scan_multiparts, parts) is not None


_QUOTED_LINES = st.tuples(
    st.sampled_from(["> q", "   > q", "    > code", ">", "a > b", "\t>", ">>", " >"]),
    st.sampled_from(["\n", "\r\n", "\r", ""]),
    st.integers(1, 12_000),
).map(lambda t: (t[0] + t[1]) * t[2])


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(_QUOTED_LINES, max_size=3).map("".join))
def test_the_quoted_lines_count_says_what_the_full_scan_says(text: str) -> None:
    assert _outcome(bounds.check_quoted, text) == _outcome(_scan_quoted, text)


def test_quoted_lines_at_the_edge_of_the_count() -> None:
    text = "> q\n" * bounds.QUOTED_LINES + "a > b"  # one '>' more than the bound, one quoted line fewer
    assert _outcome(bounds.check_quoted, text) == _outcome(_scan_quoted, text) is None
    text = "> q\n" * (bounds.QUOTED_LINES + 1)
    assert _outcome(bounds.check_quoted, text) == _outcome(_scan_quoted, text) is not None
