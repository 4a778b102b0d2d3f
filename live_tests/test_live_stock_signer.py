"""A person on a server with stock OpenDKIM answers from mutt, live (issue 24): dave@people.test
submits through a second OpenDKIM with Debian's stock signing settings (``h=`` without
Message-ID or any MIME header). His reply to an agent's letter still reaches the agent as
``human``, in the thread, the quote cut: agentmail/partly_signed.py's rule for a person's letter
whose signature leaves the MIME headers out."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from email import message_from_bytes
from email.message import Message
from pathlib import Path

import imapclient
import pytest
from conftest import LiveBus, eventually, opener, receive

from agentmail.admin import bus as bus_mod
from agentmail.config import registry as registry_mod
from agentmail.transport.smtpimap import tls_context

PERSON = "dave@people.test"  # a person on the stock-OpenDKIM domain (live_tests/mailstack/up BASE_USERS)
NEW_TEXT = "Our gateway dropped the plan field after the 2.4.1 deploy.\nRolled back; please retry."


def _password(bus: LiveBus) -> str:
    users = {u["address"]: u["password"] for u in (bus.cfg.stack or {}).get("users", [])}
    if PERSON not in users:
        pytest.fail(
            f"{PERSON} has no mailbox on the stack: restart it with MAILSTACK_DIR=/work/mailstack-run "
            f"bash live_tests/mailstack/up (its BASE_USERS holds {PERSON})",
            pytrace=False,
        )
    return users[PERSON]


def _copy_in_person_inbox(bus: LiveBus, token: str) -> Message | None:
    imap = bus.registry.bus.imap
    assert imap is not None
    with imapclient.IMAPClient(
        imap.host, port=imap.port, ssl=True, ssl_context=tls_context(bus.registry.bus.ca_file)
    ) as client:
        client.login(PERSON, _password(bus))
        client.select_folder("INBOX", readonly=True)
        uids = client.search(["SUBJECT", token])
        if not uids:
            return None
        data = client.fetch(uids[-1:], ["BODY.PEEK[]"])
    return message_from_bytes(bytes(next(iter(data.values()))[b"BODY[]"]))


def _reply_draft(original: Message) -> str:
    """What mutt's reply command writes: to the Reply-To, Re: subject, threading headers, the
    original quoted under an attribution line, the person's signature."""
    quoted = "\n".join("> " + line for line in str(original.get_payload(decode=True).decode()).splitlines())
    references = f"{original.get('References', '')} {original['Message-ID']}".strip()
    return (
        f"From: Dave <{PERSON}>\n"
        f"To: {original['Reply-To']}\n"
        f"Subject: Re: {original['Subject']}\n"
        f"In-Reply-To: {original['Message-ID']}\n"
        f"References: {references}\n"
        "\n"
        f"{NEW_TEXT}\n"
        "\n"
        f"On {original['Date']}, {original['From']} wrote:\n"
        f"{quoted}\n"
        "\n"
        "-- \n"
        "Dave, gateway team\n"
    )


def test_a_person_on_a_stock_opendkim_server_answers_from_mutt_and_the_agent_gets_it_as_human(
    bus: LiveBus, token: str, tmp_path: Path
) -> None:
    if not bus.cfg.is_stack:
        pytest.skip("needs the loopback stack's people.test domain and its mutt configuration")
    mutt = shutil.which(os.environ.get("LIVE_BUS_MUTT", "mutt"))
    if mutt is None:
        pytest.fail("mutt is not installed (live_tests/mailstack/up installs it)", pytrace=False)
    rc = Path((bus.cfg.stack or {})["MAILSTACK_DIR"]) / "mutt" / f"{PERSON}.muttrc"
    if not rc.is_file():
        pytest.fail(f"no mutt configuration {rc}: restart the stack with live_tests/mailstack/up", pytrace=False)
    _password(bus)
    registry, home = bus.variant("stock-signer", own_registry=True)
    bus_mod.set_person(registry, bus.cfg.receiver, PERSON, follows=True, writes=True)
    registry = registry_mod.load(registry.root)
    agent = bus.client(bus.cfg.sender, home=home, registry=registry)
    try:  # logged out at the end: Dovecot allows alpha 10 connections, and later checks need some
        sent = agent.send(bus.cfg.receiver, f"Stock {token}", opener(bus.cfg.sender, bus.cfg.receiver, token))
        assert sent.state == "sent", sent.extra

        copy = eventually(lambda: _copy_in_person_inbox(bus, token), f"{PERSON} waiting for the follower's copy")
        draft = tmp_path / "reply.draft"
        draft.write_text(_reply_draft(copy))
        done = subprocess.run(  # batch mode: stdin is no terminal, the draft is sent as it is
            [mutt, "-n", "-F", str(rc), "-e", "set record=''", "-H", str(draft)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"mutt failed: {done.stderr.strip()[-400:]}"

        (got,) = receive(agent, sent.thread)
        assert (got.type, got.sender, got.sender_address, got.thread) == (
            "human",
            bus.cfg.receiver,
            PERSON,
            sent.thread,
        )
        assert got.extra["person"] == PERSON and got.in_reply_to == sent.message_id
        assert got.body == NEW_TEXT, got.body  # the quote and the signature cut
        raw = agent.raw(got.id)
        signature = message_from_bytes(raw)["DKIM-Signature"]
        assert signature is not None and "d=people.test" in signature.replace(" ", "")
        tags = dict(t.strip().partition("=")[::2] for t in re.sub(r"\s+", "", signature).split(";") if "=" in t)
        signed = {h.lower() for h in tags["h"].split(":")}
        assert {"from", "to", "subject", "date"} <= signed, signed  # the stock list...
        assert not signed & {"mime-version", "content-type", "content-transfer-encoding", "message-id"}, signed
        assert [x.type for x in agent.thread(sent.thread)] == [sent.type, "human"]
        assert not [x for x in agent.quarantined() if token in (x.subject or "")]
    finally:
        agent.close()
