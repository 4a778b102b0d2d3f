"""Which change of a bus setting loosens a guard against the agent (config/settings.py, each
row's ``loosens``): the rules pinned at their boundaries (equal, one more, one less, 0, none),
and every row of the table bound to the rule decided for it, so a row moved to a looser rule,
or a boundary moved by one, fails here."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.config.registry import Endpoint
from agentmail.config.settings import (
    SETTINGS,
    VERDICTS,
    added,
    changed,
    every_set,
    later_or_off,
    lifted,
    moved_or_off,
    never,
    plaintext,
    raised,
    setting,
    towards,
    uncapped,
)

from ..depth import examples

E = "What it loosens."


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [(20, 20, False), (20, 21, True), (20, 19, False), (0, 0, False), (0, 1, True), (1, 0, False)],
)
def test_a_limit_raised_loosens_and_lowered_or_kept_does_not(before: int, after: int, loosens: bool) -> None:
    assert raised(E)(before, after) == (E if loosens else "")


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        (20, 20, False),
        (20, 21, True),
        (20, 19, False),
        (20, 0, True),  # no cap at all
        (1, 0, True),
        (1, 1, False),
        (1, 2, True),
        (0, 0, False),
        (0, 1, False),  # a cap where there was none
        (0, 500, False),
    ],
)
def test_a_cap_where_0_is_none_loosens_when_raised_or_taken_off(before: int, after: int, loosens: bool) -> None:
    assert uncapped(E)(before, after) == (E if loosens else "")


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        (3600, 3600, False),
        (3600, 3601, True),
        (3600, 3599, False),
        (3600, None, True),  # never told
        (None, None, False),
        (None, 3600, False),  # told where nobody was
        (0, None, True),
        (0, 1, True),
    ],
)
def test_a_time_before_people_are_told_loosens_when_later_or_off(
    before: int | None, after: int | None, loosens: bool
) -> None:
    assert later_or_off(E)(before, after) == (E if loosens else "")


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        ((), (), False),
        (("a/b",), ("a/b",), False),
        (("a/b",), (), False),
        (("a/b", "c/d"), ("c/d",), False),
        (("a/b", "c/d"), ("c/d", "a/b"), False),  # the same list in another order
        ((), ("a/b",), True),
        (("a/b",), ("c/d",), True),  # one off, one on: the one on lets more through
        (("a/b",), ("a/b", "c/d"), True),
    ],
)
def test_an_allow_list_loosens_when_an_entry_is_added(
    before: tuple[str, ...], after: tuple[str, ...], loosens: bool
) -> None:
    assert added(E)(before, after) == (E if loosens else "")


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        ("pinned", "aligned", True),
        ("aligned", "aligned", False),
        ("aligned", "pinned", False),
        ("pinned", "pinned", False),
    ],
)
def test_a_policy_loosens_towards_aligned_only(before: str, after: str, loosens: bool) -> None:
    assert towards("aligned", E)(before, after) == (E if loosens else "")


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        (None, None, False),
        (None, "", True),  # the folder marked \Sent, then no copy
        (None, "Sent", True),  # named: perhaps another folder than the one people read
        ("Sent", "Sent", False),
        ("Sent", "", True),
        ("Sent", "Archive", True),
        ("", "", False),
        ("", "Sent", False),  # a copy where there was none
        ("", None, False),
    ],
)
def test_the_sent_copy_loosens_when_moved_or_stopped(before: str | None, after: str | None, loosens: bool) -> None:
    assert moved_or_off(E)(before, after) == (E if loosens else "")


def _at(tls: str) -> Endpoint:
    return Endpoint("mail.bus.test", 587, tls)


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        (_at("starttls"), _at("none"), True),
        (_at("implicit"), _at("none"), True),
        (None, _at("none"), True),
        (_at("none"), _at("none"), False),
        (_at("none"), _at("implicit"), False),
        (_at("implicit"), _at("starttls"), False),  # both prove the server's certificate
        (_at("starttls"), _at("implicit"), False),
        (None, _at("implicit"), False),
        (_at("none"), None, False),
    ],
)
def test_an_endpoint_loosens_when_it_turns_to_plaintext(
    before: Endpoint | None, after: Endpoint | None, loosens: bool
) -> None:
    assert plaintext(E)(before, after) == (E if loosens else "")


@pytest.mark.parametrize(
    ("before", "after", "loosens"),
    [
        (("mail.bus.test",), ("mail.bus.test",), False),
        (("mail.bus.test",), ("evil.test",), True),
        ((), ("evil.test",), True),
        (("mail.bus.test",), (), True),  # whose word counts changed: no direction is the safe one
        (_at("implicit"), _at("implicit"), False),
        (_at("implicit"), Endpoint("mail.bus.test", 588, "implicit"), True),
        (None, None, False),
    ],
)
def test_a_setting_of_whose_word_counts_loosens_on_any_change(before: Any, after: Any, loosens: bool) -> None:
    assert changed(E)(before, after) == (E if loosens else "")


def test_a_certificate_set_loosens_every_time_and_a_setting_that_guards_nothing_never() -> None:
    assert every_set(E)("ca.pem", "ca.pem") == E  # the path stays, the certificate behind it changes
    assert every_set(E)(None, "ca.pem") == E
    assert never(1, 2) == "" and never(None, "x") == "" and never("x", "x") == ""


@pytest.mark.parametrize(
    ("before", "after", "lifts"),
    [
        ((), (), ""),
        (("beta@bus.test",), ("beta@bus.test",), ""),
        (("beta@bus.test",), (), "beta@bus.test"),
        (("beta@bus.test",), ("bus.test",), ""),  # its domain is held: so is it
        (("beta@bus.test",), ("gamma@bus.test",), "beta@bus.test"),
        (("bus.test",), ("beta@bus.test",), "bus.test"),  # narrowed to one address
        (("bus.test",), ("bus.test", "partner.test"), ""),
        ((), ("partner.test",), ""),
        (("a.test", "b.test"), (), "a.test, b.test"),
        (("a.test", "b.test"), ("b.test",), "a.test"),
    ],
)
def test_a_hold_rule_loosens_when_a_rule_is_taken_off_and_says_which(
    before: tuple[str, ...], after: tuple[str, ...], lifts: str
) -> None:
    assert lifted(before, after) == (f"The hold rule stops holding letters for {lifts}." if lifts else "")


# Each row, the rule decided for it, as a (before, after) it loosens on and one it does not.
# None in the first: the row never loosens; in the second: every change of it does.
EP, TLS = Endpoint("mail.bus.test", 993, "implicit"), Endpoint("mail.bus.test", 993, "starttls")
DECIDED: dict[str, tuple[tuple[Any, Any] | None, tuple[Any, Any] | None]] = {
    "name": (None, ("a", "b")),
    "domain": (("bus.test", "other.test"), ("bus.test", "bus.test")),
    "transport": (("smtp+imap", "local"), ("local", "local")),
    "policy": (("pinned", "aligned"), ("aligned", "pinned")),
    "trusted_authserv_ids": (((), ("evil.test",)), (("a",), ("a",))),
    "ca_file": (("ca.pem", "ca.pem"), None),
    "sent_folder": (("Sent", ""), ("", "Sent")),
    "max_size": ((4096, 4097), (4097, 4096)),
    "hold": ((("bus.test",), ()), ((), ("bus.test",))),
    "new_threads_per_hour": ((20, 0), (0, 20)),
    "attach_max_bytes": ((10, 11), (11, 10)),
    "attach_max_total": ((10, 11), (11, 10)),
    "attach_max_count": ((10, 11), (11, 10)),
    "attach_types": (((), ("text/html",)), (("text/html",), ())),
    "auth": (None, ("password", "xoauth2")),
    "stale_after": ((60, None), (None, 60)),
    "smtp": ((None, EP), (EP, EP)),
    "imap": ((EP, None), (EP, EP)),
    "smtp.tls": ((EP, _at("none")), (_at("none"), EP)),
    "imap.tls": ((EP, TLS), (TLS, TLS)),
    "poll_interval": (None, (30.0, 3600.0)),
    "groups.NAME": (None, ((), (("ops", ("alpha",)),))),
}


def test_every_row_of_the_settings_table_is_decided_here() -> None:
    assert list(DECIDED) == [row.name for row in SETTINGS]


@pytest.mark.parametrize("name", list(DECIDED))
def test_each_row_loosens_on_its_rule_and_on_nothing_else(name: str) -> None:
    row = setting(name)
    assert row is not None
    loosening, keeping = DECIDED[name]
    if loosening is not None:
        effect = row.loosens(*loosening)
        assert effect and effect.endswith(".") and "\n" not in effect, name
    if keeping is not None:
        assert row.loosens(*keeping) == "", name


def test_the_rows_that_decide_whose_word_authenticates_an_answer_say_so_to_the_approvers() -> None:
    for name in ("trusted_authserv_ids", "imap", "imap.tls"):
        row = setting(name)
        assert row is not None and row.loosens(None, "x") == VERDICTS
    row = setting("ca_file")
    assert row is not None and row.loosens("ca.pem", "ca.pem") == VERDICTS


def test_each_row_changes_the_bus_field_it_names() -> None:
    fields = {row.name: row.field for row in SETTINGS}
    assert fields["smtp.tls"] == "smtp" and fields["imap.tls"] == "imap" and fields["groups.NAME"] == "groups"
    assert all(field == name for name, field in fields.items() if name not in ("smtp.tls", "imap.tls", "groups.NAME"))


RULES = (raised(E), uncapped(E), added(E), towards("aligned", E), moved_or_off(E), changed(E), never, lifted)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**9))
def test_a_number_setting_never_loosens_both_ways_nor_when_kept(a: int, b: int) -> None:
    for rule in (raised(E), uncapped(E), later_or_off(E)):
        assert rule(a, a) == ""
        assert not (rule(a, b) and rule(b, a)), (a, b)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(["a.test", "b.test", "x@a.test", "y@b.test", "aligned", "pinned", ""]), max_size=4))
def test_no_rule_but_every_set_loosens_on_a_value_kept(values: list[str]) -> None:
    kept = tuple(values)
    for rule in RULES:
        assert rule(kept, kept) == ""
    assert every_set(E)(kept, kept) == E
