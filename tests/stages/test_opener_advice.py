"""The opener advice's text pre-check (stages/guards.py ``opener_warnings``): a body holding none
of a pattern's texts is advised without the search, and the advice is the same as searching every
pattern (the function before it, kept here as the oracle) for any body."""

from __future__ import annotations

import re

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
