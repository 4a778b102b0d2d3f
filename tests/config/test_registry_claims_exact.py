"""``config/registry``'s claims exactly (issue 37's mutation run 11): ``key_identity`` on the RSA
shapes it must not misread (an outer SEQUENCE that only looks like a SubjectPublicKeyInfo, an
RSAPublicKey without its exponent: the verifier reads none of them, so each is only its bytes),
an ed25519 key never read as RSA; ``check_claims`` past an entry without a previous key; and
``parse_previous``'s window measured from the ``now`` it is given, up to the maximum inclusive."""

from __future__ import annotations

import base64
import calendar
import time
from pathlib import Path

import dkim.crypto
import pytest

from agentmail.config import registry
from agentmail.config.registry import MAX_OVERLAP, key_identity, parse_previous
from agentmail.errors import ConfigError


def _der(tag: int, content: bytes) -> bytes:
    assert len(content) < 0x80
    return bytes([tag, len(content)]) + content


MODULUS = _der(0x02, bytes([0x00, 0xC3, 0x5A, 0x11]))
EXPONENT = _der(0x02, bytes([0x01, 0x00, 0x01]))
RSA_PUBLIC_KEY = _der(0x30, MODULUS + EXPONENT)
RSA_OID = _der(0x06, bytes.fromhex("2a864886f70d010101"))


def _spki(null: bytes) -> bytes:
    return _der(0x30, _der(0x30, RSA_OID + null) + _der(0x03, b"\x00" + RSA_PUBLIC_KEY))


@pytest.mark.parametrize(
    "data",
    [
        # an algorithm SEQUENCE that holds no OID (an INTEGER instead)
        _der(0x30, _der(0x30, _der(0x02, b"\x00"))),
        # the same, followed by a BIT STRING holding a well-formed RSAPublicKey: read only after an OID and a NULL
        _der(0x30, _der(0x30, _der(0x02, b"\x00")) + _der(0x03, b"\x00" + RSA_PUBLIC_KEY)),
        # an RSAPublicKey with a modulus and no exponent
        _der(0x30, MODULUS),
        # a SubjectPublicKeyInfo whose NULL has a long-form length cut short (two bytes promised, one given)
        _spki(b"\x05\x82\x00"),
        # an exponent INTEGER that promises more bytes than follow
        _der(0x30, MODULUS + bytes([0x02, 0x09, 0x01, 0x00, 0x01])),
    ],
    ids=["no-oid", "no-oid-with-bits", "no-exponent", "cut-null-length", "short-exponent"],
)
def test_an_rsa_shape_the_verifier_cannot_read_is_only_its_bytes(data: bytes) -> None:
    with pytest.raises(dkim.crypto.UnparsableKeyError):
        dkim.crypto.parse_public_key(data)
    assert key_identity("rsa", base64.b64encode(data).decode()) == f"rsa:{data.hex()}"


@pytest.mark.parametrize(
    "data",
    [
        RSA_PUBLIC_KEY,
        _spki(b"\x05\x00"),
        _spki(b"\x05\x81\x00"),  # a long-form length that ends the data
        bytes([0x30, 0x0F]) + MODULUS + EXPONENT,  # a SEQUENCE promising more than follows: read as far as it goes
    ],
    ids=["bare", "spki", "spki-long-form-null", "long-sequence"],
)
def test_an_rsa_key_the_verifier_reads_is_its_numbers(data: bytes) -> None:
    assert dkim.crypto.parse_public_key(data) == {"modulus": 0xC35A11, "publicExponent": 0x10001}
    assert key_identity("rsa", base64.b64encode(data).decode()) == f"rsa:{0xC35A11:x}:{0x10001:x}"


def test_an_ed25519_key_is_its_bytes_even_when_they_read_as_an_rsa_key() -> None:
    key = base64.b64encode(RSA_PUBLIC_KEY).decode()
    assert key_identity("ed25519", key) == f"ed25519:{RSA_PUBLIC_KEY.hex()}"


def test_every_entry_after_one_without_a_previous_key_is_checked(tmp_path: Path) -> None:
    (tmp_path / "platforms").mkdir()
    (tmp_path / "bus.toml").write_text('domain = "bus.test"\n')
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    (tmp_path / "platforms" / "a.toml").write_text(
        'address = "a@bus.test"\n[dkim]\nselector = "s1"\npublic_key = "' + "A" * 40 + '"\n'
    )
    (tmp_path / "platforms" / "b.toml").write_text(
        'address = "b@bus.test"\n[dkim]\nselector = "s1"\npublic_key = "' + "B" * 40 + '"\n'
        f'[dkim.previous]\nselector = "s0"\npublic_key = "{"A" * 40}"\nuntil = "{until}"\n'
    )
    with pytest.raises(ConfigError, match=r"the previous key \(s=s0\) of b is the current key \(s=s1\) of a "):
        registry.load(tmp_path)


def test_a_previous_keys_window_is_measured_from_the_now_given_up_to_the_maximum_inclusive() -> None:
    until = "2031-01-01T00:00:00Z"
    ends = calendar.timegm(time.strptime(until, "%Y-%m-%dT%H:%M:%SZ"))
    value = {"selector": "s0", "public_key": "B" * 40, "until": until}
    got = parse_previous(value, "s1", "pinned", now=ends - MAX_OVERLAP)  # years from the clock's now
    assert got == registry.RetiringKey("s0", "ed25519", "B" * 40, until)
    with pytest.raises(ConfigError, match=f"dkim.previous.until {until} is more than 90 days away"):
        parse_previous(value, "s1", "pinned", now=ends - MAX_OVERLAP - 1)
