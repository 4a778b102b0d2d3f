"""The one character policy (agentmail/text.py): what is refused going out is what is judged
malformed coming in, and nothing it forbids ever reaches a terminal."""

from __future__ import annotations

import base64

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentmail import text
from agentmail.errors import BadInput
from agentmail.letter import wire
from agentmail.model import MAX_SUBJECT, check_header_text

from ..depth import examples

# Text biased towards the characters the policy is about, mixed with any Unicode.
TRICKY = "\x00\x07\t\n\r\x1b\x1f\x7f\x85\x9b\u061c\u200b\u200d\u200e\u202e\u2066\u2069\u2028\u2029\u2060\ufeff"
texts = st.text(st.sampled_from(TRICKY) | st.characters(exclude_categories=["Cs"]), max_size=40)


def inbound_subject(subject: str) -> str:
    """What a reader makes of a letter whose Subject carries ``subject`` (RFC 2047 encoded, as
    a mail client would send it); raises Malformed where the reader quarantines it."""
    raw = wire.render(
        wire.draft_letter(
            sender_address="alpha@bus.test",
            sender_name="Alpha",
            to_address="beta@bus.test",
            type="report",
            thread="thr-abc123def0",
            subject="placeholder",
            body="Body.",
            severity="low",
            message_id="<01a.alpha@bus.test>",
        )
    )
    encoded = b"=?utf-8?b?" + base64.b64encode(subject.encode()) + b"?="  # one word: nothing split or folded
    raw = raw.replace(b"Subject: placeholder", b"Subject: " + encoded, 1)
    return wire.to_letter(wire.parse_message(raw, 10**6)).subject


@given(texts)
@example("abc\u2028")  # str.strip() would have dropped it before the inbound check
@example("\u202etxt.exe")
def test_terminal_text_never_carries_a_forbidden_character(value: str) -> None:
    shown = text.for_terminal(value)
    assert text.forbidden_in_header(shown.replace("\n", "")) is None
    # Only forbidden characters are dropped: everything else stays, in order.
    assert shown == "".join(c for c in value if c in "\n" or text.forbidden_in_header(c) is None)


@given(texts)
def test_one_line_is_one_safe_line_of_the_same_length(value: str) -> None:
    flat = text.one_line(value)
    assert len(flat) == len(value) and "\t" not in flat and text.forbidden_in_header(flat) is None


@settings(max_examples=examples(150))
@given(texts.filter(lambda s: s.strip() != "" and len(s) <= MAX_SUBJECT))
@example("line\u2028separator")
@example("trailing separator\u2029")
@example("a\tb")
@example("bidi \u202e override")
@example("a long subject that the sender folds over several lines " * 3)
def test_outbound_refusal_and_inbound_judgement_agree(subject: str) -> None:
    try:
        check_header_text("subject", subject, MAX_SUBJECT)
        refused_out = False
    except BadInput:
        refused_out = True
    try:
        inbound_subject(subject)
        refused_in = False
    except wire.Malformed as exc:
        assert "control characters" in exc.detail, exc.detail
        refused_in = True
    assert refused_out == refused_in == (text.forbidden_in_header(subject) is not None)


@pytest.mark.parametrize("char", ["\x1b", "\x9b", "\u202e", "\u2066", "\u200b", "\u2028", "\u2029", "\ufeff"])
def test_each_class_of_the_policy_is_forbidden(char: str) -> None:
    assert text.forbidden_in_header(f"a{char}b") == char
    assert text.for_terminal(f"a{char}b") == "ab"


def test_a_folded_subject_is_read_whole() -> None:
    subject = "Burst limit never releases after the window closes, " * 3
    raw = wire.render(
        wire.draft_letter(
            sender_address="alpha@bus.test",
            sender_name="Alpha",
            to_address="beta@bus.test",
            type="report",
            thread="thr-abc123def0",
            subject=subject.strip(),
            body="Body.",
            severity="low",
            message_id="<01a.alpha@bus.test>",
        )
    )
    assert b"\r\n " in raw.split(b"\r\n\r\n")[0]  # folded
    assert wire.to_letter(wire.parse_message(raw, 10**6)).subject == subject.strip()


def test_tab_and_newline_are_what_a_body_legitimately_has() -> None:
    assert text.forbidden_in_header("a\tb") is None
    assert text.for_terminal("line one\n\tline two\r\n") == "line one\n\tline two\n"


@settings(max_examples=examples(400), deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
@example("plain ASCII with a\ttab")
@example("a bell\x07 and DEL\x7f")
@example("\x1f")
@example("caf\u00e9\u200b")
def test_the_printable_ascii_shortcut_says_what_the_pattern_says(value: str) -> None:
    """``forbidden_in_header`` skips its pattern (and its compile) for printable ASCII: the same
    answer as the pattern's, for ASCII with controls and for any text."""
    found = text._pattern("any").search(value)
    assert text.forbidden_in_header(value) == (found.group() if found else None)


def test_printable_ascii_compiles_no_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "_patterns", {})
    assert text.forbidden_in_header("Subject line\twith a tab") is None
    assert text.forbidden_in_text("a body\r\nof two lines\n") is None
    assert text._patterns == {}
    assert text.forbidden_in_header("a\x1bb") == "\x1b" and "any" in text._patterns
