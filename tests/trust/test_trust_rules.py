"""Security rules of the trust core that had no test of their own (issue 15): each test here fails
when the rule it names is removed from the code."""

from __future__ import annotations

import base64
from pathlib import Path

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agentmail.client.facade import AgentMail
from agentmail.config.registry import Endpoint, Registry
from agentmail.errors import ConfigError
from agentmail.letter import wire
from agentmail.transport.smtpimap import SmtpImapTransport
from agentmail.trust import auth_results, authenticity, signing

from ..conftest import OPENER
from .test_authenticity import DATA, letter_bytes, sign_as, trusting

# --- one From, one address -----------------------------------------------------------------


def test_one_from_header_holding_two_addresses_is_malformed(registry: Registry, home: Path) -> None:
    raw = letter_bytes().replace(b"From: Alpha <alpha@bus.test>", b"From: Alpha <alpha@bus.test>, beta@bus.test")
    assert b"From: Alpha <alpha@bus.test>, beta@bus.test\r\n" in raw
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "malformed")
    assert "2 addresses" in (verdict.detail or "")


# --- signature algorithms: RSA allowed at 2048 bits with SHA-256, nothing weaker ---------------


def _rsa_pair(bits: int) -> tuple[bytes, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, base64.b64encode(public).decode()


def _rsa_signed(private: bytes, algorithm: bytes) -> bytes:
    raw = letter_bytes()
    header: bytes = dkim.sign(
        raw,
        b"am1",
        b"bus.test",
        private,
        signature_algorithm=algorithm,
        canonicalize=signing.CANONICALIZATION,
        include_headers=signing._INCLUDE,
        linesep=b"\r\n",
    )
    return header + raw


@pytest.fixture(scope="module")
def rsa2048() -> tuple[bytes, str]:
    return _rsa_pair(2048)


def test_an_rsa_sha256_signature_by_a_pinned_2048_bit_rsa_key_verifies(rsa2048: tuple[bytes, str]) -> None:
    private, public = rsa2048
    result = signing.verify(_rsa_signed(private, b"rsa-sha256"), signing.PinnedKey("bus.test", "am1", "rsa", public))
    assert result.ok, result.detail


def test_rsa_sha1_is_not_an_allowed_algorithm(rsa2048: tuple[bytes, str]) -> None:
    private, public = rsa2048
    result = signing.verify(_rsa_signed(private, b"rsa-sha1"), signing.PinnedKey("bus.test", "am1", "rsa", public))
    assert not result.ok and "algorithm rsa-sha1 is not allowed" in result.detail


def test_an_rsa_key_shorter_than_2048_bits_does_not_verify() -> None:
    private, public = _rsa_pair(1024)
    result = signing.verify(_rsa_signed(private, b"rsa-sha256"), signing.PinnedKey("bus.test", "am1", "rsa", public))
    assert not result.ok


def test_the_allow_list_is_exactly_ed25519_and_rsa_sha256() -> None:
    assert set(signing.ALGORITHMS) == {b"ed25519-sha256", b"rsa-sha256"}


# --- Authentication-Results ---------------------------------------------------------------------


def test_an_unreadable_authentication_results_from_a_trusted_id_fails_closed(registry: Registry, home: Path) -> None:
    signed = sign_as(registry, home, "alpha", letter_bytes())
    garbled = b"Authentication-Results: mail.bus.test; dkim=pass (unterminated comment header.d=bus.test\r\n"
    verdict = authenticity.judge(garbled + signed, trusting(registry))
    assert (verdict.route, verdict.reason) == ("quarantine", "verdict-fail")
    assert "unreadable Authentication-Results from mail.bus.test" in (verdict.detail or "")
    # The same garbage under an id nobody trusts means nothing: the signed letter passes.
    untrusted = garbled.replace(b"mail.bus.test;", b"relay.evil.test;")
    assert authenticity.judge(untrusted + signed, trusting(registry)).route == "accept"


def test_an_invented_result_word_from_a_trusted_id_is_a_fail() -> None:
    found = auth_results.read(["mail.bus.test; dkim=excellent header.d=bus.test"], ("mail.bus.test",))
    assert found.fails == ("dkim=excellent (not a valid result)",)


def test_only_spf_dkim_and_dmarc_results_count() -> None:
    found = auth_results.read(
        ["mail.bus.test; auth=fail smtp.auth=alpha; spf=pass smtp.mailfrom=bus.test"], ("MAIL.bus.test",)
    )
    assert found == auth_results.TrustedVerdicts((), ())


# --- automated mail ----------------------------------------------------------------------------


@pytest.mark.parametrize("precedence", ["bulk", "list", "junk", "auto_reply", "Bulk "])
def test_bulk_and_list_precedence_is_automated(registry: Registry, home: Path, precedence: str) -> None:
    raw = letter_bytes().replace(b"Subject:", f"Precedence: {precedence}\r\nSubject:".encode(), 1)
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "automated")
    assert f"Precedence: {precedence.strip().lower()}" in (verdict.detail or "")


def test_first_class_precedence_is_a_letter(registry: Registry, home: Path) -> None:
    raw = letter_bytes().replace(b"Subject:", b"Precedence: first-class\r\nSubject:", 1)
    assert authenticity.judge(sign_as(registry, home, "alpha", raw), registry).route == "accept"


@pytest.mark.parametrize(
    "sender",
    [
        "MAILER-DAEMON@bus.test",
        "postmaster@bus.test",
        "noreply@bus.test",
        "no-reply@bus.test",
        "bounce@bus.test",
        "bounces@bus.test",
    ],
)
def test_mail_system_senders_are_automated_even_when_registered(registry: Registry, home: Path, sender: str) -> None:
    local = sender.partition("@")[0]
    entry = registry.platforms["alpha"].replace(address=sender.lower())
    reg = Registry(registry.root, registry.bus, {**registry.platforms, "alpha": entry})
    raw = letter_bytes(sender=sender, name=local)
    verdict = authenticity.judge(sign_as(reg, home, "alpha", raw), reg)
    assert (verdict.route, verdict.reason) == ("quarantine", "automated")
    assert verdict.detail == "sent by a mail system, not an agent"


def test_a_report_from_a_mail_system_that_names_no_letter_is_automated(registry: Registry) -> None:
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"Message-ID: {MESSAGE_ID}", b"X-Nothing: here")
    verdict = authenticity.judge(raw, registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "automated")


def test_a_bounce_for_a_letter_this_mailbox_never_sent_is_quarantined(alpha: AgentMail) -> None:
    from agentmail.transport.local import deliver

    never_sent = "<01never.alpha@bus.test>"
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", never_sent.encode())
    assert authenticity.judge(raw, alpha.registry).route == "bounce"  # judged alone, it is a bounce
    deliver(alpha.home / "postoffice" / "alpha", raw)
    report = alpha.sync()
    assert report.bounces == 0
    (quarantined,) = report.quarantined
    assert (quarantined.reason, quarantined.detail) == (
        "automated",
        "a delivery report not believed: the local post office writes no delivery reports "
        "(it refuses an unknown recipient when a letter is sent)",
    )
    assert [x.reason for x in alpha.quarantined(sync=False)] == ["automated"]


def test_a_bounce_dropped_into_the_local_post_office_marks_nothing_undeliverable(alpha: AgentMail) -> None:
    """Anyone who can write into a Maildir can drop a report there; the post office writes none."""
    from agentmail.transport.local import deliver

    sent = alpha.send("beta", "Quota 500s", OPENER)
    raw = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", sent.message_id.encode())
    deliver(alpha.home / "postoffice" / "alpha", raw.replace(b"nosuch@bus.test", b"beta@bus.test"))
    report = alpha.sync()
    assert report.bounces == 0 and [x.reason for x in report.quarantined] == ["automated"]
    assert "undeliverable" not in alpha.show(sent.id).extra


# --- plaintext only on loopback ----------------------------------------------------------------


@pytest.mark.parametrize("which", ["smtp", "imap"])
def test_plaintext_toward_a_non_loopback_host_is_refused(which: str) -> None:
    from agentmail.config.credentials import Login

    safe, plain = Endpoint("127.0.0.1", 25, "none"), Endpoint("mail.example.org", 25, "none")
    smtp, imap = (plain, safe) if which == "smtp" else (safe, plain)
    with pytest.raises(ConfigError, match=r"plaintext to .*mail\.example\.org.* is refused"):
        SmtpImapTransport(smtp, imap, Login("alpha@bus.test", "pw"))
    loopback = SmtpImapTransport(safe, safe, Login("alpha@bus.test", "pw"))  # loopback plaintext is fine
    loopback.close()


def test_wire_header_values_are_what_the_verdicts_read(registry: Registry) -> None:
    """The trusted header is found however its name is cased (the MTA's spelling varies)."""
    raw = b"authentication-RESULTS: mail.bus.test; dmarc=fail header.from=bus.test\r\n" + letter_bytes()
    msg = wire.parse_message(raw, 1_000_000)
    assert wire.header_values(msg, "Authentication-Results") == ["mail.bus.test; dmarc=fail header.from=bus.test"]
