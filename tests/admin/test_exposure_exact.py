"""``admin/exposure.exposure`` exactly (issue 37's mutation run 11): which git question decides,
asked of real work trees in temporary folders — the tracked files under the home's ``secrets/``
alone, a home whose name git could read as an option, and the names a ``secrets/`` will hold
even when it already holds others."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin.exposure import exposure

from .test_home_exposure import git, hermetic_git  # noqa: F401  (the fixture)


def _home_with_keys(top: Path, name: str) -> Path:
    home = top / name
    (home / "secrets").mkdir(parents=True)
    (home / "secrets" / "alpha.key").write_text("not a real key\n")
    return home


def test_a_tracked_key_under_a_home_named_like_an_option_is_found(tmp_path: Path) -> None:
    # "-home/secrets" after "--" is a path; without it git takes it for an option, fails, and the
    # ignore rule alone (which also names the tracked key) would pass the home.
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("-home/secrets/\n")
    home = _home_with_keys(tmp_path, "-home")
    git(tmp_path, "add", "-f", "--", "-home/secrets/alpha.key")
    assert exposure(home) == (
        f"the agentmail home {home} lies in the git work tree {tmp_path}, which tracks files of its "
        f"-home/secrets/: the private keys may be committed already; run 'git rm -r --cached -home/secrets' "
        f"there, ignore it, and rotate the keys ('agentmail keygen')"
    )


@pytest.mark.parametrize("name", ["README", "XX-zXX"])  # any name, one git could be handed as a path
def test_files_tracked_elsewhere_in_the_work_tree_say_nothing_of_the_keys(tmp_path: Path, name: str) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("home/secrets/\n")
    (tmp_path / name).write_text("a project\n")
    git(tmp_path, "add", "--", name, ".gitignore")
    home = _home_with_keys(tmp_path, "home")
    assert exposure(home) is None


def test_a_secrets_folder_ignored_file_by_file_still_exposes_the_names_to_come(tmp_path: Path) -> None:
    # every file secrets/ holds now is ignored, but the key, the login and a new kind of file
    # written there next are not
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("home/secrets/alpha.key\n")
    home = _home_with_keys(tmp_path, "home")
    assert exposure(home) == (
        f"the agentmail home {home} lies in the git work tree {tmp_path} and its home/secrets/ is not ignored "
        f"there: the private keys are one 'git add -A' from a commit; move the home out (AGENTMAIL_HOME) or add "
        f"'home/secrets/' to {tmp_path / '.gitignore'}"
    )
    (tmp_path / ".gitignore").write_text("home/secrets/alpha.key\nhome/secrets/agentmail*\n")
    assert exposure(home) is None  # the three names of no known kind stand for every future one
