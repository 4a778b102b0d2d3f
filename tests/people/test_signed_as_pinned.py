"""A letter for people is signed by the one signer (``signing.sign_as``), which checks the key
against the pin first, exactly as an agent's letter is."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.config.registry import Registry
from agentmail.errors import ConfigError
from agentmail.people.for_people import compose_for_people
from agentmail.stages.compose import Draft, compose
from agentmail.trust import authenticity, signing

CAROL = ("carol@people.test",)


def _for_people(registry: Registry, home: Path) -> bytes:
    return compose_for_people(registry, home, "alpha", CAROL, "alpha: digest", "Open threads: 2")[1]


def _for_agents(registry: Registry, home: Path) -> bytes:
    return compose(
        registry,
        home,
        "alpha",
        Draft(to="beta", type="question", thread="thr-abc123def0", subject="Quota", body="Why 500s?"),
    )[1]


def test_a_letter_for_people_signed_with_the_pinned_key_verifies(registry: Registry, home: Path) -> None:
    raw = _for_people(registry, home)
    assert signing.verify(raw, authenticity.pinned_key(registry.get("alpha"))).ok


def test_a_letter_for_people_with_a_key_not_pinned_is_refused_as_compose_refuses(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other, _ = signing.generate_keypair()
    monkeypatch.setenv("AGENTMAIL_DKIM_KEY", other)
    with pytest.raises(ConfigError) as for_people:
        _for_people(registry, home)
    with pytest.raises(ConfigError) as for_agents:
        _for_agents(registry, home)
    assert str(for_people.value) == str(for_agents.value)
    assert str(for_people.value).startswith(
        "the private key of alpha (AGENTMAIL_DKIM_KEY) does not match the public key pinned in "
    )


def test_a_key_published_in_dns_is_not_checked_against_a_pin_but_must_sign(
    registry: Registry, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = registry.get("alpha").replace(key_lookup="dns", public_key="")
    other, _ = signing.generate_keypair()
    monkeypatch.setenv("AGENTMAIL_DKIM_KEY", other)
    raw = signing.sign_as(registry, home, published, b"From: alpha@bus.test\r\n\r\nHi\r\n")
    assert raw.startswith(b"DKIM-Signature: v=1; a=ed25519-sha256; c=relaxed/simple; d=bus.test;")
    monkeypatch.setenv("AGENTMAIL_DKIM_KEY", "QUFBQQ==")  # base64, yet no ed25519 seed
    with pytest.raises(ConfigError) as refused:
        signing.sign_as(registry, home, published, b"From: alpha@bus.test\r\n\r\nHi\r\n")
    assert str(refused.value) == "cannot sign with the key of alpha: ValueError"


@pytest.mark.parametrize("dkim_domain,signer", [("mail.bus.test", b"d=mail.bus.test;"), ("", b"d=bus.test;")])
def test_the_signature_names_the_platforms_dkim_domain_or_else_its_own(
    registry: Registry, home: Path, dkim_domain: str, signer: bytes
) -> None:
    me = registry.get("alpha").replace(dkim_domain=dkim_domain)
    raw = signing.sign_as(registry, home, me, b"From: alpha@bus.test\r\n\r\nHi\r\n")
    assert signer in raw.split(b"\r\n", 1)[0]
