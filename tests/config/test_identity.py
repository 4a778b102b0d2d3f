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


def test_a_deeper_path_hint_wins_over_a_shallower_git_remote(home: Path, tmp_path: Path) -> None:
    """DESIGN §4: among markers, remotes and path hints the deepest match wins, whatever its kind."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:org/mono.git\n')
    deeper = repo / "sub" / "deeper"
    deeper.mkdir(parents=True)
    r = bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    bus.add(home, r, "mono", repo="https://github.com/org/mono")
    bus.add(home, r, "inner", repo=str(repo / "sub"))
    reg = registry.load(home / "registry")
    assert identity.resolve(reg, None, None, deeper).platform == "inner"
    assert identity.resolve(reg, None, None, repo / "sub").platform == "inner"
    assert identity.resolve(reg, None, None, repo).platform == "mono"  # above the hint: the remote
    (deeper / ".agentmail").write_text('platform = "alpha"\n')
    assert identity.resolve(reg, None, None, deeper).platform == "alpha"  # deeper still: the marker


def test_at_the_same_depth_a_marker_wins_over_a_path_hint(reg: registry.Registry, tmp_path: Path) -> None:
    (tmp_path / ".agentmail").write_text('platform = "beta"\n')  # delta's path hint is tmp_path too
    assert identity.resolve(reg, None, None, tmp_path).platform == "beta"


def test_a_mistyped_platform_is_bad_input_from_the_flag_or_the_environment(
    reg: registry.Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(BadInput, match="did you mean alpha"):
        identity.resolve(reg, "alpah", None, tmp_path)
    monkeypatch.setenv("AGENTMAIL_PLATFORM", "bta")
    with pytest.raises(BadInput, match="no platform 'bta'"):
        identity.resolve(reg, None, None, tmp_path)
    (tmp_path / ".agentmail").write_text('platform = "gone"\n')  # a marker is configuration: exit 6
    monkeypatch.delenv("AGENTMAIL_PLATFORM")
    with pytest.raises(ConfigError, match="no platform 'gone'"):
        identity.resolve(reg, None, None, tmp_path)
