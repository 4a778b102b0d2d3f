"""The shown text: bytes in, text out (or a refusal that says what was refused)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmail.letter import mime, wire


def shown(headers: str, body: bytes) -> str:
    raw = b"From: a@bus.test\r\nMessage-ID: <1@bus.test>\r\n" + headers.encode() + b"\r\n" + body
    return mime.shown_text(wire.parse_message(raw, 10**6))


PLAIN = "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"


@pytest.mark.parametrize(
    "headers,body,text",
    [
        ("", b"no MIME headers at all\r\n", "no MIME headers at all\n"),
        (PLAIN, b"a \t tab\r\n", "a \t tab\n"),  # no CTE: 7bit
        (PLAIN + "Content-Transfer-Encoding: 8bit\r\n", b"caf\xc3\xa9\r\n", "caf\u00e9\n"),
        (
            PLAIN + "Content-Transfer-Encoding: quoted-printable\r\n",
            b"a =3D b=\r\nc caf=c3=a9=20\r\n",
            "a = bc caf\u00e9 \n",
        ),
        (PLAIN + "Content-Transfer-Encoding: base64\r\n", b"Y2Fmw6kgPSA1\r\nCg==\r\n", "caf\u00e9 = 5\n"),
        (
            'MIME-Version: 1.0 (Apple Mail 16.0)\r\nContent-Type: TEXT/Plain; Charset="UTF-8"; format=flowed\r\n'
            "Content-Transfer-Encoding: 7BIT\r\n",
            b"hi\r\n",
            "hi\n",
        ),
        ("MIME-Version: 1.0\r\nContent-Type: text/plain;\r\n\tcharset=us-ascii\r\n", b"+ADw-\r\n", "+ADw-\n"),
    ],
)
def test_the_one_shape_shown_decodes_exactly(headers: str, body: bytes, text: str) -> None:
    assert shown(headers, body) == text


@pytest.mark.parametrize(
    "headers,body,words",
    [
        ("Content-Type: text/plain; charset=utf-8\r\n", b"x", "without MIME-Version"),
        ("MIME-Version: 2.0\r\n", b"x", "MIME-Version '2.0'"),
        (
            "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-7\r\n",
            b"+ADw-",
            "charset 'utf-7' is not one agentmail shows",
        ),
        ("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=x-klingon\r\n", b"x", "unknown charset 'x-klingon'"),
        (
            "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8; charset=utf-7\r\n",
            b"x",
            "declares charset twice",
        ),
        ("MIME-Version: 1.0\r\nContent-Type: text/plain; charset*=utf-7''\r\n", b"x", "RFC 2231"),
        ("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8 (utf-7)\r\n", b"x", "does not parse"),
        ('MIME-Version: 1.0\r\nContent-Type: text/plain; charset="=?utf-8?q?x?="\r\n', b"x", "unknown charset"),
        (
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n",
            b"--b1\r\n\r\nx\r\n--b1--\r\n",
            "multipart/mixed; agentmail shows only single-part text/plain",
        ),
        ("MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n", b"<p>x", "text/html, not text/plain"),
        (
            "MIME-Version: 1.0\r\nContent-Type: message/rfc822\r\n",
            b"From: x\r\n\r\ny",
            "message/rfc822, not text/plain",
        ),
        (PLAIN, b"caf\xc3\xa9", "declared 7bit but carries 8-bit bytes"),  # undeclared 8-bit is not guessed at
        (PLAIN + "Content-Transfer-Encoding: binary\r\n", b"x", "'binary' is not one agentmail decodes"),
        (PLAIN + "Content-Transfer-Encoding: base64 (really)\r\n", b"eA==", "is not one agentmail decodes"),
        (PLAIN + "Content-Transfer-Encoding: quoted-printable\r\n", b"a =3 b", "not strictly encoded (line 1)"),
        (PLAIN + "Content-Transfer-Encoding: quoted-printable\r\n", b"ok\r\na =ZZ b", "not strictly encoded (line 2)"),
        (PLAIN + "Content-Transfer-Encoding: quoted-printable\r\n", b"caf\xc3\xa9", "not strictly encoded"),
        (PLAIN + "Content-Transfer-Encoding: quoted-printable\r\n", b"trailing \r\nx", "trailing white space (line 1)"),
        (PLAIN + "Content-Transfer-Encoding: base64\r\n", b"Y2Fm w6k=", "base64 body is not strictly encoded"),
        (PLAIN + "Content-Transfer-Encoding: base64\r\n", b"Y2Fmw6k=Y2Fm", "base64 body is not strictly encoded"),
        (PLAIN + "Content-Transfer-Encoding: base64\r\n", b"Y2F", "base64 body is not strictly encoded"),
        (PLAIN + "Content-Transfer-Encoding: 8bit\r\n", b"caf\xe9", "not valid utf-8"),
        (
            "MIME-Version: 1.0\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: 8bit\r\n",
            b"caf\xc3\xa9",
            "not valid us-ascii",
        ),
        (PLAIN + "Content-Type: text/plain; charset=utf-7\r\n", b"x", "2 Content-Type headers"),
    ],
)
def test_anything_needing_a_guess_is_refused_saying_what(headers: str, body: bytes, words: str) -> None:
    with pytest.raises(mime.Refused) as caught:
        shown(headers, body)
    assert words in str(caught.value)


def test_wire_reports_a_refusal_as_malformed() -> None:
    raw = b"From: a@bus.test\r\nMessage-ID: <1@bus.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\nx"
    with pytest.raises(wire.Malformed) as caught:
        wire.body_text(wire.parse_message(raw, 10**6))
    assert (caught.value.reason, caught.value.detail) == ("malformed", "the letter is text/html, not text/plain")


@pytest.mark.parametrize(
    "extra,words",
    [
        ("Content-Type: text/plain; charset=utf-7\r\n", "2 Content-Type headers"),
        ("content-transfer-encoding: base64\r\n", "2 Content-Transfer-Encoding headers"),
        ("Content-Type : text/plain\r\n", "2 Content-Type headers"),  # DKIM reads the name with the space dropped
        ("Content-Language : en\r\n", "parser and DKIM read the letter's Content-Language header differently"),
    ],
)
def test_a_mime_header_twice_or_read_two_ways_is_named(extra: str, words: str) -> None:
    raw = (
        b"From: a@bus.test\r\nMessage-ID: <1@bus.test>\r\n"
        + PLAIN.encode()
        + b"Content-Transfer-Encoding: 7bit\r\n"
        + extra.encode()
        + b"\r\nx"
    )
    problem = mime.header_problem(raw, wire.parse_message(raw, 10**6))
    assert problem is not None and words in problem


def test_plain_mime_headers_have_no_problem() -> None:
    raw = b"From: a@bus.test\r\n" + PLAIN.encode() + b"Content-Transfer-Encoding: 7bit\r\n\r\nx"
    assert mime.header_problem(raw, wire.parse_message(raw, 10**6)) is None


_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
_VALUES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


@given(params=st.dictionaries(_NAMES, _VALUES, max_size=4), quoted=st.booleans())
def test_property_content_type_and_disposition_share_one_parameter_grammar(
    params: dict[str, str], quoted: bool
) -> None:
    """Issue 27: one MIME parameter grammar (mime._parameters) for a Content-Type and a part's
    Content-Disposition: the same parameters read the same, quoted or bare tokens alike."""

    def written(value: str) -> str:
        token = value and all(c.isalnum() or c in "!#$%&'*+-.^_`{|}~" for c in value)
        if token and not quoted:
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    tail = "".join(f"; {name}={written(value)}" for name, value in params.items())
    assert mime.parse_content_type("Text/Plain" + tail) == ("text/plain", params)
    assert mime.parse_disposition("Attachment" + tail, "the part") == ("attachment", params)


def test_a_disposition_keeps_its_own_refusals_in_the_one_grammar() -> None:
    assert mime.parse_disposition("attachment; filename*=utf-8''a.txt", "x") == (
        "attachment",
        {"filename*": "utf-8''a.txt"},
    )
    with pytest.raises(mime.Refused, match="the part declares filename twice"):
        mime.parse_disposition("attachment; filename=a; FILENAME=b", "the part")
    with pytest.raises(mime.Refused, match="^the part does not parse$"):
        mime.parse_disposition("attachment; =", "the part")
    with pytest.raises(mime.Refused, match="RFC 2231"):
        mime.parse_content_type("text/plain; name*=utf-8''a.txt")
