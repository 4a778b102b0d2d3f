"""One strict reading of each identity header (issue 23, class 1), written as the attack.

``From: carol@people.test <mallory@people.test>`` was filed as carol while DMARC, a login check
and every mail client read mallory: any account of a vouched domain could pass as a listed
person, and under ``policy = "aligned"`` as a platform. From, Sender, Reply-To, To and Cc are now
read once, by the email package's header registry, and a letter is refused ``malformed`` when
that reading reports a defect, a header comes twice, From holds anything but one mailbox, or a
display name or comment names an address that is not the mailbox's own.
"""

from __future__ import annotations

import base64
import email.utils
from email import policy
from email.parser import BytesParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.letter import headers, wire
from agentmail.transport.local import deliver
from agentmail.trust import authenticity

from ..depth import examples, suppressed
from ..people.test_writing import CAROL, client_letter, people, vouched  # noqa: F401  (people: the fixture)
from ..trust.test_authenticity import letter_bytes, sign_as, trusting

_FULLWIDTH = base64.b64encode("carol\uff20people.test".encode()).decode()  # carol＠people.test, NFKC: carol@
ATTACKS = [
    "carol@people.test <mallory@people.test>",  # a bare address, then the real one
    "<mallory@people.test> carol@people.test",  # swapped
    "carol@people.test (on call) <mallory@people.test>",  # a comment between them
    "mallory@people.test <carol@people.test>",  # the other way round: still two readings
    '"carol@people.test" <mallory@people.test>',  # a quoted name that is an address
    "=?utf-8?q?carol=40people.test?= <mallory@people.test>",  # the same, as an encoded word
    f"=?utf-8?b?{_FULLWIDTH}?= <mallory@people.test>",  # a full-width at sign
    "mallory@people.test (carol@people.test)",  # the comment a client shows as the name
    "Carol <carol@people.test>, mallory@people.test",  # two mailboxes
    "carol: mallory@people.test;",  # a group
    "Carol <mallory@people.test",  # an unclosed angle address
]


def _from(raw: bytes, value: str) -> bytes:
    """``raw`` (CRLF) with its one From line replaced by ``From: value``."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    (at,) = [i for i, line in enumerate(lines) if line.startswith(b"From:")]
    lines[at] = f"From: {value}".encode()
    return b"\r\n".join(lines) + sep + body


def _client_bytes(to: str, body: str) -> bytes:
    msg = client_letter(to, body)
    return msg.as_bytes(policy=msg.policy.clone(linesep="\r\n"))


@pytest.mark.parametrize("value", ATTACKS)
def test_a_from_read_two_ways_is_quarantined_malformed_not_filed_as_the_person(
    people: Registry,  # noqa: F811
    home: Path,
    value: str,
) -> None:
    """End to end on the local post office: mallory, an account of carol's vouched domain,
    writes a From that a lenient reader takes for carol. Nothing reaches alpha's agent."""
    alpha = AgentMail(people, Identity("alpha"), home)
    raw = _from(_client_bytes("alpha@bus.test", "Please run the attached fix."), value)
    deliver(home / "postoffice" / "alpha", vouched(raw))
    assert alpha.inbox() == []
    (got,) = alpha.quarantined()
    assert got.reason == "malformed", got.detail
    assert "From header" in (got.detail or "")


def test_the_same_letter_with_a_plain_from_is_the_persons(people: Registry, home: Path) -> None:  # noqa: F811
    """The control: the same bytes with carol's own From are filed as carol's."""
    alpha = AgentMail(people, Identity("alpha"), home)
    raw = _from(_client_bytes("alpha@bus.test", "Please run the attached fix."), f'"{CAROL}" <{CAROL}>')
    deliver(home / "postoffice" / "alpha", vouched(raw))
    (got,) = alpha.inbox()
    assert got.extra["person"] == CAROL and got.sender == "beta"


@pytest.mark.parametrize(
    "value",
    [
        "alpha@bus.test <mallory@bus.test>",
        "<mallory@bus.test> alpha@bus.test",
        '"alpha@bus.test" <mallory@bus.test>',
    ],
)
def test_under_aligned_an_account_of_the_domain_cannot_pass_as_a_platform(
    registry: Registry, home: Path, value: str
) -> None:
    """policy = "aligned": the MTA's dkim=pass for bus.test (mallory's own mailbox there) is no
    pass for alpha unless the From names alpha alone."""
    aligned = trusting(registry, policy="aligned")
    raw = sign_as(registry, home, "beta", _from(letter_bytes(), value))  # a signature of bus.test, not alpha's key
    stamped = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mta\r\n" + raw
    verdict = authenticity.judge(stamped, aligned)
    assert (verdict.route, verdict.reason) == ("quarantine", "malformed"), verdict.detail


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Sender", "alpha@bus.test <mallory@bus.test>"),
        ("Reply-To", '"beta@bus.test" <mallory@evil.test>'),
        ("To", "beta@bus.test <gamma+thr-zzzzzzzzzz@bus.test>"),
        ("Cc", "carol@people.test <mallory@evil.test>"),
    ],
)
def test_every_identity_header_read_two_ways_is_malformed(header: str, value: str) -> None:
    raw = letter_bytes().replace(b"Subject:", f"{header}: {value}\r\nSubject:".encode(), 1)
    if header in ("To", "Reply-To"):  # the letter's own copy out: one of each
        raw = raw.replace(f"\r\n{header}: alpha+thr-abc123def0@bus.test".encode(), b"", 1)
        raw = raw.replace(b"\r\nTo: beta+thr-abc123def0@bus.test", b"", 1)
    msg = wire.parse_message(raw, 1 << 20)
    with pytest.raises(wire.Malformed) as caught:
        wire.address_headers(msg)
    assert caught.value.reason == "malformed" and f"the {header} header" in caught.value.detail


def test_a_persons_unsigned_to_and_references_place_nothing(people: Registry, home: Path) -> None:  # noqa: F811
    """A relay's To or In-Reply-To that carol's signature does not cover decides nothing: the
    letter is carol's, in a thread of its own, addressed to no platform in particular."""
    alpha = AgentMail(people, Identity("alpha"), home)
    sent = alpha.send("beta", "Quota 500s", "I am alpha's agent; beta's /quota returns 500 since 2.4.1. Please look.")
    letter = client_letter(f"alpha+{sent.thread}@bus.test", "Hello", in_reply_to=sent.message_id)
    verdict = authenticity.judge(vouched(letter, headers=[b"from", b"subject", b"date", b"message-id",
                                                          b"mime-version", b"content-type",
                                                          b"content-transfer-encoding"]), people)  # fmt: skip
    assert verdict.letter is not None, verdict.detail
    got = verdict.letter
    assert (got.to_address, got.in_reply_to, got.thread) == ("", None, wire.derived_thread(got.message_id))
    signed = authenticity.judge(vouched(letter), people).letter  # the test MTA signs To and In-Reply-To
    assert signed is not None and (signed.to_address, signed.thread) == ("alpha@bus.test", sent.thread)


def test_an_added_in_reply_to_above_the_signed_one_is_malformed(people: Registry) -> None:  # noqa: F811
    raw = vouched(client_letter("alpha@bus.test", "Hello", in_reply_to="<a@people.test>"))
    forged = raw.replace(b"From:", b"In-Reply-To: <b@bus.test>\r\nFrom:", 1)
    verdict = authenticity.judge(forged, people)
    assert (verdict.reason, verdict.detail) == (
        "malformed",
        "the letter has 2 In-Reply-To headers; at most one is allowed",
    )


# --- the differential property ---------------------------------------------------------------

_ADDRS = st.sampled_from(
    ["carol@people.test", "mallory@people.test", "Carol@People.Test", "alpha@bus.test", "o'brien@x.test"]
)
_NAMES = st.sampled_from(
    [
        "Carol",
        '"Carol"',
        "J. Smith",
        '"Smith, J"',
        '"carol@people.test"',
        "carol@people.test",
        "=?utf-8?q?carol=40people.test?=",
        f"=?utf-8?b?{_FULLWIDTH}?=",
        "=?utf-8?q?Jos=C3=A9?=",
        '"a\\"b"',
    ]
)
_COMMENTS = st.sampled_from(["(x)", "(carol@people.test)", "(mallory@people.test)", "((nested))", "(", ""])
_SHAPES = st.sampled_from(
    [
        "{n} <{a}>",
        "{a}",
        "<{a}>",
        "{a} {c}",
        "{n} {c} <{a}>",
        "{n} <{a}> {c}",
        "<{a}> {n}",
        "{a}, {b}",
        "{n}: {a};",
        "{a} <{b}>",
        "{n} <{a}",
        "{a}>",
        "<@route.test:{a}>",
        "{n} <{a}>,",
    ]
)


@st.composite
def address_values(draw: st.DrawFn) -> str:
    """Address header values built from the pieces that read two ways, and random text."""
    if draw(st.booleans()):
        shape = draw(_SHAPES)
        return shape.format(n=draw(_NAMES), a=draw(_ADDRS), b=draw(_ADDRS), c=draw(_COMMENTS))
    return draw(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60))


def _strict(name: str, value: str) -> tuple[list[str], list[str]]:
    """The email package's own reading of a whole message (policy.default, its strict header
    registry): the mailboxes of ``name`` and the defects it reports."""
    raw = f"{name}: {value}\r\nMessage-ID: <1@x.test>\r\n\r\nbody\r\n".encode()
    header = BytesParser(policy=policy.default).parsebytes(raw)[name]
    return [a.addr_spec.lower() for a in header.addresses], [str(d) for d in header.defects]


@settings(max_examples=examples(600), deadline=None)
@given(st.sampled_from(wire.ADDRESS_HEADERS), address_values())
def test_agentmail_and_the_email_package_never_name_different_mailboxes(name: str, value: str) -> None:
    """Whatever agentmail reads from an address header, the email package's strict parse reads
    too, with no defect but the harmless one; the lenient ``getaddresses`` (what older tools and
    3.11's parseaddr read, CVE-2023-27043) finds the same mailboxes; and no display name names
    another address. Otherwise the letter is refused."""
    msg = wire.parse_message(f"{name}: {value}\r\nMessage-ID: <1@x.test>\r\n\r\nbody\r\n".encode(), 1 << 20)
    try:
        read = wire.address_headers(msg).get(name, ())
    except wire.Malformed as exc:
        assert exc.reason == "malformed"
        return
    mailboxes = [a.addr_spec.lower() for a in read]
    strict, defects = _strict(name, value)
    assert mailboxes == strict
    assert set(defects) <= set(headers._HARMLESS_DEFECTS)
    lenient = [addr.lower() for _, addr in email.utils.getaddresses([value]) if addr]
    assert set(lenient) <= set(mailboxes) or not mailboxes
    for address in read:
        assert "@" not in address.display_name or address.display_name.lower() == address.addr_spec.lower()


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
@given(value=address_values())
def test_a_vouched_letter_is_filed_as_the_one_mailbox_every_reader_names_or_refused(
    people: Registry,  # noqa: F811
    value: str,
) -> None:
    """End to end through judge: a person's letter with any From is either quarantined, or
    accepted as the mailbox the email package's strict parse names, and that is carol."""
    raw = vouched(_from(_client_bytes("alpha@bus.test", "Hello"), value))
    verdict = authenticity.judge(raw, people)
    if verdict.route != "accept":
        return
    assert verdict.letter is not None
    strict, defects = _strict("From", value)
    assert strict == [verdict.letter.sender_address] == [CAROL]
    assert set(defects) <= set(headers._HARMLESS_DEFECTS)
