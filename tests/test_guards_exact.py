"""Guards and trusted verdicts, pinned to their exact outcomes (mutants that the broader tests let
live: tests/MUTATION.md)."""

from __future__ import annotations

import pytest

from agentmail import guards, verdicts
from agentmail.model import Letter

TRUSTED = ("mail.bus.test",)


def _parent(**fields: object) -> Letter:
    base: dict[str, object] = {
        "message_id": "<01abc@bus.test>",
        "sender": "beta",
        "sender_address": "beta@bus.test",
        "to": "alpha",
        "to_address": "alpha@bus.test",
        "type": "report",
        "thread": "thr-abc123def0",
        "subject": "s",
        "body": "b",
        "date": "",
        "id": "01abc",
        "state": "unread",
    }
    return Letter(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "parent,answered_by,depth,why",
    [
        (
            _parent(state="quarantine", reason="unauthenticated"),
            None,
            1,
            "letter 01abc is quarantined (unauthenticated); it cannot be answered",
        ),
        (_parent(state="sent"), None, 1, "letter 01abc is one you sent; answer the letters you received"),
        (_parent(state="outbox"), None, 1, "letter 01abc is one you sent; answer the letters you received"),
        (_parent(state="failed"), None, 1, "letter 01abc is one you sent; answer the letters you received"),
        (_parent(type="ack"), None, 1, "letter 01abc is an ack, which is never answered"),
        (_parent(type="close"), None, 1, "letter 01abc is a close, which is never answered"),
        (_parent(type="note"), None, 1, "letter 01abc is a note, which is never answered"),
        (
            _parent(),
            "01def",
            1,
            "letter 01abc was already answered (by letter 01def); one reply per letter per platform",
        ),
        (
            _parent(),
            "alpha 01def",
            1,
            "letter 01abc was already answered (by alpha, letter 01def); one reply per letter per platform",
        ),
        (
            _parent(),
            None,
            guards.MAX_DEPTH,
            f"thread thr-abc123def0 is {guards.MAX_DEPTH} letters deep (cap {guards.MAX_DEPTH}); it needs a human",
        ),
        (_parent(), None, guards.MAX_DEPTH - 1, None),
        (_parent(state="read", type="question"), None, 1, None),
    ],
)
def test_reply_refusal_says_exactly_why(parent: Letter, answered_by: str | None, depth: int, why: str | None) -> None:
    out = guards.Outbound(
        kind="reply", body="The quota endpoint fails.", me="alpha", parent=parent, answered_by=answered_by, depth=depth
    )
    assert guards.refusal(out) == why


def test_a_long_path_body_is_quoted_to_80_characters() -> None:
    path = "src/" + "a" * 120 + ".py"
    assert guards.body_refusal(path) == (
        f"the body is only a path ({path[:80]}); the reader cannot open your files — send the content (-b @FILE)"
    )


def test_an_opener_leaning_on_what_the_reader_cannot_see_is_told_so() -> None:
    warnings = guards.opener_warnings("report", "As discussed, the quota endpoint fails.")
    assert warnings[-1] == "opener: 'As discussed' leans on something the reader cannot see"
    assert not any("leans on" in w for w in guards.opener_warnings("report", "The quota endpoint fails."))


# --- trusted Authentication-Results -------------------------------------------------------------


def test_an_unreadable_header_with_several_semicolons_is_claimed_by_its_first_field() -> None:
    found = verdicts.read(["mail.bus.test; dkim=pass (broken; spf=pass; x"], TRUSTED)
    assert found.fails == ("unreadable Authentication-Results from mail.bus.test",)


def test_every_header_is_read_past_an_unreadable_or_untrusted_one() -> None:
    for first in ("relay.evil.test; dkim=pass (broken", "relay.evil.test; dkim=pass header.d=bus.test"):
        found = verdicts.read([first, "mail.bus.test; dmarc=fail header.from=bus.test"], TRUSTED)
        assert found.fails == ("dmarc=fail",)


def test_every_result_is_read_past_a_method_that_does_not_count() -> None:
    found = verdicts.read(["mail.bus.test; auth=pass smtp.auth=alpha; spf=fail smtp.mailfrom=bus.test"], TRUSTED)
    assert found.fails == ("spf=fail",)


@pytest.mark.parametrize(
    "results,passes",
    [
        ("dkim=pass header.d=bus.test", ("bus.test",)),  # no header.s: still a pass
        ("dkim=pass header.d=Bus.Test header.s=mail", ("bus.test",)),
        ("dkim=pass", ()),  # no header.d: no domain
        ("dkim=neutral header.d=bus.test", ()),
        ("spf=pass smtp.mailfrom=bus.test; dmarc=pass header.from=bus.test", ()),
    ],
)
def test_only_a_dkim_pass_names_a_passing_domain(results: str, passes: tuple[str, ...]) -> None:
    found = verdicts.read([f"mail.bus.test; {results}"], TRUSTED)
    assert (found.fails, found.dkim_pass_domains) == ((), passes)  # a dmarc pass is read apart (test_writing)
