"""The letter protocol as one table (agentmail/protocol.py): the type lists, the guards, the
reply's default type, ``status``'s state and whose move, the CLI's and MCP's type lists all read
its rows; and one rule says what opens a thread, for the server's count and the spool's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import protocol
from agentmail.cli import mcp_server
from agentmail.cli.context import REPLY_DEFAULT_HELP, TYPES_HELP
from agentmail.client.facade import AgentMail
from agentmail.model import TERMINAL_TYPES, TYPES, opener_key
from agentmail.protocol import HUMAN, opens_thread
from agentmail.stages import guards
from agentmail.transport.base import opener_id

from ..conftest import OPENER
from ..depth import examples


def test_the_lists_the_table_gives_are_the_documented_ones() -> None:
    assert TYPES == ("report", "question", "fix-notice", "verify-result", "ack", "close", "note")
    assert TYPES[:-1] == protocol.SENDABLE
    assert TERMINAL_TYPES == ("ack", "close")
    assert guards.AFTER_ACK == ("report", "close")
    assert TYPES_HELP == "report|question|fix-notice|verify-result|ack|close"
    assert REPLY_DEFAULT_HELP == "ack to a report, verify-result to a fix-notice, else question"
    assert mcp_server.OPS["send"][1]["properties"]["type"] == {"enum": list(protocol.SENDABLE)}
    assert "(default type: ack a report, verify-result a fix-notice, else question)" in mcp_server.OPS["reply"][0]


@pytest.mark.parametrize(
    "kind,state,reply",
    [
        ("report", "reported", "ack"),
        ("question", "asked", "question"),
        ("fix-notice", "fix announced", "verify-result"),
        ("verify-result", "verified", "question"),
        ("ack", "acknowledged", "question"),
        ("close", "closed", "question"),
        ("note", "note", "note"),
        (HUMAN, "human letter", "question"),
        ("rant", "rant", "question"),  # a type no row names: its own word, answered with a question
    ],
)
def test_each_type_s_state_and_default_reply(kind: str, state: str, reply: str) -> None:
    assert protocol.state_after(kind) == state
    assert protocol.default_reply(kind) == reply


@pytest.mark.parametrize(
    "kind,mine,move",
    [
        ("report", True, "beta"),
        ("report", False, "me"),
        ("ack", True, "me"),  # whoever acknowledged owes the fix
        ("ack", False, "beta"),
        ("close", True, "nobody"),
        ("close", False, "nobody"),
        ("rant", False, "me"),
    ],
)
def test_whose_move_a_type_leaves(kind: str, mine: bool, move: str) -> None:
    assert protocol.whose_move(kind, mine, "beta") == move


def test_what_opens_a_thread() -> None:
    for kind in protocol.SENDABLE:
        assert opens_thread(kind, None) and not opens_thread(kind, "<parent@bus.test>")
    assert not opens_thread("note", None)
    assert not opens_thread(HUMAN, None) and not opens_thread("", None)  # a person's letter
    assert opens_thread("rant", None)  # a type no row names counts: the quota errs toward counting


def _header(kind: str | None, in_reply_to: bool) -> bytes:
    lines = ["Message-ID: <1@bus.test>", "Date: Sun, 06 Dec 2026 07:00:00 +0000"]
    if kind is not None:
        lines.append(f"X-Agentmail-Type: {kind}")
    if in_reply_to:
        lines.append("In-Reply-To: <0@bus.test>")
    return ("\r\n".join(lines) + "\r\n").encode()


@settings(max_examples=examples(200), deadline=None)
@given(
    kind=st.none()
    | st.sampled_from([k.name for k in protocol.PROTOCOL])
    | st.from_regex(r"[a-z-]{1,12}", fullmatch=True),
    in_reply_to=st.booleans(),
)
def test_the_server_s_count_reads_a_header_by_the_one_rule(kind: str | None, in_reply_to: bool) -> None:
    counted = opener_id(_header(kind, in_reply_to)) is not None
    assert counted == opens_thread(kind or "", in_reply_to)


def test_the_spool_s_count_takes_an_opener_and_no_reply_note_or_person_s_letter(
    alpha: AgentMail, beta: AgentMail
) -> None:
    opened = alpha.send("beta", "Quota", OPENER)
    alpha.note("For my sibling", "a note opens nothing")
    (got,) = beta.inbox()
    assert beta.reply(got, "Reproduced; fixing it.", type="ack") is not None
    assert list(alpha.box.spool.read.opener_keys_since(0)) == [opener_key(opened.message_id)]
    assert list(beta.box.spool.read.opener_keys_since(0)) == []  # a reply opens nothing
