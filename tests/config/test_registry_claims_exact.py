"""``config/registry.key_identity`` exactly on the RSA shapes it must not misread (issue 37's
mutation run 11): an outer SEQUENCE that only looks like a SubjectPublicKeyInfo, and an
RSAPublicKey that holds a modulus and no exponent. The verifier reads none of them as a key, so
each is only its bytes — never an exception, never another key's numbers."""

from __future__ import annotations

import base64

import dkim.crypto
import pytest

from agentmail.config.registry import key_identity


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
