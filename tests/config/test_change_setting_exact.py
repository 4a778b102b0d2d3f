"""Exact answers of ``admin.bus.change_setting`` on its per-platform road (``--platform``): only
``auth`` is set per platform, and the change names the key it changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.registry import Registry
from agentmail.errors import BadInput

from ..people.test_approval_by_mail import CAROL, mailbox
from ..people.test_loosening_asked import _set_up


def test_a_platforms_auth_is_changed_and_named(registry: Registry, home: Path) -> None:
    changed = bus.change_setting(home / "registry", "auth", ["xoauth2"], platform="alpha")
    assert changed == bus.Changed("auth", "xoauth2") and changed.stored == "xoauth2"
    assert registry_mod.load(home / "registry").named("alpha").auth == "xoauth2"


@pytest.mark.parametrize("key", ["hold", "AUTH", "auth "])
def test_only_auth_is_set_per_platform(registry: Registry, home: Path, key: str) -> None:
    with pytest.raises(BadInput) as caught:
        bus.change_setting(home / "registry", key, ["xoauth2"], platform="alpha")
    assert str(caught.value) == f"only auth is set per platform (--platform), not {key!r}"


def test_a_hold_list_set_to_what_it_is_tells_the_approvers_nothing(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (), approver=True)  # hold: beta@bus.test, carol approving alpha's letters
    before = mailbox(home, CAROL)
    changed = bus.change_setting(root, "hold", ["beta@bus.test"])
    assert changed == bus.Changed("hold", ["beta@bus.test"], guarded=True)
    assert mailbox(home, CAROL) == before  # no change of the hold rule: nobody told, nobody asked


def test_a_hold_list_holding_more_is_told_to_the_approvers_before_it_is_written(registry: Registry, home: Path) -> None:
    root = _set_up(registry, (), approver=True)
    before = len(mailbox(home, CAROL))
    changed = bus.change_setting(root, "hold", ["beta@bus.test", "gamma@bus.test"])
    assert changed == bus.Changed("hold", ["beta@bus.test", "gamma@bus.test"], guarded=True)  # told, not asked
    (told,) = mailbox(home, CAROL)[before:]
    assert "gamma@bus.test" in told.get_content()


def test_a_platforms_auth_takes_one_value(registry: Registry, home: Path) -> None:
    with pytest.raises(BadInput) as caught:
        bus.change_setting(home / "registry", "auth", ["xoauth2", "password"], platform="alpha")
    assert str(caught.value) == "'bus set auth' takes one value"
