"""A person's letter made readable (agentmail/readable.py): the quote cutter and the decoding of
what a mail client sends, pinned with examples and with Hypothesis."""

from __future__ import annotations

from email import message_from_bytes
from email.message import EmailMessage

import dkim
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail import text
from agentmail.config.registry import Person, Registry
from agentmail.letter import mime, readable
from agentmail.trust import authenticity, signing

from ..depth import examples, suppressed

# --- the quote cutter -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,new",
    [
        ("Fixed.\n\nOn Mon, 30 Nov 2026 at 10:00, alpha wrote:\n> broken\n> really", "Fixed."),
        ("Fixed.\n\nOn Mon, 30 Nov 2026 at 10:00, Alpha Agent <alpha@bus.test>\nwrote:\n> broken", "Fixed."),
        ("> is it broken?\nYes.\n> since when?\nSince 2.4.1.", "Yes.\nSince 2.4.1."),  # interleaved
        ("Thanks.\n-- \nCarol\nOn-call", "Thanks."),
        ("Thanks.\n--\nCarol", "Thanks."),  # a client that trimmed the signature's space
        ("See below.\n-----Original Message-----\nFrom: alpha\nbroken", "See below."),
        ("Done.\n\n________________________________\nFrom: alpha <alpha@bus.test>\nSent: Monday", "Done."),
        ("A table:\n____________\nrow 1", "A table:\n____________\nrow 1"),  # a rule, no quoted header
        ("On Monday I wrote the fix.\nIt is deployed.", "On Monday I wrote the fix.\nIt is deployed."),
        ("a -- b\n--x\nc", "a -- b\n--x\nc"),  # not a signature separator
        ("\n\n  \nHello\n\n", "Hello"),
    ],
)
def test_cut_quotes_examples(text: str, new: str) -> None:
    assert readable.cut_quotes(text) == new


def test_a_bare_double_dash_far_from_the_end_is_text() -> None:
    text = "Steps:\n--\n" + "\n".join(f"step {i}" for i in range(12))
    assert readable.cut_quotes(text) == text


_plain_line = st.text(st.characters(codec="utf-8", exclude_characters="\r\n>"), max_size=60).filter(
    lambda s: s.strip() not in ("--", "-- ") and "wrote:" not in s and "Original Message" not in s
    and "Forwarded message" not in s and not s.lstrip().lower().startswith("from:")
)  # fmt: skip
_quoted_line = st.builds(lambda pre, s: pre + ">" + s, st.sampled_from(["", " ", "  "]), _plain_line)


@given(st.lists(st.one_of(_plain_line, _quoted_line), max_size=30), st.lists(_plain_line, max_size=5))
@settings(max_examples=examples(300), deadline=None)
def test_cut_quotes_keeps_every_new_line_in_order_and_no_quoted_or_signature_line(
    lines: list[str], signature: list[str]
) -> None:
    text = "\n".join([*lines, "-- ", *signature])
    cut = readable.cut_quotes(text)
    new = [line for line in lines if ">" not in line]  # plain lines never hold one; quoted ones start with it
    # Exactly the unquoted lines, in order, without the blank ones at either end.
    while new and not new[0].strip():
        new.pop(0)
    while new and not new[-1].strip():
        new.pop()
    assert cut == "\n".join(new)
    assert not any(
        line.lstrip(" ").startswith(">") and len(line) - len(line.lstrip(" ")) <= 3 for line in cut.split("\n")
    )


@given(st.text(max_size=400))
@settings(max_examples=examples(400), deadline=None)
def test_cut_quotes_on_anything_returns_a_selection_of_its_lines(text: str) -> None:
    cut = readable.cut_quotes(text)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept = cut.split("\n") if cut else []
    it = iter(lines)
    assert all(any(line == candidate for candidate in it) for line in kept)  # a subsequence, unchanged
    assert "\r" not in cut


# --- the person's letter, decoded -------------------------------------------------------------

MTA_KEY, _ = signing.generate_keypair()
TRUSTED = b"Authentication-Results: mail.bus.test; dkim=pass header.d=people.test header.s=mail\r\n"
_body = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=200).filter(
    lambda s: s.strip() != ""
)


def _letter(body: str, shape: str, charset: str, cte: str | None) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "Carol <carol@people.test>"
    msg["To"] = "alpha+thr-abc123def0@bus.test"
    msg["Subject"] = "Re: Quota"
    msg["Message-ID"] = "<h1@people.test>"
    if shape == "html":
        msg.set_content(f"<p>{_escape(body)}</p>", subtype="html", charset="utf-8", cte=cte)
    else:
        msg.set_content(body, charset=charset, cte=cte)
        if shape == "alternative":
            msg.add_alternative(f"<p>{_escape(body)}</p>", subtype="html")  # the same words, as clients write it
    return msg


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _people(registry: Registry) -> Registry:
    beta = registry.platforms["beta"]
    platforms = {**registry.platforms, "beta": beta.replace(people=(Person("carol@people.test", writes=True),))}
    return Registry(registry.root, registry.bus.replace(trusted_authserv_ids=("mail.bus.test",)), platforms)


def _vouched(raw: bytes) -> bytes:
    """Signed as the people.test MTA would; bytes no signer would take go unsigned, vouched all
    the same (the verdict line is what judging reads first)."""
    try:
        signed = _sign(raw)
    except (dkim.DKIMException, ValueError, IndexError):  # what dkimpy raises on such bytes
        signed = b""
    return TRUSTED + signed + raw


def _sign(raw: bytes) -> bytes:
    signed: bytes = dkim.sign(raw, b"mail", b"people.test", MTA_KEY.encode(), signature_algorithm=b"ed25519-sha256",
                              include_headers=[b"from", b"to", b"subject", b"message-id", b"mime-version",
                                               b"content-type", b"content-transfer-encoding"], linesep=b"\r\n")  # fmt: skip
    return signed


@given(
    body=_body,
    shape=st.sampled_from(["plain", "alternative"]),
    charset=st.sampled_from(["utf-8"]),
    cte=st.sampled_from([None, "quoted-printable", "base64"]),
)
@settings(
    max_examples=examples(80), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
def test_a_vouched_person_letter_shows_its_new_text_whatever_the_client_encoding(
    registry: Registry, body: str, shape: str, charset: str, cte: str | None
) -> None:
    raw = _letter(body, shape, charset, cte).as_bytes(policy=EmailMessage().policy.clone(linesep="\r\n"))
    verdict = authenticity.judge(_vouched(raw), _people(registry))
    assert verdict.route == "accept", verdict.detail
    assert verdict.letter is not None and verdict.letter.type == "human"
    expected = text.visible(readable.cut_quotes(body.replace("\r\n", "\n").replace("\r", "\n")))
    assert verdict.letter.body.rstrip("\n") == expected.rstrip("\n")


@given(body=_body)
@settings(max_examples=examples(60), deadline=None)
def test_html_text_is_the_texts_words(body: str) -> None:
    msg = _letter(body, "html", "utf-8", None)
    shown = readable.person_text(message_from_bytes(msg.as_bytes()))
    assert "<p>" not in shown
    assert "".join(shown.split()) == "".join(body.split())


@given(junk=st.binary(max_size=300), at=st.integers(min_value=0, max_value=2000))
@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture)
)
def test_hostile_bytes_in_a_vouched_person_letter_give_a_verdict_never_an_exception(
    registry: Registry, junk: bytes, at: int
) -> None:
    raw = _letter("hello", "alternative", "utf-8", None).as_bytes(policy=EmailMessage().policy.clone(linesep="\r\n"))
    at = min(at, len(raw))
    verdict = authenticity.judge(_vouched(raw[:at] + junk + raw[at:]), _people(registry))
    assert verdict.route in ("accept", "quarantine")
    if verdict.route == "accept":
        assert verdict.letter is not None and verdict.letter.type == "human"


@pytest.mark.parametrize("charset", ["utf-7", "x-unknown-charset", "iso-2022-jp"])
def test_a_person_letter_in_an_escaping_or_unknown_charset_is_refused(charset: str) -> None:
    raw = (
        "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=" + charset + "\r\n\r\n+ADw-script+AD4-\r\n"
    ).encode()
    with pytest.raises(mime.Refused, match="charset"):
        readable.person_text(message_from_bytes(raw))


def test_a_letter_with_no_text_part_is_refused_naming_what_it_holds() -> None:
    raw = b"MIME-Version: 1.0\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n"
    with pytest.raises(mime.Refused, match="image/png"):
        readable.person_text(message_from_bytes(raw))


def test_a_forwarded_letter_inside_is_not_shown_as_the_persons_words() -> None:
    inner = EmailMessage()
    inner["From"] = "someone@else.test"
    inner.set_content("Wire the money now.")
    outer = EmailMessage()
    outer["From"] = "carol@people.test"
    outer.set_content("FYI, see the attached letter.")
    outer.add_attachment(inner)
    assert readable.person_text(message_from_bytes(outer.as_bytes())) == "FYI, see the attached letter.\n"
    only = EmailMessage()
    only["From"] = "carol@people.test"
    only.make_mixed()
    only.attach(_as_part(inner))
    with pytest.raises(mime.Refused, match="no text or HTML part"):
        readable.person_text(message_from_bytes(only.as_bytes()))


def _as_part(inner: EmailMessage) -> EmailMessage:
    part = EmailMessage()
    part.set_content(inner)
    return part


# --- exact refusals and cuts the property tests reach only by chance (issue 15) ------------------


def test_a_letter_of_too_many_parts_is_refused() -> None:
    letter = EmailMessage()
    letter.set_content("part 0")
    for n in range(1, readable.MAX_PARTS + 2):  # 52 leaves under the root
        letter.add_attachment(f"part {n}", filename=f"p{n}.txt")
    with pytest.raises(mime.Refused, match=f"^the person's letter has more than {readable.MAX_PARTS} MIME parts$"):
        readable.person_text(message_from_bytes(letter.as_bytes()))


def test_one_part_fewer_is_still_a_letter() -> None:
    letter = EmailMessage()
    letter.set_content("part 0")
    for n in range(1, readable.MAX_PARTS + 1):  # 51 leaves: the limit counts what is left to look at
        letter.add_attachment(f"part {n}", filename=f"p{n}.txt")
    assert readable.person_text(message_from_bytes(letter.as_bytes())) == "part 0\n"


def test_a_transfer_encoding_agentmail_does_not_decode_is_refused() -> None:
    raw = b"MIME-Version: 1.0\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nbegin\r\n"
    with pytest.raises(mime.Refused, match="^the Content-Transfer-Encoding 'x-uuencode' is not one agentmail decodes$"):
        readable.person_text(message_from_bytes(raw))


def test_a_text_part_with_no_payload_is_refused() -> None:
    from email.message import Message

    part = Message()
    part["Content-Type"] = "text/plain"
    with pytest.raises(mime.Refused, match="^the letter's text part cannot be decoded$"):
        readable.person_text(part)


def test_an_attribution_line_that_quotes_nothing_is_text() -> None:
    assert readable.cut_quotes("On Monday, Carol wrote:\nI think so.\n") == "On Monday, Carol wrote:\nI think so."
    assert readable.cut_quotes("Yes.\nOn Monday, Carol wrote:\n> quoted\n") == "Yes."
    assert readable.cut_quotes("Yes.\nOn Monday,\nCarol wrote:\n> quoted\n") == "Yes."
