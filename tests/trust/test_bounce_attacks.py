"""Attacks on "a bounce is believed only from the bus's own mail system" (issue 37): a platform
of the bus signs with the bus's domain, so the trusted server's ``dkim=pass header.d=bus.test``
on a report it wrote is no word of the mail system's. A co-recipient must not be able to mark a
letter undeliverable to someone else."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import read_private_key
from agentmail.config.registry import Registry
from agentmail.trust import authenticity, signing

from .test_bounce_trust import MID

GAMMA_FAILED = (
    "From: MAILER-DAEMON@bus.test\r\nTo: alpha@bus.test\r\nSubject: Undelivered\r\n"
    "Message-ID: <dsn.forged@bus.test>\r\nMIME-Version: 1.0\r\n"
    'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
    "--b\r\nContent-Type: text/plain\r\n\r\nsorry\r\n\r\n"
    "--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mail.bus.test\r\n\r\n"
    "Final-Recipient: rfc822; gamma@bus.test\r\nAction: failed\r\nStatus: 5.2.2\r\n\r\n"
    "--b\r\nContent-Type: text/rfc822-headers\r\n\r\nFrom: alpha@bus.test\r\nMessage-ID: "
    + MID.decode()
    + "\r\n\r\n--b--\r\n"
).encode()


@pytest.fixture
def three(home: Path) -> Registry:
    endpoints = bus.endpoints("127.0.0.1:2525", "127.0.0.1:1143", ("none",), None, ("mail.bus.test",))
    return bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test", transport="smtp+imap",
                    endpoints=endpoints)  # fmt: skip


def _signed_by(registry: Registry, home: Path, platform: str, raw: bytes) -> bytes:
    entry = registry.platforms[platform]
    signed = signing.sign(raw, entry.dkim_domain, entry.selector, read_private_key(home, platform))
    # what the trusted server stamps on any letter a platform of the bus signs: its key is published
    stamp = f"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s={entry.selector}\r\n"
    return stamp.encode() + signed


def test_a_report_a_co_recipient_signs_is_not_the_mail_systems_word(three: Registry, home: Path) -> None:
    verdict = authenticity.judge(_signed_by(three, home, "beta", GAMMA_FAILED), three)
    assert verdict.route == "bounce" and verdict.failed_recipients == ()
    assert verdict.unvouched == (
        "it is signed by the platform beta (s=" + three.platforms["beta"].selector + "), not by the bus's mail "
        "system: a platform never reports another's delivery"
    )


def test_a_report_a_recipient_signs_about_itself_is_not_believed_either(three: Registry, home: Path) -> None:
    raw = GAMMA_FAILED.replace(b"gamma@bus.test", b"beta@bus.test")
    verdict = authenticity.judge(_signed_by(three, home, "beta", raw), three)
    assert verdict.failed_recipients == () and "signed by the platform beta" in (verdict.unvouched or "")


def test_the_mail_systems_own_report_is_still_believed(three: Registry) -> None:
    signed = b"DKIM-Signature: v=1; d=bus.test; s=mta; h=from\r\n" + GAMMA_FAILED  # the server's own key
    raw = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mta\r\n" + signed
    verdict = authenticity.judge(raw, three)
    assert verdict.unvouched is None and verdict.failed_recipients == ("gamma@bus.test",)


def test_the_signers_of_a_letter_are_each_readable_signatures_domain_and_selector() -> None:
    raw = (
        b"DKIM-Signature: v=1; d=Bus.Test; s=Beta-1; h=from\r\n"
        b"DKIM-Signature: v=1; d=x.test; d=x.test; s=a\r\n"  # a tag given twice: no tag list at all
        b"DKIM-Signature: v=1; d=mail.bus.test\r\n"
        b"From: a@bus.test\r\n\r\nb\r\n"
    )
    assert signing.signers(raw) == (("bus.test", "beta-1"), ("mail.bus.test", ""))
    assert signing.signers(b"no colon here\r\n\r\nbody\r\n") == ()  # headers dkimpy cannot split


def test_a_report_naming_a_platforms_previous_selector_is_that_platforms(three: Registry, home: Path) -> None:
    rotated = bus.keygen(home, three, "beta", overlap=3600)
    assert rotated.retiring is not None
    old = rotated.retiring.selector
    registry = registry_mod.load(home / "registry")
    raw = f"DKIM-Signature: v=1; d=bus.test; s={old}; h=from\r\n".encode() + GAMMA_FAILED
    raw = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test\r\n" + raw
    verdict = authenticity.judge(raw, registry)
    assert verdict.failed_recipients == () and f"signed by the platform beta (s={old})" in (verdict.unvouched or "")


def _from_person(sender: str, failed: str, stamp: str) -> bytes:
    raw = GAMMA_FAILED.replace(b"MAILER-DAEMON@bus.test", sender.encode()).replace(b"gamma@bus.test", failed.encode())
    return f"Authentication-Results: mail.bus.test; {stamp}\r\n".encode() + raw


def test_a_person_at_a_shared_domain_cannot_report_another_persons_failure(three: Registry) -> None:
    """Every user of a mail provider signs with its domain: dave@people.test's own letter passes
    DKIM for people.test, which is carol's domain; only that domain's mail system speaks for her."""
    forged = _from_person("dave@people.test", "carol@people.test", "dkim=pass header.d=people.test")
    verdict = authenticity.judge(forged, three)
    assert verdict.failed_recipients == () and "does not vouch for it" in (verdict.unvouched or "")
    for stamp in ("dkim=pass header.d=people.test", "dmarc=pass header.from=people.test"):
        genuine = _from_person("MAILER-DAEMON@mx.people.test", "carol@people.test", stamp)
        assert authenticity.judge(genuine, three).failed_recipients == ("carol@people.test",)
    unreadable = _from_person(
        "two@people.test, senders@people.test", "carol@people.test", "dkim=pass header.d=people.test"
    )
    assert authenticity.judge(unreadable, three).failed_recipients == ()


def test_a_person_at_the_bus_domain_cannot_report_anyones_failure(three: Registry) -> None:
    """The bus's domain may be a company's, whose every person's letter passes DKIM for it."""
    forged = _from_person("ops@bus.test", "gamma@bus.test", "dkim=pass header.d=bus.test")
    verdict = authenticity.judge(forged, three)
    assert verdict.failed_recipients == () and "does not vouch for it" in (verdict.unvouched or "")
    genuine = _from_person("postmaster@bus.test", "gamma@bus.test", "dkim=pass header.d=bus.test")
    assert authenticity.judge(genuine, three).failed_recipients == ("gamma@bus.test",)
