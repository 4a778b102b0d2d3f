"""Verdicts pinned to their exact reason, sentence and summary (mutants the broader tests let live:
tests/MUTATION.md). A quarantine listing shows these to a person; they are part of the contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.config import registry as registry_mod
from agentmail.config.registry import Registry
from agentmail.letter import wire
from agentmail.trust import authenticity
from tests.helpers.letters import burst

from ..conftest import OPENER
from .test_authenticity import DATA, letter_bytes, mta_signed, sign_as, trusting
from .test_bounce_trust import _report, mailserver_bus  # noqa: F401  (the fixture)
from .test_rotation import _client, _set_until

BOUNCE = (DATA / "bounce-template.eml").read_bytes().replace(b"{MESSAGE_ID}", b"<01sent.alpha@bus.test>")


def test_a_quarantine_carries_the_letters_headers_as_its_summary(registry: Registry) -> None:
    verdict = authenticity.judge(letter_bytes(sender="carol@bus.test", name="Carol"), registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "unregistered-sender")
    assert verdict.detail == "carol@bus.test is not a registered platform of this bus"
    assert verdict.summary is not None and verdict.letter is None
    assert {k: v for k, v in verdict.summary.items() if k != "date"} == {
        "from": "Carol <carol@bus.test>",
        "subject": "Burst",
        "message_id": "<01a.alpha@bus.test>",
    }
    assert verdict.summary["date"].endswith("+0000")


def test_a_missing_header_is_empty_in_the_summary_and_a_long_one_is_cut(registry: Registry) -> None:
    raw = letter_bytes(sender="carol@bus.test").replace(b"Subject: Burst", b"Subject: " + b"S" * 250)
    raw = b"\r\n".join(line for line in raw.split(b"\r\n") if not line.startswith(b"Date:"))
    summary = authenticity.judge(raw, registry).summary
    assert summary is not None and summary["date"] == "" and summary["subject"] == "S" * 200


def test_a_malformed_letter_still_has_a_summary(registry: Registry, home: Path) -> None:
    raw = letter_bytes().replace(b"From: Alpha <alpha@bus.test>", b"From: Alpha <alpha@bus.test>, beta@bus.test")
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert verdict.summary is not None and verdict.summary["message_id"] == "<01a.alpha@bus.test>"
    unparseable = authenticity.judge(b"\xff" * 2_000_000, registry)
    assert (unparseable.reason, unparseable.summary) == ("too-large", {})
    assert unparseable.detail


def test_fifty_relays_pass_and_fifty_one_are_a_loop(registry: Registry, home: Path) -> None:
    signed = sign_as(registry, home, "alpha", letter_bytes())

    def hops(n: int) -> bytes:
        return b"".join(
            b"Received: from hop%d by hop%d; Sun, 29 Nov 2026 10:00:00 +0000\r\n" % (i, i) for i in range(n)
        )

    assert authenticity.judge(hops(50) + signed, registry).route == "accept"
    verdict = authenticity.judge(hops(51) + signed, registry)
    assert (verdict.reason, verdict.detail) == ("loop", "the letter passed 51 relays (more than 50)")
    assert verdict.summary and verdict.summary["subject"] == "Burst"


@pytest.mark.parametrize(
    "value,detail",
    [
        ("auto-replied", "an automatic response (Auto-Submitted: auto-replied)"),
        ("Auto-Notified; owner=x", "an automatic response (Auto-Submitted: auto-notified)"),
    ],
)
def test_auto_submitted_mail_is_automated_with_its_value(
    registry: Registry, home: Path, value: str, detail: str
) -> None:
    raw = letter_bytes().replace(b"Auto-Submitted: auto-generated", f"Auto-Submitted: {value}".encode())
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert (verdict.reason, verdict.detail) == ("automated", detail)
    assert verdict.summary and verdict.summary["subject"] == "Burst"


def test_auto_generated_with_parameters_is_still_a_letter(registry: Registry, home: Path) -> None:
    raw = letter_bytes().replace(b"Auto-Submitted: auto-generated", b"Auto-Submitted: auto-generated; agent=alpha")
    assert authenticity.judge(sign_as(registry, home, "alpha", raw), registry).route == "accept"


def test_precedence_detail_names_the_value(registry: Registry, home: Path) -> None:
    raw = letter_bytes().replace(b"Subject:", b"Precedence: BULK\r\nSubject:", 1)
    verdict = authenticity.judge(sign_as(registry, home, "alpha", raw), registry)
    assert verdict.detail == "an automatic or bulk message (Precedence: bulk)"
    assert verdict.summary and verdict.summary["subject"] == "Burst"


def test_a_mail_system_sender_has_its_summary(registry: Registry) -> None:
    raw = BOUNCE.replace(b"Content-Type: multipart/report", b"X-Was: multipart/report")
    raw = raw.split(b"\n\n", 1)[0] + b"\nContent-Type: text/plain\n\nYour mail could not be delivered.\n"
    verdict = authenticity.judge(raw, registry)
    assert (verdict.reason, verdict.detail) == ("automated", "sent by a mail system, not an agent")
    assert verdict.summary and verdict.summary["from"].startswith("MAILER-DAEMON@mail.bus.test")


def test_the_trusted_fails_are_all_named(registry: Registry, home: Path) -> None:
    header = (
        b"Authentication-Results: mail.bus.test; spf=fail smtp.mailfrom=bus.test; dmarc=fail header.from=bus.test\r\n"
    )
    verdict = authenticity.judge(header + sign_as(registry, home, "alpha", letter_bytes()), trusting(registry))
    assert verdict.detail == "the bus's mail server reported spf=fail, dmarc=fail"
    assert verdict.summary and verdict.summary["subject"] == "Burst"


def test_a_letter_to_an_unregistered_address_is_accepted_with_no_recipient_platform(
    registry: Registry, home: Path
) -> None:
    verdict = authenticity.judge(sign_as(registry, home, "alpha", letter_bytes(to_address="carol@bus.test")), registry)
    assert verdict.route == "accept" and verdict.letter is not None
    assert (verdict.letter.sender, verdict.letter.to) == ("alpha", "")


def test_the_pinned_key_falls_back_to_the_address_domain_and_dns_means_no_key(registry: Registry) -> None:
    entry = registry.platforms["alpha"].replace(dkim_domain="")
    assert authenticity.pinned_key(entry).domain == entry.domain
    assert authenticity.pinned_key(entry.replace(dkim_domain="keys.bus.test")).domain == "keys.bus.test"
    assert authenticity.pinned_key(entry).public_key == entry.public_key
    assert authenticity.pinned_key(entry.replace(key_lookup="dns")).public_key == ""


def test_an_unsigned_letter_names_the_key_it_was_checked_against(registry: Registry) -> None:
    pinned = authenticity.judge(letter_bytes(), registry)
    assert pinned.detail == "no valid signature by alpha's pinned key: the letter carries no DKIM signature"
    published = {**registry.platforms, "alpha": registry.platforms["alpha"].replace(key_lookup="dns")}
    in_dns = authenticity.judge(letter_bytes(), Registry(registry.root, registry.bus, published))
    assert in_dns.detail == "no valid signature by alpha's key published in DNS: the letter carries no DKIM signature"


# --- delivery reports ----------------------------------------------------------------------------


def test_the_dsn_reason_is_its_status_and_diagnostic(registry: Registry) -> None:
    verdict = authenticity.judge(BOUNCE, registry)
    assert verdict.detail == "5.1.1 smtp; 550 5.1.1 <nosuch@bus.test>: Recipient address rejected"


def test_a_report_without_a_report_type_is_still_a_bounce(registry: Registry) -> None:
    verdict = authenticity.judge(BOUNCE.replace(b"report-type=delivery-status; ", b""), registry)
    assert (verdict.route, verdict.bounced_message_id) == ("bounce", "<01sent.alpha@bus.test>")


def test_a_report_without_a_type_or_an_original_is_named_as_such(registry: Registry) -> None:
    raw = BOUNCE.replace(b"report-type=delivery-status; ", b"").replace(b"Message-ID: <01sent.alpha@bus.test>", b"")
    verdict = authenticity.judge(raw, registry)
    assert (verdict.reason, verdict.detail) == ("automated", "a multipart/report report (no type), not a letter")
    assert verdict.summary and verdict.summary["subject"] == "Undelivered Mail Returned to Sender"


def test_a_mail_system_multipart_quoting_the_letter_is_a_bounce(registry: Registry) -> None:
    raw = BOUNCE.replace(b"multipart/report; report-type=delivery-status;", b"multipart/mixed;")
    verdict = authenticity.judge(raw, registry)
    assert (verdict.route, verdict.bounced_message_id) == ("bounce", "<01sent.alpha@bus.test>")


def test_a_bounce_quoting_headers_as_message_rfc822_headers_names_the_letter(registry: Registry) -> None:
    raw = BOUNCE.replace(b"Content-Type: text/rfc822-headers", b"Content-Type: message/rfc822-headers")
    assert authenticity.judge(raw, registry).bounced_message_id == "<01sent.alpha@bus.test>"


def test_a_delivery_report_from_any_sender_is_a_bounce(registry: Registry) -> None:
    raw = BOUNCE.replace(b"From: MAILER-DAEMON@mail.bus.test", b"From: alerts@mail.bus.test")
    assert authenticity.judge(raw, registry).route == "bounce"


def test_the_dsn_reason_comes_from_the_delivery_status_part_only(registry: Registry) -> None:
    raw = BOUNCE.replace(b"I am sorry", b"Status: 9.9.9 see below\nI am sorry")
    assert (
        authenticity.judge(raw, registry).detail
        == "5.1.1 smtp; 550 5.1.1 <nosuch@bus.test>: Recipient address rejected"
    )


def test_the_dsn_reason_is_cleaned_and_cut(registry: Registry) -> None:
    old = b"Diagnostic-Code: smtp; 550 5.1.1 <nosuch@bus.test>: Recipient address rejected"
    bell = authenticity.judge(BOUNCE.replace(old, b"Diagnostic-Code: smtp; 550 bad\x07bell"), registry)
    assert bell.detail == "5.1.1 smtp; 550 bad bell"
    long = authenticity.judge(BOUNCE.replace(old, b"Diagnostic-Code: " + b"x" * 400), registry)
    assert long.detail == ("5.1.1 " + "x" * 400)[:300]


def test_a_signed_letter_with_a_bad_block_is_malformed_with_its_summary(registry: Registry, home: Path) -> None:
    verdict = authenticity.judge(sign_as(registry, home, "alpha", (DATA / "yaml-tag.eml").read_bytes()), registry)
    assert verdict.reason == "malformed" and isinstance(verdict.detail, str) and verdict.detail
    assert verdict.summary and verdict.summary["from"] and verdict.summary["message_id"]


def test_a_mime_header_twice_is_unauthenticated_before_any_signature_is_weighed(registry: Registry, home: Path) -> None:
    signed = sign_as(registry, home, "alpha", letter_bytes())
    doubled = signed.replace(b"Content-Type:", b"Content-Type: text/plain\r\nContent-Type:", 1)
    verdict = authenticity.judge(doubled, registry)
    assert (verdict.route, verdict.reason, verdict.detail) == (
        "quarantine",
        "unauthenticated",
        "the letter carries 2 Content-Type headers; a MIME header may occur once",
    )
    assert verdict.summary and verdict.summary["subject"] == "Burst"


def test_an_aligned_pass_not_vouching_for_the_mime_headers_is_worded_exactly(registry: Registry) -> None:
    raw = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail\r\n" + letter_bytes()
    verdict = authenticity.judge(raw, trusting(registry, "aligned"))
    assert (verdict.reason, verdict.detail) == (
        "unauthenticated",
        "the mail server's aligned dkim=pass does not vouch for the MIME headers: "
        "no DKIM-Signature by bus.test to vouch for the MIME headers",
    )
    assert verdict.summary and verdict.summary["message_id"] == "<01a.alpha@bus.test>"


def test_under_the_aligned_policy_only_what_the_mtas_signature_covers_of_cc_and_list_id_is_kept(
    registry: Registry,
) -> None:
    raw = wire.render(burst().replace(cc=("carol@people.test",), list_id="<agentmail.bus.test>"))
    mime_and_more = [b"from", b"to", b"subject", b"mime-version", b"content-type", b"content-transfer-encoding"]
    aligned = trusting(registry, "aligned")
    vouched = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test header.s=mail\r\n"
    both = authenticity.judge(vouched + mta_signed(raw, [*mime_and_more, b"cc", b"list-id"]), aligned).letter
    assert both is not None and (both.cc, both.list_id) == (("carol@people.test",), "<agentmail.bus.test>")
    neither = authenticity.judge(vouched + mta_signed(raw, mime_and_more), aligned).letter
    assert neither is not None and (neither.cc, neither.list_id) == ((), None)
    only_cc = authenticity.judge(vouched + mta_signed(raw, [*mime_and_more, b"cc"]), aligned).letter
    assert only_cc is not None and (only_cc.cc, only_cc.list_id) == (("carol@people.test",), None)


def test_a_report_quoting_no_headers_at_all_is_automated(registry: Registry) -> None:
    """An empty text/rfc822-headers part names no letter: an automated report, not a crash."""
    cut = b"--dsn\r\nContent-Type: text/rfc822-headers\r\n"
    empty = BOUNCE.split(cut)[0] + cut + b"\r\n--dsn--\r\n"
    verdict = authenticity.judge(empty, registry)
    assert (verdict.route, verdict.reason, verdict.detail) == (
        "quarantine",
        "automated",
        "a multipart/report report (delivery-status), not a letter",
    )


def test_the_dsn_status_is_found_in_any_block_of_the_delivery_status(registry: Registry) -> None:
    """The per-recipient block may start with its Status line (RFC 3464 sets no order)."""
    old = b"Final-Recipient: rfc822; nosuch@bus.test\r\nAction: failed\r\nStatus: 5.1.1\r\n"
    assert old in BOUNCE
    raw = BOUNCE.replace(old, b"Status: 5.1.1\r\nFinal-Recipient: rfc822; nosuch@bus.test\r\nAction: failed\r\n")
    assert authenticity.judge(raw, registry).detail == (
        "5.1.1 smtp; 550 5.1.1 <nosuch@bus.test>: Recipient address rejected"
    )


def test_a_failed_recipient_with_an_at_sign_in_its_local_part_is_vouched_for_by_its_last_domain() -> None:
    """A report's recipient is hostile text: ``"a@evil.test"@people.test`` is a mailbox at
    people.test, whose own mail system (and no other) may vouch for its failure."""
    speaks_for = authenticity._speaks_for  # noqa: SLF001  (the one rule, on hostile text)
    assert speaks_for('"a@evil.test"@people.test', "mx.people.test", "bus.test") == ("people.test",)
    assert speaks_for('"a@people.test"@evil.test', "mx.people.test", "bus.test") == ()
    assert speaks_for("a@people.test", "mx.bus.test", "bus.test") == ("bus.test",)
    assert speaks_for("a@people.test", "", "bus.test") == ()


def test_a_doubted_reports_reasons_are_word_for_word(mailserver_bus: Registry) -> None:
    stamp = ["mail.bus.test; dkim=pass header.d=bus.test"]
    delayed = authenticity.judge(_report([("Final-Recipient", "beta@bus.test", "delayed")], stamp), mailserver_bus)
    assert delayed.unvouched == "it names no failed recipient (Final-Recipient with Action: failed)"
    unstamped = authenticity.judge(_report([("Final-Recipient", "beta@bus.test", "failed")], []), mailserver_bus)
    assert unstamped.unvouched == (
        "the bus's mail server does not vouch for it (no trusted Authentication-Results passing DKIM or "
        "DMARC for bus.test or the failed recipient's domain)"
    )


def test_a_letter_a_reader_fails_on_is_quarantined_under_what_its_headers_said(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(raw: bytes, registry: Registry, *, at: float | None = None) -> authenticity.Verdict:
        raise RuntimeError("a reader's bug")

    monkeypatch.setattr(authenticity, "judge_unguarded", broken)
    verdict = authenticity.judge(letter_bytes(), registry)
    assert (verdict.route, verdict.reason) == ("quarantine", "malformed")
    assert verdict.summary == {"from": "alpha@bus.test", "message_id": "<01a.alpha@bus.test>"}
    assert (
        verdict.detail == "agentmail failed on this letter in judging (RuntimeError); it is kept here for a bug report"
    )
    nameless = authenticity.judge(b"no header of a letter\r\n", registry)  # nothing to say it by
    assert (nameless.reason, nameless.summary) == ("malformed", None)


def test_a_letter_is_judged_with_the_keys_valid_when_it_arrived(registry: Registry, home: Path) -> None:
    """``at`` reaches the key check (rebuild judges a letter as of its filing): a previous key's
    window that has ended since still covers a letter that arrived inside it."""
    _client(home, "alpha").send("beta", "Signed before", OPENER)
    bus.keygen(home, registry, "alpha", overlap=3600)
    _set_until(home, "2000-01-01T00:00:00Z")
    (path,) = (home / "postoffice" / "beta" / "new").iterdir()
    rotated = registry_mod.load(home / "registry")
    assert authenticity.judge(path.read_bytes(), rotated, at=946_684_000).route == "accept"  # 1999-12-31
    assert authenticity.judge(path.read_bytes(), rotated).reason == "unauthenticated"
