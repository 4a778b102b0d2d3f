"""The outbox asks its transport what it can do (``links_copies``, ``mails_people``,
``keeps_sent_copy``, ``sent_is_durable``), never which kind it is by name: a transport a test or
an author brings is taken at its word, and a bus not yet opened is asked through its class."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.credentials import Login
from agentmail.config.identity import Identity
from agentmail.config.registry import Endpoint, Registry
from agentmail.transport import open_transport, transport_class
from agentmail.transport.base import OnResult, Outgoing, SubmitResult
from agentmail.transport.local import LocalTransport
from agentmail.transport.smtpimap import SmtpImapTransport

from ..conftest import OPENER

FOLLOWER = "carol@people.test"


class Recording(LocalTransport):
    """The local post office, keeping every ``Outgoing`` it is handed."""

    handed: list[Outgoing]

    def submit(self, messages: Sequence[Outgoing], on_result: OnResult | None = None) -> list[SubmitResult]:
        self.handed.extend(messages)
        return super().submit(messages, on_result)


def _client(registry: Registry, home: Path, platform: str, **capabilities: bool) -> tuple[AgentMail, Recording]:
    base = open_transport(registry, platform, home)
    assert isinstance(base, LocalTransport)
    kind = type("Said", (Recording,), dict(capabilities))
    transport: Recording = kind(base.postoffice, platform, base.resolve)
    transport.handed = []
    return AgentMail(registry, Identity(platform), home, transport=transport), transport


def test_each_transport_says_what_it_can_do_and_a_bus_not_opened_is_asked_through_its_class(
    registry: Registry,
) -> None:
    assert transport_class(registry) is LocalTransport
    local = (LocalTransport.sent_is_durable, LocalTransport.links_copies, LocalTransport.mails_people)
    assert local == (True, True, False)
    assert (SmtpImapTransport.sent_is_durable, SmtpImapTransport.links_copies, SmtpImapTransport.mails_people) == (
        False,
        False,
        True,
    )
    loop = Endpoint("127.0.0.1", 1, "none")
    for folder, keeps in ((None, True), ("Sent", True), ("", False)):
        imap = SmtpImapTransport(loop, loop, Login("alpha@bus.test", "pw"), sent_folder=folder)
        assert imap.keeps_sent_copy is keeps
    assert transport_class(registry.replace(bus=registry.bus.replace(transport="smtp+imap"))) is SmtpImapTransport


def test_the_post_office_links_the_spools_copy_only_when_its_transport_says_it_can(
    registry: Registry, home: Path
) -> None:
    alpha, linking = _client(registry, home, "alpha")
    assert alpha.send("beta", "Quota", OPENER).state == "sent"
    (item,) = linking.handed
    assert item.copy is not None and item.copy[0] == str(alpha.spool.read.path("sent", item.key))
    alpha, writing = _client(registry, home, "alpha", links_copies=False)
    assert alpha.send("beta", "Quota 2", OPENER).state == "sent"
    (item,) = writing.handed
    assert item.copy is None  # the bytes are written again, the spool's file untouched


def test_the_followers_are_in_the_envelope_only_where_the_transport_mails_people(
    registry: Registry, home: Path
) -> None:
    bus.set_person(registry, "alpha", FOLLOWER, follows=True, writes=False)
    reg = registry_mod.load(home / "registry")
    alpha, platforms_only = _client(reg, home, "alpha")
    sent = alpha.send("beta", "Quota", OPENER)
    assert sent.cc == (FOLLOWER,) and FOLLOWER not in platforms_only.handed[0].envelope.rcpt_to
    alpha, people_too = _client(reg, home, "alpha", mails_people=True)
    alpha.send("beta", "Quota 2", OPENER)
    assert FOLLOWER in people_too.handed[0].envelope.rcpt_to
