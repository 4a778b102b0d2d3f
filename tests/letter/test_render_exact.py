"""wire.render, exact bytes: each header line, its order and its folding, and the body's
transfer encoding, for hand-picked letters on both paths: the fast plain-header path and the
email package's (forced here by a non-ASCII value, or by stepping the fast path aside). Cheap
table tests; tests/letter/test_render_fast.py holds the two paths equal on generated letters."""

from __future__ import annotations

from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage

import pytest

from agentmail.letter import wire
from agentmail.model import Letter
from tests.helpers.letters import burst

DATE = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
BLOCK = "--- agentmail v1 ---\r\ntype: report\r\nthread: thr-abc123def0\r\n--- end agentmail ---\r\n\r\n"
TEXT_PLAIN = 'Content-Type: text/plain; charset="utf-8"'


def lines(*headers: str, cte: str = "7bit", body: str = "Fired 14 submits.") -> bytes:
    """The expected letter: header lines (CRLF each), the MIME trailer, the block and the body."""
    mime = (TEXT_PLAIN, f"Content-Transfer-Encoding: {cte}", "MIME-Version: 1.0")
    return ("\r\n".join((*headers, *mime)) + "\r\n\r\n" + BLOCK + body + "\r\n").encode()


def general(letter: Letter, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The same letter rendered by the email package (the fast path stepped aside)."""
    with monkeypatch.context() as patched:
        patched.setattr(wire, "_plain_header_block", lambda letter, date: None)
        return wire.render(letter)


FROM, TO, REPLY_TO = (
    "From: Alpha <alpha@bus.test>",
    "To: beta+thr-abc123def0@bus.test",
    "Reply-To: alpha+thr-abc123def0@bus.test",
)
SUBJECT, DATED, MID = "Subject: Burst", "Date: Tue, 01 Dec 2026 11:00:00 +0000", "Message-ID: <01s.alpha@bus.test>"
AUTO, KIND, THREAD = "Auto-Submitted: auto-generated", "X-Agentmail-Type: report", "X-Agentmail-Thread: thr-abc123def0"

PLAIN = [
    ("the bare letter", {}, lines(FROM, TO, REPLY_TO, SUBJECT, DATED, MID, AUTO, KIND, THREAD)),
    (
        "no display name",
        {"sender_name": ""},
        lines("From: alpha@bus.test", TO, REPLY_TO, SUBJECT, DATED, MID, AUTO, KIND, THREAD),
    ),
    (
        "every optional header",
        {
            "in_reply_to": "<00a.beta@bus.test>",
            "references": ("<00a.beta@bus.test>", "<00b.alpha@bus.test>"),
            "cc": ("carol@people.test", "dan@people.test"),
            "list_id": "<agentmail.bus.test>",
        },
        lines(
            FROM,
            TO,
            "Cc: carol@people.test, dan@people.test",
            REPLY_TO,
            SUBJECT,
            DATED,
            MID,
            "In-Reply-To: <00a.beta@bus.test>",
            "References: <00a.beta@bus.test> <00b.alpha@bus.test>",
            AUTO,
            "List-Id: <agentmail.bus.test>",
            KIND,
            THREAD,
        ),
    ),
    (
        "a References line of exactly 78 characters",
        {"references": ("<" + "r" * 55 + "@bus.test>",)},
        lines(FROM, TO, REPLY_TO, SUBJECT, DATED, MID, "References: <" + "r" * 55 + "@bus.test>", AUTO, KIND, THREAD),
    ),
]


def letter_with(**changes: object) -> Letter:
    people = {k: changes.pop(k) for k in ("cc", "list_id", "recipients") if k in changes}
    return burst(date=DATE, **changes).replace(**people)  # type: ignore[arg-type]


@pytest.mark.parametrize(("changes", "expected"), [(c, e) for _, c, e in PLAIN], ids=[n for n, _, _ in PLAIN])
def test_a_plain_letter_is_written_exactly_and_the_same_by_both_paths(
    changes: dict[str, object], expected: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    letter = letter_with(**changes)
    assert wire.render(letter) == expected
    assert general(letter, monkeypatch) == expected


GENERAL = [
    (
        "a non-ASCII subject and name, every optional header",
        {
            "subject": "Café crème",
            "sender_name": "Älpha",
            "in_reply_to": "<00a.beta@bus.test>",
            "references": ("<00a.beta@bus.test>", "<00b.alpha@bus.test>"),
            "cc": ("carol@people.test", "dan@people.test"),
            "list_id": "<agentmail.bus.test>",
        },
        lines(
            "From: =?utf-8?q?=C3=84lpha?= <alpha@bus.test>",
            TO,
            "Cc: carol@people.test, dan@people.test",
            REPLY_TO,
            "Subject: =?utf-8?q?Caf=C3=A9_cr=C3=A8me?=",
            DATED,
            MID,
            "In-Reply-To: <00a.beta@bus.test>",
            "References: <00a.beta@bus.test> <00b.alpha@bus.test>",
            AUTO,
            "List-Id: <agentmail.bus.test>",
            KIND,
            THREAD,
        ),
    ),
    (
        "a non-ASCII subject, no display name",
        {"subject": "Café", "sender_name": ""},
        lines("From: alpha@bus.test", TO, REPLY_TO, "Subject: =?utf-8?q?Caf=C3=A9?=", DATED, MID, AUTO, KIND, THREAD),
    ),
    (
        "a fan-out letter: every recipient at its thread address",
        {"recipients": ("beta@bus.test", "gamma@bus.test")},
        lines(
            FROM,
            "To: beta+thr-abc123def0@bus.test, gamma+thr-abc123def0@bus.test",
            REPLY_TO,
            SUBJECT,
            DATED,
            MID,
            AUTO,
            KIND,
            THREAD,
        ),
    ),
    (
        "a non-ASCII body: quoted-printable",
        {"body": "Fired 14 submits — all refused."},
        lines(
            FROM,
            TO,
            REPLY_TO,
            SUBJECT,
            DATED,
            MID,
            AUTO,
            KIND,
            THREAD,
            cte="quoted-printable",
            body="Fired 14 submits =E2=80=94 all refused.",
        ),
    ),
]


@pytest.mark.parametrize(("changes", "expected"), [(c, e) for _, c, e in GENERAL], ids=[n for n, _, _ in GENERAL])
def test_a_letter_the_email_package_writes_is_written_exactly(changes: dict[str, object], expected: bytes) -> None:
    assert wire.render(letter_with(**changes)) == expected


@pytest.mark.parametrize(
    ("subject", "longest", "cte"),
    [
        ("Burst", 900, "7bit"),  # the fast path: 900 characters is a line SMTP carries as it is
        ("Burst", 901, "quoted-printable"),
        ("Café", 900, "7bit"),  # the email package's path, the same rule
        ("Café", 901, "quoted-printable"),
    ],
)
def test_an_ascii_body_is_7bit_up_to_900_characters_a_line(
    subject: str, longest: int, cte: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if (subject, cte) == ("Burst", "7bit"):  # the fast path writes it, the email package is not asked
        monkeypatch.setattr(wire, "_render_with_email", lambda *args: pytest.fail("not the fast path"))
    raw = wire.render(letter_with(subject=subject, body="short\n" + "x" * longest))
    assert f"\r\nContent-Transfer-Encoding: {cte}\r\n".encode() in raw
    head, _, body = raw.partition(b"\r\n\r\n")
    if cte == "7bit":
        assert body == (BLOCK + "short\r\n" + "x" * longest + "\r\n").encode()
    else:  # soft line breaks keep every line within the policy's 78 characters
        assert max(map(len, body.split(b"\r\n"))) == 78
        assert body.replace(b"=\r\n", b"") == (BLOCK + "short\r\n" + "x" * longest + "\r\n").encode()


def test_a_fan_out_recipient_that_is_no_plain_address_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as refused:
        wire.render(letter_with(recipients=("beta@bus.test", "Gamma <gamma@bus.test>")))
    assert str(refused.value) == "not a plain recipient address: 'Gamma <gamma@bus.test>'"


# --- References folded as the email package folds them (the fast path's _folded) ---------------


def mid(length: int, c: str = "a") -> str:
    """A Message-ID of exactly ``length`` characters."""
    return f"<{c * (length - 11)}@bus.test>"


def email_folds(words: list[str]) -> str:
    msg = EmailMessage(policy=policy.SMTP)
    msg["References"] = " ".join(words)
    return msg.as_string().split("\r\n\r\n")[0] + "\r\n"


# "References: " is 12 characters; a line holds 78.
FOLDS = [
    ("fills the name's line exactly", [mid(66)], f"References: {mid(66)}\r\n"),
    ("one over: the value moves to a line of its own", [mid(67)], f"References:\r\n {mid(67)}\r\n"),
    ("a line of its own, filled exactly", [mid(77)], f"References:\r\n {mid(77)}\r\n"),
    ("two ids on a line of their own", [mid(33), mid(33, "b")], f"References:\r\n {mid(33)} {mid(33, 'b')}\r\n"),
    (
        "the second id ends the first line exactly",
        [mid(30), mid(35, "b"), mid(20, "c")],
        f"References: {mid(30)} {mid(35, 'b')}\r\n {mid(20, 'c')}\r\n",
    ),
    (
        "the second id one over: the next line",
        [mid(30), mid(36, "b"), mid(20, "c")],
        f"References: {mid(30)}\r\n {mid(36, 'b')} {mid(20, 'c')}\r\n",
    ),
    ("a long second id fills its own line", [mid(12), mid(77, "b")], f"References: {mid(12)}\r\n {mid(77, 'b')}\r\n"),
]


@pytest.mark.parametrize(("words", "expected"), [(w, e) for _, w, e in FOLDS], ids=[n for n, _, _ in FOLDS])
def test_references_are_folded_as_the_email_package_folds_them(words: list[str], expected: str) -> None:
    assert wire._folded("References", words) == expected
    assert email_folds(words) == expected


@pytest.mark.parametrize(
    "words",
    [[mid(78)], [mid(12), mid(78, "b")]],  # an id one character too long for any line of its own
    ids=["alone", "second"],
)
def test_an_id_too_long_for_a_line_leaves_the_folding_to_the_email_package(words: list[str]) -> None:
    assert wire._folded("References", words) is None
    assert "=?utf-8?q?" in email_folds(words)  # which encodes it: not what the fast path writes


# --- which letters the fast path writes itself (issue 11: ~1.5 ms a letter saved) ----------------


@pytest.mark.parametrize(("changes", "expected"), [(c, e) for _, c, e in PLAIN], ids=[n for n, _, _ in PLAIN])
def test_the_fast_path_writes_a_plain_letters_header_section_itself(
    changes: dict[str, object], expected: bytes
) -> None:
    letter = letter_with(**changes)
    head = wire._plain_header_block(letter, letter.date)
    assert head is not None and head.encode() == expected.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"


@pytest.mark.parametrize(
    "changes",
    [
        {"sender_name": "Älpha"},  # non-ASCII
        {"sender_name": "Alpha, Beta"},  # a comma the email package quotes
        {"sender_name": "Alpha  Beta"},  # a double space
        {"subject": "Café"},
        {"subject": "=?utf-8?q?x?= trick"},  # plain characters that read as an encoded word
        {"subject": "two  spaces"},
        {"subject": " ".join(["word"] * 16)},  # a Subject line over 78 characters: the email package folds it
        {"sender_name": "Älpha", "subject": "Burst"},
        {"date": "Tue,  01 Dec 2026 11:00:00 +0000"},
        {"message_id": "<01s/x.alpha@bus.test>"},  # a Message-ID the email package may fold differently
        {"in_reply_to": "<00a/x.beta@bus.test>"},
        {"references": ("<00a/x.beta@bus.test>",)},
        {"sender_address": "Alpha@Bus.Test"},  # capitals
        {"cc": ("carol..d@people.test",)},
    ],
    ids=lambda changes: repr(changes),
)
def test_the_fast_path_steps_aside_for_a_value_it_does_not_write(
    changes: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    letter = letter_with(**{k: v for k, v in changes.items() if k != "date"})
    if "date" in changes:
        letter = letter.replace(date=changes["date"])  # type: ignore[arg-type]
    assert wire._plain_header_block(letter, letter.date) is None
    assert wire.render(letter) == general(letter, monkeypatch)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"subject": "Burst\x07"}, "subject contains a control character (U+0007: CR, LF, NUL, bidi...); refused"),
        ({"sender_name": "n" * 101}, "display name is 101 characters; the limit is 100"),
    ],
)
def test_render_refuses_unsafe_header_text_naming_the_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        wire.render(letter_with(**changes))
    assert str(refused.value) == message


def test_a_display_name_of_100_characters_is_written() -> None:
    raw = wire.render(letter_with(sender_name="n" * 100))
    assert raw.startswith(b"From:\r\n " + b"n" * 100 + b"\r\n <alpha@bus.test>\r\nTo: ")
