"""Each bound of ``bounds.py`` and each piece of ``frame.py`` at its exact edge, with the exact
sentence a refusal says: what a mutant of either module changes (a limit off by one, a bound's
name, the words a person reads) is noticed here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentmail import bounds
from agentmail.frame import body, inline, quoted

from ..helpers.frame import unframed


def _refusal(check: Callable[[], None]) -> bounds.Exceeded:
    with pytest.raises(bounds.Exceeded) as caught:
        check()
    return caught.value


def _fields(n: int) -> bytes:
    return b"".join(b"X-F%d: v\r\n" % i for i in range(n))


def test_header_fields_at_and_over_their_bound() -> None:
    bounds.check_header_fields(_fields(bounds.HEADER_FIELDS))
    over = _refusal(lambda: bounds.check_header_fields(_fields(bounds.HEADER_FIELDS + 1)))
    assert over.bound == "HEADER_FIELDS"
    assert str(over) == "the number of header fields is 251; a letter holds at most 250 (bounds.HEADER_FIELDS)"


def test_signatures_counted_and_measured() -> None:
    one = b"DKIM-Signature: v=1; d=x\r\n"
    bounds.check_signatures(one * bounds.SIGNATURES + b"Subject: s\r\n")
    over = _refusal(lambda: bounds.check_signatures(one * (bounds.SIGNATURES + 1)))
    assert over.bound == "SIGNATURES"
    assert str(over) == "the number of DKIM-Signature fields is 17; a letter holds at most 16 (bounds.SIGNATURES)"
    head = b"DKIM-Signature: "
    long = head + b"a" * (bounds.SIGNATURE_CHARS - len(head))
    bounds.check_signatures(long + b"\r\n")
    over = _refusal(lambda: bounds.check_signatures(long + b"a\r\n"))
    assert over.bound == "SIGNATURE_CHARS"
    assert str(over) == "a DKIM-Signature field's length is 4097; a letter holds at most 4096 (bounds.SIGNATURE_CHARS)"
    bounds.check_signatures(b"X-Not-DKIM-Signature: " + b"a" * 5000 + b"\r\n")  # another field is not one


def test_multiparts_declared() -> None:
    one = b"Content-Type: multipart/mixed; boundary=b\r\n"
    bounds.check_multiparts(one * bounds.MULTIPARTS)
    over = _refusal(lambda: bounds.check_multiparts(one * (bounds.MULTIPARTS + 1)))
    assert over.bound == "MULTIPARTS"
    assert str(over) == "the number of multipart entities is 17; a letter holds at most 16 (bounds.MULTIPARTS)"


def test_an_address_header_by_length_and_by_comments() -> None:
    bounds.check_address_header("To", "a" * bounds.ADDRESS_CHARS)
    over = _refusal(lambda: bounds.check_address_header("To", "a" * (bounds.ADDRESS_CHARS + 1)))
    assert over.bound == "ADDRESS_CHARS"
    assert str(over) == "the To header's length is 8193; a letter holds at most 8192 (bounds.ADDRESS_CHARS)"
    bounds.check_address_header("Cc", "(c)" * bounds.ADDRESS_COMMENTS)
    over = _refusal(lambda: bounds.check_address_header("Cc", "(c)" * (bounds.ADDRESS_COMMENTS + 1)))
    assert over.bound == "ADDRESS_COMMENTS"
    assert (
        str(over)
        == "the number of comments in the Cc header is 33; a letter holds at most 32 (bounds.ADDRESS_COMMENTS)"
    )


def test_depth_subject_references_and_quoted_lines() -> None:
    bounds.check_depth(bounds.MIME_DEPTH)
    over = _refusal(lambda: bounds.check_depth(bounds.MIME_DEPTH + 1))
    assert (over.bound, str(over)) == (
        "MIME_DEPTH",
        "the MIME nesting depth is 9; a letter holds at most 8 (bounds.MIME_DEPTH)",
    )

    bounds.check_subject("Re: Fwd: " + "s" * bounds.SUBJECT)  # the prefixes are not counted
    over = _refusal(lambda: bounds.check_subject("s" * (bounds.SUBJECT + 1)))
    assert over.bound == "SUBJECT"
    assert str(over) == (
        "the Subject's length (characters, without Re:/Fwd: prefixes) is 201; a letter holds at most 200 (bounds.SUBJECT)"
    )
    assert bounds.topic_length("Re: Fwd: x") == 1 and bounds.topic_length("Rex") == 3

    bounds.check_references(bounds.REFERENCES)
    over = _refusal(lambda: bounds.check_references(bounds.REFERENCES + 1))
    assert (over.bound, str(over)) == (
        "REFERENCES",
        "the number of Message-IDs in References is 101; a letter holds at most 100 (bounds.REFERENCES)",
    )

    bounds.check_quoted("> q\n" * bounds.QUOTED_LINES + "not > quoted\n    > four spaces is code\n")
    over = _refusal(lambda: bounds.check_quoted("   > q\n" * (bounds.QUOTED_LINES + 1)))
    assert (over.bound, str(over)) == (
        "QUOTED_LINES",
        "the number of quoted lines ('>') is 10001; a letter holds at most 10000 (bounds.QUOTED_LINES)",
    )


# Each case is called inside the test (not when the module loads), so a mutant meets it.
@pytest.mark.parametrize(
    ("show", "expected"),
    [
        (lambda: inline(None), ""),
        (lambda: inline("a\nb  c"), "a b  c"),
        (lambda: inline(7), "7"),
        (lambda: inline("None"), "None"),
        (lambda: quoted(None), '""'),
        (lambda: quoted('a"b\\c'), '"a\\"b\\\\c"'),
        (lambda: quoted("é"), '"é"'),  # not escaped as \u00e9: a person reads it
        (lambda: quoted("abcd", 4), '"abcd"'),
        (lambda: quoted("abcde", 4), '"abc…"'),
        (lambda: quoted("abcdef", 5), '"abcd…"'),
        (lambda: body(""), ""),
        (lambda: body("\n\n"), ""),
        (lambda: body(None), ""),
        (lambda: body("a"), "| a"),
        (lambda: body("a \n"), "| a "),  # only line ends are dropped at the end, not spaces
        (lambda: body("aX\n"), "| aX"),
        (lambda: body("a\n\nb\n\n"), "| a\n|\n| b"),
        (lambda: body("\na"), "|\n| a"),
        (lambda: body("a\nb", "   "), "   | a\n   | b"),
        (lambda: body("a\n\nb", "  "), "  | a\n  |\n  | b"),
    ],
)
def test_the_frame_exactly(show: Callable[[], str], expected: str) -> None:
    assert show() == expected


def test_unframed_reads_back_what_body_framed_and_nothing_else() -> None:
    assert unframed(body("a\n\nb")) == "a\n\nb"
    assert unframed(body("a\n\nb", "  "), "  ") == "a\n\nb"
    assert unframed("") == ""
    with pytest.raises(ValueError, match="a line outside the frame: 'from: x'"):
        unframed("| a\nfrom: x")
