"""Attacks on "apply never changes the registry in use" (issue 37): what the registry reads may
lie elsewhere in the checkout, reached through a link inside the registry (an entry, or the
whole platforms/ folder, kept with the partner files it names). A patch to the file the link
leads to changes the registry as surely as one to the registry's own path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.errors import BadInput
from agentmail.stages import evidence

from ..conftest import Cli
from .test_apply_trust_anchors import _mail_patches
from .test_evidence_confinement import clone, commit_all, git, hermetic_git, make_repo  # noqa: F401  (the fixture)

REFUSED = "refused: the patches change what agentmail trusts"


def _linked_bus(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_folder: bool) -> tuple[Path, Path]:
    """A checkout whose registry in use reads beta's entry (or all of platforms/) through a
    tracked link to ``partners/``; a partner's clone. (checkout, partner)"""
    checkout = make_repo(tmp_path / "checkout")
    bus.init(home, checkout / "registry", ["alpha", "beta"], domain="bus.test")
    platforms = checkout / "registry" / "platforms"
    (checkout / "partners").mkdir()
    if whole_folder:
        for entry in platforms.iterdir():
            entry.rename(checkout / "partners" / entry.name)
        platforms.rmdir()
        platforms.symlink_to(os.path.join("..", "partners"))
    else:
        (platforms / "beta.toml").rename(checkout / "partners" / "beta.toml")
        (platforms / "beta.toml").symlink_to(os.path.join("..", "..", "partners", "beta.toml"))
    assert sorted(registry_mod.load(checkout / "registry").platforms) == ["alpha", "beta"]
    commit_all(checkout, "The bus")
    monkeypatch.setenv("AGENTMAIL_REGISTRY", str(checkout / "registry"))
    return checkout, clone(checkout, tmp_path / "partner")


def test_a_patch_to_the_file_a_registry_entry_links_to_is_refused(home: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    checkout, partner = _linked_bus(home, tmp_path, monkeypatch, whole_folder=False)
    entry = partner / "partners" / "beta.toml"
    entry.write_text(entry.read_text().replace("[dkim]", "[dkim]\n# rotated"))
    commit_all(partner, "Routine rotation")
    beta, letter = _mail_patches(home, partner, checkout)
    for check in (True, False):
        with pytest.raises(BadInput) as refused:
            beta.apply(letter, checkout, check=check)
        assert str(refused.value).startswith(
            f"{REFUSED} (0001-Routine-rotation.patch: partners/beta.toml (the registry in use)); nothing applied"
        )
    assert git(checkout, "log", "--format=%s") == "The bus\nfirst\n"


def test_a_new_entry_in_a_linked_platforms_folder_is_refused_at_the_cli(home: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        cli: Cli) -> None:  # fmt: skip
    checkout, partner = _linked_bus(home, tmp_path, monkeypatch, whole_folder=True)
    (partner / "partners" / "gamma.toml").write_text('address = "gamma@bus.test"\n')
    commit_all(partner, "Rotate")
    _, letter = _mail_patches(home, partner, checkout)
    monkeypatch.chdir(checkout)
    for args in (("apply", "--check", letter), ("apply", letter)):
        code, out, err = cli("--as", "beta", *args)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "0001-Rotate.patch: partners/gamma.toml (the registry in use)" in err
    assert not (checkout / "partners" / "gamma.toml").exists()


def test_a_patch_beside_the_linked_files_still_lands(home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    checkout, partner = _linked_bus(home, tmp_path, monkeypatch, whole_folder=False)
    (partner / "partners" / "README").write_text("partner files\n")
    (partner / "quota.py").write_text("LIMIT = 10\n")
    commit_all(partner, "Docs")
    beta, letter = _mail_patches(home, partner, checkout)
    assert beta.apply(letter, checkout).landed
    assert (checkout / "partners" / "README").read_text() == "partner files\n"


def test_the_places_links_lead_to_are_looked_for_near_the_top_and_boundedly(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    place = tmp_path / "home"
    (place / "a" / "b" / "c").mkdir(parents=True)
    (place / "near").symlink_to(tmp_path / "elsewhere")
    (place / "a" / "b" / "deep").symlink_to(tmp_path / "deep")
    (place / "a" / "b" / "c" / "too-deep").symlink_to(tmp_path / "too-deep")
    real = os.path.realpath
    assert sorted(evidence._real_places(place)) == sorted(
        [real(place), real(tmp_path / "elsewhere"), real(tmp_path / "deep")]
    )
    assert evidence._real_places(tmp_path / "missing") == [real(tmp_path / "missing")]
    assert evidence._guarded_paths([("p", "new/folder/x")], tmp_path, [(place, "h")]) == []  # folders not made yet
    monkeypatch.setattr(evidence, "_LINK_LOOKS", 1)  # a home of many files: the walk stops, never the apply
    assert len(evidence._real_places(place)) <= 2


_BIND = """
import subprocess, sys
from pathlib import Path
from agentmail.stages import evidence
base = Path(sys.argv[1])
subprocess.run(["mount", "--bind", str(base / "home"), str(base / "checkout" / "mnt")], check=True)
places = [(base / "home" / "registry", "the registry in use")]
print(evidence._guarded_paths([("p", "mnt/registry/platforms/gamma.toml"), ("p", "mnt/notes.txt"), ("p", "a.py")],
                              base / "checkout", places))
"""


def test_the_registry_under_another_name_through_a_bind_mount_is_refused(tmp_path: Path) -> None:
    """A container that mounts the home into the workspace too: one folder, two paths, no link."""
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs 'unshare -rm' (user and mount namespaces) to make a bind mount without privileges")
    (tmp_path / "home" / "registry" / "platforms").mkdir(parents=True)
    (tmp_path / "checkout" / "mnt").mkdir(parents=True)
    done = subprocess.run(["unshare", "-rm", sys.executable, "-c", _BIND, str(tmp_path)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "['p: mnt/registry/platforms/gamma.toml (the registry in use)']"
