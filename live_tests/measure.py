#!/usr/bin/env python3
"""Measurements on the live bus, each beside a raw baseline on the same servers, same run.

    python live_tests/measure.py                  # 50 latency samples, 500 letters
    python live_tests/measure.py --samples 20 --letters 200 --json out.json

1. send -> wait latency: ``AgentMail.send`` on one platform until ``AgentMail.wait`` returns the
   letter on another (compose, sign, submit on a new SMTP connection, MTA, IMAP, parse, DKIM
   check, spool commit), median and p95. Baseline: smtplib on a new connection per letter
   (STARTTLS, AUTH) while imapclient already sits in IDLE; the clock stops when the body is
   fetched. Both again with NOOP polling every 50 ms (agentmail: ``[imap] poll_interval``),
   because Dovecot delays IDLE notifications by a fixed ~0.5 s.
2. throughput: N letters queued in the outbox, then one ``flush`` submits them all over one
   connection; the clock stops when the receiver's spool holds all N (a second thread syncs
   all along). Baseline: smtplib sending N prebuilt letters over one connection until IMAP
   shows all N in the INBOX.

The bus is the one the live checks use (live_tests/livebus.py): the loopback stack by default.
Letters go from the sender to the receiver (latency) and to the partner (throughput).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import smtplib
import ssl
import statistics
import sys
import tempfile
import threading
import time
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import imapclient  # noqa: E402
import livebus  # noqa: E402

from agentmail.client.facade import AgentMail  # noqa: E402
from agentmail.config import registry as registry_mod  # noqa: E402
from agentmail.config.credentials import mailbox_login  # noqa: E402
from agentmail.config.identity import Identity  # noqa: E402
from agentmail.config.registry import Registry  # noqa: E402
from agentmail.model import new_thread_id  # noqa: E402
from agentmail.stages.compose import Draft, compose  # noqa: E402

BODY = (
    "I am the agent of {me}; measuring the live bus ({token}).\n"
    "Reproduction: `curl -s https://x.example/quota?id=7` returns 500 since 2.4.1 (2026-11-28).\n"
    "Expected 200 per the documented contract. Blast radius: the free plan.\n"
)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "median_ms": round(statistics.median(ms), 1),
        "p95_ms": round(pct(ms, 95), 1),
        "min_ms": round(min(ms), 1),
        "max_ms": round(max(ms), 1),
        "n": len(ms),
    }


class Bench:
    def __init__(self, root: Path) -> None:
        self.cfg = livebus.load_config()
        self.registry_dir, self.home = livebus.snapshot(self.cfg, root)
        self.registry = registry_mod.load(self.registry_dir)
        bus = self.registry.bus
        assert bus.smtp and bus.imap
        self.smtp, self.imap = bus.smtp, bus.imap
        self.context = ssl.create_default_context(cafile=bus.ca_file) if bus.ca_file else ssl.create_default_context()

    def login(self, platform: str) -> tuple[str, str]:
        entry = self.registry.platforms[platform]
        login = mailbox_login(self.home, platform, entry.address)
        return login.username, login.password

    def client(self, platform: str, registry: Registry | None = None, home: Path | None = None) -> AgentMail:
        am = AgentMail(registry or self.registry, Identity(platform), home or self.home)
        validity, uidnext = am.transport._select()  # type: ignore[attr-defined]  # skip the mailbox's history
        am.spool.ensure().write.set_checkpoint(am.transport.name, f"{validity}:{max(uidnext - 1, 0)}")
        return am

    # --- raw clients ---------------------------------------------------------------------------

    def smtp_connect(self, platform: str) -> smtplib.SMTP:
        user, password = self.login(platform)
        if self.smtp.tls == "implicit":
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(self.smtp.host, self.smtp.port, context=self.context, timeout=30)
        else:
            smtp = smtplib.SMTP(self.smtp.host, self.smtp.port, timeout=30)
            if self.smtp.tls == "starttls":
                smtp.starttls(context=self.context)
        smtp.login(user, password)
        return smtp

    def imap_connect(self, platform: str) -> imapclient.IMAPClient:
        user, password = self.login(platform)
        client = imapclient.IMAPClient(
            self.imap.host, port=self.imap.port, ssl=self.imap.tls == "implicit", ssl_context=self.context, timeout=30
        )
        if self.imap.tls == "starttls":
            client.starttls(self.context)
        client.login(user, password)
        return client

    def raw_letter(self, sender: str, to: str, subject: str) -> EmailMessage:
        msg = EmailMessage()
        msg["From"] = self.registry.platforms[sender].address
        msg["To"] = self.registry.platforms[to].address
        msg["Subject"] = subject
        msg["Date"] = formatdate(localtime=True)
        msg["Message-ID"] = make_msgid(domain=self.registry.platforms[sender].domain)
        msg.set_content(BODY.format(me=sender, token=subject))
        return msg


# --- 1. latency --------------------------------------------------------------------------------


def agentmail_latency(b: Bench, samples: int, poll: float | None) -> list[float]:
    registry = b.registry if poll is None else b.registry.replace(bus=b.registry.bus.replace(poll_interval=poll))
    sender, receiver = b.client(b.cfg.sender, registry), b.client(b.cfg.receiver, registry)
    times = []
    try:
        for i in range(samples + 1):  # the first warms connections and caches; not counted
            token = f"lat{secrets.token_hex(4)}"
            started = time.perf_counter()
            sent = sender.send(b.cfg.receiver, f"Latency {token}", BODY.format(me=b.cfg.sender, token=token))
            letter, _ = receiver.wait(30, thread=sent.thread)
            took = time.perf_counter() - started
            receiver.done(letter.id)
            if i:
                times.append(took)
    finally:
        sender.close()
        receiver.close()
    return times


def raw_latency(b: Bench, samples: int, poll: float | None) -> list[float]:
    imap = b.imap_connect(b.cfg.receiver)
    imap.select_folder("INBOX")
    times = []
    try:
        for i in range(samples + 1):
            token = f"raw{secrets.token_hex(4)}"
            msg = b.raw_letter(b.cfg.sender, b.cfg.receiver, f"Latency {token}")
            last = max(imap.search(["ALL"]) or [0])
            if poll is None:
                imap.idle()
            started = time.perf_counter()
            with b.smtp_connect(b.cfg.sender) as smtp:  # a new connection per letter, as agentmail does
                smtp.send_message(msg)
            body = None
            while body is None:
                if poll is None:
                    responses = imap.idle_check(timeout=30)
                    if not any(isinstance(r, tuple) and len(r) > 1 and r[1] == b"EXISTS" for r in responses):
                        continue
                    imap.idle_done()
                else:
                    time.sleep(poll)
                    imap.noop()
                new = [u for u in imap.search(["UID", f"{last + 1}:*"]) if u > last]
                if new:
                    fetched = imap.fetch(new, ["BODY.PEEK[]"])
                    body = next((d[b"BODY[]"] for d in fetched.values() if token.encode() in d[b"BODY[]"]), None)
                if body is None and poll is None:
                    imap.idle()
            took = time.perf_counter() - started
            if i:
                times.append(took)
    finally:
        imap.logout()
    return times


# --- 2. throughput -----------------------------------------------------------------------------


def agentmail_throughput(b: Bench, letters: int) -> dict[str, float]:
    """Queue ``letters`` in the sender's outbox (what ``send`` does before it submits: compose,
    sign, store durably), then one ``flush`` submits them all over one SMTP connection.

    Queueing goes through ``compose`` and the spool rather than ``send`` with the server
    unreachable: each failed ``send`` re-annotates every queued letter (an fsync each), which
    would make queueing 500 letters quadratic and measure that instead."""
    to = b.cfg.partner or b.cfg.receiver
    token = f"tp{secrets.token_hex(4)}"
    queue = AgentMail(b.registry, Identity(b.cfg.sender), b.home)
    recipient = b.registry.platforms[to]
    started = time.perf_counter()
    for i in range(letters):
        letter, raw = compose(
            queue.registry,
            queue.home,
            queue.me.platform,
            Draft(
                recipient.name,
                "report",
                new_thread_id(),
                f"Throughput {token} {i}",
                BODY.format(me=b.cfg.sender, token=token),
            ),
        )
        queue.spool.write.store("outbox", letter, raw, extra=letter.extra)
    composed = time.perf_counter() - started
    sender, receiver = AgentMail(b.registry, Identity(b.cfg.sender), b.home), b.client(to)
    received: list[int] = []
    done = threading.Event()

    def pull() -> None:
        while len(received) < letters and not done.is_set():
            report = receiver.sync()
            received.extend(1 for x in report.accepted if token in x.subject)
            if len(received) < letters:
                time.sleep(0.02)

    puller = threading.Thread(target=pull)
    started = time.perf_counter()
    puller.start()
    results = sender.flush()
    submitted = time.perf_counter() - started
    puller.join(timeout=120)
    done.set()
    spooled = time.perf_counter() - started
    sender.close()
    receiver.close()
    assert sum(r.status == "sent" for r in results) == letters, {r.status for r in results}
    assert len(received) == letters, f"only {len(received)} of {letters} reached the spool"
    return {
        "letters": letters,
        "compose_sign_queue_s": round(composed, 2),
        "submit_s": round(submitted, 2),
        "until_in_spool_s": round(spooled, 2),
        "letters_per_s": round(letters / spooled, 1),
        "submit_letters_per_s": round(letters / submitted, 1),
    }


def raw_throughput(b: Bench, letters: int) -> dict[str, float]:
    to = b.cfg.partner or b.cfg.receiver
    token = f"tr{secrets.token_hex(4)}"
    msgs = [b.raw_letter(b.cfg.sender, to, f"Throughput {token} {i}").as_bytes() for i in range(letters)]
    imap = b.imap_connect(to)
    info = imap.select_folder("INBOX", readonly=True)
    first = int(info[b"UIDNEXT"])
    sender_address = b.registry.platforms[b.cfg.sender].address
    rcpt = b.registry.platforms[to].address
    started = time.perf_counter()
    with b.smtp_connect(b.cfg.sender) as smtp:
        for raw in msgs:
            smtp.sendmail(sender_address, [rcpt], raw)
    submitted = time.perf_counter() - started
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        imap.noop()
        if len(imap.search(["UID", f"{first}:*", "SUBJECT", token])) >= letters:
            break
        time.sleep(0.02)
    seen = time.perf_counter() - started
    imap.logout()
    return {
        "letters": letters,
        "submit_s": round(submitted, 2),
        "until_in_inbox_s": round(seen, 2),
        "letters_per_s": round(letters / seen, 1),
        "submit_letters_per_s": round(letters / submitted, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--letters", type=int, default=500)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    for name in ("AGENTMAIL_DKIM_KEY", "AGENTMAIL_USERNAME", "AGENTMAIL_PASSWORD"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="agentmail-measure-") as tmp:
        b = Bench(Path(tmp))
        print(f"bus: {b.cfg.origin}; {os.cpu_count()} CPUs", flush=True)
        out: dict[str, object] = {"bus": b.cfg.origin, "cpus": os.cpu_count()}
        for label, fn, poll in (
            ("agentmail send->wait (IDLE)", agentmail_latency, None),
            ("raw smtplib + IMAP IDLE", raw_latency, None),
            ("agentmail send->wait (poll_interval 0.05)", agentmail_latency, 0.05),
            ("raw smtplib + IMAP NOOP poll 0.05", raw_latency, 0.05),
        ):
            stats = summary(fn(b, args.samples, poll))
            out[label] = stats
            print(
                f"{label:<44} median {stats['median_ms']:7.1f} ms   p95 {stats['p95_ms']:7.1f} ms   (n={stats['n']})",
                flush=True,
            )
        for label, fn in (
            ("agentmail flush, one connection, until in spool", agentmail_throughput),
            ("raw smtplib, one connection, until in INBOX", raw_throughput),
        ):
            stats = fn(b, args.letters)
            out[label] = stats
            print(
                f"{label:<52} {stats['letters_per_s']:7.1f} letters/s   (submission alone "
                f"{stats['submit_letters_per_s']:.1f}/s; {json.dumps(stats)})",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
