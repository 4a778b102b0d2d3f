"""The pure guards: credential and path-only bodies, reply refusals, opener advice."""

from __future__ import annotations

import pytest

from agentmail import guards


@pytest.mark.parametrize("body", [
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
    "key id AKIAABCDEFGHIJKLMNOP leaked",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
    "DATABASE_PASSWORD=s3cr3t-value",
    "export API_KEY='abcdef123456'",
    "login with password: hunter2hunter2",
    "sk-proj-abcdefghijklmnopqrstuvwx",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
])  # fmt: skip
def test_credential_looking_bodies_are_refused(body: str) -> None:
    assert "looks like it contains" in (guards.body_refusal(body) or "")


@pytest.mark.parametrize("body", ["/var/log/app.log", "~/notes/report.md", "./out/trace.txt", "report.md", "@report.md"])
def test_path_only_bodies_are_refused(body: str) -> None:
    assert "only a path" in (guards.body_refusal(body) or "")


@pytest.mark.parametrize("body", [
    "The password reset endpoint returns 500.",
    "See the attached output:\n/var/log/app.log: line 3: KeyError",
    "Tokens expire after 3600 s instead of 7200 s.",
])  # fmt: skip
def test_ordinary_bodies_pass(body: str) -> None:
    assert guards.body_refusal(body) is None


def test_reply_refusals_in_order() -> None:
    base = {"id": "01x", "state": "read", "type": "report", "thread": "thr-abcdef"}
    assert guards.reply_refusal(base, None, 1) is None
    assert "quarantined" in (guards.reply_refusal({**base, "state": "quarantine", "reason": "unauthenticated"}, None, 1) or "")
    assert "one you sent" in (guards.reply_refusal({**base, "state": "sent"}, None, 1) or "")
    assert "never answered" in (guards.reply_refusal({**base, "type": "close"}, None, 1) or "")
    assert "already answered" in (guards.reply_refusal(base, "01y", 1) or "")
    assert "needs a human" in (guards.reply_refusal(base, None, 20) or "")


def test_opener_advice_is_exempt_for_ack_and_close() -> None:
    assert guards.opener_warnings("ack", "ok") == []
    assert guards.opener_warnings("close", "done") == []
    assert len(guards.opener_warnings("report", "broken")) >= 6
