"""One grammar for a duration a person types (``ages.duration``): options (``keygen --rotate``,
``status --stale``, ``digest --since``), settings (``stale_after``) and MCP arguments all read it,
and say what is wrong in the same words."""

from __future__ import annotations

import argparse
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import ages
from agentmail.cli import args
from agentmail.config.registry import Registry
from agentmail.errors import BadInput

from ..conftest import Cli
from ..depth import examples

_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def _expected(text: str) -> int | None:
    """The grammar written out: a whole number (1 to 6 ASCII digits, not 0) and a unit, blanks
    around it allowed."""
    found = re.fullmatch(r"([0-9]{1,6})([mhdw])", text.strip())
    if found is None or int(found.group(1)) == 0:
        return None
    return int(found.group(1)) * _UNIT[found.group(2)]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), (" 3d\n", 259200), ("000001m", 60),
     ("999999w", 999999 * 604800)],
)  # fmt: skip
def test_the_spellings_either_grammar_took_are_taken(text: str, seconds: int) -> None:
    assert ages.duration(text) == seconds
    assert args.duration(text) == float(seconds)


@pytest.mark.parametrize("text", ["", "0d", "7", "7x", "1y", "-1d", "1.5h", "7 d", "1234567m", "\u0663d", "7D"])
def test_what_neither_grammar_took_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(BadInput) as ours:
        ages.duration(text, "--stale")
    assert str(ours.value).startswith(f"--stale {text[:40]!r} ") and "give 30m, 12h, 3d or 2w" in str(ours.value)
    with pytest.raises(argparse.ArgumentTypeError) as typed:
        args.duration(text)
    assert str(typed.value) == str(ours.value).replace("--stale", "window", 1)


@settings(max_examples=examples(300), deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=12),
        st.from_regex(r"\s*[0-9]{1,7}[mhdwMHDWy]?\s*", fullmatch=True),
    )
)
def test_any_text_is_a_duration_or_one_line_of_bad_input(text: str) -> None:
    want = _expected(text)
    try:
        got = ages.duration(text, "window")
    except BadInput as exc:
        assert want is None and "\n" not in str(exc) and str(exc).startswith("window ")
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(str(exc))):
            args.duration(text)
        return
    assert got == want and args.duration(text) == float(want)


def test_the_cli_refuses_a_window_in_the_grammars_words(registry: Registry, cli: Cli) -> None:
    code, _, err = cli("--as", "alpha", "keygen", "--rotate", "0d")
    assert code == 2
    assert err == (
        "agentmail: argument --rotate: window '0d' must be more than 0: give 30m, 12h, 3d or 2w"
        " (see 'agentmail keygen --help')\n"
    )
    code, _, err = cli("--as", "alpha", "status", "--stale", "3 d")
    assert (code, err) == (2, "agentmail: --stale '3 d' is not a duration: give 30m, 12h, 3d or 2w\n")
