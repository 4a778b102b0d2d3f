"""``wire.read_bounded`` held to its exact answers (mutation run 17): the bus's size at its edge,
the refusal's reason, words and parse for a bound counted before the parser runs and for one read
off the parsed letter, the header section at exactly its size still counted, the Subject as a
reader measures it (unfolded, white space stripped, decoded), and the quoted lines only of a text
part that is no attachment, decoded."""

from __future__ import annotations

import base64

import pytest

from agentmail import bounds
from agentmail.letter import wire

from ..helpers.letters import burst_bytes


def _with_headers(raw: bytes, lines: list[bytes]) -> bytes:
    head, _, body = raw.partition(b"\r\n\r\n")
    return b"\r\n".join([head, *lines]) + b"\r\n\r\n" + body


def _subject(raw_value: bytes) -> bytes:
    return burst_bytes().replace(b"Subject: Burst", b"Subject: " + raw_value)


def _refused(raw: bytes, max_size: int = 10_000_000) -> wire.Malformed:
    with pytest.raises(wire.Malformed) as caught:
        wire.read_bounded(raw, max_size)
    return caught.value


def test_a_letter_of_the_bus_size_is_read_and_one_byte_less_allowed_refuses_it_word_for_word() -> None:
    raw = burst_bytes()
    assert wire.read_bounded(raw, len(raw))["Subject"] == "Burst"
    refused = _refused(raw, len(raw) - 1)
    assert (refused.reason, refused.detail, refused.parsed) == (
        "too-large",
        f"the letter is {len(raw)} bytes; this bus takes at most {len(raw) - 1}",
        None,
    )


@pytest.mark.parametrize(
    ("extra", "detail"),
    [
        (
            [b"X-F%d: v" % i for i in range(bounds.HEADER_FIELDS)],
            "the number of header fields is 262; a letter holds at most 250 (bounds.HEADER_FIELDS)",
        ),
        (
            [b"DKIM-Signature: v=1; d=x"] * (bounds.SIGNATURES + 1),
            "the number of DKIM-Signature fields is 17; a letter holds at most 16 (bounds.SIGNATURES)",
        ),
        (
            [b"DKIM-Signature: " + b"a" * bounds.SIGNATURE_CHARS],
            "a DKIM-Signature field's length is 4112; a letter holds at most 4096 (bounds.SIGNATURE_CHARS)",
        ),
        (
            [b"Content-Type: multipart/mixed; boundary=b%d" % i for i in range(bounds.MULTIPARTS + 1)],
            "the number of multipart entities is 17; a letter holds at most 16 (bounds.MULTIPARTS)",
        ),
    ],
)
def test_a_bound_counted_before_the_parser_runs_is_too_large_with_nothing_parsed(
    extra: list[bytes], detail: str
) -> None:
    refused = _refused(_with_headers(burst_bytes(), extra))
    assert (refused.reason, refused.detail, refused.parsed) == ("too-large", detail, None)


def test_a_header_section_of_exactly_its_size_is_still_counted() -> None:
    fields = [b"X-F%d: v" % i for i in range(bounds.HEADER_FIELDS)]
    raw = _with_headers(burst_bytes(), fields)
    short = bounds.HEADER_BYTES - len(raw.partition(b"\r\n\r\n")[0])
    raw = _with_headers(burst_bytes(), [*fields[:-1], fields[-1] + b"v" * short])
    assert len(raw.partition(b"\r\n\r\n")[0]) == bounds.HEADER_BYTES
    refused = _refused(raw)
    assert (refused.reason, refused.detail.endswith("(bounds.HEADER_FIELDS)")) == ("too-large", True)


def test_a_bound_read_off_the_parsed_letter_is_too_large_and_keeps_the_parse() -> None:
    ids = b" ".join(b"<r%d@x.test>" % i for i in range(bounds.REFERENCES + 1))
    refused = _refused(_with_headers(burst_bytes(), [b"References: " + ids]))
    assert (refused.reason, refused.detail) == (
        "too-large",
        "the number of Message-IDs in References is 101; a letter holds at most 100 (bounds.REFERENCES)",
    )
    assert refused.parsed is not None and refused.parsed["Message-ID"] == "<01s.alpha@bus.test>"


def test_references_are_counted_over_every_references_field() -> None:
    half = bounds.REFERENCES // 2
    first = b"References: " + b" ".join(b"<a%d@x.test>" % i for i in range(half))
    second = b"References: " + b" ".join(b"<b%d@x.test>" % i for i in range(half + 1))
    assert _refused(_with_headers(burst_bytes(), [first, second])).detail.endswith("(bounds.REFERENCES)")
    wire.read_bounded(_with_headers(burst_bytes(), [first, first]), 10_000_000)


def test_a_folded_subject_is_measured_unfolded() -> None:
    # the fold's line break goes, its white space stays: 100 + 1 + 99 characters, at the bound
    assert wire.read_bounded(_subject(b"A" * 100 + b"\r\n " + b"B" * 99), 10_000_000) is not None
    refused = _refused(_subject(b"A" * 100 + b"\r\n " + b"B" * 100))
    assert refused.detail.endswith("is 201; a letter holds at most 200 (bounds.SUBJECT)")


def test_a_subject_is_measured_with_every_character_but_the_white_space_around_it() -> None:
    refused = _refused(_subject(b"X" * (bounds.SUBJECT + 1)))
    assert refused.detail.endswith("is 201; a letter holds at most 200 (bounds.SUBJECT)")
    wire.read_bounded(_subject(b"X" * bounds.SUBJECT + b" \t"), 10_000_000)
    # only spaces and TABs are set aside, as subject_of does: it judges a form feed, it is counted
    refused = _refused(_subject(b"X" * bounds.SUBJECT + b"\x0c"))
    assert refused.detail.endswith("is 201; a letter holds at most 200 (bounds.SUBJECT)")


def test_an_encoded_subject_is_measured_decoded_and_one_not_decodable_is_named() -> None:
    encoded = b"=?utf-8?b?" + base64.b64encode("é".encode() * bounds.SUBJECT) + b"?="
    assert len(encoded) > bounds.SUBJECT
    assert wire.read_bounded(_subject(encoded), 10_000_000) is not None
    refused = _refused(_subject(b"=?x-no-such-charset?q?a?="))
    assert (refused.reason, refused.detail) == ("malformed", "the Subject header cannot be decoded (LookupError)")


def test_several_subjects_are_left_to_subject_of() -> None:
    long = b"Subject: " + b"S" * (bounds.SUBJECT + 1)
    assert wire.read_bounded(_with_headers(burst_bytes(), [long]), 10_000_000) is not None


def _part(headers: bytes, body: bytes) -> bytes:
    head = burst_bytes().partition(b"\r\n\r\n")[0]
    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(b"content-"))
    return (
        head
        + b"\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
        + b"--b\r\n"
        + headers
        + b"\r\n\r\n"
        + body
        + b"\r\n--b--\r\n"
    )


QUOTED = b"\r\n".join([b"> q"] * (bounds.QUOTED_LINES + 1))


def test_only_a_text_part_that_is_no_attachment_has_its_quoted_lines_counted() -> None:
    over = _refused(_part(b"Content-Type: text/plain", QUOTED))
    assert over.detail.endswith("(bounds.QUOTED_LINES)")
    wire.read_bounded(_part(b"Content-Type: application/octet-stream", QUOTED), 10_000_000)
    wire.read_bounded(_part(b"Content-Type: text/plain\r\nContent-Disposition: attachment", QUOTED), 10_000_000)


def test_quoted_lines_are_counted_in_the_decoded_text() -> None:
    encoded = base64.encodebytes(QUOTED).replace(b"\n", b"\r\n").rstrip()
    assert b">" not in encoded
    over = _refused(_part(b"Content-Type: text/plain\r\nContent-Transfer-Encoding: base64", encoded))
    assert over.detail.endswith("(bounds.QUOTED_LINES)")
