"""The one-FETCH read asks ``BODY.PEEK[]<0.max_size+1>``: RFC 3501's numbers are 32-bit, and a bus
may take letters of any size (``max_size`` has a floor, no ceiling). A partial the server cannot
take is never asked: such a bus reads its letters by their sizes first, as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity

from ..conftest import OPENER, eventually
from ..mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


@pytest.mark.parametrize("max_size", [2**32 - 2, 2**32 - 1, 2**40])
def test_a_bus_taking_letters_past_what_a_partial_fetch_can_say_still_reads_them(
    home: Path, servers: MailServers, max_size: int
) -> None:
    reg = make_bus(home, servers, max_size=max_size)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        sent = alpha.send("beta", "Quota 500s", OPENER)
        assert eventually(lambda: len(servers.store.messages("beta@bus.test")) == 1)
        assert [x.message_id for x in beta.inbox()] == [sent.message_id]
