"""Every agent ability of the CLI over MCP (issue 41): an outcome, evidence from the checkout under
the CLI's confinement, a letter's attachments listed, saved and applied, whom one may write to,
stale threads, the digest, a note to an unknown agent refused, the guide as prompt and resource."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agentmail.cli import mcp_server
from agentmail.cli.guide import GUIDE
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.errors import BadInput, NotFound, Refused

from ..conftest import OPENER
from ..letter.test_attachments import git, make_repo, two_commits


def tool(am: AgentMail, root: Path, name: str, **args: Any) -> Any:
    return mcp_server.call(am, name, args, save_root=root)


def test_a_verify_result_carries_its_outcome(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    report = alpha.send("beta", "Quota 500s", OPENER)
    [got] = beta.inbox()
    beta.reply(got, "Reproduced; fixing.")
    beta.send("alpha", "", "Fixed in 2.4.2.", type="fix-notice", thread=report.thread)
    notice = [x for x in alpha.inbox() if x.type == "fix-notice"][0]
    out = tool(alpha, tmp_path, "reply", id=notice.id, body="Still 500 on 2.4.2.", outcome="still-broken")
    assert out["state"] == "sent" and out["from"] == "alpha"
    [verdict] = [x for x in beta.inbox() if x.type == "verify-result"]
    assert verdict.outcome == "still-broken"
    rows = tool(beta, tmp_path, "list", action="status")["items"]
    assert {r["thread"]: r["whose_move"] for r in rows}[report.thread] == "me"  # the fixer's move again


def test_evidence_from_the_checkout_is_attached_listed_saved_and_applied(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "alpha-checkout")
    two_commits(repo)
    (repo / "logs").mkdir()
    (repo / "logs" / "run.log").write_text("ERROR boom\n")
    out = tool(alpha, repo, "send", to="beta", subject="Quota", body=OPENER, attach=["logs/run.log"],
               patch="HEAD~2..HEAD")  # fmt: skip
    assert out["state"] == "sent"
    [letter] = beta.inbox()
    listed = tool(beta, tmp_path, "letter", action="attachments", id=letter.id)["attachments"]
    assert [x["name"] for x in listed][0] == "run.log" and len(listed) == 3
    assert listed[0]["size"] == 11 and all(x["type"] == "text/x-diff" for x in listed[1:])
    theirs = make_repo(tmp_path / "beta-checkout")
    checked = tool(beta, theirs, "letter", action="apply", id=letter.id, check=True)
    assert checked["applied"] is False and len(checked["commits"]) == 2 and "would apply" in checked["detail"]
    assert (theirs / "quota.py").read_text() == "LIMIT = 5\n"  # a check changes nothing
    landed = tool(beta, theirs, "letter", action="apply", id=letter.id)
    assert landed["applied"] is True and (theirs / "quota.py").read_text() == "LIMIT = 10\n"
    assert git(theirs, "log", "--format=%s", "-1").strip().startswith("Handle the free plan")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside.log", "'..' is not allowed"),
        (".env", "no hidden file"),
        ("secrets/.env", "no hidden file"),
        ("link.log", "not a regular file|symbolic link|symlink"),
        ("linked/run.log", "follows no symlink"),
        ("/etc/hostname", "is not below"),
        ("missing.log", "missing.log"),
        ("home/secrets/alpha.private", "lies inside the agentmail home"),
    ],
)
def test_attach_reads_only_regular_files_of_the_checkout(
    path: str, why: str, alpha: AgentMail, home: Path, tmp_path: Path
) -> None:
    """What the CLI's --attach refuses, and besides anything outside the server's checkout: a letter
    that asks for ~/.ssh/id_rsa or the agentmail home's keys gets a tool error, and nothing leaves."""
    checkout = tmp_path / "checkout"
    (checkout / "secrets").mkdir(parents=True)
    (checkout / "secrets" / ".env").write_text("TOKEN=x\n")
    (checkout / ".env").write_text("TOKEN=x\n")
    (tmp_path / "outside.log").write_text("x\n")
    (checkout / "link.log").symlink_to(tmp_path / "outside.log")
    (checkout / "linked").symlink_to(tmp_path)
    root = tmp_path if path.startswith("home/") else checkout  # a server started above the home
    with pytest.raises(BadInput, match=why):
        tool(alpha, root, "send", to="beta", subject="Quota", body=OPENER, attach=[path])
    assert alpha.sent() == []


def test_a_credential_is_refused_without_force(alpha: AgentMail, tmp_path: Path) -> None:
    (tmp_path / "config.txt").write_text("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    with pytest.raises((Refused, BadInput)):
        tool(alpha, tmp_path, "send", to="beta", subject="Config", body=OPENER, attach=["config.txt"])
    assert alpha.sent() == []
    assert "force" not in mcp_server.OPS["send"][1]["properties"]  # a person's decision, on the CLI only


def test_whoami_names_whom_one_may_write_to_and_the_siblings(alpha: AgentMail, tmp_path: Path) -> None:
    assert tool(alpha, tmp_path, "whoami") == {
        "platform": "alpha",
        "agent": None,
        "address": "alpha@bus.test",
        "agents": [],
        "platforms": ["beta"],
    }


def test_status_takes_the_stale_filter_and_the_digest_is_read(
    alpha: AgentMail, beta: AgentMail, tmp_path: Path
) -> None:
    report = alpha.send("beta", "Quota 500s", OPENER)
    assert [r["thread"] for r in tool(alpha, tmp_path, "list", action="status")["items"]] == [report.thread]
    assert tool(alpha, tmp_path, "list", action="status", stale="1d")["items"] == []  # it just moved
    with pytest.raises(BadInput, match="stale"):
        tool(alpha, tmp_path, "list", action="status", stale="soon")
    made = tool(alpha, tmp_path, "list", action="digest")
    assert "Quota 500s" in made["text"]


def test_a_group_checks_each_action_against_its_own_arguments(alpha: AgentMail, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"^bad arguments for letter: action show: .*'dir' was unexpected"):
        tool(alpha, tmp_path, "letter", action="show", id="01abc", dir="x")
    with pytest.raises(BadInput, match=r"^bad arguments for list: action thread: 'thread' is a required"):
        tool(alpha, tmp_path, "list", action="thread")
    with pytest.raises(BadInput, match=r"^bad arguments for list: action: 'show' is not one of"):
        tool(alpha, tmp_path, "list", action="show")
    with pytest.raises(NotFound, match="no tool guide"):
        tool(alpha, tmp_path, "guide")


def test_note_to_an_unknown_or_to_oneself_is_refused(alpha: AgentMail, home: Path, tmp_path: Path) -> None:
    with AgentMail(alpha.registry, Identity("alpha", "night"), home) as night:
        with pytest.raises(BadInput, match="a note to alpha@night is to yourself"):
            tool(night, tmp_path, "note", subject="Handover", body="Branch q.", to="night")
        with pytest.raises(BadInput, match="to yourself"):
            night.note("Handover", "Branch q.", to_agent="night", new_agent=True)
        assert night.sent() == []
    with pytest.raises(BadInput, match="no agent of this platform is called 'nigth'"):
        tool(alpha, tmp_path, "note", subject="Handover", body="Branch q.", to="nigth")
    assert tool(alpha, tmp_path, "note", subject="Handover", body="Branch q.", to="night", new_agent=True)["to"]
    assert tool(alpha, tmp_path, "note", subject="Handover", body="Branch q.", to="night")["from"] == "alpha"


def test_the_guide_is_a_prompt_and_a_resource(beta: AgentMail, tmp_path: Path) -> None:
    got: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(mcp_server.server(lambda: beta, tmp_path)) as client:
                assert mcp_server.GUIDE_URI in (client.instructions or "")
                got["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
                prompt = await client.get_prompt("guide")
                got["prompt"] = prompt.messages[0].content.text  # type: ignore[union-attr]
                got["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
                read = await client.read_resource(mcp_server.GUIDE_URI)
                got["resource"] = read.contents[0].text  # type: ignore[union-attr]

    anyio.run(main)
    assert got == {"prompts": ["guide"], "prompt": GUIDE, "resources": [mcp_server.GUIDE_URI], "resource": GUIDE}
    assert os.environ.get("AGENTMAIL_HOME")  # hermetic: the fixture's home


def test_the_grouped_tools_run_their_action_through_the_sdk(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    """``letter`` and ``list`` as a host calls them: the action runs, nothing else (never a wait)."""
    report = alpha.send("beta", "Quota 500s", OPENER)
    answers: dict[str, Any] = {}

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(mcp_server.server(lambda: beta, tmp_path)) as client:
                [letter] = json.loads((await client.call_tool("inbox", {})).content[0].text)["items"]  # type: ignore[union-attr]
                for key, name, args in [
                    ("show", "letter", {"action": "show", "id": letter["id"]}),
                    ("thread", "list", {"action": "thread", "thread": report.thread}),
                    ("brief", "list", {"action": "thread", "thread": report.thread, "brief": True}),
                    ("done", "letter", {"action": "done", "ids": [letter["id"]]}),
                    ("bad", "list", {"action": "wait"}),
                ]:
                    result = await client.call_tool(name, args)
                    text = result.content[0].text  # type: ignore[union-attr]
                    answers[key] = text if result.is_error else json.loads(text)

    anyio.run(main)
    assert answers["show"]["subject"] == "Quota 500s" and answers["show"]["body"] == OPENER.rstrip("\n")
    assert [x["subject"] for x in answers["thread"]["items"]] == ["Quota 500s"]
    assert answers["brief"]["brief"].startswith(f'thread {report.thread} "Quota 500s": 1 letter(s)')
    assert answers["done"] == {"done": [answers["show"]["id"]]}
    assert answers["bad"].startswith("bad arguments for list: action: 'wait' is not one of")
