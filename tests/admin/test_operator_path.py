"""The operator's path (issue 14): no command destroys a key or sends a letter twice, every error
says what to do, and doctor catches it — against the in-process servers of tests/mailservers."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.admin import bus
from agentmail.cli import render
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login, key_path, write_login
from agentmail.errors import ConfigError

from ..conftest import OPENER, Cli
from ..mailservers import MailServers

USERS = {"alpha@bus.test": "pw-alpha-1", "beta@bus.test": "pw-beta-1"}


def cli_bus(
    home: Path,
    ms: MailServers,
    *,
    tls: tuple[str, str] = ("starttls", "implicit"),
    ca: str | None = None,
    trust: tuple[str, ...] = (),
) -> None:
    endpoints = bus.endpoints(
        f"127.0.0.1:{ms.smtp_port}", f"127.0.0.1:{ms.imap_port}", tls, ca or str(ms.ca_file), trust
    )
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", transport="smtp+imap", endpoints=endpoints)
    for name in ("alpha", "beta"):
        write_login(home, name, Login(f"{name}@bus.test", USERS[f"{name}@bus.test"]))


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS) as ms:
        yield ms


def _spool(home: Path, name: str, state: str) -> list[str]:
    """The letter files of one state (the state from spool.db, read by a fresh connection)."""
    from agentmail.spool import Spool

    spool = Spool(home / "spool" / name)
    try:
        return sorted(f"{i}.eml" for i in spool.read.ids(state))
    finally:
        spool.db.close()


# --- never destroy -----------------------------------------------------------------------


def test_init_again_refuses_names_what_exists_and_keeps_the_keys(home: Path, cli: Cli) -> None:
    assert cli("init", "--domain", "bus.test", "alpha", "beta")[0] == 0
    before = {n: key_path(home, n).read_bytes() for n in ("alpha", "beta")}
    code, out, err = cli("init", "--domain", "bus.test", "alpha", "beta")
    assert code == 6 and out == ""
    assert "bus.toml" in err and "alpha.key" in err and "beta.key" in err and "AGENTMAIL_REGISTRY" in err
    # a second registry elsewhere, same home: the keys are still refused
    code, _, err = cli("--registry", str(home / "other"), "init", "--domain", "bus.test", "alpha")
    assert code == 6 and "alpha.key" in err
    # --force rewrites the registry but keeps each key and pins it again
    code, out, _ = cli("init", "--force", "--domain", "bus.test", "alpha", "beta")
    assert code == 0 and "kept the existing keys of alpha, beta" in out
    assert {n: key_path(home, n).read_bytes() for n in ("alpha", "beta")} == before
    reg = registry_mod.load(home / "registry")
    from agentmail.trust.signing import public_key_of

    assert reg.platforms["alpha"].public_key == public_key_of(before["alpha"].decode().strip())


def test_the_missing_registry_error_does_not_send_people_to_init(home: Path, cli: Cli) -> None:
    code, _, err = cli("--as", "alpha", "inbox")
    assert code == 6 and "AGENTMAIL_REGISTRY" in err and "makes a NEW bus" in err


def test_add_never_overwrites_a_key_and_add_repo_attaches_a_checkout(home: Path, cli: Cli) -> None:
    reg = bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    key_path(home, "gamma").write_text("left from another bus\n")
    with pytest.raises(ConfigError, match="gamma.key already exists"):
        bus.add(home, reg, "gamma")
    assert key_path(home, "gamma").read_text() == "left from another bus\n"
    before = key_path(home, "alpha").read_bytes()
    code, out, _ = cli("add", "alpha", "--repo", "git@example.com:org/alpha.git")
    assert code == 0 and "git@example.com:org/alpha.git" in out
    assert registry_mod.load(home / "registry").platforms["alpha"].remotes == ("git@example.com:org/alpha.git",)
    assert key_path(home, "alpha").read_bytes() == before


def test_send_refuses_a_key_that_does_not_match_the_pin(home: Path, cli: Cli) -> None:
    from agentmail.trust.signing import generate_keypair

    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    key_path(home, "alpha").write_text(generate_keypair()[0] + "\n")
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", OPENER)
    assert code == 6 and out == ""
    assert "does not match the public key pinned" in err and "alpha.key" in err
    assert _spool(home, "alpha", "outbox") == _spool(home, "alpha", "sent") == []
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 6 and "FAIL dkim key" in out


def test_each_platform_gets_its_own_selector_and_init_prints_every_txt_record(home: Path, cli: Cli) -> None:
    code, out, _ = cli("init", "--domain", "bus.test", "--transport", "smtp+imap", "--smtp", "mx.bus.test:587",
                       "--imap", "mx.bus.test:993", "alpha", "beta")  # fmt: skip
    reg = registry_mod.load(home / "registry")
    selectors = {p.selector for p in reg.platforms.values()}
    assert code == 0 and len(selectors) == 2
    for platform in reg.platforms.values():
        assert f'{platform.selector}._domainkey.bus.test. IN TXT "v=DKIM1; k=ed25519; p={platform.public_key}"' in out
    assert out.splitlines()[-1].startswith("next: each platform's login in ")  # then the next step


# --- never duplicate ---------------------------------------------------------------------


def test_a_refused_login_queues_nothing_and_the_fixed_send_goes_out_once(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    cli_bus(home, servers)
    write_login(home, "alpha", Login("alpha@bus.test", "wrong"))
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and out == ""
    assert "refused the login 'alpha@bus.test'" in err and "alpha.env" in err and "not queued" in err
    assert _spool(home, "alpha", "outbox") == [] and len(_spool(home, "alpha", "failed")) == 1
    write_login(home, "alpha", Login("alpha@bus.test", USERS["alpha@bus.test"]))
    assert cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)[0] == 0
    assert cli("--as", "alpha", "inbox")[0] == 0  # the next command has nothing left to send
    assert len(servers.store.accepted) == 1
    code, out, _ = cli("--as", "alpha", "--json", "status")
    assert sorted(r["delivery"] for r in json.loads(out)) == ["failed", "sent"]
    failed = next(r for r in json.loads(out) if r["delivery"] == "failed")
    assert "refused the login" in failed["delivery_detail"]


def test_a_password_from_the_environment_is_named_as_such(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    cli_bus(home, servers)
    monkeypatch.setenv("AGENTMAIL_PASSWORD", "wrong")
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and "password from the environment (AGENTMAIL_PASSWORD)" in err


def test_credentials_readable_by_others_queue_nothing(home: Path, servers: MailServers, cli: Cli) -> None:
    cli_bus(home, servers)
    os.chmod(home / "secrets" / "alpha.env", 0o644)
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 6 and out == "" and "readable by others" in err and "not queued" in err
    assert _spool(home, "alpha", "outbox") == []
    os.chmod(home / "secrets" / "alpha.env", 0o600)
    assert cli("--as", "alpha", "flush")[0] == 0
    assert servers.store.accepted == []


def test_a_transient_failure_queues_says_so_and_the_next_command_sends_it(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    cli_bus(home, servers)
    servers.stop_smtp()
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 5 and out.split()[2:] == ["queued"]  # THREAD ID queued; the news once, on stderr (issue 29)
    assert "queued (not sent): nothing is listening on 127.0.0.1:" in err and "do not send it again" in err
    assert "?;" not in err and "port? It goes out with the next command" in err  # two sentences, not "?;"
    assert err.count("\n") == 1 and "queued" not in err.partition("queued")[2]
    thread = out.split()[0]
    code, out, _ = cli("--as", "alpha", "--json", "status", "--no-sync")
    assert [r["delivery"] for r in json.loads(out)] == ["queued"]
    code, out, _ = cli("--as", "alpha", "thread", thread, "--no-sync")
    assert "QUEUED (not sent)" in out
    assert "(queued, not sent yet)" in cli("--as", "alpha", "sent")[1]
    servers.start_smtp()
    code, _, err = cli("--as", "alpha", "inbox")
    assert code == 0 and "sent 1 letter(s) that were waiting in the outbox" in err
    assert len(servers.store.accepted) == 1
    servers.stop_smtp()
    cli("--as", "alpha", "send", "beta", "-s", "Two", "-b", OPENER)
    servers.start_smtp()
    code, out, _ = cli("--as", "alpha", "flush")
    assert code == 0 and "sent 1 of 1 queued letter(s)" in out
    assert len(servers.store.accepted) == 2


def test_a_reply_that_fails_on_configuration_can_be_sent_again(home: Path, servers: MailServers, cli: Cli) -> None:
    cli_bus(home, servers)
    cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    code, out, _ = cli("--as", "beta", "--json", "inbox")
    letter_id = json.loads(out)[0]["id"]
    write_login(home, "beta", Login("beta@bus.test", "wrong"))
    assert cli("--as", "beta", "reply", letter_id, "-b", "Reproduced.", "-t", "ack")[0] == 6
    write_login(home, "beta", Login("beta@bus.test", USERS["beta@bus.test"]))
    assert cli("--as", "beta", "reply", letter_id, "-b", "Reproduced.", "-t", "ack")[0] == 0
    assert len(servers.store.accepted) == 2


# --- errors that say what to do ----------------------------------------------------------


def test_a_port_without_auth_is_called_an_mx(home: Path, cli: Cli) -> None:
    with MailServers("bus.test", USERS, smtp_auth=False) as ms:
        cli_bus(home, ms)
        code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
        assert code == 6 and out == "" and "offers no AUTH" in err and "use the submission port" in err
        assert _spool(home, "alpha", "outbox") == []
        code, out, _ = cli("--as", "alpha", "doctor")
        assert code == 6 and "FAIL smtp" in out and "looks like an MX" in out


def test_implicit_tls_against_a_starttls_port_says_which_mode(home: Path, servers: MailServers) -> None:
    from agentmail.client.facade import AgentMail
    from agentmail.config.identity import Identity

    cli_bus(home, servers, tls=("implicit", "implicit"))
    with AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home) as alpha:
        with pytest.raises(ConfigError, match="does not speak TLS at connect.*STARTTLS"):
            alpha.send("beta", "Quota", OPENER)
        assert alpha.spool.read.ids("outbox") == []


def test_starttls_against_an_implicit_tls_port_says_it_wants_implicit(home: Path, cli: Cli) -> None:
    with MailServers("bus.test", USERS, smtp_tls="implicit") as ms:
        cli_bus(home, ms, tls=("starttls", "implicit"))
        code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
        assert code == 6 and out == "" and "answers a TLS handshake: it wants implicit TLS" in err
        assert len(err.splitlines()) == 1  # one line: nothing from a library
        assert _spool(home, "alpha", "outbox") == []


def test_an_untrusted_ca_names_its_issuer_and_bus_set_ca_file_fixes_it(home: Path, cli: Cli) -> None:
    with MailServers("bus.test", USERS, untrusted_cert=True) as ms:
        cli_bus(home, ms)
        code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
        assert code == 6 and out == "" and "is not trusted" in err
        assert "it is issued by O=agentmail tests, CN=" in err and "agentmail bus set ca_file" in err
        assert ms.untrusted_ca_file is not None
        code, out, _ = cli("bus", "set", "ca_file", str(ms.untrusted_ca_file))
        assert code == 0
        assert (home / "registry" / "ca.pem").read_bytes() == ms.untrusted_ca_file.read_bytes()
        assert 'ca_file = "ca.pem"' in (home / "registry" / "bus.toml").read_text()  # relative to the registry
        assert cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)[0] == 0
        assert len(ms.store.accepted) == 1


def test_nothing_listening_is_named_and_queues(home: Path, cli: Cli) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]  # bound, not listening: connections are refused
        bus.init(
            home,
            home / "registry",
            ["alpha", "beta"],
            domain="bus.test",
            transport="smtp+imap",
            endpoints=bus.endpoints(f"127.0.0.1:{port}", f"127.0.0.1:{port}", ("none",), None, ()),
        )
        write_login(home, "alpha", Login("alpha@bus.test", "x"))
        code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert code == 5 and f"nothing is listening on 127.0.0.1:{port}" in err


def test_unknown_platform_and_outside_a_checkout(home: Path, cli: Cli) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    code, _, err = cli("--as", "alpah", "inbox")
    assert code == 2 and "did you mean alpha?" in err  # typed, as in send: exit 2
    code, _, err = cli("inbox")
    assert code == 1 and "known platforms: alpha, beta" in err and 'platform = "PLATFORM"' in err
    code, out, _ = cli("bind", "beta")
    assert code == 0 and (Path.cwd() / ".agentmail").read_text() == 'platform = "beta"\n'
    assert cli("whoami")[1].strip() == "beta"


# --- settings ----------------------------------------------------------------------------


def test_bus_toml_keys_in_the_wrong_table_are_named(home: Path) -> None:
    bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    path = home / "registry" / "bus.toml"
    base = path.read_text()
    path.write_text(base + '\n[imap]\nhost = "h"\nport = 993\nca_file = "ca.pem"\n')
    with pytest.raises(ConfigError, match="'ca_file' in \\[imap\\]; it belongs at the top of bus.toml"):
        registry_mod.load(home / "registry")
    path.write_text(base + "\nport = 587\n")
    with pytest.raises(ConfigError, match="unknown key 'port'; it belongs under \\[smtp\\] or \\[imap\\]"):
        registry_mod.load(home / "registry")
    path.write_text(base + "\ncolour = 1\n")
    with pytest.raises(ConfigError, match="unknown key 'colour'"):
        registry_mod.load(home / "registry")
    path.write_text(base)
    entry = home / "registry" / "platforms" / "alpha.toml"
    entry.write_text(entry.read_text().replace('name = "alpha"', 'name = "alpha"\nselector = "x"'))
    reg = registry_mod.load(home / "registry")
    assert "alpha" not in reg.platforms and "'selector'; it belongs under [dkim]" in reg.problems[0]


def test_bus_set_changes_settings_without_a_reinit(home: Path, cli: Cli) -> None:
    bus.init(home, home / "registry", ["alpha"], domain="bus.test")
    keys = key_path(home, "alpha").read_bytes()
    assert cli("bus", "set", "transport", "smtp+imap")[0] == 2  # no endpoints yet: refused, nothing written
    for args in (
        ("smtp", "mail.example.org:465"),
        ("imap", "mail.example.org:143"),
        ("transport", "smtp+imap"),
        ("trusted_authserv_ids", "mx.example.org"),
        ("sent_folder", "Sent"),
        ("policy", "aligned"),
    ):
        assert cli("bus", "set", *args)[0] == 0, args
    b = registry_mod.load(home / "registry").bus
    assert (b.smtp, b.imap) == (
        registry_mod.Endpoint("mail.example.org", 465, "implicit"),
        registry_mod.Endpoint("mail.example.org", 143, "starttls"),
    )
    assert (b.trusted_authserv_ids, b.sent_folder, b.policy) == (("mx.example.org",), "Sent", "aligned")
    assert cli("bus", "set", "imap.tls", "implicit")[0] == 0
    assert registry_mod.load(home / "registry").bus.imap == registry_mod.Endpoint("mail.example.org", 143, "implicit")
    code, _, err = cli("bus", "set", "policy", "lenient")
    assert code == 2 and "policy must be one of" in err
    assert key_path(home, "alpha").read_bytes() == keys


def test_init_tls_follows_the_port(home: Path) -> None:
    endpoints = bus.endpoints("mail.example.org:587", "mail.example.org:993", (), None, ())
    assert (endpoints["smtp"]["tls"], endpoints["imap"]["tls"]) == ("starttls", "implicit")
    endpoints = bus.endpoints("mail.example.org:465", "mail.example.org:143", (), None, ())
    assert (endpoints["smtp"]["tls"], endpoints["imap"]["tls"]) == ("implicit", "starttls")


def test_sent_letters_go_to_the_folder_marked_sent_unless_disabled(home: Path, servers: MailServers, cli: Cli) -> None:
    cli_bus(home, servers)
    assert cli("--as", "alpha", "send", "beta", "-s", "Copy", "-b", OPENER)[0] == 0
    assert len(servers.store.messages("alpha@bus.test", "Sent")) == 1  # found by its \Sent attribute
    assert cli("bus", "set", "sent_folder", "")[0] == 0
    assert cli("--as", "alpha", "send", "beta", "-s", "No copy", "-b", OPENER)[0] == 0
    assert len(servers.store.messages("alpha@bus.test", "Sent")) == 1


# --- doctor ------------------------------------------------------------------------------


def test_doctor_names_sources_outbox_secrets_and_a_login_that_may_not_send_as_the_platform(
    home: Path, cli: Cli
) -> None:
    with MailServers("bus.test", USERS, sender_login_check=True) as ms:
        cli_bus(home, ms)
        code, out, _ = cli("--as", "alpha", "doctor")
        assert code == 0, out
        assert "ok   sender: alpha@bus.test is the platform's own address" in out
        assert f"password from {home / 'secrets' / 'alpha.env'}" in out
        assert "ok   secrets folder:" in out and "ok   outbox: empty" in out and "alpha.key: owner-only" in out
        write_login(home, "alpha", Login("beta@bus.test", USERS["beta@bus.test"]))
        code, out, _ = cli("--as", "alpha", "doctor")
        assert (
            code == 6 and "FAIL sender: the server refuses alpha@bus.test as sender for login beta@bus.test (553" in out
        )
        os.chmod(home / "secrets", 0o755)
        code, out, _ = cli("--as", "alpha", "doctor")
        assert "FAIL secrets folder" in out and "chmod 700" in out


def test_doctor_round_trip_reads_its_letter_back(home: Path, servers: MailServers, cli: Cli) -> None:
    cli_bus(home, servers)
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 0, out
    assert "ok   round trip: sent to alpha+thr-" in out and "read back in" in out and "matches the pinned key" in out
    assert "(the probe carried no Authentication-Results)" in out
    # the probe is nobody's mail: not in the inbox, nothing queued
    code, out, _ = cli("--as", "alpha", "--json", "inbox")
    assert json.loads(out) == [] and _spool(home, "alpha", "outbox") == []


def test_doctor_round_trip_fails_when_a_trusted_id_never_stamps(home: Path, servers: MailServers, cli: Cli) -> None:
    cli_bus(home, servers, trust=("mail.bus.test",))  # the test server stamps no Authentication-Results
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 6 and "FAIL round trip" in out and "no Authentication-Results from mail.bus.test" in out
    assert "(the probe carried no Authentication-Results)" in out


def test_doctor_round_trip_names_the_authserv_ids_the_probe_carried_and_which_are_trusted(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    servers.store.authserv_id = "mail.bus.test"  # the MTA stamps its Authentication-Results
    cli_bus(home, servers)  # as the docs' first init: no id trusted
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 0, out
    assert (
        "no trusted authserv-id configured (the probe carried Authentication-Results from mail.bus.test (not trusted))"
        in out
    )
    assert cli("bus", "set", "trusted_authserv_ids", "mx.elsewhere.test")[0] == 0
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 6 and "carries no Authentication-Results from mx.elsewhere.test" in out
    assert "(the probe carried Authentication-Results from mail.bus.test (not trusted))" in out
    assert cli("bus", "set", "trusted_authserv_ids", "mail.bus.test")[0] == 0
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 0 and "(the probe carried Authentication-Results from mail.bus.test (trusted))" in out


def test_doctor_round_trip_on_the_local_transport(home: Path, cli: Cli) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    code, out, _ = cli("--as", "alpha", "doctor", "--round-trip")
    assert code == 0 and "ok   round trip:" in out


# --- send and help -----------------------------------------------------------------------


def test_advice_is_one_line_for_openers_only_and_thread_needs_no_subject(home: Path, cli: Cli) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Hm", "-b", "it broke")
    assert code == 0 and len(err.strip().splitlines()) == 1 and err.startswith("agentmail: advice")
    thread = out.split()[0]
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Q", "-b", "Which version?", "-t", "question")
    assert code == 0 and err == ""
    code, _, err = cli("--as", "alpha", "send", "beta", "--thread", thread, "-b", "More detail.", "-t", "report")
    assert code == 0 and "advice" not in err
    code, _, err = cli("--as", "alpha", "send", "beta", "-b", "x")
    assert code == 2 and "-s/--subject is required" in err


def test_help_lists_first_steps_environment_exit_codes_and_types(cli: Cli) -> None:
    _, out, _ = cli("--help")
    for needle in (
        "First steps",
        "doctor --round-trip",
        "AGENTMAIL_HOME",
        "AGENTMAIL_REGISTRY",
        "Exit codes",
        "6 configuration",
    ):
        assert needle in out
    _, out, _ = cli("send", "--help")
    for needle in ("report|question|fix-notice", "low|medium|high|critical", "TO", "REF"):
        assert needle in out
    _, out, _ = cli("reply", "--help")
    assert "ID" in out and "ack" in out


def test_show_says_how_a_letter_was_authenticated(home: Path, cli: Cli) -> None:
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    code, out, _ = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", OPENER)
    sent_id = out.split()[1]
    code, out, _ = cli("--as", "beta", "--json", "inbox")
    letter_id = json.loads(out)[0]["id"]
    code, out, _ = cli("--as", "beta", "show", letter_id)
    selector = reg.platforms["alpha"].selector
    assert code == 0
    assert (
        f"auth:     DKIM signature d=bus.test s={selector} verified against the key pinned in the registry for alpha"
        in out
    )
    code, out, _ = cli("--as", "alpha", "--json", "show", sent_id)
    assert json.loads(out)["authentication"] == f"signed here with the key of alpha (d=bus.test, s={selector})"


def test_no_library_log_line_reaches_the_terminal(home: Path) -> None:
    """imapclient logs a warning for implicit TLS to port 143; the CLI shows only its own lines.
    A subprocess, because under pytest the root logger has handlers and nothing would leak."""
    import subprocess
    import sys

    bus.init(
        home,
        home / "registry",
        ["alpha"],
        domain="bus.test",
        transport="smtp+imap",
        endpoints=bus.endpoints("127.0.0.1:9", "127.0.0.1:143", ("none", "implicit"), None, ()),
    )
    write_login(home, "alpha", Login("alpha@bus.test", "x"))
    done = subprocess.run(
        [sys.executable, "-m", "agentmail", "--as", "alpha", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AGENTMAIL_HOME": str(home)},
    )
    # Refused, or answered by whatever listens on 143 here (CI's Dovecot): the wording differs.
    assert done.returncode == 6 and "FAIL imap:" in done.stdout and "127.0.0.1:143" in done.stdout
    assert len(done.stderr.splitlines()) == 1 and done.stderr.endswith("check(s) failed\n"), done.stderr


def test_init_copies_the_ca_into_the_registry(home: Path, servers: MailServers, cli: Cli) -> None:
    code, _, err = cli(
        "init",
        "--transport",
        "smtp+imap",
        "--domain",
        "bus.test",
        "--smtp",
        f"127.0.0.1:{servers.smtp_port}",
        "--imap",
        f"127.0.0.1:{servers.imap_port}",
        "--tls",
        "starttls",
        "--tls",
        "implicit",
        "--ca-file",
        str(servers.ca_file),
        "alpha",
    )
    assert code == 0, err
    assert 'ca_file = "ca.pem"' in (home / "registry" / "bus.toml").read_text()
    assert (home / "registry" / "ca.pem").read_bytes() == servers.ca_file.read_bytes()


def test_init_with_smtp_and_imap_infers_the_transport_and_says_why_a_port_got_its_tls_mode(
    home: Path, cli: Cli
) -> None:
    code, _, err = cli("init", "--domain", "example.org", "--smtp", "mail.example.org:2525", "--imap",
                       "mail.example.org:993", "alpha")  # fmt: skip
    assert code == 0, err
    b = registry_mod.load(home / "registry").bus
    assert (b.transport, b.smtp, b.imap) == (
        "smtp+imap",
        registry_mod.Endpoint("mail.example.org", 2525, "implicit"),
        registry_mod.Endpoint("mail.example.org", 993, "implicit"),
    )
    (note,) = err.splitlines()  # the well-known 993 needs no word
    assert note.startswith('agentmail: note: smtp mail.example.org:2525: tls = "implicit", chosen because --tls')
    assert "'agentmail bus set smtp.tls starttls'" in note
    code, _, err = cli("bus", "set", "imap", "mail.example.org:1993")
    assert code == 0 and 'imap mail.example.org:1993: tls = "implicit", chosen because' in err
    assert cli("bus", "set", "imap", "mail.example.org:1993", "--tls", "implicit")[2] == ""  # chosen: no word
    err = cli("bus", "set", "imap", "mail.example.org:143")[2]  # the well-known port: no word of its mode,
    assert err.splitlines() == [f"agentmail: note: {render.UNASKED}"]  # but the server moved, with nobody asked


def test_init_smtp_imap_without_an_endpoint_names_the_missing_option(home: Path, cli: Cli) -> None:
    code, _, err = cli("init", "--transport", "smtp+imap", "--imap", "mail.example.org:993", "alpha")
    assert code == 2
    assert "--transport smtp+imap needs --smtp HOST:PORT (the submission and IMAP servers" in err
    code, _, err = cli("init", "--transport", "smtp+imap", "alpha")
    assert code == 2 and "needs --smtp HOST:PORT and --imap HOST:PORT" in err
    code, _, err = cli("init", "--transport", "local", "--smtp", "mail.example.org:587", "alpha")
    assert code == 2 and "are for --transport smtp+imap" in err  # said outright: not overridden
    assert not (home / "registry").exists()


def test_doctor_before_credentials_exist_still_reaches_both_servers_and_checks_their_tls(
    home: Path, servers: MailServers, cli: Cli
) -> None:
    cli_bus(home, servers)
    (home / "secrets" / "alpha.env").unlink()
    code, out, _ = cli("--as", "alpha", "doctor")
    assert code == 6 and "FAIL transport: no mailbox password for alpha" in out
    assert f"ok   smtp: 127.0.0.1:{servers.smtp_port} starttls TLS reached (EHLO offers AUTH " in out
    assert f"ok   imap: 127.0.0.1:{servers.imap_port} implicit TLS reached (CAPABILITY offers AUTH=" in out
    assert "the login is not tried (no credentials yet)" in out
    assert servers.store.counts["smtp.auth"] + servers.store.counts["smtp.auth_failed"] == 0
    servers.stop_imap()
    code, out, _ = cli("--as", "alpha", "doctor")
    assert f"FAIL imap: nothing is listening on 127.0.0.1:{servers.imap_port} (connection refused)" in out


def test_doctor_on_a_host_name_that_does_not_resolve_says_so_in_words(
    home: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve = socket.getaddrinfo

    def no_such_name(host: object, *args: object, **kwargs: object) -> object:
        if str(host).endswith(".invalid"):  # answered here: no query leaves the machine
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    endpoints = bus.endpoints("mail.nonexistent.invalid:587", "mail.nonexistent.invalid:993", (), None, ())
    bus.init(home, home / "registry", ["alpha"], domain="bus.test", transport="smtp+imap", endpoints=endpoints)
    for with_login in (True, False):
        if with_login:
            write_login(home, "alpha", Login("alpha@bus.test", "pw"))
        else:
            (home / "secrets" / "alpha.env").unlink()
        code, out, _ = cli("--as", "alpha", "doctor")
        assert code == 6
        for what, port in (("smtp", 587), ("imap", 993)):
            assert (
                f"FAIL {what}: cannot reach mail.nonexistent.invalid:{port}: the name mail.nonexistent.invalid does "
                f"not resolve (Name or service not known); check the host in bus.toml [{what}]"
            ) in out, out
        assert "Errno" not in out and "SMTPConnectError" not in out and "gaierror" not in out
