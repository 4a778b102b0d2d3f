"""The authserv-ids a letter carries (trust/provenance.authserv_ids): what doctor's round trip
shows an operator choosing trusted_authserv_ids. Letter bytes are hostile: an id is shown only
when it is a host name's characters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.trust.provenance import authserv_ids

from ..depth import examples

BODY = b"From: a@x.test\r\nSubject: s\r\n\r\nbody\r\n"


@pytest.mark.parametrize(
    ("headers", "ids"),
    [
        (b"", []),
        (b"Authentication-Results: mx.google.com; dkim=pass header.d=x.test\r\n", ["mx.google.com"]),
        (b"Authentication-Results: MX.Example.ORG 1; spf=pass\r\n", ["mx.example.org"]),  # a version after the id
        (
            b"Authentication-Results: mx.a.test; none\r\nAuthentication-Results: mx.b.test; none\r\n",
            ["mx.a.test", "mx.b.test"],
        ),  # fmt: skip
        (b"Authentication-Results: mx.a.test; none\r\nAuthentication-Results: MX.A.test; none\r\n", ["mx.a.test"]),
        (b"Authentication-Results: evil\x1b[31m.test; dkim=pass\r\n", ["?"]),
        (b"Authentication-Results: ; dkim=pass\r\n", ["?"]),
        (b"Authentication-Results:\r\n  folded.example.org;\r\n  dkim=pass\r\n", ["folded.example.org"]),
    ],
)
def test_each_authserv_id_once_top_first_and_never_as_it_is_when_it_is_no_host_name(
    headers: bytes, ids: list[str]
) -> None:
    assert authserv_ids(headers + BODY) == ids


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=4))
def test_any_header_values_give_host_names_or_a_question_mark(values: list[bytes]) -> None:
    raw = b"".join(b"Authentication-Results: " + v.replace(b"\n", b" ").replace(b"\r", b" ") + b"\r\n" for v in values)
    found = authserv_ids(raw + BODY)
    assert len(found) == len(set(found)) <= len(values)
    for name in found:
        assert name == "?" or (
            name.isascii() and name.replace(".", "").replace("-", "").isalnum() and name == name.lower()
        )
