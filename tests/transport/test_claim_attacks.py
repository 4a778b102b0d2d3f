"""Attacks on the reply claim on the IMAP server (issue 37), by someone who did not write it:
a Message-ID is the sender's choice, and any holder of an address can put a letter in the INBOX."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.spool.layout import reply_key
from agentmail.transport.claim_marks import Claims
from agentmail.transport.smtpimap import SmtpImapTransport

from ..conftest import OPENER
from ..mailservers import MailServers
from .test_transport_smtpimap import make_bus, servers  # noqa: F401  (the fixture)


def test_a_letter_reusing_my_message_id_in_the_inbox_does_not_split_the_claim_on_my_own_letter(
    home: Path, servers: MailServers
) -> None:
    """A partner (or a relay) delivers into beta's INBOX a letter reusing the Message-ID of
    beta's own letter, after one machine of beta claimed its follow-up on the sent copy. Another
    machine looking for the letter must find that claim, not a fresh place in the INBOX."""
    reg = make_bus(home, servers)
    with AgentMail(reg, Identity("beta"), home) as beta:
        mine = beta.send("alpha", "Quota 500s", OPENER).message_id
    key = reply_key(mine, "beta")
    first = SmtpImapTransport.from_registry(registry_mod.load(home / "registry"), "beta", home)
    second = SmtpImapTransport.from_registry(registry_mod.load(home / "registry"), "beta", home)
    try:
        assert first.claim_reply(mine, key, "beta h1 R1").holder is None  # on the sent copy
        forged = f"From: alpha@bus.test\r\nMessage-ID: {mine}\r\nSubject: x\r\n\r\nbody\r\n".encode()
        servers.store.inject("beta@bus.test", forged)
        assert "R1" in str(second.claim_reply(mine, key, "beta h2 R2").holder)  # the first claim holds
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("kind", ["directory", "link to an endless file", "big file", "fifo"])
def test_a_claim_planted_on_the_post_office_as_no_claim_holds_its_key_and_nothing_else(
    tmp_path: Path, kind: str
) -> None:
    """Anyone who can write the post office's ``.claims/`` may plant the name a claim key hashes
    to: it reads as a claim in flight (its key is held), never a FIFO opened and waited on, a
    link followed, a file read whole, or an error out of the claim."""
    claims = Claims(tmp_path / ".claims")
    planted = claims.root / f"{Claims.key('<named@x>')}.0"
    claims.root.mkdir()
    if kind == "directory":
        planted.mkdir()
    elif kind == "link to an endless file":
        planted.symlink_to("/dev/zero")
    elif kind == "big file":
        planted.write_bytes(b"alpha R9\n" + b"9" * (1 << 20))
    else:
        os.mkfifo(planted)
    assert claims.claim("<named@x>", "alpha R1") == "another home"  # held, by nobody named
    assert claims.claim("<other@x>", "alpha R1") is None  # every other key is free
