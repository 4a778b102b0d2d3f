"""Guards and trusted verdicts, pinned to their exact outcomes (mutants that the broader tests let
live: tests/MUTATION.md)."""

from __future__ import annotations

import pytest

from agentmail.model import Letter
from agentmail.stages import guards
from agentmail.trust import auth_results

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
        type="reply", body="The quota endpoint fails.", me="alpha", parent=parent, answered_by=answered_by, depth=depth
    )
    assert guards.refusal(out) == why


def test_a_long_path_body_is_quoted_to_80_characters() -> None:
    path = "src/" + "a" * 120 + ".py"
    assert guards.body_refusal(path) == (
        f"the body is only a path ({path[:80]}); the reader cannot open your files — send the content (-b @FILE)"
    )


def test_an_opener_leaning_on_what_the_reader_cannot_see_is_told_so() -> None:
    warnings = guards.opener_warnings("report", "As discussed, the quota endpoint fails.")
    assert warnings[-1] == "'As discussed' leans on something the reader cannot see"
    assert not any("leans on" in w for w in guards.opener_warnings("report", "The quota endpoint fails."))


# --- trusted Authentication-Results -------------------------------------------------------------


def test_an_unreadable_header_with_several_semicolons_is_claimed_by_its_first_field() -> None:
    found = auth_results.read(["mail.bus.test; dkim=pass (broken; spf=pass; x"], TRUSTED)
    assert found.fails == ("unreadable Authentication-Results from mail.bus.test",)


def test_every_header_is_read_past_an_unreadable_or_untrusted_one() -> None:
    for first in ("relay.evil.test; dkim=pass (broken", "relay.evil.test; dkim=pass header.d=bus.test"):
        found = auth_results.read([first, "mail.bus.test; dmarc=fail header.from=bus.test"], TRUSTED)
        assert found.fails == ("dmarc=fail",)


def test_every_result_is_read_past_a_method_that_does_not_count() -> None:
    found = auth_results.read(["mail.bus.test; auth=pass smtp.auth=alpha; spf=fail smtp.mailfrom=bus.test"], TRUSTED)
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
    found = auth_results.read([f"mail.bus.test; {results}"], TRUSTED)
    assert (found.fails, found.dkim_pass_domains) == ((), passes)  # a dmarc pass is read apart (test_writing)


@pytest.mark.parametrize(
    "results,dmarc",
    [
        ("dmarc=pass header.from=People.Test", ("people.test",)),
        ("dmarc=pass", ()),  # no header.from: no domain
        ("dmarc=fail header.from=people.test", ()),  # a fail, named among the fails
        ("dmarc=none header.from=people.test", ()),
        ("dkim=pass header.d=bus.test header.from=people.test", ()),  # a dkim pass is no dmarc pass
        ("spf=pass header.from=people.test", ()),
        ("dmarc=pass header.from=a.test; dmarc=pass header.from=b.test", ("a.test", "b.test")),
    ],
)
def test_only_a_dmarc_pass_names_its_from_domain(results: str, dmarc: tuple[str, ...]) -> None:
    assert auth_results.read([f"mail.bus.test; {results}"], TRUSTED).dmarc_pass_domains == dmarc


def test_the_verdicts_are_read_whole() -> None:
    found = auth_results.read(
        ["mail.bus.test; dkim=pass header.d=bus.test; spf=fail smtp.mailfrom=x.test; dmarc=pass header.from=bus.test"],
        TRUSTED,
    )
    assert found == auth_results.TrustedVerdicts(("spf=fail",), ("bus.test",), ("bus.test",))


# --- follow-ups, the depth cap, the new-thread quota -------------------------------------------------


@pytest.mark.parametrize(
    "parent,why",
    [
        (_parent(type="close"), "thread thr-abc123def0 is closed"),
        (
            _parent(type="ack"),
            "thread thr-abc123def0 ends with beta's ack (01abc), which is never answered; a follow-up continues "
            "only after your own last letter",
        ),
        (
            _parent(type="question"),
            "thread thr-abc123def0 ends with beta's question (01abc); answer it with reply, a follow-up continues "
            "only after your own last letter",
        ),
        (
            _parent(type=""),  # a letter filed without a type (a quarantined one's stand-in)
            "thread thr-abc123def0 ends with beta's letter (01abc); answer it with reply, a follow-up continues "
            "only after your own last letter",
        ),
        (_parent(sender="alpha", state="sent"), None),  # after one's own letter: free to follow up
    ],
)
def test_follow_up_refusal_says_exactly_why(parent: Letter, why: str | None) -> None:
    out = guards.Outbound(type="report", body="Still failing.", me="alpha", parent=parent, follow_up=True, depth=2)
    assert guards.refusal(out) == why


def test_a_held_letter_is_ones_own_and_is_not_answered() -> None:
    out = guards.Outbound(type="reply", body="Thanks.", me="alpha", parent=_parent(state="held"), depth=1)
    assert guards.refusal(out) == "letter 01abc is one you sent; answer the letters you received"


def test_a_quarantined_parent_is_refused_as_such_even_past_the_depth_cap() -> None:
    parent = _parent(state="quarantine", reason="unauthenticated")
    out = guards.Outbound(type="reply", body="Thanks.", me="alpha", parent=parent, depth=guards.MAX_DEPTH)
    assert guards.refusal(out) == "letter 01abc is quarantined (unauthenticated); it cannot be answered"


QUOTA = (
    "new-thread quota reached: alpha opened 3 threads in the last hour (new_threads_per_hour = 3); the next "
    "frees up at {frees}; replies and follow-ups in existing threads are not counted "
    "(raise it: bus set new_threads_per_hour N)"
)


def test_the_new_thread_quota_counts_openers_only_and_says_when_one_frees_up() -> None:
    def opener(kind: str, opened: int, frees: str = "") -> str | None:
        return guards.refusal(
            guards.Outbound(type=kind, body="The quota endpoint fails.", me="alpha", opened_last_hour=opened,
                            quota=3, quota_frees=frees)
        )  # fmt: skip

    assert opener("report", 2) is None
    assert opener("report", 3, "10:42 UTC") == QUOTA.format(frees="10:42 UTC")
    assert opener("report", 3) == QUOTA.format(frees="within the hour")
    assert opener("note", 3) is None  # notes are not counted
    assert guards.refusal(guards.Outbound(type="report", body="x y", me="alpha", opened_last_hour=99)) is None


# --- holding a letter for a person's approval ---------------------------------------------------------


@pytest.mark.parametrize(
    "address,rules,asked,why",
    [
        ("beta@bus.test", (), True, "held on request (--hold)"),
        ("beta@bus.test", ("beta@bus.test",), False, "held by the bus rule hold = 'beta@bus.test'"),
        ("Beta@Bus.Test", ("beta@bus.test",), False, "held by the bus rule hold = 'beta@bus.test'"),
        ("beta+thr-abc123def0@bus.test", ("beta@bus.test",), False, "held by the bus rule hold = 'beta@bus.test'"),
        ("beta@bus.test", ("bus.test",), False, "held by the bus rule hold = 'bus.test'"),
        ('"a@b"@people.test', ("people.test",), False, "held by the bus rule hold = 'people.test'"),
        ("beta@bus.test", ("gamma@bus.test", "people.test"), False, None),
        ("beta+thr-abc123def0@bus.test", ("bus",), False, None),  # a rule names a whole domain or address
        ("beta@bus.test", ("beta",), False, None),  # a local part alone is no rule
        ("beta@bus.test", ("beta+thr-abc123def0@bus.test",), False, None),  # a tagged rule names that tag only
        ("b@bus.test", ("@bus.test",), False, None),
    ],
)
def test_hold_reason_says_which_rule_holds(address: str, rules: tuple[str, ...], asked: bool, why: str | None) -> None:
    assert guards.hold_reason(address, rules, asked) == why


def _to(
    to: str, *, recipients: tuple[str, ...] = (), cc: tuple[str, ...] = (), sender: str = "alpha@bus.test"
) -> Letter:
    return Letter(message_id="<1.alpha@bus.test>", sender="alpha", sender_address=sender, to="", to_address=to,
                  type="report", thread="thr-abc123def0", subject="s", body="b", date="", recipients=recipients, cc=cc)  # fmt: skip


@pytest.mark.parametrize(
    "letter,rules,why",
    [
        (_to("beta@bus.test"), ("beta@bus.test",), "held by the bus rule hold = 'beta@bus.test'"),
        (
            _to("beta@bus.test", cc=("carol@people.test",)),
            ("people.test",),
            "held by the bus rule hold = 'people.test' (carol@people.test is copied)",
        ),  # fmt: skip
        (
            _to("beta@bus.test", recipients=("beta@bus.test", "gamma@bus.test")),
            ("gamma@bus.test",),
            "held by the bus rule hold = 'gamma@bus.test'",
        ),  # fmt: skip
        (
            _to("beta@bus.test", cc=("a@x.test", "carol@people.test")),
            ("carol@people.test",),
            "held by the bus rule hold = 'carol@people.test' (carol@people.test is copied)",
        ),  # fmt: skip
        (_to("beta@bus.test", cc=("carol@people.test",)), ("bus.test",), "held by the bus rule hold = 'bus.test'"),
        (_to("alpha@bus.test"), ("alpha@bus.test",), None),  # a note: the writer's own mailbox
        (_to("alpha@bus.test", cc=("alpha+x@bus.test",)), ("alpha@bus.test",), None),
        (_to("beta@bus.test", cc=("carol@people.test",)), ("evil.test",), None),
    ],
)
def test_letter_hold_reason_judges_every_envelope_recipient(
    letter: Letter, rules: tuple[str, ...], why: str | None
) -> None:
    assert guards.letter_hold_reason(letter, rules, False) == why
    assert guards.letter_hold_reason(letter, rules, True) == "held on request (--hold)"
