"""``trust/authenticity._attachments_over_limits`` exactly (issue 37's mutation run 11): a received
letter's listed attachments are held to this bus's limits — the count, each type and size, the
total — with the limit's own sentence; a letter listing none, or a list that is not one, passes."""

from __future__ import annotations

from typing import Any

import pytest

from agentmail.config.registry import Registry
from agentmail.model import Letter
from agentmail.trust import authenticity

from ..stages.test_guards_exact import _parent


def _letter(extra: dict[str, Any]) -> Letter:
    return _parent(extra=extra)


def _item(name: str = "log.txt", kind: str = "text/plain", size: int = 10) -> dict[str, object]:
    return {"name": name, "type": kind, "size": size}


def test_an_attachment_over_a_limit_is_refused_with_the_limits_sentence(registry: Registry) -> None:
    bus = registry.bus
    too_big = _letter({"attachments": [_item("big.log", size=bus.attach_max_bytes + 1)]})
    assert authenticity._attachments_over_limits(too_big, registry) == (
        f"the letter's attachments break this bus's limits: big.log is {bus.attach_max_bytes + 1} bytes; "
        f"an attachment may be {bus.attach_max_bytes} (bus set attach_max_bytes)"
    )
    odd = _letter({"attachments": [_item("run.exe", "application/x-msdownload")]})
    why = authenticity._attachments_over_limits(odd, registry)
    assert why is not None and why.startswith(
        "the letter's attachments break this bus's limits: run.exe: type application/x-msdownload is not in"
    )
    many = _letter({"attachments": [_item(f"f{n}.txt") for n in range(bus.attach_max_count + 1)]})
    assert authenticity._attachments_over_limits(many, registry) == (
        f"the letter's attachments break this bus's limits: {bus.attach_max_count + 1} attachments; "
        f"this bus takes at most {bus.attach_max_count} (bus set attach_max_count)"
    )


@pytest.mark.parametrize("listed", [None, [], "big.log", {"name": "big.log"}])
def test_a_letter_listing_no_attachments_passes(registry: Registry, listed: object) -> None:
    extra = {} if listed is None else {"attachments": listed}
    assert authenticity._attachments_over_limits(_letter(extra), registry) is None
    assert authenticity._attachments_over_limits(_letter({"attachments": [_item()]}), registry) is None
