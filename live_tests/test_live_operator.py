"""The operator's path on the real mail system (issue 14): a new bus made with the documented
commands only, up to a verified round trip; and the ways it can go wrong — a wrong password,
an untrusted CA, the MX port given as submission, a TLS mode mismatch, a login that may not
send as the platform, init run twice — each exit 6 with the fix, nothing queued, no key lost.

Every check makes its own bus (own home and registry, new keys) on the bus under test's
servers and mailboxes, with the CLI exactly as ONBOARDING.md runs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LiveBus, opener, receive

from agentmail.cli.app import main
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login, mailbox_login
from agentmail.config.identity import Identity
from agentmail.spool import Spool


class NewBus:
    """A bus made from nothing with ``agentmail init`` against the live servers."""

    def __init__(
        self, live: LiveBus, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.live, self.root, self.capsys = live, root, capsys
        self.home, self.registry = root / "home", root / "registry"
        self.sender, self.receiver = live.cfg.sender, live.cfg.receiver
        for name in (
            "AGENTMAIL_PLATFORM",
            "AGENTMAIL_AGENT",
            "AGENTMAIL_USERNAME",
            "AGENTMAIL_PASSWORD",
            "AGENTMAIL_DKIM_KEY",
        ):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AGENTMAIL_HOME", str(self.home))
        monkeypatch.setenv("AGENTMAIL_REGISTRY", str(self.registry))
        monkeypatch.chdir(root)
        self.logins = {
            n: mailbox_login(live.home, n, live.registry.platforms[n].address) for n in (self.sender, self.receiver)
        }

    def run(self, *args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def init(self, *, ca: bool = True) -> tuple[int, str, str]:
        b = self.live.registry.bus
        assert b.smtp is not None and b.imap is not None
        args = [
            "init",
            "--transport",
            "smtp+imap",
            "--domain",
            b.domain,
            "--smtp",
            f"{b.smtp.host}:{b.smtp.port}",
            "--imap",
            f"{b.imap.host}:{b.imap.port}",
        ]
        for authserv in b.trusted_authserv_ids:
            args += ["--trust-authserv", authserv]
        if ca and b.ca_file:
            args += ["--ca-file", b.ca_file]
        done = self.run(*args, self.sender, self.receiver)
        if done[0] == 0:  # the session's checks share these mailboxes: no new-thread cap (livebus.prepare)
            assert self.run("bus", "set", "new_threads_per_hour", "0")[0] == 0
        return done

    def credentials(self, name: str, login: Login | None = None) -> None:
        """What the documented one-liner does: owner-only from the start."""
        login = login or self.logins[name]
        old = os.umask(0o077)
        try:
            (self.home / "secrets" / f"{name}.env").write_text(
                f"AGENTMAIL_USERNAME={login.username}\nAGENTMAIL_PASSWORD={login.password}\n"
            )
        finally:
            os.umask(old)

    def spool(self, name: str, state: str) -> list[str]:
        root = self.home / "spool" / name  # the spool's spool.db says which letters are in ``state``
        return Spool(root).read.ids(state) if (root / "spool.db").exists() else []

    def client(self, name: str) -> AgentMail:
        """A client of this new bus whose spool starts at the mailbox's current end."""
        am = AgentMail(registry_mod.load(self.registry), Identity(name), self.home)
        am.spool.ensure().write.set_checkpoint(am.transport.name, am.transport.tip())  # type: ignore[attr-defined]
        return am


@pytest.fixture
def new_bus(
    bus: LiveBus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[NewBus]:
    if bus.registry.bus.transport != "smtp+imap":
        pytest.skip("the operator checks need an smtp+imap bus")
    yield NewBus(bus, tmp_path, monkeypatch, capsys)


def test_from_nothing_to_a_round_trip_and_init_again_changes_no_key(new_bus: NewBus, record_property: object) -> None:
    started = time.monotonic()
    code, out, err = new_bus.init()
    assert code == 0, err
    assert out.count("._domainkey.") == 2  # a TXT record per platform, each its own selector
    new_bus.credentials(new_bus.sender)
    code, out, err = new_bus.run("--as", new_bus.sender, "doctor", "--round-trip")
    elapsed = time.monotonic() - started
    assert code == 0, out + err
    assert "ok   round trip: sent to" in out and "read back in" in out and "matches the pinned key" in out
    assert f"ok   sender: {new_bus.logins[new_bus.sender].username} is the platform's own address" in out
    with new_bus.capsys.disabled():
        print(f"\ninit -> doctor --round-trip passing: {elapsed:.2f} s")
    record_property("init_to_round_trip_seconds", round(elapsed, 2))  # type: ignore[operator]

    keys = {p.name: p.read_bytes() for p in (new_bus.home / "secrets").glob("*.key")}
    code, out, err = new_bus.init()
    assert code == 6 and out == "" and "already exist" in err and "AGENTMAIL_REGISTRY" in err
    assert {p.name: p.read_bytes() for p in (new_bus.home / "secrets").glob("*.key")} == keys


def test_a_wrong_password_queues_nothing_and_the_fixed_send_arrives_once(new_bus: NewBus, token: str) -> None:
    assert new_bus.init()[0] == 0
    sender, receiver = new_bus.sender, new_bus.receiver
    new_bus.credentials(receiver)
    real = new_bus.logins[sender]
    new_bus.credentials(sender, Login(real.username, real.password + "-wrong"))
    reader = new_bus.client(receiver)
    body = opener(sender, receiver, token)
    code, out, err = new_bus.run("--as", sender, "send", receiver, "-s", f"Wrong password {token}", "-b", body)
    assert code == 6 and out == ""
    assert f"refused the login '{real.username}'" in err and f"{sender}.env" in err and "not queued" in err
    assert new_bus.spool(sender, "outbox") == []
    new_bus.credentials(sender)
    code, out, err = new_bus.run("--as", sender, "send", receiver, "-s", f"Wrong password {token}", "-b", body)
    assert code == 0, err
    thread = out.split()[0]
    assert new_bus.run("--as", sender, "inbox")[0] == 0  # the next command: nothing was left to send
    (letter,) = receive(reader, thread)
    assert token in letter.subject
    assert new_bus.spool(sender, "outbox") == [] and len(new_bus.spool(sender, "sent")) == 1
    assert len(new_bus.spool(sender, "failed")) == 1  # the refused one, kept as failed, never sent
    reader.close()


def test_an_untrusted_ca_then_bus_set_ca_file(new_bus: NewBus, token: str) -> None:
    ca = new_bus.live.registry.bus.ca_file
    if not ca:
        pytest.skip("the bus's certificate is publicly trusted: no private CA to leave out")
    assert new_bus.init(ca=False)[0] == 0
    new_bus.credentials(new_bus.sender)
    args = (
        "--as",
        new_bus.sender,
        "send",
        new_bus.receiver,
        "-s",
        f"CA {token}",
        "-b",
        "Which version?",
        "-t",
        "question",
    )
    code, out, err = new_bus.run(*args)
    assert code == 6 and out == "" and "is not trusted" in err and "it is issued by" in err
    assert "agentmail bus set ca_file" in err and new_bus.spool(new_bus.sender, "outbox") == []
    assert new_bus.run("bus", "set", "ca_file", ca)[0] == 0
    assert (new_bus.registry / "ca.pem").is_file()
    code, out, err = new_bus.run(*args)
    assert code == 0 and out.split()[2] == "sent", err


def test_the_mx_port_given_as_submission(new_bus: NewBus, bus: LiveBus) -> None:
    if bus.cfg.mx is None:
        pytest.skip("no MX configured (LIVE_BUS_MX)")
    assert new_bus.init()[0] == 0
    new_bus.credentials(new_bus.sender)
    host, port = bus.cfg.mx
    assert new_bus.run("bus", "set", "smtp", f"{host}:{port}")[0] == 0
    code, out, err = new_bus.run(
        "--as", new_bus.sender, "send", new_bus.receiver, "-s", "MX", "-b", "Which version?", "-t", "question"
    )
    assert code == 6 and out == "" and "offers no AUTH" in err and "use the submission port" in err
    assert new_bus.spool(new_bus.sender, "outbox") == []


def test_a_tls_mode_mismatch_fails_at_once_and_names_the_mode(new_bus: NewBus) -> None:
    """No assertion on time: the handshake timeout is a few seconds, pytest's patience longer."""
    b = new_bus.live.registry.bus
    assert b.smtp is not None and b.imap is not None
    assert new_bus.init()[0] == 0
    new_bus.credentials(new_bus.sender)
    wrong = {"implicit": "starttls", "starttls": "implicit", "none": "implicit"}
    assert new_bus.run("bus", "set", "smtp", f"{b.smtp.host}:{b.smtp.port}", "--tls", wrong[b.smtp.tls])[0] == 0
    code, out, err = new_bus.run(
        "--as", new_bus.sender, "send", new_bus.receiver, "-s", "TLS", "-b", "Which version?", "-t", "question"
    )
    assert code == 6 and out == "" and new_bus.spool(new_bus.sender, "outbox") == []
    assert ("does not speak TLS at connect" in err) if b.smtp.tls != "implicit" else ("wants implicit TLS" in err), err
    assert new_bus.run("bus", "set", "smtp", f"{b.smtp.host}:{b.smtp.port}", "--tls", b.smtp.tls)[0] == 0
    assert new_bus.run("bus", "set", "imap", f"{b.imap.host}:{b.imap.port}", "--tls", wrong[b.imap.tls])[0] == 0
    code, out, _ = new_bus.run("--as", new_bus.sender, "doctor")
    assert code == 6 and "FAIL imap:" in out
    assert ("does not speak TLS at connect" in out) if b.imap.tls != "implicit" else ("wants implicit TLS" in out), out


def test_doctor_names_a_login_that_may_not_send_as_the_platform(new_bus: NewBus, bus: LiveBus) -> None:
    assert new_bus.init()[0] == 0
    other = new_bus.logins[new_bus.receiver]
    new_bus.credentials(new_bus.sender, other)  # the receiver's mailbox login on the sender's platform
    code, out, _ = new_bus.run("--as", new_bus.sender, "doctor")
    address = bus.registry.platforms[new_bus.sender].address
    if bus.cfg.is_stack:  # Postfix's reject_sender_login_mismatch on 587
        assert code == 6
        assert f"FAIL sender: the server refuses {address} as sender for login {other.username} (553" in out
    else:  # a server may let one login send as another address; doctor then says so
        assert "sender: " in out and other.username in out
