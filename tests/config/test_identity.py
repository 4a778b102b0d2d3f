"""Who am I: flag, environment, marker, git remote, path hint; the deepest wins, ties fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import identity, registry
from agentmail.errors import BadInput, ConfigError, NotFound


@pytest.fixture
def reg(home: Path, tmp_path: Path) -> registry.Registry:
    r = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    bus.add(home, r, "gamma", repo="git@github.com:org/gamma.git")
    bus.add(home, r, "delta", repo=str(tmp_path))
    return registry.load(home / "registry")


def test_the_flag_wins_over_everything(reg: registry.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTMAIL_PLATFORM", "beta")
    assert identity.resolve(reg, "alpha", None, tmp_path).platform == "alpha"
    assert identity.resolve(reg, None, None, tmp_path).platform == "beta"


def test_a_marker_file_in_the_checkout(reg: registry.Registry, tmp_path: Path) -> None:
    sub = tmp_path / "checkout" / "src"
    sub.mkdir(parents=True)
    (tmp_path / "checkout" / ".agentmail").write_text('platform = "beta"\n')
    assert identity.resolve(reg, None, None, sub).platform == "beta"


def test_the_git_remote_matches_in_any_url_form(reg: registry.Registry, tmp_path: Path) -> None:
    checkout = tmp_path / "gamma-clone"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text('[remote "origin"]\n\turl = https://github.com/org/gamma\n')
    assert identity.resolve(reg, None, None, checkout).platform == "gamma"


def test_a_path_hint_and_the_deepest_match(reg: registry.Registry, tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert identity.resolve(reg, None, None, deep).platform == "delta"
    (tmp_path / "a" / ".agentmail").write_text('platform = "alpha"\n')
    assert identity.resolve(reg, None, None, deep).platform == "alpha"  # deeper than delta's path


def test_ties_fail_instead_of_guessing(home: Path, tmp_path: Path) -> None:
    r = bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    bus.add(home, r, "one", repo=str(tmp_path))
    bus.add(home, r, "two", repo=str(tmp_path))
    with pytest.raises(ConfigError, match="several platforms"):
        identity.resolve(registry.load(home / "registry"), None, None, tmp_path)


def test_nothing_matches_is_not_found(reg: registry.Registry) -> None:
    with pytest.raises(NotFound):
        identity.resolve(reg, None, None, Path("/"))


def test_agent_names_are_validated(reg: registry.Registry, tmp_path: Path) -> None:
    assert identity.resolve(reg, "alpha", "alice", tmp_path).mailbox == "alpha@alice"
    for bad in ("Alice", "a" * 33, "-x", "x y", "../x"):
        with pytest.raises(BadInput):
            identity.resolve(reg, "alpha", bad, tmp_path)
