"""OAuth2 sign-in on the live stack (issue 24): two platforms whose mailboxes take only tokens
(delta and echo, Dovecot's oauth2 passdb validating HS256 JWTs locally, for IMAP and, through
Dovecot SASL, for submission on 587) get their token from AGENTMAIL_PASSWORD_CMD, the stack's
mint-token. delta signs in with XOAUTH2, echo with OAUTHBEARER. A good token works end to end,
an expired one is one line and exit 6 with nothing queued, the command is asked again for each
connection (so a token that expired in between does not matter), and doctor says how it signed in."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TIMEOUT, LiveBus, eventually, opener, receive

from agentmail.admin import bus as bus_mod
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import env_file
from agentmail.config.registry import Registry
from agentmail.model import Letter
from agentmail.spool import Spool
from agentmail.trust import signing
from agentmail.trust.authenticity import pinned_key

MECHANISMS = {"delta": "xoauth2", "echo": "oauthbearer"}  # the stack's token-only logins (mailstack/up OAUTH_USERS)


class TokenBus:
    """A copy of the live bus with delta and echo added, each signing in with its own mechanism
    and a token minted by the stack's mint-token at each connection."""

    def __init__(self, bus: LiveBus, name: str) -> None:
        stack = bus.cfg.stack or {}
        logins = str(stack.get("MAILSTACK_OAUTH_USERS", "")).split()
        missing = [f"{p}@bus.test" for p in MECHANISMS if f"{p}@bus.test" not in logins]
        if missing:
            pytest.fail(
                f"the stack has no token-only login {', '.join(missing)}: restart it with "
                f"MAILSTACK_DIR=/work/mailstack-run bash live_tests/mailstack/up",
                pytrace=False,
            )
        self.key = Path(stack["MAILSTACK_OAUTH_KEY"])
        self.mint = Path(__file__).resolve().parent / "mailstack" / "mint-token"
        registry, self.home = bus.variant(name, own_registry=True)
        self.root = registry.root
        for platform in MECHANISMS:
            bus_mod.add(self.home, registry, platform)  # a fresh key pair, pinned in the copy
            registry = registry_mod.load(self.root)
        bus_mod.set_setting(self.root, "auth", ["xoauth2"])
        bus_mod.set_setting(self.root, "auth", ["oauthbearer"], platform="echo")
        self.logs = {p: self.home / f"{p}.tokens" for p in MECHANISMS}
        for platform in MECHANISMS:
            self.token_command(platform)
        self.registry: Registry = registry_mod.load(self.root)
        assert not self.registry.problems, self.registry.problems
        assert [self.registry.auth_of(p) for p in MECHANISMS] == ["xoauth2", "oauthbearer"]
        self.bus = bus
        self.clients: list[AgentMail] = []

    def token_command(self, platform: str, *options: str) -> None:
        """secrets/<platform>.env: the login, and mint-token (with ``options``) as its secret."""
        argv = [sys.executable, str(self.mint), "--key", str(self.key), "--log", str(self.logs[platform])]
        path = env_file(self.home, platform)
        path.write_text(
            f"AGENTMAIL_USERNAME={platform}@bus.test\n"
            f"AGENTMAIL_PASSWORD_CMD={' '.join([*argv, *options, f'{platform}@bus.test'])}\n"
        )
        path.chmod(0o600)

    def runs(self, platform: str) -> list[tuple[str, int]]:
        """(token SHA-256, exp) of each run of the platform's token command so far."""
        path = self.logs[platform]
        lines = path.read_text().splitlines() if path.exists() else []
        return [(sha, int(exp)) for _, sha, exp in (line.split() for line in lines)]

    def client(self, platform: str) -> AgentMail:
        am = self.bus.client(platform, home=self.home, registry=self.registry)
        self.clients.append(am)
        return am

    def close(self) -> None:
        """Log out now: Dovecot allows a login 10 connections, and the session's clients live on."""
        for am in self.clients:
            am.close()

    def cli(self, platform: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
        env.update(AGENTMAIL_HOME=str(self.home), AGENTMAIL_REGISTRY=str(self.root))
        return subprocess.run(
            [sys.executable, "-m", "agentmail", "--as", platform, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT + 30,
            cwd=self.home,
        )

    def spool(self, platform: str, state: str) -> list[str]:
        spool = Spool(self.home / "spool" / platform)
        try:
            return spool.read.ids(state)
        finally:
            spool.db.close()


@pytest.fixture
def tokens(bus: LiveBus, request: pytest.FixtureRequest) -> Iterator[TokenBus]:
    if not bus.cfg.is_stack:
        pytest.skip("needs the loopback stack's token-only logins and its token key")
    made = TokenBus(bus, request.node.name[:40])
    yield made
    made.close()


def test_a_bus_on_oauth2_tokens_sends_syncs_and_replies_over_xoauth2_and_oauthbearer(
    tokens: TokenBus, token: str
) -> None:
    delta, echo = tokens.client("delta"), tokens.client("echo")
    sent = delta.send("echo", f"Tokens {token}", opener("delta", "echo", token))
    assert sent.state == "sent", sent.extra
    (got,) = receive(echo, sent.thread)
    assert (got.sender, got.to, got.type) == ("delta", "echo", sent.type)
    assert signing.verify(echo.raw(got.id), pinned_key(tokens.registry.platforms["delta"])).ok
    answer = echo.reply(got, f"Reproduced on our side; fixing. {token}", type="ack")
    assert answer is not None and answer.state == "sent", answer
    (back,) = receive(delta, sent.thread)
    assert (back.sender, back.type, back.in_reply_to) == ("echo", "ack", sent.message_id)
    assert signing.verify(delta.raw(back.id), pinned_key(tokens.registry.platforms["echo"])).ok
    # each letter once: a second sync brings nothing more, nothing was quarantined
    assert echo.sync().accepted == [] and delta.sync().accepted == []
    both = [sent.message_id, answer.message_id]
    assert [x.message_id for x in echo.thread(sent.thread)] == both
    assert [x.message_id for x in delta.thread(sent.thread)] == both
    assert not [x for x in echo.quarantined() + delta.quarantined() if token in (x.subject or "")]
    # every connection asked the command: each platform's runs minted distinct tokens
    for platform in MECHANISMS:
        hashes = [sha for sha, _ in tokens.runs(platform)]
        assert len(hashes) >= 2 and len(set(hashes)) == len(hashes), (platform, hashes)


def test_an_expired_token_exits_6_in_one_line_and_queues_nothing(tokens: TokenBus, token: str) -> None:
    for platform in MECHANISMS:
        tokens.token_command(platform, "--ttl=-60")  # a token that was expired when minted
    for platform, to in (("delta", "echo"), ("echo", "delta")):
        done = tokens.cli(platform, "send", to, "-s", f"Stale {token}", "-b", opener(platform, to, token))
        name = MECHANISMS[platform].upper()
        assert done.returncode == 6 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"refused the login '{platform}@bus.test' ({name} token from the command of" in done.stderr
        assert "not queued" in done.stderr, done.stderr
        assert tokens.spool(platform, "outbox") == [], "a refused login queued the letter"
        ((_, exp),) = tokens.runs(platform)  # the command ran once, and its token had expired
        assert exp < time.time()
    # the IMAP side says the same in one line
    done = tokens.cli("delta", "inbox")
    assert done.returncode == 6 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "refused the login 'delta@bus.test' (XOAUTH2 token" in done.stderr, done.stderr


def test_the_command_mints_a_fresh_token_for_each_connection_so_an_expired_one_does_not_matter(
    tokens: TokenBus, token: str
) -> None:
    echo = tokens.client("echo")  # reading from here on
    ttl = tokens.home / "delta.ttl"
    ttl.write_text("8\n")  # the first connection's token lives 8 s
    tokens.token_command("delta", f"--ttl-file={ttl}")
    first = tokens.cli("delta", "send", "echo", "-s", f"First {token}", "-b", opener("delta", "echo", token))
    assert first.returncode == 0, first.stderr
    before = tokens.runs("delta")
    assert len(before) >= 1
    deadline = max(exp for _, exp in before)
    while time.time() <= deadline + 1:  # wait until every token minted so far has expired
        time.sleep(0.5)
    ttl.write_text("3600\n")
    second = tokens.cli("delta", "send", "echo", "-s", f"Second {token}", "-b", opener("delta", "echo", token))
    assert second.returncode == 0, second.stderr
    after = tokens.runs("delta")
    assert len(after) > len(before), "the second connection did not run the command"
    hashes = [sha for sha, _ in after]
    assert len(set(hashes)) == len(hashes), hashes  # a new token each run, never one reused
    assert all(exp < time.time() for _, exp in before)  # the first connection's token is dead now
    assert all(exp > time.time() for _, exp in after[len(before) :])  # and the second was fresh

    def both() -> list[Letter] | None:
        mine = [x for x in echo.inbox() if token in x.subject]
        return mine if len(mine) >= 2 else None

    got = eventually(both, f"echo waiting for both letters of {token}")
    assert sorted(x.subject for x in got) == [f"First {token}", f"Second {token}"]  # each once


def test_doctor_names_the_mechanism_the_token_command_and_that_the_server_offers_it(tokens: TokenBus) -> None:
    for platform, mechanism in MECHANISMS.items():
        done = tokens.cli(platform, "doctor")
        assert done.returncode == 0, done.stdout + done.stderr
        name = mechanism.upper()
        source = f"the command of AGENTMAIL_PASSWORD_CMD in {env_file(tokens.home, platform)}"
        assert f"ok   mailbox login: {platform}@bus.test, auth {mechanism} ({name} token from {source}" in done.stdout
        assert f"AUTH {name} accepted (EHLO offers AUTH " in done.stdout, done.stdout
        assert f"AUTHENTICATE {name} accepted (CAPABILITY offers " in done.stdout, done.stdout
        smtp_line = next(line for line in done.stdout.splitlines() if f"AUTH {name} accepted" in line)
        imap_line = next(line for line in done.stdout.splitlines() if f"AUTHENTICATE {name} accepted" in line)
        assert name in smtp_line.partition("EHLO offers")[2] and f"AUTH={name}" in imap_line
        assert "eyJ" not in done.stdout + done.stderr  # never a token (a JWT starts so)
