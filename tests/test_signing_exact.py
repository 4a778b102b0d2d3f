"""DKIM verification pinned to exact outcomes, and a bad signature above a good one never hides it
(mutants the broader tests let live: tests/MUTATION.md)."""

from __future__ import annotations

import dkim
import pytest

from agentmail import signing, wire
from agentmail.mime import is_mime_header

from .test_signing import KEY, PRIVATE, signed


def _top_header(raw: bytes) -> bytes:
    """The first DKIM-Signature header of ``raw`` (with its folded lines)."""
    head = raw.split(b"\r\n\r\n", 1)[0]
    lines = head.split(b"\r\n")
    out = [lines[0]]
    for line in lines[1:]:
        if not line[:1].isspace():
            break
        out.append(line)
    return b"\r\n".join(out) + b"\r\n"


def test_a_pass_says_which_key_passed() -> None:
    result = signing.verify(signed(), KEY)
    assert result == signing.DkimResult(True, "dkim=pass d=bus.test s=am1")


def test_a_signature_by_another_domain_is_named_exactly() -> None:
    attacker, _ = signing.generate_keypair()
    raw = signing.sign(
        wire.render(
            wire.draft_letter(
                "alpha@bus.test", "", "beta@bus.test", "report", "thr-abc123def0", "Hi", "x", message_id="<1@evil.test>"
            )
        ),
        "evil.test",
        "sel9",
        attacker,
    )
    result = signing.verify(raw, KEY)
    assert result.ok is False
    assert result.detail == "signature by d=evil.test s=sel9, not the pinned d=bus.test s=am1"


def test_each_refusal_is_worded_exactly() -> None:
    raw = signed()
    limited = raw.replace(b"DKIM-Signature: v=1;", b"DKIM-Signature: v=1; l=5;", 1)
    assert signing.verify(limited, KEY).detail == "the signature limits the body length (l=), which is refused"
    body_changed = raw.replace(b"Fired 14 submits.", b"Fired 15 submits.")
    assert signing.verify(body_changed, KEY).detail == "the signature does not verify (the body changed after signing)"
    _, other = signing.generate_keypair()
    wrong_key = signing.verify(raw, signing.PinnedKey("bus.test", "am1", "ed25519", other))
    assert wrong_key.detail == "the signature does not verify against the pinned key"


def test_a_signature_that_does_not_over_sign_names_the_headers() -> None:
    unsigned = wire.render(
        wire.draft_letter(
            "alpha@bus.test", "", "beta@bus.test", "report", "thr-abc123def0", "Hi", "x", message_id="<1@bus.test>"
        )
    )

    def signed_with(include: list[bytes]) -> bytes:
        header: bytes = dkim.sign(
            unsigned,
            b"am1",
            b"bus.test",
            PRIVATE.encode(),
            signature_algorithm=b"ed25519-sha256",
            canonicalize=signing.CANONICALIZATION,
            include_headers=include,
            linesep=b"\r\n",
        )
        return header + unsigned

    once = [h.lower().encode() for h in wire.SIGNED_HEADERS]
    # The MIME headers are checked first: signed only once, the first (sorted) is named.
    assert signing.verify(signed_with(once), KEY).detail == (
        "the signature does not over-sign the content-transfer-encoding header"
    )
    # MIME headers over-signed, the rest signed once: every one of those is named, in order, and
    # the people header the letter carries (its Reply-To) that this signature does not list.
    mime_twice = once + [h.lower().encode() for h in wire.SIGNED_HEADERS if is_mime_header(h.lower().encode())]
    assert signing.verify(signed_with(mime_twice), KEY).detail == (
        "the signature does not over-sign from, to, subject, date, message-id, auto-submitted, "
        "x-agentmail-type, x-agentmail-thread, reply-to"
    )


@pytest.mark.parametrize(
    "bad_top",
    [
        "evil",  # another domain's signature
        "l",  # a body-length limit
        "algorithm",  # an algorithm not allowed
        "body",  # a signature over another body
        "unreadable",  # a signature dkimpy cannot read
    ],
)
def test_a_bad_signature_above_a_good_one_does_not_hide_it(bad_top: str) -> None:
    good = signed()
    if bad_top == "evil":
        attacker, _ = signing.generate_keypair()
        top = _top_header(signing.sign(good, "evil.test", "am1", attacker))
    elif bad_top == "l":
        top = _top_header(signing.sign(good, "bus.test", "am1", PRIVATE)).replace(b"v=1;", b"v=1; l=5;", 1)
    elif bad_top == "algorithm":
        top = _top_header(signing.sign(good, "bus.test", "am1", PRIVATE)).replace(b"a=ed25519-sha256", b"a=rsa-sha1", 1)
    elif bad_top == "body":
        top = _top_header(signing.sign(signed(body="Another body."), "bus.test", "am1", PRIVATE))
    else:
        top = b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test\r\n"
    result = signing.verify(top + good, KEY)
    assert result.ok is True, result.detail
