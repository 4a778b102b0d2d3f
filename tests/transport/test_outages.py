"""The server is down, refuses a login, drops a batch, bounces, or vouches for a letter (issue 15).

Every failure here is produced by the in-process servers (tests/mailservers) the way a real MTA
produces it, and each test fails when the handling it names is removed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.cli.app import main
from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login, write_login
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import ConfigError
from agentmail.transport import logins, smtpimap

from ..conftest import OPENER, eventually
from ..mailservers import MailServers
from .test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)


@pytest.fixture
def bus(home: Path, servers: MailServers) -> Registry:  # noqa: F811
    return make_bus(home, servers)


@pytest.fixture
def alpha_beta(bus: Registry, home: Path) -> Iterator[tuple[AgentMail, AgentMail]]:
    with AgentMail(bus, Identity("alpha"), home) as alpha, AgentMail(bus, Identity("beta"), home) as beta:
        yield alpha, beta


def _queue(alpha: AgentMail, servers: MailServers, n: int) -> list[str]:  # noqa: F811
    """``n`` letters waiting in alpha's outbox (SMTP was down when they were sent)."""
    servers.stop_smtp()
    ids = []
    for i in range(n):
        letter = alpha.send("beta", f"Letter {i}", OPENER)
        assert letter.state == "outbox"
        ids.append(letter.id)
    servers.start_smtp()
    return ids


# --- the server is down ------------------------------------------------------------------------


def test_a_hook_shows_the_spool_as_last_synced_when_imap_is_down(
    alpha_beta: tuple[AgentMail, AgentMail],
    servers: MailServers,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    alpha, beta = alpha_beta
    alpha.send("beta", "Quota 500s", OPENER)
    assert len(beta.sync().accepted) == 1
    servers.stop_imap()
    assert main(["--as", "beta", "hook", "generic", "session-start"]) == 0
    out, err = capsys.readouterr()
    assert "1 unread letter for beta" in out and "Quota 500s" in out
    assert err == ""


def test_the_read_commands_show_the_spool_as_last_synced_with_one_warning_when_the_server_is_down(
    alpha_beta: tuple[AgentMail, AgentMail],
    servers: MailServers,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    alpha, beta = alpha_beta
    sent = alpha.send("beta", "Quota 500s", OPENER)
    assert len(beta.sync().accepted) == 1
    servers.stop_imap()
    servers.stop_smtp()
    for args, shown in (
        (["status"], sent.thread),
        (["thread", sent.thread], "Quota 500s"),
        (["search", "Quota"], "Quota 500s"),
        (["digest"], sent.thread),
        (["--json", "status"], sent.thread),
    ):
        assert main(["--as", "beta", *args]) == 0, args
        out, err = capsys.readouterr()
        assert shown in out, (args, out)
        (line,) = err.splitlines()
        assert line.startswith(f"agentmail: warning: nothing is listening on 127.0.0.1:{servers.imap_port}"), line
        assert line.endswith("; shown as of the last sync (this machine's copy)"), line
        assert main(["--as", "beta", *args, "--no-sync"]) == 0, args  # asked not to sync: no warning
        assert capsys.readouterr().err == ""
    # a bad argument is still refused before any sync; a command that sends still fails
    assert main(["--as", "beta", "status", "--stale", "soon"]) == 2
    assert "warning" not in capsys.readouterr().err
    assert main(["--as", "beta", "digest", "--send"]) == 5  # a digest mailed is never one of a stale spool
    assert "warning" not in capsys.readouterr().err


def test_flush_with_smtp_down_keeps_the_letters_and_sends_each_once_when_it_is_back(
    alpha_beta: tuple[AgentMail, AgentMail],
    servers: MailServers,
    capsys: pytest.CaptureFixture[str],  # noqa: F811
) -> None:
    alpha, beta = alpha_beta
    ids = _queue(alpha, servers, 2)
    servers.stop_smtp()
    results = alpha.flush()
    assert [(r.key, r.status) for r in results] == [(i, "queued") for i in ids]
    assert all(
        r.detail.startswith(f"nothing is listening on 127.0.0.1:{servers.smtp_port} (connection refused)")
        for r in results
    )
    capsys.readouterr()
    assert main(["--as", "alpha", "flush"]) == 5  # TransportError: the documented exit code
    out, err = capsys.readouterr()
    assert err.strip() == "agentmail: 2 letter(s) not sent" and "Traceback" not in out + err
    assert [x.state for x in alpha.sent()] == ["outbox", "outbox"]
    servers.start_smtp()
    assert [r.status for r in alpha.flush()] == ["sent", "sent"]
    assert alpha.flush() == []
    assert sorted(x.subject for x in beta.inbox()) == ["Letter 0", "Letter 1"]
    assert len(servers.store.accepted) == 2


def test_watch_keeps_running_through_an_imap_outage(
    alpha_beta: tuple[AgentMail, AgentMail], servers: MailServers, tmp_path: Path
) -> None:  # noqa: F811
    alpha, beta = alpha_beta
    out, said = tmp_path / "runs.txt", []
    servers.stop_imap()
    watcher = Watcher(beta, f'echo "$AGENTMAIL_THREAD" >> {out}', log=said.append)
    watcher.slice = 0.2  # the retry pause after a failed wait; not what the test measures
    runner = threading.Thread(target=watcher.run, daemon=True)
    runner.start()
    try:
        assert eventually(lambda: any("sync failed" in s for s in said)), said
        assert eventually(lambda: any("retrying" in s for s in said)), said
        assert runner.is_alive()
        servers.start_imap()
        sent = alpha.send("beta", "Quota 500s", OPENER)
        assert eventually(out.exists), "the watcher did not recover from the outage"
    finally:
        watcher.stop()
        runner.join(60)
    assert not runner.is_alive()
    assert out.read_text().split() == [sent.thread]


# --- refused and broken sessions ---------------------------------------------------------------


def test_a_login_refused_in_the_middle_of_sending_loses_nothing(
    alpha_beta: tuple[AgentMail, AgentMail], servers: MailServers
) -> None:  # noqa: F811
    alpha, beta = alpha_beta
    assert alpha.send("beta", "First", OPENER).state == "sent"  # a session is open
    servers.stop_smtp()
    servers.start_smtp()  # the session is gone; the password changed on the server meanwhile
    servers.store.refuse_logins()
    # A configuration error is not queued (issue 14): the letter goes to failed/ with the reason,
    # the command says so; nothing is lost and nothing is ever sent twice.
    with pytest.raises(
        ConfigError, match=r"refused the login 'alpha@bus\.test' .*the letter was not sent and not queued"
    ):
        alpha.send("beta", "Second", OPENER)
    (failed,) = [x for x in alpha.sent() if x.subject == "Second"]
    assert failed.state == "failed" and alpha.spool.read.ids("outbox") == []
    assert "refused the login" in str(alpha.spool.read.annotations(failed.id))
    servers.store.refuse_logins(False)
    assert alpha.flush() == []  # nothing queued: a failed letter is never sent behind the user's back
    assert alpha.send("beta", "Second", OPENER).state == "sent"  # after the fix it can be sent again
    assert sorted(x.subject for x in beta.inbox()) == ["First", "Second"]
    assert len(servers.store.accepted) == 2


def test_a_connection_dropped_mid_batch_sends_the_rest_later_and_nothing_twice(
    alpha_beta: tuple[AgentMail, AgentMail],
    servers: MailServers,  # noqa: F811
) -> None:
    alpha, beta = alpha_beta
    ids = _queue(alpha, servers, 3)
    servers.store.drop_connection_at_data(2)
    results = alpha.flush()
    assert [(r.key, r.status) for r in results] == [(ids[0], "sent"), (ids[1], "queued"), (ids[2], "queued")]
    assert all("broke" in r.detail for r in results[1:])
    assert len(servers.store.accepted) == 1
    assert [r.status for r in alpha.flush()] == ["sent", "sent"]  # a new session for the rest
    assert sorted(x.subject for x in beta.inbox()) == ["Letter 0", "Letter 1", "Letter 2"]
    assert len(servers.store.accepted) == 3


# --- what a real MTA adds: verdicts, hops, bounces ----------------------------------------------


def test_a_trusted_mta_reporting_dmarc_fail_quarantines_a_signed_letter(
    alpha_beta: tuple[AgentMail, AgentMail], servers: MailServers
) -> None:  # noqa: F811
    alpha, beta = alpha_beta
    servers.store.authserv_id = "mail.bus.test"
    servers.store.results = "dkim=pass header.d=bus.test; dmarc=fail (p=reject) header.from=bus.test"
    alpha.send("beta", "Quota 500s", OPENER)
    report = beta.sync()
    assert report.accepted == []
    (held,) = report.quarantined
    assert (held.reason, "dmarc=fail" in (held.detail or "")) == ("verdict-fail", True)
    raw = beta.raw(held.id)
    assert raw.count(b"Received: ") == 1 and b"Authentication-Results: mail.bus.test;" in raw


def test_a_trusted_mta_reporting_pass_changes_nothing_for_a_signed_letter(
    alpha_beta: tuple[AgentMail, AgentMail], servers: MailServers
) -> None:  # noqa: F811
    alpha, beta = alpha_beta
    servers.store.authserv_id = "mail.bus.test"
    servers.store.results = (
        "dkim=pass header.d=bus.test; spf=pass smtp.mailfrom=bus.test; dmarc=pass header.from=bus.test"
    )
    alpha.send("beta", "Quota 500s", OPENER)
    assert [x.subject for x in beta.inbox()] == ["Quota 500s"]


def test_a_dsn_bounce_from_the_server_marks_the_sent_letter_undeliverable(
    alpha_beta: tuple[AgentMail, AgentMail], servers: MailServers
) -> None:  # noqa: F811
    alpha, beta = alpha_beta
    servers.store.bounce_mail_for("beta@bus.test")
    servers.store.authserv_id, servers.store.results = "mail.bus.test", "dkim=pass header.d=mail.bus.test"
    sent = alpha.send("beta", "Quota 500s", OPENER)
    assert sent.state == "sent"  # SMTP took it; the bounce comes later, as mail
    report = alpha.sync()
    assert (report.bounces, report.quarantined, report.accepted) == (1, [], [])
    shown = alpha.show(sent.id)
    assert shown.extra.get("undeliverable") == "true" and "5.2.2" in str(shown.extra.get("undeliverable_reason"))
    (row,) = alpha.status(sync=False)
    assert row.undeliverable is True
    assert beta.inbox() == []


def test_a_dsn_the_server_does_not_vouch_for_marks_nothing_undeliverable(
    alpha_beta: tuple[AgentMail, AgentMail], servers: MailServers
) -> None:  # noqa: F811
    alpha, _ = alpha_beta
    servers.store.bounce_mail_for("beta@bus.test")  # the server stamps no Authentication-Results
    sent = alpha.send("beta", "Quota 500s", OPENER)
    report = alpha.sync()
    assert report.bounces == 0 and [x.reason for x in report.quarantined] == ["automated"]
    assert "does not vouch for it" in (report.quarantined[0].detail or "")
    assert "undeliverable" not in alpha.show(sent.id).extra
    (row,) = alpha.status(sync=False)
    assert row.undeliverable is False


def test_a_login_refused_after_a_penalty_longer_than_the_handshake_timeout_is_still_a_refusal(
    home: Path,
    servers: MailServers,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Dovecot's auth penalty delays a 535 by seconds: longer than the connect/greeting/TLS timeout,
    # left at its default (a smaller one could be outrun by a busy machine's TLS handshake), yet
    # the answer is a refusal (exit 6, nothing queued), never an outage.
    make_bus(home, servers)
    servers.store.mechanisms = ("PLAIN",)  # one SASL try, one penalty
    servers.store.auth_delay = logins.HANDSHAKE_TIMEOUT + 1.0
    write_login(home, "alpha", Login("alpha@bus.test", "wrong"))
    assert main(["--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER]) == 6
    _, err = capsys.readouterr()
    assert "refused the login 'alpha@bus.test'" in err and "timed out" not in err
    with AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home) as alpha:
        assert alpha.spool.read.ids("outbox") == []
    assert servers.store.counts["smtp.auth_failed"] == 1 and servers.store.accepted == []
    # IMAP's login too: the refusal read after the penalty
    assert main(["--as", "alpha", "inbox"]) == 6
    _, err = capsys.readouterr()
    assert "refused the login 'alpha@bus.test'" in err and "timed out" not in err


def test_a_login_with_no_answer_at_all_is_an_outage_named_as_the_login(
    home: Path,
    servers: MailServers,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(logins, "LOGIN_TIMEOUT", 0.5)
    monkeypatch.setattr(smtpimap, "LOGIN_TIMEOUT", 0.5)
    make_bus(home, servers)
    servers.store.mechanisms = ("PLAIN",)
    servers.store.auth_delay = 3.0
    assert main(["--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER]) == 5
    _, err = capsys.readouterr()
    assert f"127.0.0.1:{servers.smtp_port} did not answer the login within 0.5s (timed out)" in err
    assert main(["--as", "alpha", "inbox"]) == 5
    _, err = capsys.readouterr()
    assert f"127.0.0.1:{servers.imap_port} did not answer the login within 0.5s (timed out)" in err
