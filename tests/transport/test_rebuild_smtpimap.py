"""Rebuild restores what was on smtp+imap (issue 37), attacked: a lost spool.db rebuilt, then
the server's mailboxes read again from the start (no checkpoint is restored) — every letter a
duplicate, every delivery report one already noted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail import ages
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity

from ..conftest import OPENER
from ..mailservers import MailServers
from ..spool.test_rebuild_restores import views
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def _open(home: Path, name: str) -> AgentMail:
    return AgentMail(registry_mod.load(home / "registry"), Identity(name), home)


def _lose_and_rebuild(am: AgentMail) -> None:
    am.close()
    am.spool.db.close()
    for name in ("spool.db", "spool.db-wal", "spool.db-shm"):
        (am.spool.root / name).unlink(missing_ok=True)
    am.rebuild()


def _bounce(servers: MailServers, message_id: str) -> None:
    dsn = (Path(__file__).parents[1] / "data" / "bounce-template.eml").read_bytes()
    dsn = dsn.replace(b"{MESSAGE_ID}", message_id.encode()).replace(b"nosuch@", b"beta@")
    stamp = b"Authentication-Results: mail.bus.test; dkim=pass header.d=bus.test\r\n"  # the trusted MTA's
    servers.store.inject("alpha@bus.test", stamp + dsn)


@pytest.mark.parametrize("how", ["rebuild", "from-start"])
def test_a_delivery_report_read_again_is_not_a_new_bounce(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A report read a second time (after a rebuild, or ``inbox --from-start``, which an agent
    a letter steers may run) is the bounce already noted: the letter keeps when it was found
    undeliverable, so the people's digest does not report it again as new."""
    make_bus(home, servers)
    alpha = _open(home, "alpha")
    sent = alpha.send("beta", "Quota 500s", OPENER)
    _bounce(servers, sent.message_id)
    assert alpha.sync().bounces == 1
    before = views(alpha)
    monkeypatch.setattr(ages, "clock", lambda: time.time() + 86400)  # a day on
    if how == "rebuild":
        _lose_and_rebuild(alpha)
        alpha = _open(home, "alpha")
        assert views(alpha) == before
    else:
        alpha.from_start()
    alpha.sync()
    assert views(alpha) == before
    alpha.close()


def test_every_state_survives_a_rebuild_and_a_read_from_the_start(home: Path, servers: MailServers) -> None:
    """Held, answered, read and quarantined letters on smtp+imap: equal on every view after a
    rebuild, and again after the mailboxes are read from the start."""
    make_bus(home, servers)
    alpha, beta = _open(home, "alpha"), _open(home, "beta")
    alpha.send("beta", "Quota 500s", OPENER)
    alpha.send("beta", "Second", OPENER)
    first, second = beta.inbox()
    assert beta.reply(first, "Reproduced.", type="ack") is not None
    beta.done(second.id)
    beta.send("alpha", "Hold me", OPENER, hold=True)
    servers.store.inject("beta@bus.test", beta.spool.read.raw(first.id).replace(b"Quota 500s", b"Quota 501s"))
    assert [x.reason for x in beta.quarantined()] == ["unauthenticated"]
    before = views(beta)
    _lose_and_rebuild(beta)
    beta = _open(home, "beta")
    assert views(beta) == before
    beta.sync()
    assert views(beta) == before
    assert beta.reply(first, "Again.", type="ack") is None
    for am in (alpha, beta):
        am.close()
