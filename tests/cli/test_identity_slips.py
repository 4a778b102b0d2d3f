"""No silent identity slip (issue 41): a new --agent name is said, a note to oneself is refused,
a note to an unknown agent needs --new-agent, and MCP's confirmations name who acted."""

from __future__ import annotations

import json
from pathlib import Path

from agentmail.cli import mcp_server
from agentmail.client.facade import AgentMail

from ..conftest import OPENER, Cli


def test_a_new_agent_name_is_said_once(cli: Cli, registry: object, home: Path) -> None:
    code, _, err = cli("--as", "alpha", "--agent", "nigth", "inbox", "--no-sync")
    assert code == 0 and err == (
        "agentmail: note: alpha@nigth is a new mailbox (agents of alpha so far: none); check the spelling of --agent\n"
    )
    code, _, err = cli("--as", "alpha", "--agent", "night", "inbox", "--no-sync")
    assert "alpha@night is a new mailbox (agents of alpha so far: nigth)" in err
    assert cli("--as", "alpha", "--agent", "night", "inbox", "--no-sync") == (0, "no unread letters\n", "")
    assert cli("--as", "alpha", "inbox", "--no-sync")[2] == ""  # no agent: the platform's mailbox


def test_a_note_to_oneself_is_refused_and_an_unknown_agent_needs_new_agent(
    cli: Cli, registry: object, home: Path
) -> None:
    assert cli("--as", "alpha", "--agent", "day", "whoami")[0] == 0
    code, out, err = cli("--as", "alpha", "--agent", "day", "note", "--to", "day", "-s", "Handover", "-b", "On q.")
    assert (code, out) == (2, "") and "a note to alpha@day is to yourself" in err
    code, _, err = cli("--as", "alpha", "--agent", "day", "note", "--to", "nite", "-s", "Handover", "-b", "On q.")
    assert code == 2 and "no agent of this platform is called 'nite'" in err and "--new-agent" in err
    code, out, _ = cli("--as", "alpha", "--agent", "day", "note", "--to", "nite", "--new-agent", "-s", "H", "-b", "q.")
    assert code == 0 and out.endswith(" sent\n")
    code, out, _ = cli("--json", "--as", "alpha", "--agent", "day", "note", "--to", "nite", "-s", "H", "-b", "q.")
    assert code == 0 and json.loads(out)["as"] == "alpha@day"  # the confirmation names who acted


def test_mcp_confirmations_name_the_acting_mailbox(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    sent = mcp_server.call(alpha, "send", {"to": "beta", "subject": "Quota", "body": OPENER}, save_root=tmp_path)
    assert sent["from"] == "alpha" and sent["to"] == "beta"
    [letter] = beta.inbox()
    answered = mcp_server.call(beta, "reply", {"id": letter.id, "body": "Reproduced; fixing."}, save_root=tmp_path)
    assert answered["from"] == "beta"
