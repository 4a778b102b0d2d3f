"""People in the loop, live (issue 12): a follower's own mailbox on the stack receives the whole
thread, threaded, and a second IMAP client sees the keywords agentmail set on the agent's INBOX
letters, with \\Seen untouched."""

from __future__ import annotations

from email import message_from_bytes
from typing import Any

import imapclient
import pytest
from conftest import LiveBus, eventually, opener, receive

from agentmail.admin import bus as bus_mod
from agentmail.config import registry as registry_mod
from agentmail.transport.smtpimap import tls_context

FOLLOWER = "carol@bus.test"  # a person's mailbox on the stack (live_tests/mailstack/up BASE_USERS)


def _password(bus: LiveBus, address: str) -> str:
    users = {u["address"]: u["password"] for u in (bus.cfg.stack or {}).get("users", [])}
    if address not in users:
        pytest.fail(
            f"{address} has no mailbox on the stack: restart it with MAILSTACK_DIR=/work/mailstack-run "
            f"bash live_tests/mailstack/up (its BASE_USERS holds {address})",
            pytrace=False,
        )
    return users[address]


def _inbox(bus: LiveBus, address: str, token: str) -> dict[str, tuple[set[str], Any]]:
    """Message-ID -> (flags, parsed headers) of ``address``'s INBOX letters whose subject has
    ``token``, read as a person's own client would: a separate login, read-only, BODY.PEEK."""
    imap = bus.registry.bus.imap
    assert imap is not None
    with imapclient.IMAPClient(
        imap.host, port=imap.port, ssl=True, ssl_context=tls_context(bus.registry.bus.ca_file)
    ) as person:
        person.login(address, _password(bus, address))
        person.select_folder("INBOX", readonly=True)
        uids = person.search(["SUBJECT", token])
        got = person.fetch(uids, ["FLAGS", "BODY.PEEK[HEADER]"]) if uids else {}
    found = {}
    for item in got.values():
        headers = message_from_bytes(bytes(item[b"BODY[HEADER]"]))
        found[str(headers["Message-ID"]).strip()] = ({f.decode() for f in item[b"FLAGS"]}, headers)
    return found


def test_a_follower_receives_the_whole_thread_and_the_agent_mailbox_shows_keywords(bus: LiveBus, token: str) -> None:
    if not bus.cfg.is_stack:
        pytest.skip("needs the loopback stack's person mailbox")
    _password(bus, FOLLOWER)
    registry, home = bus.variant("people", own_registry=True)
    bus_mod.set_person(registry, bus.cfg.receiver, FOLLOWER, follows=True, writes=False)
    registry = registry_mod.load(registry.root)
    sender, receiver = (
        bus.client(bus.cfg.sender, home=home, registry=registry),
        bus.client(bus.cfg.receiver, home=home, registry=registry),
    )
    sent = sender.send(
        receiver.me.platform, f"Followed {token}", opener(sender.me.platform, receiver.me.platform, token)
    )
    assert sent.state == "sent", sent.extra
    (got,) = receive(receiver, sent.thread)
    answer = receiver.reply(got, "Reproduced; fixing.", type="ack")
    assert answer is not None and answer.state == "sent", answer
    receive(sender, sent.thread)

    def both() -> dict[str, tuple[set[str], Any]] | None:
        letters = _inbox(bus, FOLLOWER, token)
        return letters if len(letters) >= 2 else None

    follower = eventually(both, f"{FOLLOWER} waiting for both letters of {sent.thread}")
    assert set(follower) == {sent.message_id, answer.message_id}  # each letter once, the whole thread
    first, second = follower[sent.message_id][1], follower[answer.message_id][1]
    assert FOLLOWER in str(first["Cc"]) and FOLLOWER in str(second["Cc"])
    assert str(second["In-Reply-To"]).strip() == sent.message_id  # threaded in the person's client
    assert (
        str(first["Reply-To"]).strip()
        == f"{sender.platform.address.split('@')[0]}+{sent.thread}@{sender.platform.domain}"
    )
    assert str(first["List-Id"]).strip() == f"<agentmail.{registry.bus.domain}>"

    mailbox = _inbox(bus, receiver.platform.address, token)  # a second client on the agent's own mailbox
    flags, _ = mailbox[sent.message_id]
    assert "$AgentmailVerified" in flags and "\\Seen" not in flags, flags
