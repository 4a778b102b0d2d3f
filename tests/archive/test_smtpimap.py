"""The archive and the proof bundle on an smtp+imap bus (the in-process SMTP and IMAP servers):
what the spools hold is the same whichever transport filed it, and so are the pages and proofs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmail.archive import proof, site
from agentmail.archive.history import History
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity

from ..conftest import OPENER, eventually
from ..mailservers import MailServers
from ..transport.test_transport_smtpimap import USERS, make_bus


@pytest.fixture
def servers() -> Iterator[MailServers]:
    with MailServers("bus.test", USERS, smtp_tls="starttls", imap_tls="implicit") as ms:
        yield ms


def test_archive_and_proof_of_a_thread_over_smtp_and_imap(home: Path, servers: MailServers, tmp_path: Path) -> None:
    reg = make_bus(home, servers, sent_folder="", new_threads_per_hour=0)
    with AgentMail(reg, Identity("alpha"), home) as alpha, AgentMail(reg, Identity("beta"), home) as beta:
        thread = alpha.send("beta", "Quota over IMAP", OPENER).thread
        assert eventually(lambda: len(beta.inbox()) == 1)
        (got,) = beta.thread(thread, sync=False)
        beta.reply(got, "Reproduced; fixing it.", type="ack")
        assert eventually(lambda: len(alpha.thread(thread)) == 2)
        done = site.write([alpha, beta], tmp_path / "site", bus="bus.test")
        assert (done.threads, done.letters) == (1, 2)
        page = (tmp_path / "site" / "t" / thread / "index.html").read_text()
        assert page.count("badge verified") == 2
        letters = alpha.thread(thread, sync=False)
        bundle = proof.build([(x, alpha.raw(x.id)) for x in letters], History(reg.root), thread, "alpha")
    checked = proof.verify(bundle)
    assert checked.ok and len(checked.letters) == 2 and json.loads(bundle)["thread"] == thread
