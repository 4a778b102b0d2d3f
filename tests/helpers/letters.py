"""The one plain letter the signing and wire tests start from (alpha's report to beta), so each
test names only what it changes."""

from __future__ import annotations

from agentmail.letter import wire
from agentmail.model import Letter

BURST: dict[str, object] = dict(
    sender_address="alpha@bus.test",
    sender_name="Alpha",
    to_address="beta@bus.test",
    type="report",
    thread="thr-abc123def0",
    subject="Burst",
    body="Fired 14 submits.",
    message_id="<01s.alpha@bus.test>",
)


def burst(**changes: object) -> Letter:
    """alpha's report to beta as a draft, with ``changes`` applied."""
    return wire.draft_letter(**{**BURST, **changes})  # type: ignore[arg-type]


def burst_bytes(**changes: object) -> bytes:
    """The same letter rendered, unsigned."""
    return wire.render(burst(**changes))
