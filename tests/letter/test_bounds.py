"""The one table of bounds (agentmail/bounds.py), as the reader holds a letter to it
(``wire.read_bounded``), and the work a hostile letter buys counted, never timed."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentmail import bounds
from agentmail.letter import headers, readable, wire

from ..depth import examples
from ..helpers.letters import burst_bytes


def _with_headers(raw: bytes, lines: list[bytes]) -> bytes:
    head, _, body = raw.partition(b"\r\n\r\n")
    return b"\r\n".join([head, *lines]) + b"\r\n\r\n" + body


def _nested(depth: int, text: bytes = b"hello\r\n") -> bytes:
    """A letter whose body is ``depth`` multipart/mixed levels, one inside the other."""
    body = b"Content-Type: text/plain\r\n\r\n" + text
    for level in range(depth, 0, -1):
        body = (
            b"Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n" % (level, level)
            + body
            + b"\r\n--b%d--\r\n" % level
        )
    head = burst_bytes().partition(b"\r\n\r\n")[0]
    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(b"content-"))
    return head + b"\r\n" + body


def _verdict(raw: bytes) -> str | None:
    """None when the letter is within every bound, else the bound it is over."""
    try:
        wire.read_bounded(raw, 10_000_000)
    except wire.Malformed as exc:
        assert exc.reason == "too-large", exc.detail
        return exc.detail.rpartition("(bounds.")[2].rstrip(")")
    return None


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 2 * bounds.REFERENCES))
@example(bounds.REFERENCES).via("at the bound")
@example(bounds.REFERENCES + 1).via("over it")
def test_references_over_the_bound_are_too_large_and_never_under_it(count: int) -> None:
    ids = b" ".join(b"<r%d@x.test>" % i for i in range(count))
    raw = _with_headers(burst_bytes(), [b"References: " + ids] if count else [])
    assert _verdict(raw) == ("REFERENCES" if count > bounds.REFERENCES else None)


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2 * bounds.HEADER_FIELDS))
@example(bounds.HEADER_FIELDS).via("over it, with the letter's own")
def test_header_fields_over_the_bound_are_too_large(extra: int) -> None:
    raw = _with_headers(burst_bytes(), [b"X-Filler-%d: v" % i for i in range(extra)])
    fields = len(raw.partition(b"\r\n\r\n")[0].split(b"\r\n"))
    assert _verdict(raw) == ("HEADER_FIELDS" if fields > bounds.HEADER_FIELDS else None)


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(1, bounds.MULTIPARTS + 4))
@example(bounds.MIME_DEPTH).via("at the depth bound")
@example(bounds.MIME_DEPTH + 1).via("over it")
@example(bounds.MULTIPARTS + 1).via("over the multipart bound")
def test_multipart_nesting_is_bounded_before_the_parser_runs(depth: int) -> None:
    expected = "MULTIPARTS" if depth > bounds.MULTIPARTS else "MIME_DEPTH" if depth > bounds.MIME_DEPTH else None
    assert _verdict(_nested(depth)) == expected


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2 * bounds.QUOTED_LINES), st.sampled_from(["> ", "   >", ">>"]))
@example(bounds.QUOTED_LINES, "> ").via("at the bound")
@example(bounds.QUOTED_LINES + 1, "   >").via("over it")
def test_quoted_lines_over_the_bound_are_too_large(count: int, mark: str) -> None:
    body = "\n".join([f"{mark}quoted"] * count + ["My answer."])
    assert _verdict(burst_bytes(body=body)) == ("QUOTED_LINES" if count > bounds.QUOTED_LINES else None)


_PREFIXES = st.lists(st.sampled_from(["Re: ", "RE:", "Fwd: ", "AW: ", "WG:", "Re[2]: ", "re :"]), max_size=4)


@settings(max_examples=examples(60), deadline=None)
@given(_PREFIXES, st.integers(1, 2 * bounds.SUBJECT))
@example(["Re: ", "AW: "], bounds.SUBJECT).via("at the bound, with prefixes")
@example([], bounds.SUBJECT + 1).via("over it")
def test_a_subject_is_bounded_without_the_prefixes_clients_add(prefixes: list[str], length: int) -> None:
    subject = "".join(prefixes) + "S" * length
    raw = burst_bytes().replace(b"Subject: Burst", b"Subject: " + subject.encode())
    assert bounds.topic_length(subject) == length
    assert _verdict(raw) == ("SUBJECT" if length > bounds.SUBJECT else None)


def test_a_letter_without_a_subject_or_with_a_huge_header_is_judged_as_before() -> None:
    untitled = b"\r\n".join(line for line in burst_bytes().split(b"\r\n") if not line.startswith(b"Subject:"))
    assert _verdict(untitled) is None  # no Subject: subject_of reads it as ""
    huge = _with_headers(burst_bytes(), [b"X-Filler: " + b"v" * (bounds.HEADER_BYTES + 1)])
    with pytest.raises(wire.Malformed, match="header section is larger") as raised:
        wire.read_bounded(huge, 10_000_000)
    assert raised.value.reason == "malformed"  # the reason it always had


def test_an_attachments_quoted_lines_are_its_own() -> None:
    quoted = b"\r\n".join([b"> q"] * (bounds.QUOTED_LINES + 1))
    raw = _nested(1).replace(
        b"Content-Type: text/plain\r\n\r\nhello",
        b"Content-Type: text/plain\r\nContent-Disposition: attachment\r\n\r\n" + quoted,
    )
    assert _verdict(raw) is None


def test_a_letter_over_a_bound_is_quarantined_with_who_sent_it(registry: Any) -> None:
    from agentmail.trust import authenticity

    raw = burst_bytes(body="\n".join(["> q"] * (bounds.QUOTED_LINES + 1)))
    verdict = authenticity.judge(raw, registry)
    assert verdict.reason == "too-large" and "bounds.QUOTED_LINES" in (verdict.detail or "")
    assert verdict.summary is not None and "alpha@bus.test" in verdict.summary["from"]
    assert authenticity.judge(_nested(bounds.MULTIPARTS + 1), registry).reason == "too-large"
    huge = burst_bytes() + b"x" * 100
    assert authenticity.judge(huge, registry.replace(bus=registry.bus.replace(max_size=len(huge) - 1))).reason == (
        "too-large"
    )


# --- work counted, not timed ------------------------------------------------------------------


def _operations(work: Callable[[], object], module_file: str) -> int:
    """The bytecode operations ``work`` runs in ``module_file``'s code (comprehensions included)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if frame.f_code.co_filename != module_file:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return tracer

    measuring = sys.gettrace()  # coverage's tracer, when it runs: given back, or it measures nothing after
    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(measuring)
    return count


HOSTILE_REPLIES: dict[str, Callable[[int], str]] = {
    "attributions without quotes": lambda n: "\n".join(["On Monday alice wrote:"] * n),
    "two-line attributions": lambda n: "\n".join(["On Monday, 1 Dec", "alice wrote:"] * n),
    "outlook rules": lambda n: "\n".join(["__________"] * n),
    "blank lines, then text": lambda n: "\n" * n + "text",
    "quoted lines": lambda n: "\n".join(["> q", "answer"] * n),
}


@pytest.mark.parametrize("shape", HOSTILE_REPLIES)
def test_cutting_the_quoted_history_is_linear_in_the_letter(shape: str) -> None:
    make = HOSTILE_REPLIES[shape]
    small, large = (_operations(lambda n=n: readable.cut_quotes(make(n)), readable.__file__) for n in (400, 800))
    assert large <= 2.2 * small, (small, large)  # twice the lines, about twice the work; n² would be 4x


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(1, 800), st.integers(0, 2 * bounds.ADDRESS_COMMENTS))
@example(700, 0).via("over ADDRESS_CHARS")
@example(1, bounds.ADDRESS_COMMENTS + 1).via("over ADDRESS_COMMENTS")
@example(2, bounds.ADDRESS_COMMENTS).via("at the bound")
def test_an_address_header_is_bounded_before_the_email_package_reads_it(addresses: int, comments: int) -> None:
    to = ", ".join(f"b{i}@bus.test" for i in range(addresses)) + " (c)" * comments
    raw = burst_bytes().replace(b"To: beta+thr-abc123def0@bus.test", b"To: " + to.encode())
    assert to.encode() in raw
    over = (
        "ADDRESS_CHARS"
        if len(to) > bounds.ADDRESS_CHARS
        else "ADDRESS_COMMENTS"
        if comments > bounds.ADDRESS_COMMENTS
        else None
    )
    try:
        wire.address_headers(wire.parse_message(raw, len(raw) + 1))
    except wire.Malformed as exc:
        assert exc.reason == "too-large" and exc.detail.endswith(f"(bounds.{over})"), exc.detail
    else:
        assert over is None


@pytest.mark.parametrize(
    "shape",
    [
        lambda n: ", ".join(f"b{i}@bus.test" for i in range(n)),
        lambda n: ", ".join(f"Bob {i} <b{i}@bus.test>" for i in range(n)),
        lambda n: ", ".join(f'"Bob, {i}" <b{i}@bus.test>' for i in range(n)),
    ],
    ids=["addresses", "named", "quoted names"],
)
def test_reading_an_address_header_is_linear_in_its_addresses(shape: Callable[[int], str]) -> None:
    small, large = (_operations(lambda n=n: headers._addresses(shape(n), "To"), headers.__file__) for n in (100, 200))
    assert large <= 2.2 * small, (small, large)  # the comments were looked for once per address: n²


def _signature_field(spaces: int, name: bytes = b"DKIM-Signature") -> bytes:
    """A DKIM-Signature field anyone on the way could add, its h= padded with folded white space."""
    pad = b"".join(b"\r\n " + b" " * 70 for _ in range(spaces // 73)) + b" " * (spaces % 73)
    return name + b": v=1; a=ed25519-sha256; d=relay.test; s=x; bh=AAAA; b=AAAA; h=from" + pad + b"to"


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 3 * bounds.SIGNATURE_CHARS), st.sampled_from([b"DKIM-Signature", b"dkim-signature "]))
@example(bounds.SIGNATURE_CHARS - 80, b"DKIM-Signature").via("at the bound")
@example(60_000, b"DKIM-Signature").via("what made a verification take seconds")
def test_a_dkim_signature_field_is_bounded_before_it_is_verified(spaces: int, name: bytes) -> None:
    field = _signature_field(spaces, name)
    raw = _with_headers(burst_bytes(), [field])
    assert _verdict(raw) == ("SIGNATURE_CHARS" if len(field) > bounds.SIGNATURE_CHARS else None)


def test_another_long_field_is_not_a_signature() -> None:
    long = b"X-Note: h=from" + b"".join(b"\r\n " + b" " * 70 for _ in range(100)) + b"to"
    assert _verdict(_with_headers(burst_bytes(), [long])) is None


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(0, 2 * bounds.SIGNATURES))
@example(bounds.SIGNATURES).via("at the bound")
def test_the_dkim_signatures_a_letter_carries_are_counted_before_any_is_verified(count: int) -> None:
    # each verified hashes the whole body: a relay adding 200 over 1 MB cost 0.5 s a verification
    raw = _with_headers(burst_bytes(), [_signature_field(0)] * count)
    own = raw.lower().count(b"\ndkim-signature:") + raw.lower().startswith(b"dkim-signature:")
    assert _verdict(raw) == ("SIGNATURES" if own > bounds.SIGNATURES else None)


OLD_REPLY_PREFIX = r"(?i)^(?:[ \t]*(?:re|fwd?|aw|wg|sv|vs|tr|antw|rif|r)[ \t]*(?:\[\d{1,3}\])?[ \t]*:[ \t]*){1,8}"


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.sampled_from(["Re", "re", "FWD", "fw", "AW", "r", "x", " ", "\t", "  ", ":", "[2]", "[", "]"]), max_size=20
    )
)
def test_the_reply_prefix_is_measured_as_before(parts: list[str]) -> None:
    subject = "".join(parts)
    old = re.match(OLD_REPLY_PREFIX, subject)
    assert bounds.topic_length(subject) == len(subject) - (old.end() if old else 0)


def test_a_subject_of_a_long_white_space_run_is_measured_in_linear_time() -> None:
    # "Re", a long run of white space, no colon: the old prefix tried every split of the run
    # (60,000 characters, what a header section holds: seconds; this one: days)
    subject = "Re" + "\t" * 2_000_000 + "[1]" + " " * 2_000_000 + "x"
    assert bounds.topic_length(subject) == len(subject)
    raw = _with_headers(burst_bytes(), []).replace(b"Subject: ", b"Subject: Re" + b" " * 60_000 + b"x ", 1)
    assert _verdict(raw) == "SUBJECT"


# The pre-checks before the two counting searches ("multipart/" in the letter lowercased, ">" in
# the text): the same count as the search alone, for any bytes and text near the patterns.
_NEAR_MULTIPART = st.lists(
    st.sampled_from([b"Content-Type:", b"content-TYPE:", b" ", b"\t", b"\r\n", b"\n", b"\r\n\t", b"multipart/",
                     b"MULTIPART/", b"MultiPart/", b"multipart", b"/", b"x", b"\xc4\xb0", b"\xe2\x84\xaa", b"\xff"]),
    max_size=20,
).map(b"".join)  # fmt: skip


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(_NEAR_MULTIPART, st.binary(max_size=200)))
def test_the_multipart_count_is_the_search_alone(raw: bytes) -> None:
    found = len(re.findall(bounds._MULTIPART, raw))
    if found > bounds.MULTIPARTS:
        with pytest.raises(bounds.Exceeded):
            bounds.check_multiparts(raw)
    else:
        bounds.check_multiparts(raw)
    assert (found > 0) <= (b"multipart/" in raw.lower())


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(st.lists(st.sampled_from([">", " ", "\t", "\n", "x", "   >", "\uff1e", "\u203a"]), max_size=30).map("".join),
                 st.text(max_size=200)))  # fmt: skip
def test_the_quoted_count_is_the_search_alone(text: str) -> None:
    assert bounds.quoted_lines(text) == len(re.findall(bounds._QUOTED, text))


def test_a_letter_without_multipart_or_quotes_is_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    searched: list[object] = []
    real = re.findall
    monkeypatch.setattr(re, "findall", lambda pattern, text, *a: searched.append(pattern) or real(pattern, text, *a))
    bounds.check_multiparts(b"Subject: x\r\nContent-Type: text/plain\r\n\r\nhello\r\n")
    assert bounds.quoted_lines("no quotes here\nat all") == 0
    assert searched == []
    assert bounds.quoted_lines("> quoted\n") == 1 and searched == [bounds._QUOTED]
