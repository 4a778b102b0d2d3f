"""Wire format, exact outcomes: what parsing makes of hand-written bytes (each header rule, each
refusal's reason and sentence), what rendering puts on the wire as read back by a plain RFC-822
parser, and the address and thread helpers. Written against the bytes and the Letter, never
against how render builds its message, so a different rendering of the same letter passes."""

from __future__ import annotations

import email
import re
from email import policy
from email.utils import parsedate_to_datetime

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentmail.letter import wire
from agentmail.model import Letter
from tests.helpers.letters import burst

from ..depth import examples

MID = "<01x.alpha@bus.test>"
START, END = "--- agentmail v1 ---", "--- end agentmail ---"
UTF8 = ("MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit")
BLOCK = "--- agentmail v1 ---\ntype: report\nthread: thr-abc123def0\n--- end agentmail ---\n"


def raw_letter(*headers: str, body: str = BLOCK + "Fired 14 submits.\n", defaults: bool = True) -> bytes:
    """Header lines (``Name: value``) and a body, CRLF; From/To/Message-ID/Subject added unless given."""
    names = {h.split(":", 1)[0].lower() for h in headers}
    lines = list(headers)
    if defaults:
        for name, line in (
            ("from", "From: Alpha <alpha@bus.test>"),
            ("to", "To: beta@bus.test"),
            ("message-id", f"Message-ID: {MID}"),
            ("subject", "Subject: Burst"),
        ):
            if name not in names:
                lines.append(line)
    return ("\r\n".join(lines) + "\r\n\r\n" + body.replace("\n", "\r\n")).encode()


def parsed(raw: bytes) -> Letter:
    return wire.to_letter(wire.parse_message(raw, 1 << 20))


def refusal(raw: bytes, max_size: int = 1 << 20) -> tuple[str, str]:
    with pytest.raises(wire.Malformed) as caught:
        wire.to_letter(wire.parse_message(raw, max_size))
    assert str(caught.value) == caught.value.detail
    return caught.value.reason, caught.value.detail


# --- the address and thread helpers -----------------------------------------------------------


def test_tagged_address_replaces_a_tag_and_keeps_the_domain() -> None:
    assert wire.tagged_address("beta@bus.test", "thr-abc123") == "beta+thr-abc123@bus.test"
    assert wire.tagged_address("beta+thr-old111@bus.test", "thr-abc123") == "beta+thr-abc123@bus.test"
    assert wire.tagged_address("beta+a+b@bus.test", "thr-abc123") == "beta+thr-abc123@bus.test"
    with pytest.raises(ValueError, match="thread id 'thr-x' must match"):
        wire.tagged_address("beta@bus.test", "thr-x")


def test_base_address_drops_every_tag() -> None:
    assert wire.base_address("beta+thr-abc123@bus.test") == "beta@bus.test"
    assert wire.base_address("beta+a+b@bus.test") == "beta@bus.test"
    assert wire.base_address("beta@bus.test") == "beta@bus.test"


@pytest.mark.parametrize(
    ("address", "thread"),
    [
        ("beta+thr-abc123@bus.test", "thr-abc123"),
        ("Beta+THR-ABC123@Bus.Test", "thr-abc123"),  # read case-insensitively, given back lowercase
        ("beta+thr-abc12@bus.test", None),  # five characters: too short for a thread id
        ("beta@bus.test", None),
        ("x+beta+thr-abc123@bus.test", None),  # the tag must follow the name directly
        ("-beta+thr-abc123@bus.test", None),
    ],
)
def test_thread_of_address(address: str, thread: str | None) -> None:
    assert wire.thread_of_address(address) == thread


def test_derived_thread_is_a_stable_twelve_character_id() -> None:
    first = wire.derived_thread("<a@b.test>")
    assert first == wire.derived_thread("<a@b.test>") != wire.derived_thread("<c@b.test>")
    assert first.startswith("thr-") and len(first) == 16
    assert first == "thr-3eanlrak6hld"  # sha256 of the id, base32, lowercase: fixed forever


def test_list_id_and_new_message_id() -> None:
    assert wire.list_id("bus.test") == "<agentmail.bus.test>"
    with pytest.raises(ValueError, match="not a bus domain: 'Bus Test'"):
        wire.list_id("Bus Test")
    mid = wire.new_message_id("alpha", "bus.test")
    assert wire.MESSAGE_ID_RE.fullmatch(mid) and mid.endswith(".alpha@bus.test>")


# --- the header section -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "line"),
    [
        (b"From: a\r\nTo: b\r\n", None),
        (b"From: a\r\n folded\r\n\tand more\r\nTo: b\r\n", None),
        (b"From : a\r\n", None),  # white space before the colon is still a field
        (b"not a header\r\nFrom: a\r\n", 1),
        (b"From: a\r\nTo: b\r\nnot a header\r\n", 3),
        (b"From: a\nTo: b\nbroken\n", 3),
        (b"From: a\r\n: no name\r\n", 2),
    ],
)
def test_bad_header_line_numbers_the_first_line_that_is_no_field(head: bytes, line: int | None) -> None:
    assert wire.bad_header_line(head) == line


def test_quick_identity_reads_simple_headers_only() -> None:
    assert wire.quick_identity(raw_letter("From: Alpha <Alpha@Bus.Test>")) == ("alpha@bus.test", MID)
    assert wire.quick_identity(raw_letter("from: alpha@bus.test", f"message-id:   {MID}  ")) == ("alpha@bus.test", MID)
    assert wire.quick_identity(raw_letter("From: a@bus.test", "From: b@bus.test")) is None  # two From
    assert wire.quick_identity(raw_letter("Message-ID: <1@x>", "Message-ID: <2@x>")) is None
    assert wire.quick_identity(raw_letter("Message-ID: none")) is None


def test_parse_message_refuses_with_a_reason_and_a_sentence() -> None:
    big = raw_letter()
    assert refusal(big, max_size=len(big) - 1) == (
        "too-large",
        f"the letter is {len(big)} bytes; this bus takes at most {len(big) - 1}",
    )
    wire.parse_message(big, len(big))  # exactly the limit is fine
    assert refusal(raw_letter("X-Pad: " + "a" * wire.MAX_HEADER_BYTES)) == (
        "malformed",
        f"the header section is larger than {wire.MAX_HEADER_BYTES} bytes",
    )
    assert refusal(raw_letter(body="a\x00b")) == ("malformed", "the letter contains NUL bytes")
    assert refusal(raw_letter("X-One: 1", "no colon here")) == (
        "malformed",
        "header line 2 is neither a field nor the continuation of one",
    )


# --- From, Message-ID, Subject ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            ("From: a@bus.test", "From: b@bus.test"),
            ("malformed", "the letter has 2 From headers; exactly one is allowed"),
        ),
        (
            ("From: a@bus.test, b@bus.test",),
            ("malformed", "the From header holds 2 addresses; exactly one is allowed"),
        ),
        (
            ("From: <alpha@bus_test>",),
            ("unregistered-sender", "the From address 'alpha@bus_test' is not a plain ASCII address"),
        ),
        (
            (f"Message-ID: {MID}", "Message-ID: <2.alpha@bus.test>"),
            ("malformed", "the letter has 2 Message-ID headers; exactly one is required"),
        ),
        (("Message-ID: 01x.alpha@bus.test",), ("malformed", "the Message-ID is not of the form <local@domain>")),
        (("Message-ID: <a b@bus.test>",), ("malformed", "the Message-ID is not of the form <local@domain>")),
        (("Subject: one", "Subject: two"), ("malformed", "the letter has more than one Subject")),
        (
            ("Subject: =?utf-8?q?a=01b?=",),
            ("malformed", "the Subject decodes to text with control characters (U+0001)"),
        ),
        (
            ("Subject: =?utf-8?q?trailing=E2=80=A8?=",),
            ("malformed", "the Subject decodes to text with control characters (U+2028)"),
        ),
        (("Subject: =?x-nonesuch?q?abc?=",), ("malformed", "the Subject header cannot be decoded (LookupError)")),
    ],
)
def test_header_refusals_are_exact(headers: tuple[str, ...], expected: tuple[str, str]) -> None:
    assert refusal(raw_letter(*headers)) == expected


def test_no_from_and_no_message_id_are_counted() -> None:
    assert refusal(raw_letter("To: beta@bus.test", "Message-ID: " + MID, "Subject: s", defaults=False)) == (
        "malformed",
        "the letter has 0 From headers; exactly one is allowed",
    )
    assert refusal(raw_letter("From: a@bus.test", "Subject: s", defaults=False)) == (
        "malformed",
        "the letter has 0 Message-ID headers; exactly one is required",
    )


def test_sender_is_lowercased_and_its_name_made_one_line() -> None:
    letter = parsed(raw_letter("From: =?utf-8?q?Al=09pha?= <ALPHA@Bus.Test>"))
    assert (letter.sender_address, letter.sender_name) == ("alpha@bus.test", "Al pha")
    assert parsed(raw_letter("From: alpha@bus.test")).sender_name is None
    long_name = parsed(raw_letter(f"From: {'n' * 150} <alpha@bus.test>")).sender_name
    assert long_name == "n" * 100


def test_subject_is_unfolded_decoded_and_stripped() -> None:
    assert parsed(raw_letter("Subject: a long\r\n subject")).subject == "a long subject"
    assert parsed(raw_letter("Subject:   padded\t ")).subject == "padded"
    assert parsed(raw_letter("Subject: X marks the spot X")).subject == "X marks the spot X"
    assert parsed(raw_letter("Subject: =?utf-8?q?caf=C3=A9?= =?utf-8?q?_au_lait?=")).subject == "café au lait"
    assert parsed(raw_letter("Subject: with\ttab")).subject == "with\ttab"  # TAB is allowed in a header
    no_subject = raw_letter("From: a@bus.test", "To: beta@bus.test", f"Message-ID: {MID}", defaults=False)
    assert parsed(no_subject).subject == ""


def test_a_from_header_that_does_not_parse_is_refused_by_name() -> None:
    assert refusal(raw_letter("From: alpha@bus.test, <")) == ("malformed", "the From header does not parse")


def test_a_multipart_letter_without_a_body_cannot_be_read_as_sent() -> None:
    # the email package gives no parts (no blank line, no body) while its type says multipart/mixed
    raw = raw_letter("MIME-Version: 1.0", 'Content-Type: multipart/mixed; boundary="b"', body="")
    assert refusal(raw.removesuffix(b"\r\n\r\n")) == ("malformed", "the multipart letter cannot be read as sent")


BARE_CR = ("malformed", "the letter contains a bare CR (a carriage return without its line feed)")


def test_a_letter_with_bare_cr_line_ends_is_refused_single_part_or_multipart() -> None:
    # the email package ends lines at a lone CR, the header split and dkimpy only at LF: refused
    # before either reads it, so no letter is read one way and verified another
    body = "--b\nContent-Type: text/plain\n\nhi\n--b--\n"
    multipart = raw_letter("MIME-Version: 1.0", 'Content-Type: multipart/mixed; boundary="b"', body=body)
    assert refusal(multipart.replace(b"\r\n", b"\r")) == BARE_CR
    assert refusal(raw_letter().replace(b"\r\n", b"\r")) == BARE_CR


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_a_cr_put_anywhere_without_its_lf_is_refused_first(data: st.DataObject) -> None:
    """Wherever a lone CR lands (a header, the block, the body, before a CRLF), nothing else is
    judged first: the letter is refused for it."""
    plain = raw_letter()
    at = data.draw(st.integers(0, len(plain)), label="at")
    raw = plain[:at] + b"\r" + plain[at:]
    assume(re.search(rb"\r(?!\n)", raw))  # a CR put just before an LF completes a CRLF
    assert refusal(raw) == BARE_CR


def test_one_bare_cr_anywhere_is_refused_and_crlf_is_not() -> None:
    plain = raw_letter()
    assert refusal(plain.replace(b"Subject:", b"X-Note: a\rb\r\nSubject:", 1)) == BARE_CR
    assert refusal(plain + b"trailing\r") == BARE_CR
    assert parsed(plain).message_id == MID


def test_a_control_character_at_the_end_of_the_raw_subject_is_refused_not_stripped() -> None:
    # only spaces and tabs are stripped before decoding: str.strip() would drop \x1f unseen
    assert refusal(raw_letter("Subject: Burst\x1f")) == (
        "malformed",
        "the Subject decodes to text with control characters (U+001F)",
    )


def test_message_id_is_stripped_of_surrounding_space() -> None:
    assert parsed(raw_letter(f"Message-ID:    {MID}   ")).message_id == MID


# --- To, Cc, List-Id, Date, references --------------------------------------------------------


def test_to_is_the_first_plain_address_without_its_tag() -> None:
    assert parsed(raw_letter("To: Beta <Beta+thr-abc123def0@Bus.Test>")).to_address == "beta@bus.test"
    assert parsed(raw_letter("To: beta@bus.test, gamma@bus.test")).to_address == "beta@bus.test"
    assert refusal(raw_letter("To: beta@bus.test, <")) == ("malformed", "the To header does not parse")
    no_to = raw_letter("From: a@bus.test", f"Message-ID: {MID}", "Subject: s", defaults=False)
    assert parsed(no_to).to_address == ""


@pytest.mark.parametrize(
    ("headers", "detail"),
    [
        (("To: ", "To: gamma@bus.test"), "the letter has 2 To headers; at most one is allowed"),
        (
            ("To: <bëta@bus.test>",),
            "the To header holds 8-bit bytes: an address is ASCII, a name an RFC 2047 encoded word",
        ),
        (("To: beta@bus.test", "To: gamma@bus.test, <"), "the letter has 2 To headers; at most one is allowed"),
        (("Cc: omega@bus.test, <",), "the Cc header does not parse"),
        (("Cc: a@bus.test", "Cc: b@bus.test"), "the letter has 2 Cc headers; at most one is allowed"),
        (("Reply-To: a@bus.test", "Reply-To: b@bus.test"), "the letter has 2 Reply-To headers; at most one is allowed"),
        (("Sender: a@bus.test, b@bus.test",), "the Sender header holds 2 addresses; exactly one is allowed"),
        (("Sender: alpha",), "the Sender header does not parse cleanly (addr-spec local part with no domain)"),
    ],
)
def test_every_identity_header_is_read_once_and_strictly(headers: tuple[str, ...], detail: str) -> None:
    """To, Cc, Reply-To and Sender as From (issue 23): once at most, each one that parses cleanly
    (no header ignored because it is odd, no second copy a signature does not cover)."""
    assert refusal(raw_letter(*headers)) == ("malformed", detail)


def test_recipients_are_every_plain_to_address_once_and_the_odd_left_out() -> None:
    fan_out = raw_letter("To: Beta <beta+thr-abc123def0@bus.test>, o'brien@bus.test, gamma@bus.test, Gamma@Bus.test")
    assert parsed(fan_out).recipients == ("beta@bus.test", "gamma@bus.test")
    assert parsed(raw_letter("To: beta@bus.test, o'brien@bus.test")).recipients == ()  # one plain: no fan-out


def test_cc_keeps_each_plain_address_once_and_leaves_out_the_odd() -> None:
    letter = parsed(
        raw_letter("Cc: Gamma <Gamma@Bus.Test>, delta@bus.test, <z@bus_test>, gamma@bus.test, Zeta@bus.test")
    )
    assert letter.cc == ("gamma@bus.test", "delta@bus.test", "zeta@bus.test")
    assert parsed(raw_letter()).cc == ()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (("List-Id:  <agentmail.bus.test> ",), "<agentmail.bus.test>"),
        (("List-Id: <agentmail.bus.test>", "List-Id: <agentmail.bus.test>"), None),  # two: neither counts
        (("List-Id: <other.bus.test>",), None),
        ((), None),
    ],
)
def test_list_id_is_kept_only_when_one_well_formed(headers: tuple[str, ...], expected: str | None) -> None:
    assert parsed(raw_letter(*headers)).list_id == expected


def test_date_is_kept_with_its_white_space_collapsed() -> None:
    letter = parsed(raw_letter("Date: Tue,  1 Dec 2026\r\n  10:00:00 +0000"))
    assert letter.date == "Tue, 1 Dec 2026 10:00:00 +0000"
    assert parsed(raw_letter()).date == ""


def test_in_reply_to_and_references_keep_only_well_formed_ids() -> None:
    letter = parsed(
        raw_letter(
            "In-Reply-To: junk <bad id@x> <1.alpha@bus.test> <2.alpha@bus.test>",
            "References: <0.alpha@bus.test> <no-at-sign> <1.alpha@bus.test>",
        )
    )
    assert letter.in_reply_to == "<1.alpha@bus.test>"
    assert letter.references == ("<0.alpha@bus.test>", "<1.alpha@bus.test>")
    plain = parsed(raw_letter())
    assert (plain.in_reply_to, plain.references) == (None, ())


def test_a_parsed_letter_has_no_spool_names_yet() -> None:
    letter = parsed(raw_letter())
    assert (letter.sender, letter.to, letter.id) == ("", "", "")


# --- the agentmail block and the thread -------------------------------------------------------


def test_the_block_may_follow_blank_lines_and_the_body_keeps_its_indentation() -> None:
    letter = parsed(raw_letter(body="\n\n" + BLOCK + "\nBody line.\n\n"))
    assert (letter.type, letter.thread, letter.body) == ("report", "thr-abc123def0", "Body line.")
    assert parsed(raw_letter(body="\n  indented line\n\n")).body == "  indented line"


def test_without_a_block_a_letter_is_human_and_its_thread_derived_from_its_id() -> None:
    letter = parsed(raw_letter(body="Hello there.\n"))
    assert (letter.type, letter.thread, letter.body) == ("human", wire.derived_thread(MID), "Hello there.")
    assert (letter.severity, letter.ref, letter.to_agent) == (None, None, None)


def test_only_line_breaks_may_come_before_the_block() -> None:
    for before in (" ", "X"):  # a space or a letter first: no block, the text is the body
        letter = parsed(raw_letter(body=before + BLOCK + "Hello.\n"))
        assert (letter.type, letter.body) == ("human", (before + BLOCK + "Hello.").replace("\r\n", "\n"))
    letter = parsed(raw_letter(body=BLOCK + "X marks the spot X\n"))
    assert (letter.type, letter.body) == ("report", "X marks the spot X")  # only line breaks stripped
    assert letter.extra == {}  # no attachments: nothing said about them


def test_block_fields_are_read() -> None:
    body = f"{START}\ntype: question\nthread: thr-abc123def0\nseverity: high\nref: src/x.py:12\nto-agent: fixer\n{END}\nQ?\n"
    letter = parsed(raw_letter(body=body))
    assert (letter.type, letter.severity, letter.ref, letter.to_agent) == ("question", "high", "src/x.py:12", "fixer")


@pytest.mark.parametrize(
    ("field", "detail"),
    [
        (
            "ref: a\u202eb",
            "the agentmail block: ref contains a control character (U+202E: CR, LF, NUL, bidi...); refused",
        ),
        ("to-agent: Fixer", "the agentmail block: agent name 'Fixer' must match ^[a-z0-9][a-z0-9-]{0,31}$"),
        ("severity: apocalyptic", "the agentmail block: unknown severity 'apocalyptic'; one of: low, medium"),
        ("type: shout", "the agentmail block: unknown type 'shout'"),
    ],
)
def test_bad_block_fields_are_malformed_with_the_field_named(field: str, detail: str) -> None:
    body = f"{START}\nthread: thr-abc123def0\n{field}\n{END}\nBody.\n"
    reason, said = refusal(raw_letter(*UTF8, body=body))
    assert reason == "malformed" and said.startswith(detail)


def test_the_address_tag_decides_the_thread() -> None:
    tagged = "To: beta+thr-abc123def0@bus.test"
    assert parsed(raw_letter(tagged)).thread == "thr-abc123def0"  # tag and block agree
    assert parsed(raw_letter(tagged, body="No block.\n")).thread == "thr-abc123def0"  # the tag alone
    assert refusal(raw_letter("To: beta+thr-zzz999zzz9@bus.test")) == (
        "thread-mismatch",
        "the address tag says thr-zzz999zzz9 but the block says thr-abc123def0",
    )


def test_the_recipient_thread_is_read_from_any_recipient_header_and_they_must_agree() -> None:
    letter = parsed(
        raw_letter(
            "Delivered-To: Beta+THR-ABC123DEF0@bus.test",
            "X-Original-To: beta+thr-abc123def0@bus.test",
            "To: beta@bus.test",
            body="No block.\n",
        )
    )
    assert letter.thread == "thr-abc123def0"
    with pytest.raises(wire.Malformed) as disagree:  # a fan-out's extra To may not name another thread
        wire.recipient_thread(
            wire.parse_message(
                raw_letter(
                    "Delivered-To: Beta+THR-ABC123DEF0@bus.test",
                    "To: beta+thr-yyy888yyy8@bus.test",
                    body="No block.\n",
                ),
                1 << 20,
            )
        )
    assert disagree.value.reason == "thread-mismatch"
    only_original = parsed(raw_letter("X-Original-To: beta+thr-zzz999zzz9@bus.test", body="No block.\n"))
    assert only_original.thread == "thr-zzz999zzz9"
    untagged_first = parsed(
        raw_letter("Delivered-To: beta@bus.test", "To: x@y.test, Beta+thr-yyy888yyy8@Bus.Test", body="No block.\n")
    )
    assert untagged_first.thread == "thr-yyy888yyy8"


MISMATCH = "the recipient addresses name different threads: "


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ("Delivered-To: Beta+THR-ABC123DEF0@Bus.Test", "Delivered-To beta+thr-abc123def0@bus.test"),
        ("X-Original-To: beta+thr-abc123def0@bus.test", "X-Original-To beta+thr-abc123def0@bus.test"),
    ],
)
def test_a_thread_mismatch_names_each_header_address_and_thread(header: str, named: str) -> None:
    assert refusal(raw_letter(header, "To: beta+thr-yyy888yyy8@bus.test", body="No block.\n")) == (
        "thread-mismatch",
        f"{MISMATCH}{named} says thr-abc123def0; To beta+thr-yyy888yyy8@bus.test says thr-yyy888yyy8",
    )


def test_a_thread_mismatch_is_cut_at_300_characters() -> None:
    threads = [f"thr-{c * 10}" for c in "abcdefghij"]
    to = "To: " + ", ".join(f"b+{t}@bus.test" for t in threads)
    reason, detail = refusal(raw_letter(to, body="No block.\n"))
    said = "To b+thr-aaaaaaaaaa@bus.test says thr-aaaaaaaaaa; To b+thr-bbbbbbbbbb@bus.test says thr-bbbbbbbbbb; "
    assert (reason, detail[: len(MISMATCH) + len(said)]) == ("thread-mismatch", MISMATCH + said)
    assert len(detail) == len(MISMATCH) + 300
    assert detail.endswith("@bus.test says thr-ffffffffff; ")  # six of 50 characters; the seventh cut off


def test_draft_letter_is_a_letter_before_the_spool_names_it() -> None:
    draft = wire.draft_letter("alpha@bus.test", "", "beta@bus.test", "report", "thr-abc123def0", "Burst", "Fired.")
    assert draft == Letter(
        message_id="",
        sender="",
        sender_address="alpha@bus.test",
        to="",
        to_address="beta@bus.test",
        type="report",
        thread="thr-abc123def0",
        subject="Burst",
        body="Fired.",
        date="",
    )
    assert draft.sender_name is None


# --- rendering, read back by a plain parser ---------------------------------------------------


def draft(**changes: object) -> Letter:
    return burst(**{"message_id": MID, **changes})


def on_the_wire(letter: Letter) -> email.message.EmailMessage:
    raw = wire.render(letter)
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")  # CRLF throughout
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))  # RFC 5322's line limit
    return email.message_from_bytes(raw, policy=policy.default)  # type: ignore[return-value]


def test_render_writes_the_thread_into_to_and_reply_to() -> None:
    msg = on_the_wire(draft(to_address="beta+thr-old111@bus.test"))
    assert msg["To"] == "beta+thr-abc123def0@bus.test"
    assert msg["Reply-To"] == "alpha+thr-abc123def0@bus.test"
    assert msg["From"] == "Alpha <alpha@bus.test>"
    assert (msg["X-Agentmail-Type"], msg["X-Agentmail-Thread"]) == ("report", "thr-abc123def0")
    assert msg["Auto-Submitted"] == "auto-generated"
    assert msg["Message-ID"] == MID
    for absent in ("Cc", "In-Reply-To", "References", "List-Id"):
        assert msg[absent] is None


def test_render_writes_the_optional_headers_when_given() -> None:
    letter = draft(in_reply_to="<0.beta@bus.test>", references=("<a.beta@bus.test>", "<0.beta@bus.test>"))
    msg = on_the_wire(letter.replace(cc=("gamma@bus.test", "delta@bus.test"), list_id="<agentmail.bus.test>"))
    assert msg["In-Reply-To"] == "<0.beta@bus.test>"
    assert msg["References"] == "<a.beta@bus.test> <0.beta@bus.test>"
    assert msg["Cc"] == "gamma@bus.test, delta@bus.test"
    assert msg["List-Id"] == "<agentmail.bus.test>"


def test_render_dates_an_undated_letter_now_and_keeps_a_given_date() -> None:
    stamped = parsedate_to_datetime(on_the_wire(draft())["Date"])
    assert stamped.tzinfo is not None and stamped.year >= 2026
    given = parsedate_to_datetime("Tue, 01 Dec 2026 10:00:00 +0000")
    assert on_the_wire(draft(date=given))["Date"] == "Tue, 01 Dec 2026 10:00:00 +0000"


def test_render_keeps_a_long_line_and_non_ascii_text_intact() -> None:
    body = "x" * 1200 + "\nçà va — " + "y" * 10
    letter = draft(body=body)
    assert parsed(wire.render(letter)).body == body


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"message_id": "no-brackets@bus.test"}, "not a Message-ID: 'no-brackets@bus.test'"),
        ({"in_reply_to": "<bad>"}, "not a Message-ID: '<bad>'"),
        ({"references": ("<ok@x.test>", "bad")}, "not a Message-ID: 'bad'"),
        ({"ref": "a\nb"}, "ref contains a control character"),
        ({"sender_name": "Al\rpha"}, "display name contains a control character"),
        ({"to_agent": "Fixer"}, "agent name 'Fixer' must match"),
        ({"severity": "apocalyptic"}, "unknown severity 'apocalyptic'"),
        ({"type": "shout"}, "unknown type 'shout'"),
        ({"thread": "thr-x"}, "thread id 'thr-x' must match"),
    ],
)
def test_render_refuses_unsafe_values(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        wire.render(draft(**changes))
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cc", ("Gamma <gamma@bus.test>",), "not a plain address to copy: 'Gamma <gamma@bus.test>'"),
        ("list_id", "<other.bus.test>", "not a List-Id: '<other.bus.test>'"),
        ("date", "Tue\n, 1 Dec", "date contains a control character"),
    ],
)
def test_render_refuses_unsafe_people_headers(field: str, value: object, message: str) -> None:
    letter = draft().replace(**{field: value})
    with pytest.raises(ValueError) as caught:
        wire.render(letter)
    assert str(caught.value).startswith(message)
