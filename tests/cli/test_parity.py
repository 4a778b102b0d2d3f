"""The CLI and the MCP server are two shells over one client: every CLI command has its MCP tool
or a stated reason not to, every option its tool argument or a stated reason, and the rules
they share (send --thread, a refused reply, a queued letter) are the client's, so both agree."""

from __future__ import annotations

import pytest

from agentmail.cli.app import main_group
from agentmail.cli.mcp_server import GROUPS, OPS, TOOL_OF, TOOLS, Tools, call
from agentmail.client.facade import AgentMail, raise_for_state
from agentmail.errors import PermanentFailure, Refused, TransportError

# CLI commands an agent's MCP tool list does without, and why (each one costs context in every conversation).
CLI_ONLY = {
    "archive": "a static site for people who follow a thread in a browser, not an agent's view (issue 42)",
    "add": "operator setup: registering a platform is a reviewed commit to the registry, not an agent's move",
    "approve": "a person's decision to let a held letter go, never an agent's (issue 12)",
    "bind": "operator setup: writes the checkout's .agentmail marker, once",
    "bus": "operator setup: the bus's servers and TLS",
    "demo": "a tour for a person, in a temporary home",
    "guide": "the server gives it as its guide prompt and resource, and its instructions point there (issue 41)",
    "doctor": "a diagnosis for the operator; a tool error already says what is wrong",
    "export": "a proof bundle is for a person outside the bus; an agent reads the thread (issue 42)",
    "flush": "every tool that syncs or sends flushes the outbox first",
    "hook": "the hooks are another shell for hosts without MCP",
    "init": "operator setup: creates the bus and its keys",
    "keygen": "operator setup: rotates a key (the registry entry must be committed)",
    "mcp": "the MCP server itself",
    "rebuild": "recovery after a lost or damaged spool.db is the operator's step; the tool error names it (issue 23)",
    "reject": "a person's decision to drop a held letter, never an agent's (issue 12)",
    "person": "operator setup: who follows or writes into a platform's threads is a reviewed registry commit",
    "platforms": "whoami lists the platforms one may write to (issue 41); addresses and keys are the operator's",
    "serve": "a long-running web server for people, read-only (issue 42)",
    "sent": "status shows per thread how far my letters got (delivery, delivery_detail)",
    "sync": "inbox, status, notes, quarantine and wait sync first",
    "verify": "checking a proof bundle offline is a person's step, done outside any mailbox (issue 42)",
    "watch": "a long-running process that starts agents; an MCP host is itself the loop",
}
# CLI option -> tool argument, where the names differ; None: the tool has none, for the reason given.
OPTIONS = {
    ("show", "letter_id"): "id",
    ("show", "raw"): None,  # the raw bytes are for a person's bug report
    ("done", "letter_ids"): "ids",
    ("reply", "letter_id"): "id",
    ("thread", "thread_id"): "thread",
    ("wait", "thread_id"): "thread",
    ("send", "letter_type"): "type",
    ("reply", "letter_type"): "type",
    ("wait", "letter_type"): "type",
    ("note", "to_agent"): "to",
    ("status", "closed"): None,  # an agent works on what is open
    ("search", "sender"): "from",
    ("search", "letter_type"): "type",
    ("search", "thread_id"): "thread",
    # The tool list costs context in every conversation (~1,300 tokens in all): search keeps five arguments.
    ("search", "state"): None,  # each hit says its state; sent and received are both searched
    ("search", "include_quarantine"): None,  # the quarantine tool lists what was rejected
    ("search", "syntax"): None,  # FTS5 syntax is for a person; plain words cannot go wrong
    ("inbox", "from_start"): None,  # re-reading a mailbox's whole history is a person's step
    # --force passes the credential check: a person's decision, never a tool's
    ("send", "force"): None,
    ("reply", "force"): None,
    ("note", "force"): None,
}
OPTIONS.update({("save", "letter_id"): "id", ("save", "directory"): "dir"})
# save --force replaces a file: a person's decision; the tool never replaces anything (issue 23)
OPTIONS[("save", "force")] = None
OPTIONS.update({("apply", "letter_id"): "id"})
# a digest mailed to the followers is the operator's step (digest --send); an agent reads it
OPTIONS.update({("digest", "send"): None})
# quarantine recheck follows a registry fix, a person's step (the registry is theirs to change)
OPTIONS[("quarantine", "words")] = None
NO_SYNC = None  # every tool syncs first: a tool's view is never stale
# Tool arguments no CLI option has, and why: a list tool's result enters the agent's context, so
# it comes a page at a time (limit, cursor); a terminal scrolls, and --json is for programs.
PAGED = ("inbox", "search", "status", "quarantine", "held", "notes", "thread")
TOOL_ONLY = {(name, "cursor") for name in PAGED} | {
    (name, "limit") for name in ("status", "quarantine", "held", "notes", "thread")
}


# Operations no CLI command has, and why.
MCP_ONLY = {"attachments": "show lists a letter's attachments on a terminal; an agent asks for them apart"}


def test_every_cli_command_has_its_tool_or_a_reason() -> None:
    commands = set(main_group.commands)
    assert set(OPS) - set(MCP_ONLY) <= commands, f"tools with no CLI command: {set(OPS) - commands}"
    assert commands - set(OPS) == set(CLI_ONLY), "a CLI command is neither a tool nor in CLI_ONLY (with a reason)"
    assert all(reason.strip() for reason in CLI_ONLY.values())


def test_every_operation_is_listed_once_as_a_tool_or_an_action_of_one() -> None:
    assert set(TOOL_OF) == set(OPS) and set(TOOL_OF.values()) == set(TOOLS)
    for group, (_description, ops) in GROUPS.items():
        assert TOOLS[group][1]["properties"]["action"]["enum"] == list(ops)
        for op in ops:  # a group's schema takes every argument of each of its actions
            assert set(OPS[op][1]["properties"]) <= set(TOOLS[group][1]["properties"])


@pytest.mark.parametrize("name", sorted(set(OPS) - set(MCP_ONLY)))
def test_every_option_has_its_tool_argument_or_a_reason(name: str) -> None:
    command = main_group.commands[name]
    expected = set()
    for param in command.params:
        if param.attrs.get("into_ctx"):
            continue  # --json, --as, --agent: the server's identity and output are fixed
        if param.dest == "no_sync":
            assert NO_SYNC is None
            continue
        mapped = OPTIONS.get((name, param.dest), param.dest)
        if mapped is not None:
            expected.add(mapped)
    assert set(OPS[name][1]["properties"]) - {arg for tool, arg in TOOL_ONLY if tool == name} == expected


@pytest.fixture
def pair(alpha: AgentMail, beta: AgentMail) -> tuple[AgentMail, AgentMail]:
    return alpha, beta


def test_send_with_a_thread_is_one_rule_for_both_shells(
    pair: tuple[AgentMail, AgentMail], capsys: pytest.CaptureFixture[str]
) -> None:
    """``send --thread`` to the wrong platform: the client warns, the CLI prints it, the tool returns it."""
    from agentmail.cli.app import main

    alpha, beta = pair
    opened = alpha.send(
        "beta", "Quota 500s", "Steps: run it. Output: 500. Expected 200 per the docs, v1.2. Please fix."
    )
    letter = alpha.send("alpha", "", "Also on 1.3; please look at both.", type="question", thread=opened.thread)
    assert letter.to == "beta" and letter.notices == [f"thread {opened.thread} is with beta; sent there"]
    result = call(
        alpha,
        "send",
        {"to": "alpha", "subject": "-", "body": "And on 1.4; please.", "type": "question", "thread": opened.thread},
    )
    assert result["to"] == "beta" and result["warnings"] == [f"thread {opened.thread} is with beta; sent there"]
    assert main(["--as", "alpha", "send", "alpha", "--thread", opened.thread, "-t", "question", "-b", "And 1.5."]) == 0
    assert f"agentmail: note: thread {opened.thread} is with beta; sent there" in capsys.readouterr().err


def test_a_refused_reply_is_refused_in_both_shells_and_none_in_the_documented_api(
    pair: tuple[AgentMail, AgentMail],
) -> None:
    alpha, beta = pair
    sent = alpha.send("beta", "Done", "Closing it.", type="close")
    (close,) = beta.inbox()
    assert close.id and sent.state == "sent"
    assert beta.reply(close, "Thanks!") is None and "never answered" in (beta.why_refused(close) or "")
    with pytest.raises(Refused, match="never answered"):
        beta.reply(close, "Thanks!", raise_refused=True)
    text, failed = Tools(lambda: beta).run("reply", {"id": close.id, "body": "Thanks!"})
    assert failed and "never answered" in text


def test_a_letter_state_means_one_thing(pair: tuple[AgentMail, AgentMail]) -> None:
    """Queued and failed are errors (exit 5, a tool error) everywhere; failed is PermanentFailure."""
    alpha, _beta = pair
    sent = alpha.send("beta", "Quota", "Why 500s? Please say.", type="question")
    assert raise_for_state(sent) is sent

    with pytest.raises(TransportError, match="queued, not sent yet: the server is unreachable") as queued:
        raise_for_state(sent.replace(state="outbox"))
    assert not isinstance(queued.value, PermanentFailure)
    with pytest.raises(PermanentFailure, match="refused by the server: 554 no") as failed:
        raise_for_state(sent.replace(state="failed", extra={"failed_reason": "554 no"}))
    assert failed.value.exit_code == 5


def test_the_parity_tables_name_only_real_commands_and_options() -> None:
    for name, option in OPTIONS:
        assert option in {p.dest for p in main_group.commands[name].params}, (name, option)
