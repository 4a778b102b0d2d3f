"""``demo --home DIR`` builds a new bus and never rewrites one (issue 37; issue 38, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.admin.demo import run_demo
from agentmail.errors import ConfigError

from ..conftest import Cli


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_second_demo_into_a_demo_home_is_refused_in_one_line(cli: Cli, tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    code, out, _ = cli("demo", "--home", str(demo))
    assert code == 0 and "quarantined as unauthenticated" in out
    before = _tree(demo)
    code, out, err = cli("demo", "--home", str(demo))
    assert code == 6 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    assert "holds a bus" in err and "new or empty folder" in err
    assert _tree(demo) == before  # nothing of the first demo rewritten


def test_demo_on_a_home_holding_a_bus_leaves_its_registry_and_keys(cli: Cli, home: Path) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    before = _tree(home)
    code, _, err = cli("--json", "demo", "--home", str(home))
    assert code == 6 and "holds a bus (registry/bus.toml)" in err
    assert _tree(home) == before


def test_demo_on_a_folder_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    used = tmp_path / "project"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not an empty folder"):
        run_demo(used, lambda _: None)
    assert sorted(p.name for p in used.iterdir()) == ["notes.txt"]


def test_demo_into_a_new_or_empty_folder_runs(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = run_demo(empty, lambda _: None)
    assert summary["forgery"]["reason"] == "unauthenticated"
    assert (empty / "registry" / "bus.toml").is_file()
