"""wire.render writes plain headers itself instead of through EmailMessage (issue 11): the
bytes must be exactly what the email package writes for the same letter, or the fast path
must step aside. Compared here on generated letters, plain and awkward alike."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.letter import headers, matter, wire
from agentmail.model import SEVERITIES, TYPES, Letter

from ..depth import examples

_ID = st.from_regex(r"<[A-Za-z0-9._+-]{1,40}@[a-z0-9.-]{1,30}>", fullmatch=True)
_ADDR = st.one_of(
    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,12}(?:\.[a-z0-9_-]{1,8})?@[a-z0-9]{1,12}\.[a-z]{2,6}", fullmatch=True),
    st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}@[a-z0-9][a-z0-9.-]{0,20}", fullmatch=True),  # dots anywhere
)
# Subjects and names from plain words to the awkward: long, encoded-word look-alikes,
# non-ASCII, doubled spaces, characters the email package quotes.
_TEXT = st.one_of(
    st.from_regex(r"[A-Za-z0-9]{1,12}(?: [A-Za-z0-9.,:!?()'\"-]{1,12}){0,14}", fullmatch=True),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x17F, exclude_characters="\x7f"), min_size=1, max_size=120)
    .map(str.strip)
    .filter(bool),
    st.just("=?utf-8?q?x?= trick"),
    st.just("two  spaces"),
)
_NAME = st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_-]{1,10}(?: [A-Za-z0-9_-]{1,10}){0,3}", fullmatch=True), _TEXT)
_BODY = st.one_of(
    st.text(st.characters(min_codepoint=0x09, max_codepoint=0x7E), max_size=300),
    st.text(max_size=200),
    st.just("line\x0bwith a vertical tab\x0cand a form feed\r\nand CRLF"),
).filter(lambda b: b.strip())


def letters() -> st.SearchStrategy[Letter]:
    return st.builds(
        lambda mid, name, sender, to, kind, sev, subject, body, reply, refs, cc, listed, date: Letter(
            message_id=mid,
            sender="a",
            sender_address=sender,
            sender_name=name,
            to="b",
            to_address=to,
            type=kind,
            thread="thr-abcdef1234",
            subject=subject,
            body=body,
            date=date,
            severity=sev,
            in_reply_to=reply,
            references=refs,
            cc=cc,
            list_id="<agentmail.bus.test>" if listed else None,
        ),
        _ID,
        _NAME,
        _ADDR,
        _ADDR,
        st.sampled_from(TYPES),
        st.one_of(st.none(), st.sampled_from(SEVERITIES)),
        _TEXT,
        _BODY,
        st.one_of(st.none(), _ID),
        st.lists(_ID, max_size=6).map(tuple),
        st.lists(_ADDR, max_size=4, unique=True).map(tuple),
        st.booleans(),
        st.sampled_from(["Tue, 01 Dec 2026 04:00:00 +0000", "Mon, 30 Nov 2026 23:59:59 -0000"]),
    )


def _through_email(letter: Letter) -> bytes:
    fields = {"type": letter.type, "thread": letter.thread, "severity": letter.severity}
    text = matter.join({k: v for k, v in fields.items() if v is not None}, letter.body.strip())
    return wire._render_with_email(letter, text, letter.date)


@settings(max_examples=examples(400), deadline=None)
@given(letters())
def test_render_writes_what_the_email_package_writes(letter: Letter) -> None:
    fast: bytes | type[BaseException]
    slow: bytes | type[BaseException]
    try:
        fast = wire.render(letter)
    except ValueError:
        return  # refused header text: render checks every value before either path
    except Exception as exc:  # the email package refusing an address: it must still refuse it
        fast = exc.__class__
    try:
        slow = _through_email(letter)
    except Exception as exc:
        slow = exc.__class__
    assert fast == slow


def test_a_plain_letter_takes_the_fast_path_and_an_awkward_one_does_not() -> None:
    plain = wire.draft_letter(
        "alpha@bus.test", "Alpha Platform", "beta@bus.test", "report", "thr-abcdef1234", "Quota fails", "Hello",
        message_id="<01abc.alpha@bus.test>", date=datetime(2026, 12, 1, 4, 0, tzinfo=UTC),
        references=tuple(f"<01jx{i:024d}.alpha@bus.test>" for i in range(5)),  # folded by the fast path
    )  # fmt: skip
    assert wire._plain_header_block(plain, "Tue, 01 Dec 2026 04:00:00 +0000") is not None
    assert b"References: <01jx" in wire.render(plain)
    for awkward in (
        {"subject": "Quota f\u00e4ils"},
        {"subject": "x" * 90},
        {"sender_name": "A. Platform"},
        {"references": ("<" + "a" * 80 + "@bus.test>",)},  # one id longer than a line: no fold point
    ):
        changed = plain.replace(**awkward)
        assert wire._plain_header_block(changed, "Tue, 01 Dec 2026 04:00:00 +0000") is None
        assert wire.render(changed) == _through_email(changed)


_WORD = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
_HEADER_VALUE = st.one_of(
    st.builds(lambda words, addr: f"{' '.join(words)} <{addr}>", st.lists(_WORD, min_size=1, max_size=3), _ADDR),
    _ADDR,
    st.builds(lambda a, b: f"{a}, {b}", _ADDR, _ADDR),
    st.sampled_from(
        [
            '"A. B" <a@b.c>',
            "=?utf-8?q?J=C3=B6rg?= <a@b.c>",
            "a@b.c (comment)",
            "A  B <a@b.c>",
            " a@b.c",
            "<a@b.c>",
            "A <a@b.c",
            "a@b..c",
            "Undisclosed:;",
            "A <\u00e4@b.c>",
            "a@[127.0.0.1]",
        ]
    ),
    st.text(max_size=40),
)


@settings(max_examples=examples(500), deadline=None)
@given(_HEADER_VALUE)
def test_reading_a_plain_address_agrees_with_the_email_parser(value: str) -> None:
    try:
        expected = tuple((a.display_name, a.addr_spec) for a in headers._registry()("From", value).addresses)
    except Exception:
        expected = None
    try:
        got = tuple((a.display_name, a.addr_spec) for a in headers._addresses(value, "From"))
    except wire.Malformed:
        got = None
    # The plain path reads what the parser reads; the strict reading may refuse more (issue 23:
    # a defect, a name that is an address), never read something else.
    assert got is None or got == expected
    if re.fullmatch(headers._PLAIN_MAILBOX, value):
        assert got == expected


_ZONES = st.one_of(
    st.none(),
    st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59)).map(timezone),
)


@settings(max_examples=examples(200), deadline=None)
@given(when=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)), zone=_ZONES)
def test_the_date_is_written_as_the_email_package_writes_it(when: datetime, zone: timezone | None) -> None:
    """A send formats its Date without email.utils (and the socket module it loads): the same
    text for every time and offset, naive ones as -0000."""
    from email.utils import format_datetime

    moment = when.replace(tzinfo=zone)
    assert wire.format_date(moment) == format_datetime(moment)
    assert wire.format_date(datetime(2026, 12, 1, 4, 0, tzinfo=UTC)) == "Tue, 01 Dec 2026 04:00:00 +0000"
