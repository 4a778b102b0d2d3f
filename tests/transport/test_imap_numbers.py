"""A server's answer that is no number where IMAP says one stands (UIDNEXT, UIDVALIDITY's
checkpoint, RFC822.SIZE) is a transport failure: exit 5 with the server named, the connection
dropped, nothing filed and the checkpoint where it was — never a ValueError from the middle of a
sync."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import imapclient
import pytest

from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.errors import TransportError

from ..conftest import OPENER
from ..mailservers import MailServers
from .test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def _answering(field: bytes, value: bytes) -> Any:
    real_select = imapclient.IMAPClient.select_folder
    real_fetch = imapclient.IMAPClient.fetch

    def select_folder(self: Any, *args: Any, **kwargs: Any) -> Any:
        info = dict(real_select(self, *args, **kwargs))
        if field in info:
            info[field] = value
        return info

    def fetch(self: Any, *args: Any, **kwargs: Any) -> Any:
        rows = real_fetch(self, *args, **kwargs)
        return {uid: {**row, field: value} if field in row else row for uid, row in rows.items()}

    return select_folder, fetch


@pytest.mark.parametrize("field", [b"UIDNEXT", b"RFC822.SIZE"])
def test_a_number_that_is_no_number_fails_the_sync_with_exit_5_and_files_nothing(
    home: Path, servers: MailServers, monkeypatch: pytest.MonkeyPatch, field: bytes
) -> None:
    reg = make_bus(home, servers, new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        alpha.send("beta", "A report", OPENER)
        select_folder, fetch = _answering(field, b"12x")
        monkeypatch.setattr(imapclient.IMAPClient, "select_folder", select_folder)
        monkeypatch.setattr(imapclient.IMAPClient, "fetch", fetch)
        with pytest.raises(TransportError, match="IMAP .* failed: ValueError") as raised:
            beta.sync()
        assert raised.value.exit_code == 5
        assert beta.inbox(sync=False) == []
        monkeypatch.undo()
        assert [x.subject for x in beta.inbox()] == ["A report"]  # the next sync files it, once
        assert [x.subject for x in beta.inbox()] == ["A report"]
