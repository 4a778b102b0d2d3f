"""What ``watch`` keys its handled letters by (cli/watch.py ``_key``), exactly: the verified sender
and the Message-ID, or the letter's id here when it has none (tests/MUTATION.md, run 17)."""

from __future__ import annotations

from pathlib import Path

from agentmail.cli.watch import Watcher, _key
from agentmail.client.facade import AgentMail
from agentmail.model import Letter

from .test_watch import RECORD, lines

LETTER = Letter(message_id="<1.alpha@bus.test>", sender="alpha", sender_address="alpha@bus.test", to="beta",
                to_address="beta@bus.test", type="report", thread="thr-aaaaaaaaaa", subject="Quota", body="500s",
                date="", id="01jaaaaaaaaaaaaaaaaaaaaaaa")  # fmt: skip


def test_the_key_is_the_sender_and_message_id_else_the_id_here() -> None:
    assert _key(LETTER) == "alpha <1.alpha@bus.test>"
    assert _key(LETTER.replace(sender="gamma")) == "gamma <1.alpha@bus.test>"  # a reused Message-ID: another letter
    assert _key(LETTER.replace(id="01jbbbbbbbbbbbbbbbbbbbbbbb")) == "alpha <1.alpha@bus.test>"  # another copy here
    assert _key(LETTER.replace(message_id="")) == "id:01jaaaaaaaaaaaaaaaaaaaaaaa"


def test_letters_that_no_longer_show_a_message_id_are_each_run_once(beta: AgentMail, tmp_path: Path) -> None:
    """Two unread letters whose files no longer parse and whose records are gone (a damaged spool):
    neither has a Message-ID nor a sender to key by; each is its own letter, run once."""
    for n in (1, 2):
        letter = LETTER.replace(id="", message_id=f"<{n}.alpha@bus.test>")
        beta.spool.write.store("unread", letter, b"no header at all")
    beta.spool.db.conn().execute("UPDATE letters SET meta=NULL")
    assert [(x.sender, x.message_id) for x in beta.inbox(sync=False)] == [("", ""), ("", "")]
    out, said = tmp_path / "runs.txt", []
    assert Watcher(beta, RECORD.format(out=out), log=said.append).run(once=True) == 2, said
    assert Watcher(beta, RECORD.format(out=out), log=said.append).run(once=True) == 0  # a restart: recorded
    assert sorted(line[0] for line in lines(out)) == sorted(x.id for x in beta.inbox(sync=False))
