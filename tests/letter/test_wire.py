"""Wire format v1: render → parse round trips, and strict parsing of hostile or odd messages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentmail.letter import wire
from agentmail.model import HUMAN, Letter

DATA = Path(__file__).parents[1] / "data"


def outline(**changes: object) -> Letter:
    base: dict[str, object] = dict(
        sender_address="alpha@bus.test",
        sender_name="Alpha agent",
        to_address="beta@bus.test",
        type="report",
        thread="thr-abc123def0",
        subject="Burst limit never releases",
        body="Fired 14 submits.\n\nSee output.",
        severity="high",
        ref="runflow#12",
        message_id="<01abc.alpha@bus.test>",
    )
    base.update(changes)
    return wire.draft_letter(**base)  # type: ignore[arg-type]


ROUND_TRIPS = [
    outline(),
    outline(body="Ünïcode — and a long line " + "x" * 1200, subject="Grüße aus Köln"),
    outline(
        type="ack",
        severity=None,
        ref=None,
        in_reply_to="<01p.beta@bus.test>",
        references=("<01o.alpha@bus.test>", "<01p.beta@bus.test>"),
        subject="Re: Burst",
    ),
    outline(type="note", to_agent="bob", severity=None),
    outline(body="yes\nno: 0123\n--- agentmail v1 ---\nnot a block, just text"),
]


@pytest.mark.parametrize("original", ROUND_TRIPS)
def test_render_then_parse_gives_the_same_letter(original: Letter) -> None:
    raw = wire.render(original)
    letter = wire.to_letter(wire.parse_message(raw, 10**6))
    assert letter.type == original.type
    assert letter.thread == original.thread
    assert letter.subject == original.subject
    assert letter.body == original.body.strip()
    assert letter.severity == original.severity
    assert letter.ref == original.ref
    assert letter.to_agent == original.to_agent
    assert letter.in_reply_to == original.in_reply_to
    assert letter.references == original.references
    assert letter.message_id == original.message_id
    assert letter.sender_address == "alpha@bus.test"
    assert letter.to_address == "beta@bus.test"


def test_rendered_headers_carry_thread_tag_and_auto_submitted() -> None:
    raw = wire.render(outline()).decode()
    assert "\r\nTo: beta+thr-abc123def0@bus.test\r\n" in raw
    assert "\r\nAuto-Submitted: auto-generated\r\n" in raw
    assert "\r\nX-Agentmail-Type: report\r\n" in raw
    assert "\r\nX-Agentmail-Thread: thr-abc123def0\r\n" in raw
    assert raw.index("--- agentmail v1 ---") < raw.index("--- end agentmail ---") < raw.index("Fired 14")


@pytest.mark.parametrize(
    "field,value",
    [
        ("subject", "hi\r\nBcc: victim@example.com"),
        ("subject", "hi\nBcc: x@y"),
        ("subject", "nul\x00byte"),
        ("subject", "bell\x07"),
        ("subject", "line\u2028separator"),
        ("ref", "runflow#1\r\nX-Evil: 1"),
        ("sender_name", "Alpha\r\nBcc: x@y"),
    ],
)
def test_control_characters_in_header_values_are_refused(field: str, value: str) -> None:
    with pytest.raises(ValueError, match="control character"):
        wire.render(outline(**{field: value}))


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"type": "rant"}, "unknown type"),
        ({"severity": "apocalyptic"}, "unknown severity"),
        ({"thread": "thr-../../x"}, "thread id"),
        ({"to_agent": "Bob Smith"}, "agent name"),
    ],
)
def test_unknown_values_are_refused_loudly(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire.render(outline(**changes))


def test_thread_tags_never_stack() -> None:
    assert wire.tagged_address("beta+thr-aaaaaa@bus.test", "thr-bbbbbb") == "beta+thr-bbbbbb@bus.test"
    assert wire.tagged_address("beta@bus.test", "thr-bbbbbb") == "beta+thr-bbbbbb@bus.test"


@pytest.mark.parametrize(
    "subject,expected",
    [
        ("Burst", "Re: Burst"),
        ("Re: Burst", "Re: Burst"),
        ("RE: re:Re :  Burst", "Re: Burst"),
    ],
)
def test_replies_carry_exactly_one_re(subject: str, expected: str) -> None:
    from agentmail.model import reply_subject

    assert reply_subject(subject) == expected


def test_a_human_letter_without_block_is_type_human_with_a_stable_thread() -> None:
    msg = wire.parse_message((DATA / "human-plain.eml").read_bytes(), 10**6)
    letter = wire.to_letter(msg)
    assert letter.type == HUMAN
    assert letter.body.startswith("Hi alpha, does /quota still return 404")
    assert "—" in letter.body
    assert letter.thread == wire.derived_thread("<CAF1234567@mail.gmail.com>")  # stable: from its Message-ID
    assert letter.sender_name == "Ada Lovelace"


def test_lf_only_messages_parse_like_crlf() -> None:
    letter = wire.to_letter(wire.parse_message((DATA / "lf-only.eml").read_bytes(), 10**6))
    assert (letter.type, letter.thread, letter.body) == ("question", "thr-abc123def0", "Does it still work with LF?")


@pytest.mark.parametrize(
    "name,reason,words",
    [
        ("unknown-charset.eml", "malformed", "unknown charset"),
        ("two-from.eml", "malformed", "2 From headers"),
        ("crlf-subject.eml", "malformed", "control characters"),
        ("path-message-id.eml", "malformed", "Message-ID"),
        ("yaml-tag.eml", "malformed", "tags are not allowed"),
        ("yaml-anchor.eml", "malformed", "anchors and aliases"),
        ("human-multipart.eml", "malformed", "multipart/alternative; agentmail shows only single-part text/plain"),
    ],
)
def test_hostile_or_broken_messages_are_refused_with_a_reason(name: str, reason: str, words: str) -> None:
    with pytest.raises(wire.Malformed) as caught:
        wire.to_letter(wire.parse_message((DATA / name).read_bytes(), 10**6))
    assert caught.value.reason == reason
    assert words in caught.value.detail


def test_oversized_letters_are_too_large() -> None:
    with pytest.raises(wire.Malformed) as caught:
        wire.parse_message(wire.render(outline(body="x" * 5000)), 4096)
    assert caught.value.reason == "too-large"


def test_a_huge_header_section_is_malformed() -> None:
    raw = b"X-Filler: " + b"a" * 70_000 + b"\r\n" + wire.render(outline())
    with pytest.raises(wire.Malformed, match="header section"):
        wire.parse_message(raw, 10**6)


# Every reason wire.Malformed may carry (DESIGN §8).
WIRE_REASONS = {"malformed", "too-large", "unregistered-sender", "thread-mismatch"}


def test_garbage_bytes_never_raise_anything_but_malformed() -> None:
    """Random bytes in every place of a letter: each outcome is a Letter or a Malformed with a
    known reason and a one-line detail, and the garbage reaches every stage of parsing."""
    import base64
    import random

    rng = random.Random(7)
    base = wire.render(outline())
    head, _, _body = base.partition(b"\r\n\r\n")
    places: dict[str, Callable[[bytes], bytes]] = {
        "the whole letter": lambda g: g,
        "a header name": lambda g: base.replace(b"\r\nDate:", b"\r\n" + g.replace(b":", b"") + b":", 1),
        "the Subject": lambda g: base.replace(b"Subject: ", b"Subject: " + g.replace(b"\n", b""), 1),
        "an encoded word": lambda g: base.replace(
            b"Subject: ", b"Subject: =?utf-8?b?" + base64.b64encode(g) + b"?= ", 1
        ),
        "the From": lambda g: base.replace(b"From: Alpha agent", b"From: " + g.replace(b"\n", b""), 1),
        "the charset": lambda g: base.replace(b'charset="utf-8"', b'charset="' + g.replace(b"\n", b"") + b'"', 1),
        "the body": lambda g: head + b"\r\n\r\n" + g,
        "the front matter": lambda g: base.replace(b"ref: runflow#12", b"ref: " + g.replace(b"\x00", b""), 1),
    }
    reached: dict[str, set[str]] = {place: set() for place in places}
    for place, build in places.items():
        for turn in range(60):
            garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            if turn % 2:  # printable ASCII only: past the first checks, into the later ones
                garbage = bytes(b for b in garbage if 0x20 < b < 0x7F) or b"x"
            stage = "parse_message"
            try:
                msg = wire.parse_message(build(garbage), 10**6)
                stage = "to_letter"
                letter = wire.to_letter(msg)
                stage = "a letter"
                assert letter.message_id == "<01abc.alpha@bus.test>" or place == "the whole letter"
            except wire.Malformed as exc:
                assert exc.reason in WIRE_REASONS
                assert exc.detail and "\n" not in exc.detail and len(exc.detail) < 300
                if "agentmail block" in exc.detail:
                    stage = "the agentmail block"
            reached[place].add(stage)
    assert "parse_message" in reached["the whole letter"]
    for place in places.keys() - {"the whole letter"}:
        assert reached[place] & {"to_letter", "a letter", "the agentmail block"}, place  # past parse_message
    assert "parse_message" in reached["a header name"]  # 8-bit or control bytes in a name
    assert "to_letter" in reached["the body"] and "the agentmail block" in reached["the front matter"]
    assert set().union(*reached.values()) == {"parse_message", "to_letter", "a letter", "the agentmail block"}


def test_tag_and_block_disagreeing_is_a_thread_mismatch() -> None:
    raw = wire.render(outline()).replace(b"To: beta+thr-abc123def0@", b"To: beta+thr-zzzzzz999@")
    with pytest.raises(wire.Malformed) as caught:
        wire.to_letter(wire.parse_message(raw, 10**6))
    assert caught.value.reason == "thread-mismatch"


def test_message_ids_are_generated_locally_and_unique() -> None:
    ids = {wire.new_message_id("alpha", "bus.test") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(wire.MESSAGE_ID_RE.fullmatch(i) and i.endswith(".alpha@bus.test>") for i in ids)
