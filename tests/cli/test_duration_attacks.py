"""Attacks on the one duration grammar through arguments a letter chose (docs/threat/attacks-session6.md)."""

from __future__ import annotations

import pytest

from agentmail import ages
from agentmail.config.registry import Registry
from agentmail.errors import BadInput

from ..conftest import Cli


@pytest.mark.parametrize("blanks", ["\n", "\x1c\x1d\x1e\x1f", "\x85", "\u2028", "\r\n\x0b\x0c"])
def test_the_blanks_a_duration_may_carry_are_never_shown_back(registry: Registry, cli: Cli, blanks: str) -> None:
    """Python's blanks include line and record separators: ``status --stale`` takes them around
    a value (the grammar) and says the value as read, not what was around it."""
    code, out, err = cli("--as", "alpha", "status", "--no-sync", "--stale", f"{blanks}3d{blanks}")
    assert (code, out, err) == (0, "no thread without a move for over 3d\n", "")


def test_a_zero_duration_says_its_value_without_the_blanks_around_it() -> None:
    with pytest.raises(BadInput) as refused:
        ages.duration(" " * 100_000 + "0d" + "\n" * 100_000, "--stale")
    assert str(refused.value) == "--stale '0d' must be more than 0: give 30m, 12h, 3d or 2w"
