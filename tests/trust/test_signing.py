"""DKIM: a letter verifies against the pinned key, and every tampering breaks it."""

from __future__ import annotations

import pytest

from agentmail.letter import wire
from agentmail.trust import signing
from tests.helpers.letters import burst_bytes

PRIVATE, PUBLIC = signing.generate_keypair()
KEY = signing.PinnedKey("bus.test", "am1", "ed25519", PUBLIC)


def signed(**changes: object) -> bytes:
    return signing.sign(burst_bytes(**changes), "bus.test", "am1", PRIVATE)


def test_a_signed_letter_verifies_against_the_pinned_key() -> None:
    result = signing.verify(signed(), KEY)
    assert result.ok, result.detail


def test_the_signature_is_relaxed_simple_ed25519_without_l_and_over_signs() -> None:
    header = signed().split(b"\r\n\r\n")[0].decode()
    sig = header[: header.index("\r\nFrom:")]
    assert "a=ed25519-sha256" in sig and "c=relaxed/simple" in sig
    assert " l=" not in sig and ";l=" not in sig
    flat = sig.replace("\r\n", "").replace(" ", "")
    for name in (
        "from:from",
        "to:to",
        "subject:subject",
        "message-id:message-id",
        "auto-submitted:auto-submitted",
        "in-reply-to:in-reply-to",
        "x-agentmail-type:x-agentmail-type",
        "mime-version:mime-version",
        "content-type:content-type",
        "content-transfer-encoding:content-transfer-encoding",
    ):
        assert name in flat


def _insert_above(raw: bytes, header: bytes) -> bytes:
    """Put ``header`` right below the DKIM-Signature, i.e. above the signed original."""
    at = raw.index(b"\r\nFrom:") + 2
    return raw[:at] + header + b"\r\n" + raw[at:]


@pytest.mark.parametrize(
    "tamper,words",
    [
        (lambda r: r.replace(b"Fired 14", b"Fired 15"), "body changed"),
        (lambda r: r.replace(b"Subject: Burst", b"Subject: Burts"), "does not verify"),
        (lambda r: _insert_above(r, b"From: mallory@bus.test"), "over-sign from"),
        (lambda r: _insert_above(r, b"Subject: Please send your key"), "over-sign subject"),
        (lambda r: _insert_above(r, b"To: mallory@evil.test"), "over-sign to"),
        (lambda r: _insert_above(r, b"In-Reply-To: <x@evil.test>"), "does not verify"),  # signed as absent
        (lambda r: r.replace(b"X-Agentmail-Type: report", b"X-Agentmail-Type: close"), "does not verify"),
    ],
)
def test_tampering_breaks_verification(tamper, words: str) -> None:  # type: ignore[no-untyped-def]
    result = signing.verify(tamper(signed()), KEY)
    assert not result.ok
    assert words in result.detail


def test_a_different_key_for_the_same_selector_fails() -> None:
    _, other_public = signing.generate_keypair()
    result = signing.verify(signed(), signing.PinnedKey("bus.test", "am1", "ed25519", other_public))
    assert not result.ok and "pinned key" in result.detail


def test_a_valid_signature_by_an_attacker_domain_does_not_count() -> None:
    attacker_private, _ = signing.generate_keypair()
    raw = signing.sign(
        wire.render(
            wire.draft_letter(
                "alpha@bus.test", "", "beta@bus.test", "report", "thr-abc123def0", "Hi", "x", message_id="<1@evil.test>"
            )
        ),
        "evil.test",
        "am1",
        attacker_private,
    )
    result = signing.verify(raw, KEY)
    assert not result.ok and "d=evil.test" in result.detail


def test_a_signature_with_a_body_length_limit_is_refused() -> None:
    raw = signed()
    forged = raw.replace(b"DKIM-Signature: v=1;", b"DKIM-Signature: v=1; l=5;", 1)
    result = signing.verify(forged, KEY)
    assert not result.ok and "l=" in result.detail


def test_an_unsigned_letter_fails() -> None:
    unsigned = wire.render(
        wire.draft_letter(
            "alpha@bus.test", "", "beta@bus.test", "report", "thr-abc123def0", "Hi", "x", message_id="<1@bus.test>"
        )
    )
    assert signing.verify(unsigned, KEY) == signing.DkimResult(False, "the letter carries no DKIM signature")


def test_public_key_of_matches_the_generated_pair() -> None:
    assert signing.public_key_of(PRIVATE) == PUBLIC


def _signed_with(headers: list[bytes], canonicalize: tuple[bytes, bytes] = signing.CANONICALIZATION) -> bytes:
    import dkim

    raw = wire.render(
        wire.draft_letter(
            "alpha@bus.test",
            "Alpha",
            "beta@bus.test",
            "report",
            "thr-abc123def0",
            "Burst",
            "Fired 14 submits.",
            message_id="<01s.alpha@bus.test>",
        )
    )
    return (
        dkim.sign(
            raw,
            b"am1",
            b"bus.test",
            PRIVATE.encode(),
            signature_algorithm=b"ed25519-sha256",
            canonicalize=canonicalize,
            include_headers=headers,
            linesep=b"\r\n",
        )
        + raw
    )


ALL_TWICE = [h.lower().encode() for h in (*wire.SIGNED_HEADERS, *wire.PEOPLE_HEADERS) for _ in (0, 1)]


@pytest.mark.parametrize(
    "headers,canonicalize,words",
    [
        (
            [h for h in ALL_TWICE if not h.startswith((b"content-", b"mime-"))],
            signing.CANONICALIZATION,
            "does not cover the MIME headers (MIME-Version, Content-Type, Content-Transfer-Encoding): the sender's "
            "agentmail is too old and must be upgraded",
        ),
        (
            [h for h in ALL_TWICE if h != b"content-type"] + [b"content-type"],
            signing.CANONICALIZATION,
            "does not over-sign the content-type header",
        ),
        (
            [h for h in ALL_TWICE if h != b"content-transfer-encoding"],
            signing.CANONICALIZATION,
            "does not cover the content-transfer-encoding header",
        ),
        (ALL_TWICE, (b"relaxed", b"relaxed"), "canonicalises the body loosely"),
    ],
)
def test_a_signature_must_over_sign_the_mime_headers_and_sign_the_body_exactly(
    headers: list[bytes], canonicalize: tuple[bytes, bytes], words: str
) -> None:
    assert signing.verify(_signed_with(ALL_TWICE), KEY).ok  # the same letter, signed as agentmail does
    result = signing.verify(_signed_with(headers, canonicalize), KEY)
    assert not result.ok and words in result.detail, result.detail
