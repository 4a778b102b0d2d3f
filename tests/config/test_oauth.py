"""OAuth2 sign-in (SASL XOAUTH2 and OAUTHBEARER, RFC 7628) with the token from a command or the
keyring, against the in-process SMTP and IMAP servers of tests/mailservers (issue 24)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login, env_file, write_login
from agentmail.config.identity import Identity

from ..conftest import OPENER, Cli
from ..mailservers import MailServers

USERS = {"alpha@bus.test": "pw-alpha-1", "beta@bus.test": "pw-beta-1"}
CANARY = "Tok3nCanary"  # in every token and in the command's error output: it must never be shown
PAD = "x" * 2000  # a Microsoft access token is 1.5-2.5 KB: the AUTH line is longer than 1000


def script(folder: Path, name: str, body: str) -> Path:
    """An executable Python script (the shape of oama, pizauth or mutt_oauth2.py: it prints a token)."""
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport pathlib, sys\n{body}\n")
    path.chmod(0o700)
    return path


def minting(folder: Path, name: str) -> tuple[Path, Path]:
    """A token command that mints a new token each run (its number in ``state``) and so revokes
    the one before: only what it printed last is good."""
    state = folder / f"{name}.state"
    path = script(
        folder,
        f"{name}-token",
        f"state = pathlib.Path({str(state)!r})\n"
        f"n = int(state.read_text()) + 1 if state.exists() else 1\n"
        f"state.write_text(str(n))\n"
        f"print('{CANARY}-{name}-' + str(n) + '-{PAD}')",
    )
    return path, state


def current(name: str, state: Path) -> object:
    """The issuer's check: the token minted last, none before it."""
    return lambda token: state.exists() and token == f"{CANARY}-{name}-{state.read_text()}-{PAD}"


def secrets(home: Path, name: str, text: str) -> None:
    path = env_file(home, name)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)
    path.chmod(0o600)


def oauth_bus(home: Path, ms: MailServers, auth: str = "xoauth2") -> dict[str, Path]:
    """A bus with ``auth``, each platform's token from its minting command (secrets/<name>.env);
    returns each platform's state file."""
    endpoints = bus.endpoints(
        f"127.0.0.1:{ms.smtp_port}", f"127.0.0.1:{ms.imap_port}", ("starttls", "implicit"), str(ms.ca_file), ()
    )
    endpoints["auth"] = auth
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", transport="smtp+imap", endpoints=endpoints)
    states = {}
    for name in ("alpha", "beta"):
        command, state = minting(home, name)
        secrets(home, name, f"AGENTMAIL_USERNAME={name}@bus.test\nAGENTMAIL_PASSWORD_CMD={command}\n")
        ms.store.set_token(f"{name}@bus.test", current(name, state))  # type: ignore[arg-type]
        states[name] = state
    return states


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS) as ms:
        yield ms


def _spool(home: Path, name: str, state: str) -> list[str]:
    from agentmail.spool import Spool

    spool = Spool(home / "spool" / name)
    try:
        return spool.read.ids(state)
    finally:
        spool.db.close()


@pytest.mark.parametrize("auth, sasl", [("xoauth2", "XOAUTH2"), ("oauthbearer", "OAUTHBEARER")])
def test_a_bus_on_tokens_sends_and_reads_with_a_fresh_token_for_each_connection(
    home: Path, servers: MailServers, cli: Cli, auth: str, sasl: str
) -> None:
    states = oauth_bus(home, servers, auth)
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 0, err
    code, out, err = cli("--as", "beta", "--json", "inbox")
    assert code == 0, err
    assert [r["subject"] for r in json.loads(out)] == ["Quota"]
    counts = servers.store.counts
    assert counts[f"smtp.auth.{sasl}"] == 1 and counts[f"imap.auth.{sasl}"] >= 2  # Sent copy, beta's read
    assert counts["smtp.auth_failed"] == counts["imap.auth_failed"] == 0
    tokens = [t for _, mechanism, t in servers.store.tokens_received if mechanism == sasl]
    # one run of the command for each connection: each token new, each the last one minted
    assert len(tokens) == len(set(tokens)) == int(states["alpha"].read_text()) + int(states["beta"].read_text())
    assert all(len(t) > 2000 for t in tokens)


def test_a_long_running_client_takes_the_renewed_token_on_its_next_connection(home: Path, servers: MailServers) -> None:
    states = oauth_bus(home, servers)
    reg = registry_mod.load(home / "registry")
    with AgentMail(reg, Identity("alpha"), home) as alpha:
        assert alpha.send("beta", "One", OPENER).state == "sent"
        minted = int(states["alpha"].read_text())
        servers.stop_smtp()  # the session is gone: the next letter needs a new login...
        servers.start_smtp()
        assert alpha.send("beta", "Two", OPENER).state == "sent"  # ...with a token minted for it
        assert int(states["alpha"].read_text()) > minted
    assert servers.store.counts["smtp.auth.XOAUTH2"] == 2 and servers.store.counts["smtp.auth_failed"] == 0
    smtp_tokens = [t for protocol, _, t in servers.store.tokens_received if protocol == "smtp"]
    assert len(smtp_tokens) == 2 and smtp_tokens[0] != smtp_tokens[1]


def test_an_expired_token_exits_6_in_one_line_and_queues_nothing(home: Path, servers: MailServers, cli: Cli) -> None:
    oauth_bus(home, servers)
    stale = script(home, "stale", f"print('{CANARY}-expired')")
    secrets(home, "alpha", f"AGENTMAIL_PASSWORD_CMD={stale}\n")
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and out == "" and err.count("\n") == 1, err
    assert "refused the login 'alpha@bus.test' (XOAUTH2 token from the command of" in err and "(535 " in err
    assert "program 'stale'" in err and "not queued" in err and CANARY not in err
    assert _spool(home, "alpha", "outbox") == [] and len(_spool(home, "alpha", "failed")) == 1
    assert servers.store.accepted == []
    # the IMAP side says the same, and a later command has nothing queued to retry
    code, out, err = cli("--as", "alpha", "inbox")
    assert (
        code == 6
        and err.count("\n") == 1
        and "refused the login 'alpha@bus.test' (XOAUTH2 token" in err
        and CANARY not in err
    )
    command, _ = minting(home, "alpha")
    secrets(home, "alpha", f"AGENTMAIL_PASSWORD_CMD={command}\n")
    assert cli("--as", "alpha", "flush")[0] == 0
    assert servers.store.accepted == []  # fixing the token never sends the refused letter by itself


def test_a_failing_token_command_exits_6_and_its_error_output_is_never_shown(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    oauth_bus(home, servers)
    broken = script(home, "oama", f"sys.stderr.write('refresh failed for {CANARY}\\n'); sys.exit(3)")
    secrets(home, "alpha", f"AGENTMAIL_PASSWORD_CMD={broken} access alpha@bus.test\n")
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and out == "" and err.count("\n") == 1, err
    assert "the command of AGENTMAIL_PASSWORD_CMD in" in err and "(program 'oama') exited with status 3" in err
    assert CANARY not in err and "Traceback" not in err
    assert _spool(home, "alpha", "outbox") == [] and servers.store.accepted == []
    assert servers.store.counts["smtp.auth_failed"] == 0  # nothing was tried with no token


def test_a_server_that_does_not_offer_the_mechanism_is_named_with_what_it_offers(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    oauth_bus(home, servers, "oauthbearer")
    servers.store.mechanisms = ("PLAIN", "LOGIN", "XOAUTH2")
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and "does not offer AUTH OAUTHBEARER (it offers LOGIN PLAIN XOAUTH2)" in err
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 6
    assert "FAIL smtp: " in out and "does not offer AUTH OAUTHBEARER" in out
    assert "FAIL imap: " in out and "does not offer AUTHENTICATE OAUTHBEARER (it offers PLAIN XOAUTH2)" in out
    assert servers.store.tokens_received == []  # the token never left for a server that does not take it


def test_doctor_names_the_mechanism_the_secret_source_and_what_the_server_offers(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    oauth_bus(home, servers)
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 0, out
    source = f"the command of AGENTMAIL_PASSWORD_CMD in {env_file(home, 'alpha')} (program 'alpha-token')"
    assert f"ok   mailbox login: alpha@bus.test, auth xoauth2 (XOAUTH2 token from {source})" in out
    assert "AUTH XOAUTH2 accepted (EHLO offers AUTH LOGIN OAUTHBEARER PLAIN XOAUTH2)" in out
    assert "AUTHENTICATE XOAUTH2 accepted (CAPABILITY offers AUTH=PLAIN AUTH=XOAUTH2 AUTH=OAUTHBEARER)" in out
    assert CANARY not in out
    # a source that does not answer fails its own line, naming the source
    secrets(home, "alpha", "AGENTMAIL_PASSWORD_CMD=/nonexistent/token-helper\n")
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 6 and "FAIL mailbox login: alpha@bus.test, auth xoauth2" in out
    assert "(program 'token-helper') cannot be run: there is no such program" in out
    (line,) = [x for x in out.splitlines() if "mailbox login" in x]
    assert line.count("AGENTMAIL_PASSWORD_CMD") == 1, line  # the failing source is named once


def test_a_platform_entry_overrides_the_bus_auth(home: Path, servers: MailServers, cli: Cli) -> None:
    oauth_bus(home, servers)
    write_login(home, "alpha", Login("alpha@bus.test", USERS["alpha@bus.test"]))
    code, out, _ = cli("--json", "bus", "set", "auth", "password", "--platform", "alpha")
    assert code == 0 and json.loads(out) == {"key": "auth", "value": "password", "platform": "alpha"}
    assert 'auth = "password"' in (home / "registry" / "platforms" / "alpha.toml").read_text()
    reg = registry_mod.load(home / "registry")
    assert (reg.bus.auth, reg.auth_of("alpha"), reg.auth_of("beta")) == ("xoauth2", "password", "xoauth2")
    assert cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)[0] == 0
    assert cli("--as", "beta", "inbox")[0] == 0
    counts = servers.store.counts
    assert counts["smtp.auth.XOAUTH2"] == 0 and counts["smtp.auth"] == 1  # alpha: the password
    assert counts["imap.auth.XOAUTH2"] >= 1  # beta: its token
    # "" goes back to the bus's; a mechanism that does not exist is refused, nothing written
    code, out, _ = cli("bus", "set", "auth", "", "--platform", "alpha")
    assert code == 0 and out.strip().endswith('auth = "xoauth2"')
    assert "auth = " not in (home / "registry" / "platforms" / "alpha.toml").read_text()
    before = (home / "registry" / "bus.toml").read_text()
    code, _, err = cli("bus", "set", "auth", "kerberos")
    assert code == 2 and "auth must be one of password, xoauth2, oauthbearer" in err
    assert (home / "registry" / "bus.toml").read_text() == before
    code, _, err = cli("bus", "set", "policy", "aligned", "--platform", "alpha")
    assert code == 2 and "only auth is set per platform" in err
    code, _, err = cli("bus", "set", "auth", "password", "--platform", "gamma")
    assert code == 2 and "no platform 'gamma'" in err


def test_an_unknown_auth_in_a_file_is_named(home: Path, servers: MailServers) -> None:
    oauth_bus(home, servers)
    path = home / "registry" / "bus.toml"
    path.write_text(path.read_text().replace('auth = "xoauth2"', 'auth = "XOAUTH2"'))
    with pytest.raises(registry_mod.ConfigError, match="bus.toml: auth must be one of password, xoauth2"):
        registry_mod.load(home / "registry")
    path.write_text(path.read_text().replace('auth = "XOAUTH2"', 'auth = "xoauth2"'))
    entry = home / "registry" / "platforms" / "beta.toml"
    entry.write_text('auth = "token"\n' + entry.read_text())
    reg = registry_mod.load(home / "registry")
    assert "beta" not in reg.platforms and "auth must be one of" in reg.problems[0]


def test_a_password_given_where_a_token_is_wanted_is_refused_unshown(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    oauth_bus(home, servers)
    secrets(home, "alpha", f'AGENTMAIL_PASSWORD="{CANARY} with spaces!"\n')
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and err.count("\n") == 1 and "is not an OAuth2 access token" in err and CANARY not in err
    helper_json = script(home, "json", f'print(\'{{"access_token": "{CANARY}", "expires_in": 3599}}\')')
    secrets(home, "alpha", f"AGENTMAIL_PASSWORD_CMD={helper_json}\n")
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and "is not an OAuth2 access token" in err and CANARY not in err
    assert servers.store.tokens_received == [] and _spool(home, "alpha", "outbox") == []


def test_two_secrets_in_one_place_are_refused(
    home: Path, servers: MailServers, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth_bus(home, servers)
    secrets(home, "alpha", "AGENTMAIL_PASSWORD=x\nAGENTMAIL_PASSWORD_CMD=/bin/true\n")
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and "sets AGENTMAIL_PASSWORD and AGENTMAIL_PASSWORD_CMD: give the mailbox secret one way" in err
    # the environment, as a whole, stands before the file (as AGENTMAIL_PASSWORD always did)
    command, state = minting(home, "envtok")
    monkeypatch.setenv("AGENTMAIL_PASSWORD_CMD", f"{command}")
    monkeypatch.setenv("AGENTMAIL_USERNAME", "alpha@bus.test")
    servers.store.set_token("alpha@bus.test", current("envtok", state))  # type: ignore[arg-type]
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 0, err
    monkeypatch.setenv("AGENTMAIL_PASSWORD_KEYRING", "agentmail")
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and "the environment sets AGENTMAIL_PASSWORD_CMD and AGENTMAIL_PASSWORD_KEYRING" in err


class _MemoryKeyring:
    """A keyring backend holding what the test put in it (the keyring library's own interface)."""

    def __new__(cls, store: dict[tuple[str, str], str]) -> object:
        import keyring.backend

        class Backend(keyring.backend.KeyringBackend):
            priority = 1  # type: ignore[assignment]

            def get_password(self, service: str, username: str) -> str | None:
                return store.get((service, username))

            def set_password(self, service: str, username: str, password: str) -> None:
                store[(service, username)] = password

            def delete_password(self, service: str, username: str) -> None:
                store.pop((service, username), None)

        return Backend()


@pytest.fixture
def memory_keyring() -> Iterator[dict[tuple[str, str], str]]:
    import keyring

    kept = keyring.get_keyring()
    store: dict[tuple[str, str], str] = {}
    keyring.set_keyring(_MemoryKeyring(store))  # type: ignore[arg-type]
    try:
        yield store
    finally:
        keyring.set_keyring(kept)


def test_the_token_from_the_system_keyring_is_read_for_each_connection(
    home: Path, servers: MailServers, cli: Cli, memory_keyring: dict[tuple[str, str], str]
) -> None:
    oauth_bus(home, servers)
    secrets(home, "alpha", "AGENTMAIL_PASSWORD_KEYRING=agentmail-bus\n")
    memory_keyring[("agentmail-bus", "alpha@bus.test")] = f"{CANARY}-kr-1"
    servers.store.set_token("alpha@bus.test", f"{CANARY}-kr-1")
    code, out, err = cli("--as", "alpha", "doctor")
    assert code == 0, out
    assert "XOAUTH2 token from the system keyring (service 'agentmail-bus', AGENTMAIL_PASSWORD_KEYRING in" in out
    assert cli("--as", "alpha", "send", "beta", "-s", "One", "-b", OPENER)[0] == 0
    memory_keyring[("agentmail-bus", "alpha@bus.test")] = f"{CANARY}-kr-2"  # renewed by whoever keeps it
    servers.store.set_token("alpha@bus.test", f"{CANARY}-kr-2")
    assert cli("--as", "alpha", "send", "beta", "-s", "Two", "-b", OPENER)[0] == 0
    assert len(servers.store.accepted) == 2
    del memory_keyring[("agentmail-bus", "alpha@bus.test")]
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Three", "-b", OPENER)
    assert code == 6 and err.count("\n") == 1
    assert "has no secret for login 'alpha@bus.test': store it with 'keyring set agentmail-bus alpha@bus.test'" in err
    assert CANARY not in out + err and _spool(home, "alpha", "outbox") == []


def test_without_the_keyring_library_the_extra_is_named(
    home: Path, servers: MailServers, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth_bus(home, servers)
    secrets(home, "alpha", "AGENTMAIL_PASSWORD_KEYRING=agentmail-bus\n")
    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring: ImportError
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and "the keyring library is not installed: pip install 'agentmail[keyring]'" in err


def test_a_keyring_without_a_backend_is_one_line(home: Path, servers: MailServers, cli: Cli) -> None:
    import keyring
    from keyring.backends.fail import Keyring as NoBackend

    oauth_bus(home, servers)
    secrets(home, "alpha", "AGENTMAIL_PASSWORD_KEYRING=agentmail-bus\n")
    kept = keyring.get_keyring()
    keyring.set_keyring(NoBackend())
    try:
        code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    finally:
        keyring.set_keyring(kept)
    assert code == 6 and err.count("\n") == 1 and "this machine has no keyring backend" in err


def test_the_password_path_is_unchanged_for_existing_users(home: Path, servers: MailServers, cli: Cli) -> None:
    """No auth key: the bus logs in with the password, as before, and bus.toml gains nothing."""
    endpoints = bus.endpoints(
        f"127.0.0.1:{servers.smtp_port}", f"127.0.0.1:{servers.imap_port}", ("starttls", "implicit"),
        str(servers.ca_file), (),
    )  # fmt: skip
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", transport="smtp+imap", endpoints=endpoints)
    for name in ("alpha", "beta"):
        write_login(home, name, Login(f"{name}@bus.test", USERS[f"{name}@bus.test"]))
    assert "auth = " not in (home / "registry" / "bus.toml").read_text()
    assert cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)[0] == 0
    assert cli("--as", "beta", "inbox")[0] == 0
    assert servers.store.tokens_received == [] and servers.store.counts["imap.LOGIN"] >= 2
    assert os.stat(env_file(home, "alpha")).st_mode & 0o777 == 0o600


def test_the_oauthbearer_response_is_rfc_7628s_with_the_user_escaped() -> None:
    from agentmail.transport.logins import oauthbearer_response

    assert oauthbearer_response("user@example.com", "vF9dft4qmT", "server.example.com", 143) == (
        b"n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer vF9dft4qmT\x01\x01"
    )  # RFC 7628 §4.1, with the authzid
    assert oauthbearer_response("a,b=c@x.test", "t", "h", 1).startswith(b"n,a=a=2Cb=3Dc@x.test,\x01")
