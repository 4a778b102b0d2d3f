"""The credential guard's literal pre-check, attacked from the patterns' side: every text a
pattern matches (drawn from the pattern itself, wrapped in any text) holds every group of its
literals, so the pre-check never skips a search that would refuse. The differential in
test_guards.py draws bodies from fragments; this one cannot miss a literal nobody listed."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.stages import guards

from ..depth import examples, suppressed

_PATTERNS = [
    pytest.param(pattern, groups, id=f"{n}-{what}") for n, (pattern, what, groups) in enumerate(guards._CREDENTIALS)
]


@pytest.mark.parametrize(("pattern", "groups"), _PATTERNS)
@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=suppressed(HealthCheck.filter_too_much, HealthCheck.data_too_large),
)
@given(data=st.data())
def test_every_text_a_pattern_matches_holds_each_group_of_its_literals(
    pattern: str, groups: guards._Needles, data: st.DataObject
) -> None:
    match = data.draw(st.from_regex(pattern))
    before, after = data.draw(st.text(max_size=6)), data.draw(st.text(max_size=6))
    text = guards.plain(before + match + after)
    if re.search(pattern, text) is None:  # (the folding of look-alikes can unmake a match)
        return
    folded = text.lower() if text.isascii() else None
    assert all(guards._may_match(text, folded, needles, fold) for needles, fold in groups)
    assert guards.credential_in(before + match + after) is not None
