"""The opener advice's text pre-check (stages/guards.py ``opener_warnings``): a body holding none
of a pattern's texts is advised without the search, and the advice is the same as searching every
pattern (the function before it, kept here as the oracle) for any body."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.stages import guards
from agentmail.stages.guards import _ADVICE, _INVISIBLE, opener_warnings

from ..depth import examples


def _searched(kind: str, body: str) -> list[str]:
    """Every pattern searched, as before the pre-check."""
    if kind in guards.TERMINAL_TYPES:
        return []
    warnings = [advice for pattern, advice, _needles in _ADVICE if not re.search(pattern, body)]
    invisible = re.search(_INVISIBLE, body)
    if invisible:
        warnings.append(f"'{invisible.group(0)}' leans on something the reader cannot see")
    return warnings


# Pieces near each pattern's edge: its texts, in other cases, inside longer words, at a line's
# start, and the characters that fold to ASCII letters under IGNORECASE (the Kelvin sign, a long s).
# Written out here, not taken from the texts under test: a text missing from them must show.
_WORDS = """i am|i'm|we are|this is|from the|maintainer|platform|agent for|$ |>>> |curl |python|pytest|agentmail |
git |make |npm |go |cargo |reproduce|reproduction|steps to|output|error|traceback|got|returned|status|expected|
should|according to|per the|documented|spec|contract|previously|version|commit|utc|today|since|affect|impact|
blast|user|users|every|all|only|break|breaks|block|blocks|please|could you|can you|want|need|asking|request|
would like|the issue from earlier|as discussed|as mentioned|see above|see my last|you know the one|
the same bug as before|my logs|my terminal""".replace("\n", "").split("|")
_PIECES = [
    *_WORDS,
    "I AM", "Platform", "abusers", "allow", "alloy", "Expected", "USERS", "$", ">>>", "```", "    x", "\t",
    "pytest -q", "curl -s", "deadbeef", "defaced", "v2.4.1", "1.2", "2026-12-06", "UTC", "since",
    "\u212a", "\u017f", "\u0130", "é", "ǅ", "see my last", "see my previous", "sinCe", "ERROR", "gotten",
]  # fmt: skip
_SEPARATORS = st.sampled_from([" ", "\n", "", "-", ".", "\n    "])
_BODY = st.lists(st.tuples(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), _SEPARATORS), max_size=30).map(
    lambda parts: "".join(piece + separator for piece, separator in parts)
)


@settings(max_examples=examples(600), deadline=None)
@given(kind=st.sampled_from(["report", "question", "ack", "close"]), body=_BODY)
def test_the_pre_check_gives_the_advice_every_search_gives(kind: str, body: str) -> None:
    assert opener_warnings(kind, body) == _searched(kind, body)


@settings(max_examples=examples(200), deadline=None)
@given(body=st.text(max_size=300))
def test_any_text_gets_the_advice_every_search_gives(body: str) -> None:
    assert opener_warnings("report", body) == _searched("report", body)


def test_every_match_of_a_pattern_holds_one_of_its_texts() -> None:
    """What makes skipping the search right: a pattern with texts never matches an ASCII body
    without one of them (checked on bodies built around each text's near misses)."""
    for pattern, advice, needles in _ADVICE:
        for text in needles or ():
            assert re.search(pattern, f"x {text.upper()} y") or re.search(pattern, f"\n{text}x"), (advice, text)
    assert _ADVICE[4][2] is None  # a hex commit id ("defaced") has no text to look for first


def test_each_word_a_pattern_matches_holds_one_of_its_texts() -> None:
    for word in _WORDS + ["    x", "```", "\n$ ls", "\n>>> 1"]:
        for body in (f" {word} ", f" {word.upper()} ", f"\n{word}"):
            for pattern, advice, needles in _ADVICE:
                if needles is not None and re.search(pattern, body):
                    assert any(needle in body.lower() for needle in needles), (advice, word)


def test_a_body_with_none_of_the_texts_is_advised_on_every_count() -> None:
    assert opener_warnings("report", "hello there") == _searched("report", "hello there")
    assert len(opener_warnings("report", "hello there")) == len(_ADVICE)
    assert opener_warnings("report", "\u212a") == _searched("report", "\u212a")  # non-ASCII: searched


# ASCII bodies: searched lowercased with the ASCII-only form of each pattern (guards._folded_form).
# The characters where that could differ: every case, the separators re's \s holds beyond
# (?a)'s (\x1c-\x1f), the word characters at \b's edge, digits and hex.
_ASCII = st.characters(min_codepoint=0, max_codepoint=127)
_ASCII_BODY = st.lists(
    st.tuples(
        st.one_of(st.sampled_from([w for w in _PIECES if w.isascii()]).map(str.upper), st.sampled_from(_PIECES),
                  st.text(_ASCII, max_size=6)),
        st.sampled_from([" ", "\n", "", "_", "\x1c", "\x1f", "\n\x1d", "\n    ", "    ", "\x1e   x", "9", "é"]),
    ),
    max_size=30,
).map(lambda parts: "".join(piece + separator for piece, separator in parts))  # fmt: skip


@settings(max_examples=examples(800), deadline=None)
@given(body=_ASCII_BODY)
def test_an_ascii_body_searched_lowercased_gets_the_advice_every_search_gives(body: str) -> None:
    assert opener_warnings("report", body) == _searched("report", body)


@settings(max_examples=examples(300), deadline=None)
@given(body=st.text(_ASCII, max_size=200))
def test_each_pattern_finds_the_same_span_in_any_ascii_text_lowercased(body: str) -> None:
    for pattern in [*(p for p, _advice, _needles in _ADVICE), _INVISIBLE]:
        before, after = re.search(pattern, body), re.search(guards._folded_form(pattern), body.lower())
        assert (before and before.span()) == (after and after.span()), pattern


def test_re_s_on_ascii_is_the_spelt_out_class() -> None:
    spelt = re.compile(f"[{guards._ASCII_SPACE}]")
    for code in range(128):
        assert bool(re.match(r"\s", chr(code))) == bool(spelt.match(chr(code))), hex(code)


def test_an_ascii_body_is_searched_lowercased_never_with_ignorecase(monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes the advice cheaper: no pattern is searched case-insensitively on an ASCII body
    (IGNORECASE walks a body at half the speed); a non-ASCII body still is, as it was."""
    searched: list[str] = []
    real = re.search

    def search(pattern: str, text: str, *args: object) -> object:
        searched.append(pattern)
        return real(pattern, text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(re, "search", search)
    body = "Reproduce: run it. Expected 2.4.1, got nothing; every user is blocked, please fix. As discussed."
    advice = opener_warnings("report", body)
    assert advice == ["say who you are and what you integrate with",
                      "'As discussed' leans on something the reader cannot see"]  # fmt: skip
    assert searched and not any("i" in p[: p.index(")")] for p in searched)
    searched.clear()
    opener_warnings("report", body + " \u00e9")
    assert searched and all("i" in p[: p.index(")")] for p in searched)
