"""People's letters under ordinary signatures (issue 24): a person's letter whose vouching
signature leaves MIME headers out is shown only when the text cannot depend on them
(partly_signed, DESIGN §5). A table of real signers' header lists × the letters people write,
each signed for real with dkimpy by the person's domain key, and a property: re-declaring an
unsigned MIME header leaves the shown text byte-identical or quarantines the letter."""

from __future__ import annotations

from email.message import EmailMessage

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.config.registry import Registry
from agentmail.trust import authenticity

from ..depth import suppressed
from ..people.test_writing import client_letter, people, vouched  # noqa: F401  (the fixture)

STRICT = "from:to:subject:date:message-id:in-reply-to:references:mime-version:content-type:content-transfer-encoding"
SIGNERS = {
    # OpenDKIM with no SignHeaders line (Debian's default), From over-signed (notes/mail-in-the-field.md)
    "opendkim-stock": "from:to:subject:date:from",
    "opendkim-stock+thread": "from:to:subject:date:cc:reply-to:in-reply-to:references:from",
    # a provider's list without Content-Transfer-Encoding (Gmail's h=, as seen on its letters)
    "no-cte": "mime-version:references:in-reply-to:from:date:message-id:subject:to:content-type",
    # one without Content-Type (signs MIME-Version and Content-Transfer-Encoding only)
    "no-content-type": "from:to:subject:date:message-id:mime-version:content-transfer-encoding",
    # rspamd's default sign_headers (dkim_signing; over-signing aside)
    "rspamd": (
        "from:sender:reply-to:subject:date:message-id:to:cc:mime-version:content-type:content-transfer-encoding:"
        "resent-to:resent-cc:resent-from:resent-date:in-reply-to:references:list-id:list-help:list-owner:"
        "list-unsubscribe:list-subscribe:list-post:list-unsubscribe-post:openpgp:autocrypt"
    ),
    "strict": STRICT,
}
TO = "alpha+thr-abc123def0@bus.test"
REPLY = "<20261201.alpha.1@bus.test>"


def _plain() -> EmailMessage:
    msg = client_letter(TO, "The quota row is back.\nThanks for the report.\n", charset="us-ascii",
                        in_reply_to=REPLY, references=REPLY)  # fmt: skip
    del msg["Content-Transfer-Encoding"]
    msg["Content-Transfer-Encoding"] = "7bit"
    return msg


def _qp() -> EmailMessage:
    msg = client_letter(TO, "Grüße aus Köln: die Zeile ist zurück.\n", in_reply_to=REPLY)
    msg.replace_header("Content-Transfer-Encoding", "quoted-printable")
    msg.set_payload("Gr=C3=BC=C3=9Fe aus K=C3=B6ln: die Zeile ist zur=C3=BCck.\n")
    return msg


def _base64() -> EmailMessage:
    msg = client_letter(TO, "Привет, строка квоты восстановлена.\n", in_reply_to=REPLY)
    msg.replace_header("Content-Transfer-Encoding", "base64")
    import base64

    msg.set_payload(base64.encodebytes("Привет, строка квоты восстановлена.\n".encode()).decode())
    return msg


def _alternative() -> EmailMessage:
    return client_letter(TO, "The row is *back*.\n", html="<p>The row is <b>back</b>.</p>\n", in_reply_to=REPLY)


def _attachment() -> EmailMessage:
    msg = client_letter(TO, "Log attached.\n", in_reply_to=REPLY)
    msg.add_attachment(b"%PDF-1.4 fake\n" * 20, maintype="application", subtype="pdf", filename="log.pdf")
    return msg


def _mutt_8bit() -> EmailMessage:
    """mutt's way with UTF-8 text (an 8BITMIME server): 8bit, and Content-Disposition: inline."""
    msg = client_letter(TO, "Grüße, die Zeile ist zurück.\n\nOn Tue, Dec 01, 2026, alpha wrote:\n> a quote\n")
    msg.set_payload("Grüße, die Zeile ist zurück.\n\nOn Tue, Dec 01, 2026, alpha wrote:\n> a quote\n".encode(), "utf-8")
    del msg["Content-Transfer-Encoding"]
    msg["Content-Transfer-Encoding"] = "8bit"
    msg["Content-Disposition"] = "inline"
    return msg


def _latin1() -> EmailMessage:
    return client_letter(TO, "Grüße aus Köln.\n", charset="iso-8859-1", in_reply_to=REPLY)


def _tags() -> EmailMessage:
    return client_letter(TO, "Wrap it in <b>bold</b> then.\n", charset="us-ascii", in_reply_to=REPLY)


LETTERS = {"plain-ascii": _plain, "utf8-qp": _qp, "base64": _base64, "alternative-html": _alternative,
           "attachment": _attachment, "mutt-utf8-8bit": _mutt_8bit, "latin1-qp": _latin1, "plain-with-html-tags": _tags}  # fmt: skip


def _judged(people: Registry, kind: str, signer: str) -> authenticity.Verdict:  # noqa: F811
    raw = vouched(LETTERS[kind](), headers=[h.encode() for h in SIGNERS[signer].split(":")])
    return authenticity.judge(raw, people)


ALL_THREE = ("MIME-Version", "Content-Type", "Content-Transfer-Encoding")
SHOWN = {
    "plain-ascii": "The quota row is back.\nThanks for the report.",
    "utf8-qp": "Grüße aus Köln: die Zeile ist zurück.",
    "base64": "Привет, строка квоты восстановлена.",
    "alternative-html": "The row is *back*.",
    "attachment": "Log attached.",
    "mutt-utf8-8bit": "Grüße, die Zeile ist zurück.",
    "latin1-qp": "Grüße aus Köln.",
    "plain-with-html-tags": "Wrap it in <b>bold</b> then.",
}
_UNSIGNED = {"opendkim-stock": ALL_THREE, "opendkim-stock+thread": ALL_THREE, "no-content-type": ("Content-Type",)}
_CHARSET = "no charset can be derived from its bytes: 8-bit bytes that are not UTF-8 need one named"
_TAGS = "as text/plain 7bit it shows 'Wrap it in <b>bold</b> then.'; as text/html 7bit it shows 'Wrap it in bold then.'"
# The quarantined cells; every other cell is accepted with SHOWN[kind].
QUARANTINED = {(signer, kind): why for signer in _UNSIGNED for kind, why in
               (("latin1-qp", _CHARSET), ("plain-with-html-tags", _TAGS))}  # fmt: skip


def _detail(signer: str, why: str) -> str:
    unsigned = _UNSIGNED[signer]
    names = " and ".join(unsigned) if len(unsigned) < 3 else "MIME-Version, Content-Type and Content-Transfer-Encoding"
    return (
        f"the mail server's aligned dkim=pass does not vouch for the MIME headers: people.test's signature does not "
        f"cover {names}, and the body reads more than one way without them ({why}); the person's mail server must "
        f"sign {names} (h=…:{':'.join(h.lower() for h in unsigned)})"
    )


@pytest.mark.parametrize("signer", list(SIGNERS))
@pytest.mark.parametrize("kind", list(LETTERS))
def test_each_signers_list_with_each_letter_a_person_writes(people: Registry, kind: str, signer: str) -> None:  # noqa: F811
    got = _judged(people, kind, signer)
    if (signer, kind) in QUARANTINED:
        assert (got.route, got.reason, got.detail) == (
            "quarantine", "unauthenticated", _detail(signer, QUARANTINED[signer, kind])
        )  # fmt: skip
    else:
        assert got.route == "accept", got.detail
        assert got.letter is not None and (got.letter.type, got.letter.body) == ("human", SHOWN[kind])
        assert got.letter.thread == "thr-abc123def0"


# --- re-declaring what the signature leaves out --------------------------------------------------


def _redeclare(raw: bytes, name: bytes, value: bytes | None, *, add: bool = False) -> bytes:
    """``raw`` with the top-level header ``name`` replaced by ``value`` (None: removed), or with
    one more copy of it (``add``), as a relay could do to a header the signature does not cover."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    fields: list[list[bytes]] = []
    for line in lines:
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1].append(line)
        else:
            fields.append([line])
    ours = [f for f in fields if f[0].lower().startswith(name.lower() + b":")]
    if add or not ours:
        if value is not None:
            fields.append([name + b": " + value])
    else:
        at = fields.index(ours[0])
        fields[at : at + 1] = [] if value is None else [[name + b": " + value]]
    return b"\r\n".join(b"\r\n".join(f) for f in fields) + b"\r\n\r\n" + body


_TYPES = [b"text/plain", b"text/plain; charset=utf-8", b"text/plain; charset=iso-8859-1", b"text/plain; charset=utf-16",
          b"text/plain; charset=koi8-r", b"text/html; charset=utf-8", b"multipart/mixed; boundary=x",
          b'multipart/alternative; boundary="===============0=="', b"multipart/mixed", b"application/octet-stream",
          b"message/rfc822", b"text/plain; charset=utf-7", b"text/plain; charset*=utf-8''x"]  # fmt: skip
_ENCODINGS = [b"7bit", b"8bit", b"binary", b"quoted-printable", b"base64", b"x-uuencode", b"Base64 "]
_MUTATION = st.one_of(
    st.tuples(st.just(b"Content-Type"), st.sampled_from(_TYPES)),
    st.tuples(st.just(b"Content-Transfer-Encoding"), st.sampled_from(_ENCODINGS)),
    st.tuples(st.just(b"MIME-Version"), st.sampled_from([b"1.0", b"2.0", b"1.0 (Apple)"])),
    st.tuples(st.sampled_from([b"Content-Type", b"Content-Transfer-Encoding", b"MIME-Version"]), st.none()),
)
_PARTIAL = ["opendkim-stock", "opendkim-stock+thread", "no-cte", "no-content-type"]
_ACCEPTED = [(s, k) for s in _PARTIAL for k in LETTERS if (s, k) not in QUARANTINED]


@settings(max_examples=150, deadline=None, suppress_health_check=suppressed(HealthCheck.function_scoped_fixture))
@given(cell=st.sampled_from(_ACCEPTED), mutations=st.lists(st.tuples(_MUTATION, st.booleans()), min_size=1, max_size=3))
def test_a_relays_redeclaration_of_an_unsigned_mime_header_shows_the_same_text_or_quarantines(
    people: Registry,  # noqa: F811
    cell: tuple[str, str],
    mutations: list[tuple[tuple[bytes, bytes | None], bool]],
) -> None:
    signer, kind = cell
    signed = SIGNERS[signer].split(":")
    raw = vouched(LETTERS[kind](), headers=[h.encode() for h in signed])
    before = authenticity.judge(raw, people)
    assert before.route == "accept" and before.letter is not None
    changed = raw
    for (name, value), add in mutations:
        if name.decode().lower() in signed:
            continue  # a signed header changed breaks the signature: the trusted MTA would not say pass
        changed = _redeclare(changed, name, value, add=add)
    after = authenticity.judge(changed, people)
    if after.route == "accept":
        assert after.letter is not None and after.letter.body == before.letter.body
    else:
        assert after.route == "quarantine" and after.reason in ("unauthenticated", "malformed"), after.detail


def test_a_base64_body_redeclared_as_7bit_is_quarantined_naming_the_header(people: Registry) -> None:  # noqa: F811
    raw = vouched(_base64(), headers=[h.encode() for h in SIGNERS["no-cte"].split(":")])
    got = authenticity.judge(_redeclare(raw, b"Content-Transfer-Encoding", b"7bit"), people)
    assert (got.route, got.reason) == ("quarantine", "unauthenticated")
    assert (
        got.detail is not None and "as declared they read the signed body otherwise than its bytes allow" in got.detail
    )
    assert got.detail.endswith(
        "the person's mail server must sign Content-Transfer-Encoding (h=…:content-transfer-encoding)"
    )


def test_a_charset_redeclared_under_stock_opendkim_is_quarantined(people: Registry) -> None:  # noqa: F811
    raw = vouched(_qp(), headers=[h.encode() for h in SIGNERS["opendkim-stock"].split(":")])
    got = authenticity.judge(_redeclare(raw, b"Content-Type", b"text/plain; charset=iso-8859-1"), people)
    assert (got.route, got.reason) == ("quarantine", "unauthenticated")
    assert "as declared it shows 'GrÃ¼Ã" in (got.detail or "")


def test_the_dmarc_pass_path_and_agents_keep_their_rules(people: Registry) -> None:  # noqa: F811
    """dmarc=pass alone (no aligned signature) is unchanged; an agent's own letter still needs its
    own signature over every MIME header (signing.verify), which this module never relaxes."""
    dmarc = b"Authentication-Results: mail.bus.test; spf=pass smtp.mailfrom=people.test; dmarc=pass header.from=people.test\r\n"
    got = authenticity.judge(vouched(_plain(), verdict=dmarc, headers=[b"from", b"to"]), people)
    assert got.route == "accept" and got.letter is not None and got.letter.body == SHOWN["plain-ascii"]


def _sign(msg: EmailMessage | bytes, signed: str) -> bytes:
    return vouched(msg, headers=[h.encode() for h in signed.split(":")])


def test_a_letter_every_reading_refuses_alike_stays_malformed(people: Registry) -> None:  # noqa: F811
    msg = client_letter(TO, "x")
    msg.set_content(b"%PDF-1.4\n", maintype="application", subtype="pdf", filename="log.pdf")
    msg.make_mixed()
    got = authenticity.judge(_sign(msg, SIGNERS["opendkim-stock"]), people)
    assert (got.route, got.reason, got.detail) == (
        "quarantine", "malformed", "the person's letter holds no text or HTML part (application/pdf)"
    )  # fmt: skip


def test_an_encoded_multipart_is_refused_as_rfc_2045_says(people: Registry) -> None:  # noqa: F811
    raw = _redeclare(_sign(_alternative(), SIGNERS["no-cte"]), b"Content-Transfer-Encoding", b"base64")
    got = authenticity.judge(raw, people)
    assert (got.route, got.reason) == ("quarantine", "malformed")
    assert got.detail == "the letter is multipart/alternative encoded 'base64' (RFC 2045 §6.4: never encoded)"


def test_only_mime_version_unsigned_reads_as_signed(people: Registry) -> None:  # noqa: F811
    got = authenticity.judge(_sign(_qp(), "from:to:subject:date:content-type:content-transfer-encoding"), people)
    assert got.letter is not None and got.letter.body == SHOWN["utf8-qp"]
    got = authenticity.judge(_redeclare(_sign(_qp(), "from:to:content-type"), b"MIME-Version", b"2.0"), people)
    assert (got.route, got.reason, got.detail) == (
        "quarantine",
        "malformed",
        "the letter declares MIME-Version '2.0', not 1.0",
    )


def test_a_signed_top_level_disposition_is_read_under_a_partial_list(people: Registry) -> None:  # noqa: F811
    msg = _plain()
    msg["Content-Disposition"] = "attachment; filename=notes.txt"
    got = authenticity.judge(_sign(msg, "from:to:subject:date:content-disposition"), people)
    assert (got.route, got.reason) == ("quarantine", "malformed")
    assert got.detail == "the person's letter is disposed as an attachment: a mail client shows no text, only a file"
    msg.replace_header("Content-Disposition", "inline")
    got = authenticity.judge(_sign(msg, "from:to:subject:date:content-disposition"), people)
    assert got.letter is not None and got.letter.body == SHOWN["plain-ascii"]


def test_an_html_document_and_a_nested_multipart_derive_one_reading(people: Registry) -> None:  # noqa: F811
    html = client_letter(TO, "", html="<!DOCTYPE html><html><body><p>The row is <b>back</b>.</p></body></html>\n")
    got = authenticity.judge(_sign(html, SIGNERS["opendkim-stock"]), people)
    assert got.letter is not None and got.letter.body == "The row is back."
    nested = _alternative()
    nested.add_attachment(b"log\n", maintype="application", subtype="octet-stream", filename="a.log")
    got = authenticity.judge(_sign(nested, SIGNERS["opendkim-stock"]), people)  # two boundaries, one text
    assert got.letter is not None and got.letter.body == SHOWN["alternative-html"]


def test_an_unknown_signed_encoding_has_no_reading(people: Registry) -> None:  # noqa: F811
    msg = _plain()
    msg.replace_header("Content-Transfer-Encoding", "x-uuencode")
    got = authenticity.judge(_sign(msg, "from:to:subject:date:content-transfer-encoding"), people)
    assert (got.route, got.reason) == ("quarantine", "unauthenticated")
    assert (got.detail or "").endswith("must sign MIME-Version and Content-Type (h=…:mime-version:content-type)"), (
        got.detail
    )


def test_a_relay_removing_mime_version_above_a_content_type_is_refused(people: Registry) -> None:  # noqa: F811
    got = authenticity.judge(_redeclare(_sign(_qp(), SIGNERS["no-content-type"].replace("mime-version:", "")),
                                        b"MIME-Version", None), people)  # fmt: skip
    assert (got.route, got.reason, got.detail) == (
        "quarantine", "malformed", "the letter declares its content without MIME-Version"
    )  # fmt: skip


def _raw_letter(body: bytes) -> bytes:
    return (
        b"From: Carol <carol@people.test>\r\nTo: " + TO.encode() + b"\r\nSubject: Re: Quota 500s\r\n"
        b"Date: Tue, 01 Dec 2026 05:00:00 +0000\r\nMessage-ID: <20261201.carol.9@people.test>\r\n"
        b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n" + body
    )


def test_a_body_holding_too_many_boundaries_is_ambiguous(people: Registry) -> None:  # noqa: F811
    from agentmail.letter.partly_signed import MAX_BOUNDARIES

    body = b"".join(
        b"--b%d\r\nContent-Type: text/plain\r\n\r\nx\r\n--b%d--\r\n" % (i, i) for i in range(MAX_BOUNDARIES + 1)
    )
    got = authenticity.judge(_sign(_raw_letter(body), SIGNERS["opendkim-stock"]), people)
    assert (got.route, got.reason) == ("quarantine", "unauthenticated")
    assert f"it holds the delimiters of more than {MAX_BOUNDARIES} multipart boundaries" in (got.detail or "")


def test_a_hostile_body_of_delimiter_like_lines_is_judged_in_one_pass(people: Registry) -> None:  # noqa: F811
    """50,000 delimiter-like lines (no boundary: no part headers follow, no closing line): each
    read once (a quadratic scan, 2.5e9 steps, would not finish in the test's timeout), kept as text."""
    body = b"--b0\r\nContent-Type: text/plain\r\n\r\nHi\r\n" + b"--b1\r\n" * 50_000 + b"--b0--\r\n"
    got = authenticity.judge(_sign(_raw_letter(body), SIGNERS["opendkim-stock"]), people)
    assert got.letter is not None and got.letter.body == "\n".join(["Hi", *["--b1"] * 50_000])
