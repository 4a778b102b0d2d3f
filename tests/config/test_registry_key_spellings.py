"""A previous key is only ever the platform's own, however it is spelt (issue 37, attacked): one
key has many base64 spellings and an RSA key two wrappings, each of which the verifier reads as
the same key. A previous key that is another platform's key spelt otherwise would let that
platform sign as this one; the registry's claims compare keys as the verifier reads them."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import dkim.crypto
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.config import registry as registry_mod
from agentmail.config.registry import Registry, key_identity
from agentmail.errors import ConfigError
from agentmail.trust import signing

from ..conftest import Cli
from ..depth import examples
from ..trust.test_trust_rules import _rsa_signed

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _respelt(key: str) -> str:
    """``key`` (32 bytes, base64) with the unused low bits of its last character set: other text, same bytes."""
    last = B64.index(key[42])
    return key[:42] + B64[last ^ 1] + "="


def _add_previous(home: Path, name: str, key: str, algorithm: str = "ed25519") -> None:
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    path = home / "registry" / "platforms" / f"{name}.toml"
    path.write_text(
        path.read_text() + f'\n[dkim.previous]\nselector = "old-1"\nalgorithm = "{algorithm}"\n'
        f'public_key = "{key}"\nuntil = "{until}"\n'
    )


def test_another_platforms_key_respelt_as_a_previous_key_is_refused(registry: Registry, home: Path,
                                                                    cli: Cli) -> None:  # fmt: skip
    beta_key = registry.platforms["beta"].public_key
    respelt = _respelt(beta_key)
    assert respelt != beta_key and base64.b64decode(respelt) == base64.b64decode(beta_key)
    _add_previous(home, "alpha", respelt)  # beta's private key would sign as alpha with s=old-1
    with pytest.raises(ConfigError, match=r"previous key \(s=old-1\) of alpha is the current key .* of beta"):
        registry_mod.load(home / "registry")
    code, out, err = cli("--as", "beta", "inbox")
    assert code == 6 and out == "" and "beta could sign as alpha" in err and err.count("\n") == 1


def _rsa_public(key: rsa.RSAPrivateKey, fmt: serialization.PublicFormat) -> str:
    return base64.b64encode(key.public_key().public_bytes(serialization.Encoding.DER, fmt)).decode()


def test_an_rsa_key_wrapped_otherwise_as_a_previous_key_is_refused(registry: Registry, home: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    spki = _rsa_public(key, serialization.PublicFormat.SubjectPublicKeyInfo)
    bare = _rsa_public(key, serialization.PublicFormat.PKCS1)
    beta = home / "registry" / "platforms" / "beta.toml"
    current = registry.platforms["beta"].public_key
    beta.write_text(beta.read_text().replace(current, spki).replace('algorithm = "ed25519"', 'algorithm = "rsa"'))
    assert registry_mod.load(home / "registry").platforms["beta"].algorithm == "rsa"
    # the verifier takes the bare wrapping as the same key: a letter beta signs verifies under it
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    signed = _rsa_signed(private, b"rsa-sha256")
    assert signing.verify(signed, signing.PinnedKey("bus.test", "am1", "rsa", bare)).ok
    _add_previous(home, "alpha", bare, algorithm="rsa")
    with pytest.raises(ConfigError, match=r"previous key \(s=old-1\) of alpha is the current key .* of beta"):
        registry_mod.load(home / "registry")


def _der(tag: int, content: bytes, long_form: int) -> bytes:
    """One DER/BER element, its length in the short form or in ``long_form`` bytes."""
    if long_form == 0 and len(content) < 0x80:
        return bytes([tag, len(content)]) + content
    size = max(long_form, (len(content).bit_length() + 7) // 8, 1)
    return bytes([tag, 0x80 | size]) + len(content).to_bytes(size, "big") + content


@settings(max_examples=examples(200), deadline=None)
@given(
    modulus=st.integers(min_value=1, max_value=2**2048),
    exponent=st.integers(min_value=1, max_value=2**32),
    zeros=st.integers(min_value=0, max_value=3),
    long_form=st.integers(min_value=0, max_value=3),
    wrapped=st.booleans(),
)
def test_every_spelling_of_an_rsa_key_is_one_key_as_the_verifier_reads_it(modulus: int, exponent: int, zeros: int,
                                                                          long_form: int, wrapped: bool) -> None:  # fmt: skip
    def integer(n: int) -> bytes:
        return _der(0x02, b"\0" * zeros + n.to_bytes((n.bit_length() + 8) // 8, "big"), long_form)

    bare = _der(0x30, integer(modulus) + integer(exponent), long_form)
    algorithm = _der(0x30, _der(0x06, bytes.fromhex("2a864886f70d010101"), 0) + _der(0x05, b"", 0), 0)
    data = _der(0x30, algorithm + _der(0x03, b"\0" + bare, long_form), long_form) if wrapped else bare
    read = dkim.crypto.parse_public_key(data)
    assert (read["modulus"], read["publicExponent"]) == (modulus, exponent)
    canonical = base64.b64encode(_der(0x30, integer(modulus) + integer(exponent), 0)).decode()
    assert key_identity("rsa", base64.b64encode(data).decode()) == key_identity("rsa", canonical)


@settings(max_examples=examples(200), deadline=None)
@given(raw=st.binary(min_size=32, max_size=32), other=st.binary(min_size=32, max_size=32))
def test_two_ed25519_spellings_are_one_key_exactly_when_their_bytes_are(raw: bytes, other: bytes) -> None:
    key = base64.b64encode(raw).decode()
    assert key_identity("ed25519", _respelt(key)) == key_identity("ed25519", key)
    same = key_identity("ed25519", base64.b64encode(other).decode()) == key_identity("ed25519", key)
    assert same == (raw == other)
    assert key_identity("rsa", key) != key_identity("ed25519", key)  # another algorithm is another key


def test_a_key_that_is_not_base64_is_only_ever_itself() -> None:
    assert key_identity("ed25519", "A" * 41) == "text:" + "A" * 41
    assert key_identity("rsa", "MAA=") == "rsa:3000"  # RSA bytes the verifier cannot read: those bytes


def test_an_rsa_key_cut_short_is_only_its_bytes() -> None:
    cut_length = base64.b64encode(bytes([0x30, 0x84, 0x01])).decode()  # a long-form length cut off
    short_integer = base64.b64encode(bytes([0x30, 0x04, 0x02, 0x09, 0x01, 0x02])).decode()  # 9 bytes promised, 2 given
    assert key_identity("rsa", cut_length) == "rsa:308401"
    assert key_identity("rsa", short_integer) == "rsa:300402090102"
