"""Registry loading: per-entry validation, one bad entry never breaks the rest."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry
from agentmail.errors import ConfigError


def test_init_writes_bus_platforms_and_owner_only_keys(home: Path) -> None:
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    assert sorted(reg.platforms) == ["alpha", "beta"]
    assert reg.platforms["alpha"].address == "alpha@bus.test"
    secrets = home / "secrets"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    for name in ("alpha", "beta"):
        key = secrets / f"{name}.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert key.read_text().strip() not in (home / "registry" / "platforms" / f"{name}.toml").read_text()


def test_a_bad_platform_entry_is_reported_and_skipped(home: Path) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    folder = home / "registry" / "platforms"
    (folder / "broken.toml").write_text("name = 'broken'\naddress = 'not an address'\n")
    (folder / "garbage.toml").write_text("this is [not toml")
    (folder / "Upper.toml").write_text("name = 'Upper'\naddress = 'upper@bus.test'\n")
    reg = registry.load(home / "registry")
    assert sorted(reg.platforms) == ["alpha", "beta"]
    assert len(reg.problems) == 3
    assert all("skipped" in p for p in reg.problems)


def test_two_entries_cannot_claim_one_address(home: Path) -> None:
    bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    folder = home / "registry" / "platforms"
    text = (folder / "alpha.toml").read_text().replace('name = "alpha"', 'name = "alpha2"')
    (folder / "alpha2.toml").write_text(text)
    with pytest.raises(ConfigError) as refused:
        registry.load(home / "registry")
    assert f"{folder / 'alpha.toml'} and {folder / 'alpha2.toml'} both claim the address alpha@bus.test" in str(
        refused.value
    )


def test_address_lookup_is_exact(home: Path) -> None:
    reg = bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    assert reg.by_address("ALPHA@bus.test") is not None
    for other in ("xalpha@bus.test", "alpha@bus.test.evil", "alpha@bus", "alpha+thr-abcdef@bus.test"):
        assert reg.by_address(other) is None


def test_a_missing_registry_says_what_to_do(home: Path) -> None:
    with pytest.raises(ConfigError, match="AGENTMAIL_REGISTRY=DIR or --registry DIR.*'agentmail init' makes a NEW bus"):
        registry.load(home / "nowhere")


def test_init_refuses_to_clobber_and_validates_names(home: Path) -> None:
    bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    with pytest.raises(ConfigError, match="already exist.*init makes a NEW bus"):
        bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    with pytest.raises(ValueError, match="must match"):
        bus.init(home, home / "other", ["Bad Name"], domain="bus.test")


def test_add_and_keygen_pin_new_keys(home: Path) -> None:
    reg = bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    added = bus.add(home, reg, "gamma", repo="git@example.com:org/gamma.git", domain="partner.test")
    assert added.address == "gamma@partner.test" and added.remotes == ("git@example.com:org/gamma.git",)
    reg = registry.load(home / "registry")
    before = reg.platforms["gamma"]
    rotated = bus.keygen(home, reg, "gamma")
    assert rotated.public_key != before.public_key
    assert registry.load(home / "registry").platforms["gamma"].public_key == rotated.public_key
    assert rotated.txt_record().startswith("v=DKIM1; k=ed25519; p=")


def test_tls_none_is_refused_for_a_remote_host() -> None:
    with pytest.raises(ValueError, match="loopback"):
        bus.endpoints("mail.example.com:587", "mail.example.com:993", ("none",), None, ())
    tables = bus.endpoints("127.0.0.1:587", "127.0.0.1:993", ("starttls", "implicit"), None, ("mail.bus.test",))
    assert (tables["smtp"]["tls"], tables["imap"]["tls"]) == ("starttls", "implicit")


def test_secret_files_readable_by_others_are_refused(home: Path) -> None:
    from agentmail.config.credentials import key_path, read_private_key
    from agentmail.errors import SecretError

    bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    path = key_path(home, "alpha")
    os.chmod(path, 0o644)
    with pytest.raises(SecretError, match="chmod 600"):
        read_private_key(home, "alpha")
    os.chmod(path, 0o600)
    link = path.with_name("beta.key")
    link.symlink_to(path)
    with pytest.raises(SecretError, match="symlink"):
        read_private_key(home, "beta")
