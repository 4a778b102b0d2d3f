"""Attacks on "a home whose keys are one ``git add -A`` from a push is refused" (issue 37): the
home's secrets/ holds the mailbox logins (``<platform>.env``) beside the keys, so a work tree
that ignores only key files (the common ``*.key`` line), or ignores the folder but not a file in
it, still commits a password."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.admin.doctor import run_checks
from agentmail.admin.exposure import exposure
from agentmail.config.credentials import Login, write_login

from ..conftest import Cli
from .test_home_exposure import git, hermetic_git  # noqa: F401  (the fixture)


def test_a_work_tree_that_ignores_only_key_files_is_refused(home: Path, tmp_path: Path, cli: Cli) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("*.key\n")  # the keys are safe; the login beside them is not
    code, out, err = cli("init", "--domain", "bus.test", "alpha", "beta")
    assert code == 6 and out == "" and err.count("\n") == 1, err
    assert f"lies in the git work tree {tmp_path} and its home/secrets/ is not ignored there" in err


def test_a_login_the_ignore_rules_let_through_is_flagged_by_doctor(home: Path, tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("home/secrets/*\n!home/secrets/alpha.env\n")
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    assert exposure(home) is None  # nothing but the keys yet, and they are ignored
    write_login(home, "alpha", Login("alpha@bus.test", "hunter2"))
    assert "home/secrets/alpha.env" in git(tmp_path, "status", "--porcelain", "--untracked-files=all")
    why = exposure(home)
    assert why is not None and "home/secrets/ is not ignored there" in why
    checks = {c.name: c for c in run_checks(home, reg.root, "alpha", None)}
    assert not checks["home"].ok


@pytest.mark.parametrize("ignore", ["home/secrets/\n", "home/secrets/*\n", "secrets\n", "/home/\n"])
def test_every_way_of_ignoring_the_whole_folder_is_taken(home: Path, tmp_path: Path, ignore: str) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text(ignore)
    bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    write_login(home, "alpha", Login("alpha@bus.test", "hunter2"))
    assert exposure(home) is None
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "secrets" not in status
