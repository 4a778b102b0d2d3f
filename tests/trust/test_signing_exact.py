"""DKIM verification pinned to exact outcomes, and a bad signature above a good one never hides it
(mutants the broader tests let live: tests/MUTATION.md)."""

from __future__ import annotations

import dkim
import pytest

from agentmail.letter import wire
from agentmail.letter.mime import is_mime_header
from agentmail.trust import signing
from tests.helpers.letters import burst_bytes

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


def test_a_reply_to_signed_once_is_not_over_signed() -> None:
    """A people header the letter carries, signed as often as it occurs (not once more), is named."""
    raw = burst_bytes()
    assert raw.count(b"\r\nReply-To:") == 1
    twice = [h.lower().encode() for h in wire.SIGNED_HEADERS for _ in (0, 1)]
    assert signing.verify(_signed_listing(raw, [*twice, b"reply-to"]), KEY).detail == (
        "the signature does not over-sign reply-to"
    )


def _signed_listing(raw: bytes, include: list[bytes], canonicalize: tuple[bytes, bytes] | None = None) -> bytes:
    header: bytes = dkim.sign(
        raw,
        b"am1",
        b"bus.test",
        PRIVATE.encode(),
        signature_algorithm=b"ed25519-sha256",
        canonicalize=canonicalize or signing.CANONICALIZATION,
        include_headers=include,
        linesep=b"\r\n",
    )
    return header + raw


def test_an_unreadable_signature_is_named_with_dkimpys_reason_cut_at_160_characters() -> None:
    top = b"DKIM-Signature: v=1; a=ed25519-sha256; d=bus.test; s=am1; h=from; bh=AAAA; b=" + b"!" * 200 + b"\r\n"
    assert signing.verify(top + burst_bytes(), KEY).detail == (
        "unreadable signature (b= value is not valid base64 (b'" + "!" * 128 + ")"
    )


def test_undecodable_d_and_s_are_named_with_replacement_characters_one_problem_per_signature() -> None:
    raw = signed()
    other_d = raw.replace(b"d=bus.test", b"d=bus\xff.test", 1).replace(b"i=@bus.test", b"i=@bus\xff.test", 1)
    assert signing.verify(other_d, KEY).detail == "signature by d=bus\ufffd.test s=am1, not the pinned d=bus.test s=am1"
    other_s = raw.replace(b"s=am1", b"s=am\xff", 1)
    assert signing.verify(other_s, KEY).detail == "signature by d=bus.test s=am\ufffd, not the pinned d=bus.test s=am1"
    both = _top_header(other_s) + other_d  # two signatures, two problems, top first
    assert signing.verify(both, KEY).detail == (
        "signature by d=bus.test s=am\ufffd, not the pinned d=bus.test s=am1; "
        "signature by d=bus\ufffd.test s=am1, not the pinned d=bus.test s=am1"
    )


LOOSE = (
    "the signature canonicalises the body loosely (c=.../relaxed), so white space in it could change "
    "unnoticed; agentmail signs the body exactly (c=.../simple)"
)


def test_the_body_canonicalisation_is_read_as_dkim_reads_c() -> None:
    """c= names header/body; an absent c= is simple/simple and a c= without a slash has a simple
    body (RFC 6376 §3.5): those get as far as the signature check (which the edit then fails)."""
    raw = signed()
    assert b"c=relaxed/simple;" in raw
    not_verified = "the signature does not verify against the pinned key"
    assert signing.verify(raw.replace(b" c=relaxed/simple;", b"", 1), KEY).detail == not_verified
    assert signing.verify(raw.replace(b"c=relaxed/simple", b"c=relaxed", 1), KEY).detail == not_verified
    assert (
        signing.verify(_signed_listing(burst_bytes(), signing._INCLUDE, (b"relaxed", b"relaxed")), KEY).detail == LOOSE
    )
    # what follows the first slash is the body's: "relaxed/simple" is not simple
    assert signing.verify(raw.replace(b"c=relaxed/simple", b"c=simple/relaxed/simple", 1), KEY).detail == LOOSE
    # a c= dkimpy cannot read: its words, cut at 120 characters
    long_c = raw.replace(b"c=relaxed/simple", b"c=" + b"x" * 130 + b"/simple", 1)
    assert signing.verify(long_c, KEY).detail == (
        "the signature does not verify (MessageFormatError: invalid c= value: b'" + "x" * 100 + ")"
    )


@pytest.mark.parametrize(
    "bad_top",
    [
        "evil",  # another domain's signature
        "l",  # a body-length limit
        "algorithm",  # an algorithm not allowed
        "body",  # a signature over another body
        "unreadable",  # a signature dkimpy cannot read
        "mime",  # a signature leaving the MIME headers out
        "weak",  # a signature that does not over-sign
        "relaxed",  # a signature over the body relaxed
    ],
)
def test_a_bad_signature_above_a_good_one_does_not_hide_it(bad_top: str) -> None:
    good = signed()
    once = [h.lower().encode() for h in wire.SIGNED_HEADERS]
    if bad_top == "mime":
        top = _top_header(_signed_listing(good, [h for h in once if not is_mime_header(h)]))
    elif bad_top == "weak":
        top = _top_header(_signed_listing(good, once + [h for h in once if is_mime_header(h)]))
    elif bad_top == "relaxed":
        top = _top_header(_signed_listing(good, signing._INCLUDE, (b"relaxed", b"relaxed")))
    elif bad_top == "evil":
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
