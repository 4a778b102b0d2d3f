"""``headers.decoded`` gives a value with no encoded word back as it is, without the email
package: on hostile header text it answers exactly what the package's decoding answers (the
same text, or the same refusal)."""

from __future__ import annotations

from email.errors import HeaderParseError
from email.header import decode_header, make_header

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.letter.headers import Malformed, decoded

from ..depth import examples


def _by_the_package(value: str) -> str:
    try:
        return str(make_header(decode_header(value)))
    except (LookupError, UnicodeError, ValueError, HeaderParseError):
        return "refused"


def _ours(value: str) -> str:
    try:
        return decoded(value, "Subject")
    except Malformed:
        return "refused"


_PIECES = st.one_of(
    st.sampled_from(
        ["=?", "?=", "=?utf-8?q?", "=?utf-8?b?", "=?x?q?a?=", "?q?", "=", "?", " ", "\t", "\r\n ", "\udcff"]
    ),
    st.text(max_size=12),
)


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_the_same_text_as_the_email_package(value: str) -> None:
    assert _ours(value) == _by_the_package(value)


def test_a_value_without_an_encoded_word_is_itself() -> None:
    for value in ["Quota endpoint returns 500", "  spaced\tout  ", "caf\u00e9 \udcff", "a = ? b", "?=x=", ""]:
        assert decoded(value, "Subject") == value == _by_the_package(value)
    assert decoded("=?utf-8?q?caf=C3=A9?=", "Subject") == "caf\u00e9"
