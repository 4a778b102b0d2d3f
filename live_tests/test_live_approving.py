"""Approving, live (issue 12, issue 26): with a bus ``hold`` rule a letter is signed and kept in
held/; ``flush`` never sends it; only the operator's ``agentmail approve --key-file`` does,
exactly once, and the agent's ``approve`` without the key is refused. An approver on the stack
receives the announcement in their own INBOX and mutt's "approve" reply releases the letter on
the agent's next sync. Run as CLI processes against the live bus, as a person would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LiveBus, eventually, opener, receive
from test_live_writing import PERSON, _copy_in_person_inbox, _mutt, _password

from agentmail.admin import bus as bus_mod
from agentmail.config import registry as registry_mod
from agentmail.people import approval
from agentmail.spool import Spool


def _cli(home: Path, registry: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMAIL_")}
    env.update(AGENTMAIL_HOME=str(home), AGENTMAIL_REGISTRY=str(registry))
    done = subprocess.run([sys.executable, "-m", "agentmail", *args], env=env, cwd=home, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_held_letter_leaves_only_after_approve(bus: LiveBus, token: str, tmp_path: Path) -> None:
    registry, home = bus.variant("approving", own_registry=True)
    me, them = bus.cfg.sender, bus.cfg.receiver
    code, _, err = _cli(home, registry.root, "bus", "set", "hold", registry.platforms[them].address)
    assert code == 0, err
    registry = registry_mod.load(registry.root)
    receiver = bus.client(them, home=home, registry=registry)  # its checkpoint: only what comes now
    code, out, err = _cli(home, registry.root, "--as", me, "--json", "send", them, "-s", f"Held {token}", "-b",
                          opener(me, them, token))  # fmt: skip
    assert code == 0, err
    held = json.loads(out)
    assert held["state"] == "held"
    assert _cli(home, registry.root, "--as", me, "flush")[0] in (0, 1)
    code, out, _ = _cli(home, registry.root, "--as", me, "--json", "held")
    assert [x["id"] for x in json.loads(out)] == [held["id"]]  # flush left it where it was
    assert Spool(home / "spool" / me).read.ids("sent") == []
    code, out, _ = _cli(home, registry.root, "--as", me, "--json", "status", "--no-sync")
    assert [r["delivery"] for r in json.loads(out) if r["thread"] == held["thread"]] == ["held"]
    code, out, err = _cli(home, registry.root, "--as", me, "approve", held["id"])  # the agent: no key
    assert (code, out) == (4, "") and "approval key" in err, (code, out, err)
    key = str(tmp_path / "operator.key")  # the operator's, outside AGENTMAIL_HOME
    code, _, err = _cli(home, registry.root, "approve", "--new-key", key)  # an agent's command pins no first key
    assert code == 4 and "init" in err, (code, err)
    approval.first_key(registry_mod.load(registry.root), key, home)  # what 'init --approval-key' does
    code, out, err = _cli(home, registry.root, "--as", me, "approve", held["id"], "--key-file", key)
    assert code == 0 and out.split() == [held["thread"], held["id"], "sent"], (out, err)
    assert _cli(home, registry.root, "--as", me, "approve", held["id"], "--key-file", key)[0] == 1  # never twice
    (got,) = receive(receiver, held["thread"])
    assert got.message_id == held["message_id"]


@pytest.mark.parametrize("answer", ["approve", "reject the figures in it are wrong"])
def test_mutt_decides_a_held_letter_by_replying_to_its_announcement(
    bus: LiveBus, token: str, tmp_path: Path, answer: str, request: pytest.FixtureRequest
) -> None:
    """carol, an approver, answers the announcement from mutt: "approve" releases the letter
    once, "reject REASON" drops it with her reason for the agent (issue 26)."""
    if not bus.cfg.is_stack:
        pytest.skip("needs the loopback stack's person mailbox and mutt configuration")
    (mutt, rc), _ = _mutt(bus), _password(bus)
    registry, home = bus.variant(f"approving-by-mail-{answer.split()[0]}", own_registry=True)
    me, them = bus.cfg.sender, bus.cfg.receiver
    bus_mod.set_person(registry, me, PERSON, follows=False, writes=False, approves=True)
    code, _, err = _cli(home, registry.root, "bus", "set", "hold", registry.platforms[them].address)
    assert code == 0, err  # announced to carol (from the first platform with an approver)
    registry = registry_mod.load(registry.root)
    receiver = bus.client(them, home=home, registry=registry)
    agent = bus.client(me, home=home, registry=registry)
    for client in (receiver, agent):  # logged out at the end: Dovecot allows 10 logins per user and IP
        request.addfinalizer(client.close)
    held = agent.send(them, f"Held {token}", opener(me, them, token))
    assert held.state == "held" and held.extra.get("announced"), held.extra
    news = eventually(lambda: _copy_in_person_inbox(bus, token), f"{PERSON} waiting for the announcement")
    assert news["Auto-Submitted"] == "auto-generated" and news["Message-ID"] == held.extra["announced"]
    quoted = "\n".join("> " + line for line in news.get_payload(decode=True).decode().splitlines())
    draft = tmp_path / "approve.draft"
    draft.write_text(
        f"From: Carol <{PERSON}>\nTo: {news['From']}\nSubject: Re: {news['Subject']}\n"
        f"In-Reply-To: {news['Message-ID']}\nReferences: {news['Message-ID']}\n\n"
        f"{answer}\n\nOn {news['Date']}, agentmail wrote:\n{quoted}\n"
    )
    done = subprocess.run(  # batch mode: the draft is sent as it is, from carol's own login
        [mutt, "-n", "-F", str(rc), "-e", "set record=''", "-H", str(draft)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"mutt failed: {done.stderr.strip()[-400:]}"

    def released() -> str | None:
        agent.sync()
        state = agent.spool.read.locate(held.id)
        return state if state != "held" else None

    if answer != "approve":
        assert eventually(released, "the agent reading carol's rejection") == "failed"
        assert agent.show(held.id).extra["failed_reason"] == f"rejected by {PERSON}: the figures in it are wrong"
        agent.flush()
        assert not [x for x in receiver.inbox() if x.thread == held.thread]  # it never left
        return
    assert eventually(released, "the agent reading carol's approval") == "sent"
    assert agent.show(held.id).extra["approved_by"] == PERSON
    (got,) = receive(receiver, held.thread)
    assert got.message_id == held.message_id
    agent.sync()
    agent.flush()
    assert len([x for x in receiver.inbox() if x.thread == held.thread]) == 1  # once
