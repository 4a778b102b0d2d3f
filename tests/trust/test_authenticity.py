"""Inbound authenticity (DESIGN §5): only a registered, positively authenticated letter passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.config.credentials import read_private_key
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.trust import authenticity, signing

DATA = Path(__file__).parents[1] / "data"


def letter_bytes(sender: str = "alpha@bus.test", name: str = "Alpha", **changes: object) -> bytes:
    fields: dict[str, object] = dict(
        sender_address=sender,
        sender_name=name,
        to_address="beta@bus.test",
        type="report",
        thread="thr-abc123def0",
        subject="Burst",
        body="Fired 14 submits.",
        message_id="<01a.alpha@bus.test>",
    )
    fields.update(changes)
    return wire.render(wire.draft_letter(**fields))  # type: ignore[arg-type]


def sign_as(registry: Registry, home: Path, platform: str, raw: bytes) -> bytes:
    entry = registry.platforms[platform]
    return signing.sign(raw, entry.dkim_domain, entry.selector, read_private_key(home, platform))


def trusting(registry: Registry, policy: str = "pinned") -> Registry:
    bus = registry.bus.replace(trusted_authserv_ids=("mail.bus.test",), policy=policy)
    return Registry(registry.root, bus, registry.platforms)


def test_a_genuine_signed_letter_is_accepted_and_attributed(registry: Registry, home: Path) -> None:
    verdict = authenticity.judge(sign_as(registry, home, "alpha", letter_bytes()), registry)
    assert verdict.route == "accept", verdict.detail
    assert verdict.letter is not None
    assert (verdict.letter.sender, verdict.letter.to) == ("alpha", "beta")


@pytest.mark.parametrize(
    "sender,name",
    [
        ("carol@bus.test", "Carol"),  # not registered at all
        ("mallory@evil.test", "alpha"),  # display name says alpha
        ("\u0430lpha@bus.test", "Alpha"),  # Cyrillic а: a homoglyph
        ("xalpha@bus.test", "Alpha"),  # suffix match must not count
        ("alpha@bus.test.evil.test", "Alpha"),  # domain suffix
    ],
)
def test_senders_that_are_not_exactly_registered_are_quarantined(
    registry: Registry, home: Path, sender: str, name: str
) -> None:
    raw = (
        letter_bytes(sender=sender, name=name)
        if sender.isascii()
        else letter_bytes().replace(b"From: Alpha <alpha@bus.test>", f"From: Alpha <{sender}>".encode())
    )
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert verdict.route == "quarantine"
    assert verdict.reason in ("unregistered-sender", "malformed")
    assert verdict.reason == "unregistered-sender" or "address" in (verdict.detail or "")


def test_a_letter_signed_with_another_platforms_key_is_unauthenticated(registry: Registry, home: Path) -> None:
    raw = sign_as(registry, home, "beta", letter_bytes(sender="alpha@bus.test"))
    verdict = authenticity.judge(raw, registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "unauthenticated")


def test_an_unsigned_letter_is_unauthenticated_under_the_pinned_policy(registry: Registry) -> None:
    verdict = authenticity.judge(letter_bytes(), registry)
    assert verdict.reason == "unauthenticated"
    assert "no DKIM signature" in (verdict.detail or "")


def test_a_forged_authentication_results_from_an_untrusted_id_is_ignored(registry: Registry) -> None:
    raw = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test\r\n" + letter_bytes()
    # Not trusted on this bus: the header means nothing, and the letter is still unsigned.
    assert authenticity.judge(raw, registry).reason == "unauthenticated"
    raw = b"Authentication-Results: evil.test; dkim=pass header.d=bus.test\r\n" + letter_bytes()
    assert authenticity.judge(raw, trusting(registry, "aligned")).reason == "unauthenticated"


def test_an_explicit_fail_from_a_trusted_id_quarantines_even_a_signed_letter(registry: Registry, home: Path) -> None:
    raw = b"Authentication-Results: mail.bus.test; dmarc=fail (p=reject) header.from=bus.test\r\n"
    raw += sign_as(registry, home, "alpha", letter_bytes())
    verdict = authenticity.judge(raw, trusting(registry))
    assert (verdict.reason, "dmarc=fail" in (verdict.detail or "")) == ("verdict-fail", True)


MTA_KEY, _ = signing.generate_keypair()  # the MTA's own key: only its h= list is read here


def mta_signed(raw: bytes, headers: list[bytes]) -> bytes:
    """``raw`` as the bus's MTA signs it (d=bus.test s=mail), listing ``headers`` in h=."""
    import dkim

    return (
        dkim.sign(
            raw,
            b"mail",
            b"bus.test",
            MTA_KEY.encode(),
            signature_algorithm=b"ed25519-sha256",
            include_headers=headers,
            linesep=b"\r\n",
        )
        + raw
    )


def test_aligned_policy_accepts_a_trusted_aligned_dkim_pass(registry: Registry) -> None:
    signed = mta_signed(
        letter_bytes(), [b"from", b"to", b"subject", b"mime-version", b"content-type", b"content-transfer-encoding"]
    )
    raw = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail\r\n" + signed
    assert authenticity.judge(raw, trusting(registry, "aligned")).route == "accept"
    assert authenticity.judge(raw, trusting(registry, "pinned")).reason == "unauthenticated"
    other = raw.replace(b"header.d=bus.test", b"header.d=evil.test")
    assert authenticity.judge(other, trusting(registry, "aligned")).reason == "unauthenticated"


@pytest.mark.parametrize(
    "headers,missing",
    [
        ([b"from", b"to", b"subject"], "content-transfer-encoding"),
        ([b"from", b"mime-version", b"content-type"], "content-transfer-encoding"),
        ([b"from", b"mime-version", b"content-transfer-encoding"], "content-type"),
        (None, "no DKIM-Signature by bus.test"),
    ],
)
def test_an_aligned_pass_must_come_from_a_signature_covering_every_mime_header(
    registry: Registry, headers: list[bytes] | None, missing: str
) -> None:
    body = letter_bytes()
    signed = body if headers is None else mta_signed(body, headers)
    raw = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail\r\n" + signed
    verdict = authenticity.judge(raw, trusting(registry, "aligned"))
    assert verdict.reason == "unauthenticated"
    assert "does not vouch for the MIME headers" in (verdict.detail or "") and missing in (verdict.detail or "")


@pytest.mark.parametrize(
    "name,reason",
    [
        ("unknown-charset.eml", "malformed"),
        ("path-message-id.eml", "malformed"),
        ("yaml-tag.eml", "malformed"),
        ("yaml-anchor.eml", "malformed"),
        ("crlf-subject.eml", "malformed"),
        ("two-from.eml", "malformed"),
    ],
)
def test_signed_but_malformed_letters_are_quarantined_as_malformed(
    registry: Registry, home: Path, name: str, reason: str
) -> None:
    raw = (DATA / name).read_bytes()
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert (verdict.route, verdict.reason) == ("quarantine", reason)
    assert verdict.detail


def test_garbage_bytes_are_quarantined_never_raised(registry: Registry) -> None:
    import random

    rng = random.Random(11)
    for _ in range(100):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        assert authenticity.judge(blob, registry).route == "quarantine"


def test_an_oversized_letter_is_too_large(registry: Registry, home: Path) -> None:
    raw = sign_as(registry, home, "alpha", letter_bytes(body="x" * 2_000_000))
    assert authenticity.judge(raw, registry).reason == "too-large"


def test_a_delivery_report_is_a_bounce_of_the_letter_it_names(registry: Registry) -> None:
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", b"<01sent.alpha@bus.test>")
    verdict = authenticity.judge(raw, registry)
    assert (verdict.route, verdict.bounced_message_id) == ("bounce", "<01sent.alpha@bus.test>")
    assert "5.1.1" in (verdict.detail or "")


def test_an_auto_reply_is_automated(registry: Registry, home: Path) -> None:
    raw = sign_as(registry, home, "beta", (DATA / "auto-reply.eml").read_bytes())
    assert authenticity.judge(raw, registry).reason == "automated"


def test_too_many_relays_is_a_loop(registry: Registry, home: Path) -> None:
    raw = b"".join(b"Received: from hop%d by hop%d; Sun, 29 Nov 2026 10:00:00 +0000\r\n" % (i, i) for i in range(51))
    verdict = authenticity.judge(raw + sign_as(registry, home, "alpha", letter_bytes()), registry)
    assert verdict.reason == "loop"


def test_a_trusted_mta_failing_only_our_pinned_signature_is_not_a_fail(registry: Registry, home: Path) -> None:
    """The MTA cannot see a pinned key; its permerror for that one signature says nothing."""
    entry = registry.platforms["alpha"]
    signed = sign_as(registry, home, "alpha", letter_bytes())
    header = (
        f"Authentication-Results: mail.bus.test; dkim=permerror (no key for signature) "
        f"header.d={entry.dkim_domain} header.s={entry.selector}\r\n"
    ).encode()
    assert authenticity.judge(header + signed, trusting(registry)).route == "accept"
    other = header.replace(f"header.s={entry.selector}".encode(), b"header.s=mail")
    assert authenticity.judge(other + signed, trusting(registry)).reason == "verdict-fail"
    dmarc = b"Authentication-Results: mail.bus.test; dmarc=fail header.from=bus.test\r\n"
    assert authenticity.judge(dmarc + header + signed, trusting(registry)).reason == "verdict-fail"


def test_a_humans_plain_text_letter_under_aligned_needs_every_mime_header_signed_by_the_mta(registry: Registry) -> None:
    human = (DATA / "human-plain.eml").read_bytes()  # Thunderbird adds Content-Language
    verdict_line = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail\r\n"
    mime_headers = [b"from", b"to", b"subject", b"mime-version", b"content-type", b"content-transfer-encoding"]
    partly = authenticity.judge(verdict_line + mta_signed(human, mime_headers), trusting(registry, "aligned"))
    assert partly.reason == "unauthenticated" and "content-language" in (partly.detail or "")
    whole = authenticity.judge(
        verdict_line + mta_signed(human, [*mime_headers, b"content-language"]), trusting(registry, "aligned")
    )
    assert whole.route == "accept" and whole.letter is not None and whole.letter.type == "human", whole.detail
    assert whole.letter.body == "Hi alpha, does /quota still return 404 for unknown ids? \u2014 Ada"
    multipart = (DATA / "human-multipart.eml").read_bytes()
    refused = authenticity.judge(verdict_line + mta_signed(multipart, mime_headers), trusting(registry, "aligned"))
    assert refused.reason == "malformed" and "single-part text/plain" in (refused.detail or "")
