"""Attacks on "a letter not here names the mailbox that holds it" (issue 38, item 5): the look
into the machine's other spools reads them only, and one that cannot be read says nothing; a
spool whose database SQLite cannot open at all is storage damage (exit 7), not an internal error."""

from __future__ import annotations

from pathlib import Path

from agentmail.client.facade import AgentMail

from ..conftest import OPENER, Cli


def test_a_spool_sqlite_cannot_open_is_passed_over_by_others_and_exit_7_for_its_own(
    alpha: AgentMail, beta: AgentMail, home: Path, cli: Cli
) -> None:
    sent = alpha.send("beta", "Quota", OPENER)
    assert beta.inbox()
    beta.spool.db.close()
    db = home / "spool" / "beta" / "spool.db"
    db.rename(home / "beta-spool.db.bak")
    db.mkdir()  # what no SQLite opens: a folder in the file's place
    code, out, err = cli("--as", "alpha", "show", "<nowhere@bus.test>")
    assert (code, out) == (1, "") and err == (
        "agentmail: no letter with Message-ID <nowhere@bus.test> in the mailbox alpha, chosen by --as\n"
    )
    assert cli("--as", "alpha", "show", sent.message_id)[0] == 0  # its own copy, sent
    code, out, err = cli("--as", "beta", "inbox", "--no-sync")
    assert code == 7 and out == "" and err.count("\n") == 1 and "internal error" not in err
    assert f"spool database: unable to open database file ({db})" in err
