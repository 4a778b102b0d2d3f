"""Who approves, who follows or writes, the keys and ``init --force`` are asked of the approvers by
the library (issue 37, attack E), for every caller: through the Python API ``admin.bus``'s
``set_person``, ``keygen``, ``retire`` and ``init(force=True)`` are Refused (exit 4), nothing
written and the change mailed to the approvers, until one of them approved it by mail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import key_path
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, NotFound, Refused

from .test_approval_by_mail import CAROL, answer, mailbox
from .test_loosening_asked import _files, _set_up

MALLORY = "mallory@evil.test"


def _asked(home: Path) -> list[str]:
    return [str(m["Subject"]).strip() for m in mailbox(home, CAROL) if "Approve? a change: " in str(m["Subject"])]


def _refused_then_approved(home: Path, root: Path, change: Callable[[], None], subject: str) -> None:
    """``change`` (a call) is Refused with nothing written and one ask, worded ``subject``;
    carol approves it by mail; the call then goes through."""
    before = _files(root)
    keys = sorted(p.read_bytes() for p in (home / "secrets").glob("*.key"))
    with pytest.raises(Refused, match="waits for an approver"):
        change()
    assert _files(root) == before and sorted(p.read_bytes() for p in (home / "secrets").glob("*.key")) == keys
    assert _asked(home) == [f"Approve? a change: {subject}"]
    with pytest.raises(Refused, match="still waits"):
        change()  # asked once, not twice
    (ask,) = [m for m in mailbox(home, CAROL) if subject in str(m["Subject"])]
    answer(home, ask, "approve")
    change()
    assert _files(root) != before


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        ({"approves": True}, "--approves"),
        ({"follows": True}, "--follows"),
        ({"writes": True}, "--writes"),
    ],
)
def test_through_the_api_listing_an_approver_a_follower_or_a_writer_waits_for_an_approver(
    registry: Registry, home: Path, flags: dict[str, bool], shown: str
) -> None:
    root = _set_up(registry, (), approver=True)
    given = {"follows": False, "writes": False, **flags}

    def change() -> None:
        bus.set_person(registry_mod.load(root), "alpha", MALLORY, **given)

    _refused_then_approved(home, root, change, f"agentmail person alpha {MALLORY} {shown}")
    (listed,) = [p for p in registry_mod.load(root).named("alpha").people if p.address == MALLORY]
    assert (listed.approves, listed.follows, listed.writes) == (
        given.get("approves", False),
        given["follows"],
        given["writes"],
    )


def test_through_the_api_a_person_change_that_loosens_nothing_is_not_asked(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (), approver=False)
    bus.set_person(registry_mod.load(root), "alpha", MALLORY, follows=True, writes=True)
    bus.set_person(registry_mod.load(root), "alpha", CAROL, follows=False, writes=False, approves=True)
    bus.set_person(registry_mod.load(root), "alpha", MALLORY, follows=False, writes=True)  # a copy taken away
    bus.set_person(registry_mod.load(root), "alpha", MALLORY, follows=False, writes=False, remove=True)
    assert [p.address for p in registry_mod.load(root).named("alpha").people] == [CAROL] and _asked(home) == []


def test_through_the_api_a_new_key_waits_for_an_approver(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (), approver=True)
    selector = registry_mod.load(root).named("alpha").selector

    def change() -> None:
        bus.keygen(home, registry_mod.load(root), "alpha")

    _refused_then_approved(home, root, change, "agentmail --as alpha keygen")
    assert registry_mod.load(root).named("alpha").selector != selector


def test_through_the_api_retiring_the_old_key_waits_for_an_approver(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (), approver=False)
    bus.keygen(home, registry_mod.load(root), "alpha", overlap=3600.0)  # before anyone approves
    bus.set_person(registry_mod.load(root), "alpha", CAROL, follows=False, writes=False, approves=True)

    def change() -> None:
        bus.retire(registry_mod.load(root), "alpha", force=True)

    _refused_then_approved(home, root, change, "agentmail --as alpha keygen --retire")
    assert registry_mod.load(root).named("alpha").retiring is None


def test_through_the_api_init_force_over_a_bus_with_approvers_waits_for_an_approver(
    registry: Registry, home: Path
) -> None:
    root = _set_up(registry, (), approver=True)

    def change() -> None:
        bus.init(home, root, ["alpha", "beta"], domain="bus.test", force=True)

    _refused_then_approved(home, root, change, "agentmail init --force alpha beta")
    assert registry_mod.load(root).named("alpha").people == ()


def test_a_key_change_refused_anyway_is_refused_before_anyone_is_asked(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (), approver=True)
    before = _files(root)
    with pytest.raises(NotFound):
        bus.retire(registry_mod.load(root), "alpha")  # no previous key
    with pytest.raises(BadInput):
        bus.keygen(home, registry_mod.load(root), "alpha", overlap=1e9)  # beyond the longest window
    with pytest.raises(BadInput):
        bus.set_person(registry_mod.load(root), "alpha", "Mallory <mallory@evil.test>", follows=True, writes=False)
    assert _files(root) == before and _asked(home) == [] and key_path(home, "alpha").exists()
