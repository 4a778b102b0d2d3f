"""A delivery report is believed only from the bus's own mail system (issue 37): on smtp+imap
one its trusted Authentication-Results vouch for (DKIM or DMARC pass for the bus's domain or the
failed recipient's, no trusted fail), naming who failed; on the local post office, none (it
writes no reports). The report is hostile input: every shape is judged without raising."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmail.admin import bus
from agentmail.cli import mcp_server
from agentmail.client.facade import AgentMail
from agentmail.config.registry import Registry
from agentmail.transport.local import deliver
from agentmail.trust import authenticity

from ..conftest import OPENER
from ..depth import examples, suppressed

MID = b"<01sent.alpha@bus.test>"


def _report(
    recipients: list[tuple[str, str, str]], stamps: list[str], sender: str = "MAILER-DAEMON@mail.bus.test"
) -> bytes:
    """A DSN naming MID, one per-recipient block per (field, address, action), under ``stamps``,
    from ``sender`` (a mail system's address)."""
    blocks = "".join(f"{field}: rfc822; {address}\r\nAction: {action}\r\nStatus: 5.1.1\r\n\r\n"
                     for field, address, action in recipients)  # fmt: skip
    head = "".join(f"Authentication-Results: {stamp}\r\n" for stamp in stamps)
    return (
        head + f"From: {sender}\r\nTo: alpha@bus.test\r\nSubject: Undelivered\r\n"
        "Message-ID: <dsn.1@mail.bus.test>\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        "--b\r\nContent-Type: text/plain\r\n\r\nsorry\r\n\r\n"
        "--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mail.bus.test\r\n\r\n"
        + blocks
        + "--b\r\nContent-Type: text/rfc822-headers\r\n\r\nFrom: alpha@bus.test\r\nMessage-ID: "
        + MID.decode()
        + "\r\n\r\n--b--\r\n"
    ).encode()


@pytest.fixture
def mailserver_bus(home: Path) -> Registry:
    endpoints = bus.endpoints("127.0.0.1:2525", "127.0.0.1:1143", ("none",), None, ("mail.bus.test",))
    return bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", transport="smtp+imap",
                    endpoints=endpoints)  # fmt: skip


def test_a_report_the_trusted_server_vouches_for_names_who_failed(mailserver_bus: Registry) -> None:
    raw = _report([("Final-Recipient", "Beta+thr-1@bus.test", "failed"), ("Original-Recipient", "<x@p.test>", "failed")],
                  ["mail.bus.test; dkim=pass header.d=bus.test"])  # fmt: skip
    verdict = authenticity.judge(raw, mailserver_bus)
    assert (verdict.route, verdict.bounced_message_id, verdict.unvouched) == ("bounce", MID.decode(), None)
    assert verdict.failed_recipients == ("beta+thr-1@bus.test", "x@p.test")  # bus.test vouches for any


def test_another_domain_vouches_only_for_its_own_recipients(mailserver_bus: Registry) -> None:
    """A partner's mail system may report on its own mailboxes, never on the bus's: a report
    signed by evil.test that also names beta@bus.test is believed for x@evil.test alone."""
    raw = _report([("Final-Recipient", "beta@bus.test", "failed"), ("Final-Recipient", "x@evil.test", "failed")],
                  ["mail.bus.test; dkim=pass header.d=evil.test"], "MAILER-DAEMON@evil.test")  # fmt: skip
    verdict = authenticity.judge(raw, mailserver_bus)
    assert verdict.unvouched is None and verdict.failed_recipients == ("x@evil.test",)


@pytest.mark.parametrize(
    ("stamps", "recipients", "doubt"),
    [
        ([], [("Final-Recipient", "beta@bus.test", "failed")], "does not vouch for it"),
        (["evil.test; dkim=pass header.d=bus.test"], [("Final-Recipient", "beta@bus.test", "failed")], "vouch"),
        (["mail.bus.test; dkim=pass header.d=evil.test"], [("Final-Recipient", "beta@bus.test", "failed")], "vouch"),
        (["mail.bus.test; dkim=pass header.d=notbus.test"], [("Final-Recipient", "beta@bus.test", "failed")], "vouch"),
        (
            ["mail.bus.test; dkim=pass header.d=bus.test; spf=fail smtp.helo=x"],
            [("Final-Recipient", "beta@bus.test", "failed")],
            "vouch",
        ),  # fmt: skip
        (
            ["mail.bus.test; dkim=pass header.d=bus.test"],
            [("Final-Recipient", "beta@bus.test", "delayed")],
            "names no failed recipient",
        ),  # fmt: skip
        (
            ["mail.bus.test; dkim=pass header.d=bus.test"],
            [("Final-Recipient", "not an address", "failed")],
            "names no failed recipient",
        ),  # fmt: skip
    ],
)
def test_a_report_nothing_trusted_vouches_for_is_doubted(
    mailserver_bus: Registry, stamps: list[str], recipients: list[tuple[str, str, str]], doubt: str
) -> None:
    verdict = authenticity.judge(_report(recipients, stamps), mailserver_bus)
    assert verdict.route == "bounce" and doubt in (verdict.unvouched or "")


def test_the_failed_recipients_domain_may_vouch_for_its_own_report(mailserver_bus: Registry) -> None:
    raw = _report(
        [("Final-Recipient", "carol@people.test", "failed")],
        ["mail.bus.test; dmarc=pass header.from=mx.people.test"],
        "postmaster@mx.people.test",
    )
    assert authenticity.judge(raw, mailserver_bus).unvouched is None


def test_on_the_local_post_office_no_report_is_believed(registry: Registry) -> None:
    raw = _report([("Final-Recipient", "beta@bus.test", "failed")], ["mail.bus.test; dkim=pass header.d=bus.test"])
    verdict = authenticity.judge(raw, registry)
    assert verdict.route == "bounce" and "the local post office writes no delivery reports" in (verdict.unvouched or "")


ADDRESSES = st.sampled_from(["beta@bus.test", "Beta+thr-1@Bus.Test", "x@people.test", "<beta@bus.test>", "", "a b@c",
                             "beta@evil.test", "\u00e9@bus.test"])  # fmt: skip
STAMPS = st.sampled_from([
    "mail.bus.test; dkim=pass header.d=bus.test",
    "mail.bus.test; dkim=pass header.d=mail.bus.test",
    "mail.bus.test; dkim=pass header.d=people.test",
    "mail.bus.test; dmarc=pass header.from=bus.test",
    "mail.bus.test; dkim=fail header.d=bus.test",
    "mail.bus.test; dkim=pass header.d=evil.test",
    "other.test; dkim=pass header.d=bus.test",
    "mail.bus.test; dkim=pass",
    "mail.bus.test; garbage ((",
])  # fmt: skip


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=suppressed(HealthCheck.function_scoped_fixture))  # fmt: skip
@given(
    recipients=st.lists(
        st.tuples(
            st.sampled_from(["Final-Recipient", "Original-Recipient", "X-Recipient"]),
            ADDRESSES,
            st.sampled_from(["failed", "FAILED", "delayed", "delivered", ""]),
        ),  # fmt: skip
        max_size=3,
    ),
    stamps=st.lists(STAMPS, max_size=3),
    sender=st.sampled_from(
        ["MAILER-DAEMON@mail.bus.test", "postmaster@people.test", "dave@people.test", "mailer-daemon@mx.evil.test"]
    ),  # fmt: skip
)
def test_a_report_is_believed_exactly_when_a_trusted_pass_covers_a_failed_recipient(
    mailserver_bus: Registry, recipients: list[tuple[str, str, str]], stamps: list[str], sender: str
) -> None:
    verdict = authenticity.judge(_report(recipients, stamps, sender), mailserver_bus)
    assert verdict.route == "bounce" and verdict.bounced_message_id == MID.decode()
    failed = []
    for field, address, action in recipients:
        plain = address.strip("<>").lower()
        if field != "X-Recipient" and action.lower() == "failed" and plain and " " not in plain and plain.isascii():
            failed.append(plain) if plain not in failed else None
    trusted = [s for s in stamps if s.startswith("mail.bus.test;")]
    fails = any("=fail" in s or "((" in s for s in trusted)
    passes = {s.rpartition("=")[2] for s in trusted if "=pass header." in s}

    local, _, system = sender.lower().partition("@")  # a domain's mail system speaks for its mailboxes

    def covered(address: str) -> bool:
        domain = address.rpartition("@")[2]
        speaks = local in ("mailer-daemon", "postmaster") and (system == domain or system.endswith("." + domain))
        from_bus = local in ("mailer-daemon", "postmaster") and (system == "bus.test" or system.endswith(".bus.test"))
        owners = (("bus.test",) if from_bus else ()) + ((domain,) if speaks else ())
        return any(d == o or d.endswith("." + o) for d in passes for o in owners)

    vouched = [] if fails else [a for a in failed if covered(a)]
    assert list(verdict.failed_recipients) == vouched
    assert (verdict.unvouched is None) == bool(vouched)


def test_through_mcp_a_report_dropped_in_the_post_office_is_quarantined_not_a_bounce(
    alpha: AgentMail, home: Path
) -> None:
    sent = alpha.send("beta", "Quota", OPENER)
    raw = _report([("Final-Recipient", "beta@bus.test", "failed")], ["mail.bus.test; dkim=pass header.d=bus.test"])
    deliver(home / "postoffice" / "alpha", raw.replace(MID, sent.message_id.encode()))
    assert mcp_server.call(alpha, "inbox", {})["items"] == []  # MCP lists are paged
    (shown,) = mcp_server.call(alpha, "quarantine", {})["items"]
    assert shown["reason"] == "automated" and "not believed" in shown["detail"]
    assert mcp_server.call(alpha, "status", {})["items"][0]["undeliverable"] is False
