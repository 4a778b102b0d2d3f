"""Exact answers of ``admin.bus.change_setting`` on its per-platform road (``--platform``): only
``auth`` is set per platform, and the change names the key it changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config.registry import Registry
from agentmail.errors import BadInput


def test_a_platforms_auth_is_changed_and_named(registry: Registry, home: Path) -> None:
    changed = bus.change_setting(home / "registry", "auth", ["xoauth2"], platform="alpha")
    assert changed == bus.Changed("auth", "xoauth2")


@pytest.mark.parametrize("key", ["hold", "AUTH", "auth "])
def test_only_auth_is_set_per_platform(registry: Registry, home: Path, key: str) -> None:
    with pytest.raises(BadInput) as caught:
        bus.change_setting(home / "registry", key, ["xoauth2"], platform="alpha")
    assert str(caught.value) == f"only auth is set per platform (--platform), not {key!r}"
