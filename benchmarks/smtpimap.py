"""Figure 7: the ``smtp+imap`` transport, against real SMTP and IMAP servers on 127.0.0.1.

The servers are the project's in-process test servers (``tests/mailservers``: aiosmtpd and a
compact IMAP server, STARTTLS submission and implicit-TLS IMAP as in production). They run
on a thread of this process, so both sides of every figure share them alike. Skipped, with
a printed note, when the transport or the servers are not there.

7a. warm delivery latency: ``send()`` → an already-running ``agentmail wait`` (IMAP IDLE)
    returns. Baseline: smtplib submits the same bytes; a bare imaplib reader in IDLE sees them.
7b. send throughput: ``send()`` (one SMTP session per letter, as the API does it). Baseline:
    smtplib sends the same bytes over one session.

TODO(smtp+imap): sync throughput over IMAP (batched FETCH + verify + commit) beside imaplib
fetching the same messages; targets for these figures once the project sets them.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from . import bare, letters
from .common import DOMAIN, PYTHON, Settings, TempBus
from .report import Figure, median, p95
from .waiting import sleeping, time_answer

PASSWORDS = {"alpha": "bench-alpha-pw", "beta": "bench-beta-pw"}
WARMUP = 2


def unavailable() -> str | None:
    """Why figure 7 cannot run here, or None."""
    for module in ("agentmail.transport.smtpimap", "tests.mailservers", "aiosmtpd"):
        try:
            found = importlib.util.find_spec(module)
        except ImportError:
            found = None
        if found is None:
            return f"{module} is not available"
    return None


def figures(root: Path, settings: Settings) -> list[Figure]:
    reason = unavailable()
    if reason:
        print(f" skipped: {reason} (figure 7 needs the smtp+imap transport and tests/mailservers)", end="")
        return [
            Figure(key, title, unit, None, None, "", skipped=reason)
            for key, title, unit in (
                ("smtpimap_latency", "7a. smtp+imap: warm delivery latency", "ms"),
                ("smtpimap_send", "7b. smtp+imap: send throughput", "letters/s"),
            )
        ]
    with _servers() as servers:
        tb = _bus(root, servers)
        try:
            return [_latency(tb, servers, settings), _send(tb, servers, settings)]
        finally:
            tb.remove()


@contextmanager
def _servers() -> Iterator[Any]:
    from tests.mailservers import MailServers

    users = {f"{name}@{DOMAIN}": password for name, password in PASSWORDS.items()}
    with MailServers(DOMAIN, users, smtp_tls="starttls", imap_tls="implicit") as servers:
        yield servers


def _bus(root: Path, servers: Any) -> TempBus:
    from agentmail.admin import bus
    from agentmail.config.credentials import Login, write_login

    endpoints = bus.endpoints(
        f"127.0.0.1:{servers.smtp_port}",
        f"127.0.0.1:{servers.imap_port}",
        ("starttls", "implicit"),
        str(servers.ca_file),
        (f"mail.{DOMAIN}",),
    )
    tb = TempBus(root, tuple(PASSWORDS), transport="smtp+imap", endpoints=endpoints)
    for name, password in PASSWORDS.items():
        write_login(tb.home, name, Login(f"{name}@{DOMAIN}", password))
    return tb


def _idling(servers: Any, before: int) -> Any:
    """Ready once the server has seen a new IDLE and the waiter sleeps on its socket."""
    return lambda pid: servers.store.counts["imap.IDLE"] > before and sleeping(pid)


def _latency(tb: TempBus, servers: Any, settings: Settings) -> Figure:
    alpha, beta = tb.client("alpha"), tb.client("beta")
    body = letters.OPENER.format(sender="alpha", to="beta")
    waiter = tb.command("beta", "wait", "--timeout", "60")
    reader = [
        PYTHON,
        bare.__file__,
        "imap-wait",
        "127.0.0.1",
        str(servers.imap_port),
        f"beta@{DOMAIN}",
        str(servers.ca_file),
    ]
    reader_env = {**tb.env, "BARE_PASSWORD": PASSWORDS["beta"]}
    raw = b""
    ours: list[float] = []
    base: list[float] = []

    def submit() -> None:
        with bare.smtp_session(
            "127.0.0.1", servers.smtp_port, f"alpha@{DOMAIN}", PASSWORDS["alpha"], str(servers.ca_file)
        ) as smtp:
            smtp.sendmail(f"alpha@{DOMAIN}", [f"beta@{DOMAIN}"], raw)

    for index in range(WARMUP + settings.smtp_samples):
        ready = _idling(servers, servers.store.counts["imap.IDLE"])
        answer = time_answer(waiter, tb.env, tb.home, partial(alpha.send, "beta", "Latency probe", body), ready)
        beta.done(answer.output.split()[0].decode())
        raw = raw or alpha.spool.read.raw(alpha.spool.read.ids("sent")[-1])
        ready = _idling(servers, servers.store.counts["imap.IDLE"])
        bare_answer = time_answer(reader, reader_env, tb.home, submit, ready)
        if index >= WARMUP:
            ours.append(answer.to_output * 1e3)
            base.append(bare_answer.to_output * 1e3)
    alpha.close()
    beta.close()
    return Figure(
        "smtpimap_latency",
        "7a. smtp+imap: warm delivery latency",
        "ms",
        median(ours),
        median(base),
        "smtplib + imaplib IDLE",
        None,
        len(ours),
        {"p95": p95(ours), "baseline_p95": p95(base)},
    )


def _send(tb: TempBus, servers: Any, settings: Settings) -> Figure:
    alpha = tb.client("alpha")
    body = letters.OPENER.format(sender="alpha", to="beta")
    alpha.send("beta", "Warm-up", body)
    count = settings.smtp_samples * 5
    before = set(alpha.spool.read.ids("sent"))
    start = time.perf_counter()
    for index in range(count):
        alpha.send("beta", f"Throughput probe {index}", body)
    ours = count / (time.perf_counter() - start)
    raws = [alpha.spool.read.raw(i) for i in alpha.spool.read.ids("sent") if i not in before]
    start = time.perf_counter()
    with bare.smtp_session(
        "127.0.0.1", servers.smtp_port, f"alpha@{DOMAIN}", PASSWORDS["alpha"], str(servers.ca_file)
    ) as smtp:
        for raw in raws:
            smtp.sendmail(f"alpha@{DOMAIN}", [f"beta@{DOMAIN}"], raw)
    base = len(raws) / (time.perf_counter() - start)
    start = time.perf_counter()
    for raw in raws:  # what the API does: a session per letter; shows what a reused session saves
        with bare.smtp_session(
            "127.0.0.1", servers.smtp_port, f"alpha@{DOMAIN}", PASSWORDS["alpha"], str(servers.ca_file)
        ) as smtp:
            smtp.sendmail(f"alpha@{DOMAIN}", [f"beta@{DOMAIN}"], raw)
    per_session = len(raws) / (time.perf_counter() - start)
    alpha.close()
    return Figure(
        "smtpimap_send",
        "7b. smtp+imap: send throughput",
        "letters/s",
        ours,
        base,
        "smtplib, one session",
        None,
        1,
        {"letters": count, "baseline_session_per_letter": per_session},
    )
