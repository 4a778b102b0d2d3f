"""send40's guard cuts attacked beside the code they replaced (kept here as it was): the
credential scan's literal pre-check as loops, and the advice searched in a lowercased ASCII body
with case-sensitive ASCII-only patterns. Bodies built of what a steered agent or a person might
write near each pattern: mixed case, every ASCII white space (\\x1c-\\x1f too), indented and
quoted lines, non-ASCII look-alikes (the long s, the Kelvin sign, a dotless i) that re's
IGNORECASE folds into ASCII letters. The same credential named, the same advice, the same span."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.stages import guards

from ..depth import examples

_ADVICE_PIECES = st.sampled_from(
    ["I am", "i'M", "This Is", "Platform", "$ ", ">>> ", "Curl ", "PYTHON", "```", "Reproduc", "steps To", "    X",
     "    \x1c", "\x1c", "\x1f", " ", "\t", "\n", "\r", "\x0b", "\x0c", "Output", "Error", "got", "v1.2", "1.2.3",
     "ABCDEF1", "abcdef0123", "2026-01-01", "UTC", "today", "since", "affect", "Users", "all", "Only", "breaks",
     "please", "Could You", "Want", "As Discussed", "see My Last", "my logs", "See above", "_", "x", "9", "-", ".",
     ":", "\x00", "\x7f", "\u017f", "\u212a", "\u0131", "İ", "é"]
)  # fmt: skip


@settings(max_examples=examples(2000), deadline=None)
@given(st.lists(_ADVICE_PIECES, max_size=12).map("".join))
def test_the_advice_is_found_where_the_unicode_search_finds_it(body: str) -> None:
    folded = body.lower() if body.isascii() else None
    for pattern in [p for p, _, _ in guards._ADVICE] + [guards._INVISIBLE]:
        new, old = guards._found(pattern, body, folded), re.search(pattern, body)
        assert (new and new.span()) == (old and old.span())


def _scanned_credential(text: str) -> str | None:
    text = guards.plain(text)
    folded = text.lower() if text.isascii() else None
    for pattern, what, groups in guards._CREDENTIALS:
        if all(guards._may_match(text, folded, needles, fold) for needles, fold in groups) and re.search(pattern, text):
            return what
    return None


_SECRET_PIECES = st.sampled_from(
    ["-----BEGIN ", "RSA ", "PRIVATE KEY", "-----", "AKIA", "ABCDEFGHIJKLMNOP", "ghp_", "github_pat_", "glpat-",
     "npm_", "AIza", "sk_live_", "rk_test_", "xoxb-", "sk-", "sk-ant-", "eyJ", ".", "a" * 12, "A1b2C3d4E5" * 4,
     "export ", "DB_PASSWORD", "password", "PaSsWd", "pwd", "TOKEN", "api_key", "Api-Key", "client_secret", "?token",
     "&key", "=", ":", " ", "\n", "\t", "'", '"', "hunter2hunter2", "\u017f", "\u212a", "\uff1d", "\u200b", "_", "-"]
)  # fmt: skip


@settings(max_examples=examples(2000), deadline=None)
@given(st.lists(_SECRET_PIECES, max_size=10).map("".join))
def test_the_credential_scan_names_what_the_generator_form_named(text: str) -> None:
    assert guards.credential_in(text) == _scanned_credential(text)
