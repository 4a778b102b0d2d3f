"""Exact answers of the stall's claim (people/escalation.py ``claim``/``settle``) for a per-home
record that names only half of a claim (written before the claim existed, or by hand): it is
never asked of the server, which would be asked of nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agentmail.people import escalation


class _Unasked:
    """A transport that must not be asked: any claim or mark is a test failure."""

    def claim_reply(self, *args: Any) -> Any:
        raise AssertionError(f"the server was asked: {args}")

    def reply_sent(self, *args: Any) -> Any:
        raise AssertionError(f"the server was told: {args}")


@pytest.mark.parametrize(
    "record",
    [
        {"key": "k", "holder": "alpha 01A"},  # no claim_on: recorded before the claim existed
        {"key": "k", "claim_on": "<1@bus.test>"},  # no holder
        {"key": "k", "holder": ["alpha"], "claim_on": "<1@bus.test>"},
        {"key": "k", "holder": "alpha 01A", "claim_on": 7},
    ],
)
def test_a_record_naming_half_a_claim_is_ours_without_asking_the_server(record: dict[str, Any]) -> None:
    assert escalation.claim(_Unasked(), record) is None  # type: ignore[arg-type]
    escalation.settle(_Unasked(), record)  # type: ignore[arg-type]
