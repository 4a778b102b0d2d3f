#!/usr/bin/env python3
"""Prove the loopback mail stack started by ./up behaves as agentmail expects.

Stdlib only (smtplib, imaplib, ssl), so it runs before the project is installed:

    python3 live_tests/mailstack/selftest.py            # reads run/stack.json
    MAILSTACK_DIR=/elsewhere python3 .../selftest.py

Prints one line per check and exits non-zero if any check fails. The last lines are
timings (587 -> INBOX seen by IMAP polling, and IDLE).
"""

from __future__ import annotations

import email
import email.policy
import imaplib
import json
import os
import re
import secrets
import shlex
import smtplib
import ssl
import statistics
import sys
import time
from collections.abc import Callable
from email.message import EmailMessage, Message
from pathlib import Path

HOST = "127.0.0.1"
WAIT = 15.0  # seconds a letter (or a bounce) may take to show up


def load_stack() -> dict:
    run = Path(os.environ.get("MAILSTACK_DIR") or Path(__file__).resolve().parent / "run")
    if (run / "stack.json").exists():
        return json.loads((run / "stack.json").read_text())
    env: dict = {}
    for line in (run / "stack.env").read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = " ".join(shlex.split(value))
    env["users"] = [
        {"address": a, "password": env["MAILSTACK_PASSWORD_" + re.sub("[^A-Za-z0-9]", "_", a)]}
        for a in env["MAILSTACK_USERS"].split()
    ]
    return env


STACK = load_stack()
CTX = ssl.create_default_context(cafile=STACK["MAILSTACK_CA"])
PASSWORDS = {u["address"]: u["password"] for u in STACK["users"]}
AUTHSERV = STACK["MAILSTACK_AUTHSERV_ID"]
SUBMISSION = int(STACK["MAILSTACK_SUBMISSION_PORT"])
MX = int(STACK["MAILSTACK_MX_PORT"])
IMAPS = int(STACK["MAILSTACK_IMAP_PORT"])
IMAP_STARTTLS = int(STACK["MAILSTACK_IMAP_STARTTLS_PORT"])
failures = 0


def check(name: str, fn: Callable[[], str | None]) -> None:
    global failures
    try:
        detail = fn()
    except Exception as exc:  # one failed check must not hide the others
        failures += 1
        print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
    else:
        print(f"ok   {name}" + (f" ({detail})" if detail else ""), flush=True)


def letter(sender: str, to: str, token: str, **headers: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = f"mailstack selftest {token}"
    msg["Date"] = email.utils.formatdate(localtime=True)
    msg["Message-ID"] = email.utils.make_msgid(idstring=token, domain=sender.split("@")[1])
    for key, value in headers.items():
        msg[key.replace("_", "-")] = value
    msg.set_content(f"token {token}\n")
    return msg


def submit(user: str) -> smtplib.SMTP:
    smtp = smtplib.SMTP(HOST, SUBMISSION, timeout=10)
    smtp.starttls(context=CTX)
    smtp.login(user, PASSWORDS[user])
    return smtp


def mailbox(user: str) -> imaplib.IMAP4_SSL:
    imap = imaplib.IMAP4_SSL(HOST, IMAPS, ssl_context=CTX, timeout=10)
    imap.login(user, PASSWORDS[user])
    imap.select("INBOX")
    return imap


def wait_for(imap: imaplib.IMAP4, token: str, where: str = "SUBJECT") -> Message:
    """Poll until a letter carrying token arrives; return its parsed headers (and body)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        _, data = imap.uid("SEARCH", where, token)
        uids = data[0].split()
        if uids:
            _, parts = imap.uid("FETCH", uids[-1], "(BODY.PEEK[])")
            return email.message_from_bytes(parts[0][1], policy=email.policy.compat32)
        time.sleep(0.005)
    raise TimeoutError(f"no letter with {token} in {WAIT:.0f}s")


def results(msg: Message, method: str) -> list[str]:
    """Our own authserv-id's verdicts for method, e.g. ['pass']."""
    out = []
    for value in msg.get_all("Authentication-Results", []):
        value = " ".join(value.split())
        if value.split(";")[0].strip() != AUTHSERV:
            continue
        for clause in value.split(";")[1:]:
            clause = clause.strip()
            if clause.startswith(method + "="):
                out.append(clause.split("=", 1)[1].split()[0])
    return out


# --- checks ---------------------------------------------------------------------------


def genuine_letter() -> str:
    token = secrets.token_hex(6)
    to = "beta+thr-abc123@bus.test"
    with submit("alpha@bus.test") as smtp:
        smtp.send_message(letter("alpha@bus.test", to, token))
    imap = mailbox("beta@bus.test")
    msg = wait_for(imap, token)
    imap.logout()
    assert msg["Delivered-To"] == to, f"Delivered-To is {msg['Delivered-To']!r}"
    assert results(msg, "dkim") == ["pass"], f"dkim verdicts {results(msg, 'dkim')}"
    assert results(msg, "dmarc") == ["pass"], f"dmarc verdicts {results(msg, 'dmarc')}"
    sig = " ".join(msg["DKIM-Signature"].split())
    assert "d=bus.test;" in sig and "s=mail;" in sig, sig
    return f"Delivered-To {to}, dkim=pass dmarc=pass, signed d=bus.test s=mail"


def partner_letter() -> str:
    token = secrets.token_hex(6)
    with submit("gamma@partner.test") as smtp:
        smtp.send_message(letter("gamma@partner.test", "alpha@bus.test", token))
    imap = mailbox("alpha@bus.test")
    msg = wait_for(imap, token)
    imap.logout()
    assert results(msg, "dkim") == ["pass"] and results(msg, "dmarc") == ["pass"], msg.get_all("Authentication-Results")
    assert "d=partner.test;" in " ".join(msg["DKIM-Signature"].split())
    return "gamma@partner.test -> alpha: dkim=pass d=partner.test, dmarc=pass"


def forgery_at_mx() -> str:
    token = secrets.token_hex(6)
    forged = letter(
        "alpha@bus.test",
        "beta@bus.test",
        token,
        Authentication_Results=f"{AUTHSERV}; dkim=pass header.d=bus.test; dmarc=pass",
    )
    with smtplib.SMTP(HOST, MX, timeout=10) as smtp:
        smtp.send_message(forged)
    imap = mailbox("beta@bus.test")
    msg = wait_for(imap, token)
    imap.logout()
    assert "pass" not in results(msg, "dkim"), msg.get_all("Authentication-Results")
    assert results(msg, "dmarc") == ["fail"], msg.get_all("Authentication-Results")
    return f"dmarc=fail, dkim={','.join(results(msg, 'dkim')) or '-'}, forged A-R stripped"


def sender_mismatch() -> str:
    token = secrets.token_hex(6)
    with submit("alpha@bus.test") as smtp:
        try:
            smtp.send_message(letter("beta@bus.test", "gamma@partner.test", token))
        except smtplib.SMTPRecipientsRefused as exc:
            code, reply = next(iter(exc.recipients.values()))
        except smtplib.SMTPSenderRefused as exc:
            code, reply = exc.smtp_code, exc.smtp_error
        else:
            raise AssertionError("alpha was allowed to send as beta")
    assert code == 553, (code, reply)
    return f"{code} {reply.decode().split(':')[-1].strip()}"


def auth_needs_tls() -> str:
    with smtplib.SMTP(HOST, SUBMISSION, timeout=10) as smtp:
        smtp.ehlo()
        assert not smtp.has_extn("auth"), "AUTH offered before STARTTLS"
        try:
            smtp.login("alpha@bus.test", PASSWORDS["alpha@bus.test"])
        except smtplib.SMTPNotSupportedError:
            pass
        else:
            raise AssertionError("login worked without TLS")
    return "no AUTH before STARTTLS"


def wrong_password() -> str:
    with smtplib.SMTP(HOST, SUBMISSION, timeout=10) as smtp:
        smtp.starttls(context=CTX)
        try:
            smtp.login("alpha@bus.test", "not-the-password")
        except smtplib.SMTPAuthenticationError as exc:
            assert exc.smtp_code == 535, exc
            return "535"
    raise AssertionError("wrong password accepted")


def unknown_at_mx() -> str:
    with smtplib.SMTP(HOST, MX, timeout=10) as smtp:
        try:
            smtp.sendmail("x@partner.test", ["nosuchuser@bus.test"], b"Subject: x\r\n\r\nx\r\n")
        except smtplib.SMTPRecipientsRefused as exc:
            code, _ = exc.recipients["nosuchuser@bus.test"]
            assert code == 550, exc
            return "550 at RCPT"
    raise AssertionError("unknown recipient accepted at 25")


def bounce_on_submission() -> str:
    token = secrets.token_hex(6)
    with submit("alpha@bus.test") as smtp:
        refused = smtp.send_message(letter("alpha@bus.test", "nosuchuser@bus.test", token))
    assert not refused, refused  # 587 accepts, then bounces
    imap = mailbox("alpha@bus.test")
    dsn = wait_for(imap, token, where="TEXT")
    imap.logout()
    assert dsn.get_content_type() == "multipart/report", dsn.get_content_type()
    assert dsn.get_param("report-type") == "delivery-status"
    status = [p for p in dsn.walk() if p.get_content_type() == "message/delivery-status"]
    text = status[0].as_string() if status else ""
    assert "5.1.1" in text, text
    return f"accepted with 250, DSN from {dsn['From']} status 5.1.1"


def sent_folder() -> str:
    imap = mailbox("gamma@partner.test")
    _, listed = imap.list('""', "*")
    _, subscribed = imap.lsub('""', "*")
    imap.logout()
    assert any(b"\\Sent" in x and b"Sent" in x for x in listed), listed
    assert any(x.endswith(b"Sent") or x.endswith(b'"Sent"') for x in subscribed), subscribed
    return "Sent exists, \\Sent, subscribed"


def imap_starttls() -> str:
    imap = imaplib.IMAP4(HOST, IMAP_STARTTLS, timeout=10)
    imap.starttls(ssl_context=CTX)
    imap.login("beta@bus.test", PASSWORDS["beta@bus.test"])
    imap.logout()
    return f"STARTTLS + LOGIN on {IMAP_STARTTLS}"


IDLE_SECONDS: list[float] = []


def idle() -> str:
    imap = mailbox("gamma@partner.test")
    imap.send(b"i1 IDLE\r\n")
    assert imap.readline().startswith(b"+"), "no IDLE continuation"
    token = secrets.token_hex(6)
    start = time.monotonic()
    with smtplib.SMTP(HOST, MX, timeout=10) as smtp:
        smtp.sendmail("x@bus.test", ["gamma@partner.test"], f"Subject: idle {token}\r\n\r\n.\r\n")
    imap.sock.settimeout(WAIT)
    while b"EXISTS" not in (line := imap.readline()):
        assert line, "connection closed while idling"
    IDLE_SECONDS.append(time.monotonic() - start)
    imap.send(b"DONE\r\n")
    while not imap.readline().startswith(b"i1 "):
        pass
    imap.logout()
    return f"EXISTS {IDLE_SECONDS[-1] * 1000:.0f} ms after the letter went to 25"


def latency(n: int = 10) -> str:
    """Sequential letters on one SMTP and one IMAP connection, IMAP polled every 5 ms."""
    accepted, seen = [], []
    imap = mailbox("beta@bus.test")
    with submit("alpha@bus.test") as smtp:
        for _ in range(n):
            token = secrets.token_hex(6)
            msg = letter("alpha@bus.test", "beta+thr-abc123@bus.test", token)
            start = time.monotonic()
            smtp.send_message(msg)
            accepted.append(time.monotonic() - start)
            wait_for(imap, token)
            seen.append(time.monotonic() - start)
    imap.logout()
    ms = " ".join(f"{x * 1000:.0f}" for x in seen)
    median_250 = statistics.median(accepted) * 1000
    median_seen = statistics.median(seen) * 1000
    return (
        f"{n} letters 587 -> beta INBOX: SMTP 250 median {median_250:.1f} ms,"
        f" seen over IMAP median {median_seen:.1f} ms [{ms}]"
    )


def main() -> int:
    print(f"mailstack selftest against {STACK['MAILSTACK_DIR']}")
    check("587 alpha -> beta+thr-abc123 (plus tag, DKIM, DMARC)", genuine_letter)
    check("587 partner.test signs and passes", partner_letter)
    check("25 forgery From alpha@bus.test judged", forgery_at_mx)
    check("587 alpha cannot send as beta", sender_mismatch)
    check("587 AUTH refused before STARTTLS", auth_needs_tls)
    check("587 wrong password refused", wrong_password)
    check("25 unknown recipient rejected", unknown_at_mx)
    check("587 unknown local recipient bounces to sender", bounce_on_submission)
    check("Sent folder auto-created", sent_folder)
    check("143 STARTTLS login", imap_starttls)
    check("993 IDLE notices new mail", idle)
    check("latency", latency)
    print("all checks passed" if not failures else f"{failures} check(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
