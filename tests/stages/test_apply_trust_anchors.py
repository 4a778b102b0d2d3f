"""The registry and the home are not the checkout's to change (issue 37): where the registry is
tracked in the checkout, a partner's "routine rotation" patch that edits it is refused by
``apply`` (and ``apply --check``), naming each file, as is a patch into the agentmail home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.errors import BadInput
from agentmail.stages import evidence

from ..conftest import OPENER, Cli
from .test_evidence_confinement import clone, commit_all, git, hermetic_git, make_repo  # noqa: F401  (the fixture)

REFUSED = "refused: the patches change what agentmail trusts"


def _tracked_bus(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A checkout whose tracked ``registry/`` is the registry in use (as agentmail's own is), and
    a partner's clone of it. (checkout, partner)"""
    checkout = make_repo(tmp_path / "checkout")
    bus.init(home, checkout / "registry", ["alpha", "beta"], domain="bus.test",
             endpoints={"hold": ["partner.example"]})  # fmt: skip
    commit_all(checkout, "The bus")
    monkeypatch.setenv("AGENTMAIL_REGISTRY", str(checkout / "registry"))
    return checkout, clone(checkout, tmp_path / "partner")


def _mail_patches(home: Path, partner: Path, checkout: Path) -> tuple[AgentMail, str]:
    """alpha mails the partner's last commit; beta (whose registry is the checkout's) reads it."""
    reg = registry_mod.load(checkout / "registry")
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    alpha.send("beta", "Routine rotation", OPENER, attachments=evidence.from_patches("HEAD~1..", partner))
    [letter] = beta.inbox()
    return beta, letter.id


def test_a_patch_that_drops_a_hold_from_the_tracked_registry_is_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout, partner = _tracked_bus(home, tmp_path, monkeypatch)
    bus_toml = partner / "registry" / "bus.toml"
    bus_toml.write_text(bus_toml.read_text().replace('"partner.example"', ""))
    (partner / "quota.py").write_text("LIMIT = 10\n")
    commit_all(partner, "Routine rotation")
    beta, letter = _mail_patches(home, partner, checkout)
    for check in (True, False):
        with pytest.raises(BadInput) as refused:
            beta.apply(letter, checkout, check=check)
        assert str(refused.value).startswith(
            f"{REFUSED} (0001-Routine-rotation.patch: registry/bus.toml (the registry in use)); nothing applied"
        )
    assert git(checkout, "log", "--format=%s") == "The bus\nfirst\n"
    assert registry_mod.load(checkout / "registry").bus.hold == ("partner.example",)


def test_a_patch_that_adds_a_key_to_another_platforms_entry_is_refused_at_the_cli(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    checkout, partner = _tracked_bus(home, tmp_path, monkeypatch)
    entry = partner / "registry" / "platforms" / "beta.toml"
    entry.write_text(entry.read_text().replace("[dkim]", "[dkim]\n# rotated"))
    (partner / "registry" / "platforms" / "gamma.toml").write_text('address = "gamma@bus.test"\n')
    commit_all(partner, "Rotate")
    _, letter = _mail_patches(home, partner, checkout)
    monkeypatch.chdir(checkout)
    for args in (("apply", "--check", letter), ("apply", letter)):
        code, out, err = cli("--as", "beta", *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert "0001-Rotate.patch: registry/platforms/beta.toml (the registry in use)" in err
        assert "0001-Rotate.patch: registry/platforms/gamma.toml (the registry in use)" in err
    assert git(checkout, "status", "--porcelain") == "" and not (checkout / "registry/platforms/gamma.toml").exists()


def test_a_patch_into_the_agentmail_home_is_refused_and_others_land(tmp_path: Path) -> None:
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "state" / "secrets").mkdir(parents=True)
    (fixer / "state" / "secrets" / "beta.key").write_text("planted\n")
    commit_all(fixer, "Plant")
    patches = evidence.from_patches("HEAD~1..", fixer)
    guarded = evidence.guarded_places(target / "state", tmp_path / "elsewhere")
    with pytest.raises(BadInput, match=r"0001-Plant.patch: state/secrets/beta.key \(the agentmail home\)"):
        evidence.apply(patches, target, guarded=guarded)
    assert not (target / "state").exists()
    done = evidence.apply(patches, target, guarded=evidence.guarded_places(tmp_path / "home", tmp_path / "r"))
    assert done.landed and (target / "state" / "secrets" / "beta.key").exists()


def test_by_default_the_home_and_the_registry_it_names_are_guarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    (fixer / "dot").mkdir()
    (fixer / "dot" / "registry").mkdir()
    (fixer / "dot" / "registry" / "bus.toml").write_text('domain = "evil.test"\n')
    commit_all(fixer, "Bus")
    monkeypatch.setenv("AGENTMAIL_HOME", str(target / "dot"))
    monkeypatch.delenv("AGENTMAIL_REGISTRY", raising=False)
    assert evidence.guarded_places() == (
        (target / "dot", "the agentmail home"),
        (target / "dot" / "registry", "the registry in use"),
    )
    with pytest.raises(BadInput, match=r"dot/registry/bus.toml \(the agentmail home\)"):
        evidence.apply(evidence.from_patches("HEAD~1..", fixer), target)


def test_a_guarded_folder_reached_through_a_link_in_the_checkout_is_refused(tmp_path: Path) -> None:
    fixer = make_repo(tmp_path / "fixer")
    target = clone(fixer, tmp_path / "target")
    outside = tmp_path / "registry"
    outside.mkdir()
    (fixer / "conf").mkdir()
    (fixer / "conf" / "bus.toml").write_text("x = 1\n")
    commit_all(fixer, "Conf")
    os.symlink(outside, target / "conf")  # the checkout's own, untracked link to the registry
    with pytest.raises(BadInput, match=r"conf/bus.toml \(the registry in use\)"):
        evidence.apply(evidence.from_patches("HEAD~1..", fixer), target,
                       guarded=evidence.guarded_places(tmp_path / "home", outside))  # fmt: skip


def test_a_registry_of_the_agents_own_never_unguards_the_one_the_environment_names(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """The steered agent writes a registry of its own (``init --force`` keeps this home's keys)
    and applies the partner's patch with ``--registry`` naming it: the registry in use is then
    its own, and the tracked one the environment names was not guarded."""
    checkout, partner = _tracked_bus(home, tmp_path, monkeypatch)
    bus_toml = partner / "registry" / "bus.toml"
    bus_toml.write_text(bus_toml.read_text().replace('"partner.example"', ""))
    commit_all(partner, "Routine rotation")
    _, letter = _mail_patches(home, partner, checkout)
    own = str(tmp_path / "own")
    assert cli("--registry", own, "init", "--force", "--domain", "bus.test", "alpha", "beta")[0] == 0
    monkeypatch.chdir(checkout)
    code, out, err = cli("--registry", own, "--as", "beta", "apply", letter)
    assert (code, out) == (2, "") and "registry/bus.toml (the registry the environment names)" in err, err
    assert registry_mod.load(checkout / "registry").bus.hold == ("partner.example",)
