"""A home inside a git work tree (issue 37): its private keys must not be one ``git add -A``
from a push. ``init``, ``add``, ``keygen`` and ``bind`` refuse such a home (exit 6, one line);
``doctor`` reports it, and a ``secrets/`` already tracked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.admin.doctor import run_checks
from agentmail.admin.exposure import exposure, work_tree_of
from agentmail.config import registry as registry_mod
from agentmail.errors import ConfigError

from ..conftest import Cli

GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture(autouse=True)
def hermetic_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_init_in_a_home_inside_a_work_tree_is_refused_and_writes_nothing(home: Path, tmp_path: Path,
                                                                        cli: Cli) -> None:  # fmt: skip
    git(tmp_path, "init", "-q")  # the home (tmp_path/home) now lies in a work tree
    code, out, err = cli("init", "--domain", "bus.test", "alpha", "beta")
    assert code == 6 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"the agentmail home {home} lies in the git work tree {tmp_path} and its home/secrets/ is not ignored" in err
    assert f"add 'home/secrets/' to {tmp_path / '.gitignore'}" in err
    assert not (home / "secrets").exists() and not (home / "registry").exists()
    with pytest.raises(ConfigError, match="refusing to init: the agentmail home"):
        bus.init(home, home / "registry", ["alpha"], domain="bus.test", force=True)  # --force is no way round


def test_a_home_whose_secrets_are_ignored_is_taken_and_doctor_says_so(home: Path, tmp_path: Path, cli: Cli) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("home/secrets/\n")
    assert cli("init", "--domain", "bus.test", "alpha", "beta")[0] == 0
    checks = {c.name: c for c in run_checks(home, home / "registry", "alpha", None)}
    assert checks["home"].ok and checks["home"].detail == f"{home}: in {tmp_path}, which ignores its secrets/"
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all").count("secrets") == 0


def test_tracked_secrets_are_flagged_by_doctor_and_refused_by_keygen_add_and_bind(
    home: Path, tmp_path: Path, cli: Cli
) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("home/secrets/\n")
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    git(tmp_path, "add", "-f", "home/secrets/alpha.key")  # ignored now, but tracked already
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 6 and "which tracks files of its home/secrets/: the private keys may be committed already" in out
    with pytest.raises(ConfigError, match="refusing to make a key: .*tracks files of its home/secrets/"):
        bus.keygen(home, reg, "alpha", overlap=3600)
    with pytest.raises(ConfigError, match="refusing to add gamma: "):
        bus.add(home, reg, "gamma")
    assert registry_mod.load(home / "registry").platforms["alpha"] == reg.platforms["alpha"]
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    code, out, err = cli("bind", "alpha", "--dir", str(checkout))
    assert code == 6 and err.startswith("agentmail: refusing to bind: ") and not (checkout / ".agentmail").exists()


def test_a_home_outside_any_work_tree_passes_everywhere(registry: registry_mod.Registry, home: Path,
                                                        tmp_path: Path) -> None:  # fmt: skip
    assert work_tree_of(home) is None and exposure(home) is None
    checks = {c.name: c for c in run_checks(home, home / "registry", "alpha", None)}
    assert checks["home"].ok and checks["home"].detail == f"{home}: in no git work tree"


def test_the_work_tree_is_found_from_a_home_not_made_yet_and_through_a_worktree_file(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    git(tmp_path / "repo", "init", "-q")
    assert work_tree_of(tmp_path / "repo" / "not" / "yet") == tmp_path / "repo"
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / ".git").write_text("gitdir: /nowhere\n")  # a worktree's .git is a file
    assert work_tree_of(tmp_path / "linked" / "home") == tmp_path / "linked"
    # a .git that git cannot read says nothing about the keys being safe
    assert exposure(tmp_path / "linked" / "home") is not None
