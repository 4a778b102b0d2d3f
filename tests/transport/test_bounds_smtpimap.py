"""The per-letter bounds hold on smtp+imap as on the local post office: a relay's additions to a
genuinely signed letter (a DKIM-Signature of 60 KB of white space, twenty signatures of its own)
are quarantined ``too-large`` before any signature is verified, and the letters beside them are
filed (in-process servers, loopback only)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity

from ..client.test_bounds_sync import _signed
from ..mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus

_PAD = b"".join(b"\r\n " + b" " * 70 for _ in range(60_000 // 73))
_ADDED = b"DKIM-Signature: v=1; a=ed25519-sha256; d=relay.test; s=x; bh=AAAA; b=AAAA; h=from"


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_a_relays_signatures_are_bounded_on_smtp_imap(home: Path, servers: MailServers) -> None:
    reg = make_bus(home, servers, sent_folder="", new_threads_per_hour=0)
    with AgentMail(reg, Identity("beta"), home) as beta:
        servers.store.deliver("beta@bus.test", _ADDED + _PAD + b"to\r\n" + _signed(reg, home, subject="Long"))
        servers.store.deliver("beta@bus.test", (_ADDED + b"\r\n") * 20 + _signed(reg, home, subject="Many"))
        servers.store.deliver("beta@bus.test", _signed(reg, home, subject="Fine", body="A fine letter."))
        report = beta.sync()
        assert [x.subject for x in report.accepted] == ["Fine"]
        named = sorted(str(x.detail).rpartition("(bounds.")[2].rstrip(")") for x in report.quarantined)
        assert named == ["SIGNATURES", "SIGNATURE_CHARS"]
