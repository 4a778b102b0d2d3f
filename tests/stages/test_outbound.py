"""Every way a letter leaves passes one guard, per platform (issue 9 §3).

- one guard function (``guards.refusal``) behind reply, follow-up (``send --thread``), note,
  the MCP tools, the hooks and the commands ``watch`` runs: each refuses the same cases;
- a follow-up continues only after the platform's own last letter;
- one reply per letter per *platform*: two agents of one platform, in two processes, racing
  on the same letters — exactly one answers each, the other is told who did (exit 4);
- a claim whose reply was never filed (the process died) is taken over, not stuck.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

import pytest

from agentmail.cli import hooks, mcp_server
from agentmail.cli.watch import Watcher
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import Refused
from agentmail.stages import guards
from agentmail.transport.local import deliver

from ..conftest import OPENER, Cli

WORKER = Path(__file__).parents[1] / "helpers" / "reply_worker.py"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every call of the one guard, recorded (it still decides: this only counts)."""
    calls: list[str] = []
    real = guards.refusal

    def counting(out: guards.Outbound) -> str | None:
        reason = real(out)
        calls.append(reason or "ok")
        return reason

    monkeypatch.setattr(guards, "refusal", counting)
    yield calls


# --- the same cases on every path -----------------------------------------------------------


def _ended_with_their(kind: str, alpha: AgentMail, beta: AgentMail) -> tuple[str, str]:
    """A thread beta opened that alpha's ``kind`` ends; (thread, beta's id of alpha's letter)."""
    opened = beta.send("alpha", "Quota", OPENER)
    (got,) = alpha.inbox()
    assert alpha.reply(got, "Terminal.", type=kind) is not None
    (terminal,) = beta.inbox()
    return opened.thread, terminal.id


def _twenty_deep(alpha: AgentMail, beta: AgentMail) -> tuple[str, str]:
    """A thread whose last letter (to beta) is 19 deep: one more would be 20."""
    sides = [(alpha, beta), (beta, alpha)]
    opened = beta.send("alpha", "Ping-pong", OPENER, type="question")
    for turn in range(19):
        me, _ = sides[turn % 2]
        (letter,) = me.inbox()
        assert me.reply(letter, f"answer {turn}", type="question") is not None
    (last,) = beta.inbox()
    assert last.depth == 19
    return opened.thread, last.id


CASES: dict[str, tuple[Callable[[AgentMail, AgentMail], tuple[str, str]], str]] = {
    # a follow-up after their ack says what the reporter may still send (issue 26's rule)
    "their ack": (lambda a, b: _ended_with_their("ack", a, b), "never answered|may add evidence .* nothing else"),
    "their close": (lambda a, b: _ended_with_their("close", a, b), "closed|never answered"),
    "depth cap": (_twenty_deep, "cap 20"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_outbound_path_refuses_the_same_cases(
    case: str, alpha: AgentMail, beta: AgentMail, home: Path, cli: Cli, counted: list[str]
) -> None:
    import re

    make, expected = CASES[case]
    thread, letter_id = make(alpha, beta)
    pattern = re.compile(expected)
    before = (
        len(list((home / "postoffice" / "alpha" / "new").iterdir()))
        if (home / "postoffice" / "alpha" / "new").is_dir()
        else 0
    )
    counted.clear()
    refusals: dict[str, str] = {}

    # reply (API), and the reason why_refused gives (what the hooks ask)
    assert beta.reply(letter_id, "Thanks!") is None
    refusals["reply"] = beta.why_refused(letter_id) or ""
    refusals["hooks"] = "" if hooks.needs_answer(beta, beta.inbox(sync=False)) else "not asked to answer"
    # follow-up (API) in the same thread
    with pytest.raises(Refused) as raised:
        beta.follow_up(thread, "Fixed in 2.4.2.", type="fix-notice")
    refusals["follow_up"] = str(raised.value)
    # CLI: reply and send --thread, exit 4 with the reason
    code, _, err = cli("--as", "beta", "reply", letter_id, "-b", "Thanks!")
    refusals["cli reply"] = err if code == 4 else f"exit {code}"
    code, _, err = cli(
        "--as",
        "beta",
        "send",
        "alpha",
        "-s",
        "x",
        "-b",
        "Fixed in 2.4.2.",
        "--thread",
        thread,
        "-t",
        "fix-notice",
    )
    refusals["cli send --thread"] = err if code == 4 else f"exit {code}"
    # MCP tools: reply and send with a thread
    for name, args in (
        ("reply", {"id": letter_id, "body": "Thanks!"}),
        ("send", {"to": "alpha", "subject": "x", "body": "Fixed in 2.4.2.", "type": "fix-notice", "thread": thread}),
    ):
        with pytest.raises(Refused) as raised:
            mcp_server.call(beta, name, args)
        refusals[f"mcp {name}"] = str(raised.value)

    for path, reason in refusals.items():
        if path == "hooks":
            assert reason == "not asked to answer"
        else:
            assert pattern.search(reason), f"{path}: {reason!r}"
    # Each path asked the one guard; none of them let a letter out.
    assert len(counted) >= 6 and "ok" not in counted
    after = (
        len(list((home / "postoffice" / "alpha" / "new").iterdir()))
        if (home / "postoffice" / "alpha" / "new").is_dir()
        else 0
    )
    assert after == before


def test_a_command_run_by_watch_is_refused_the_same_way(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    """watch runs a command per letter; an ``agentmail reply`` in it meets the same guard (exit 4)."""
    _ended_with_their("ack", alpha, beta)
    log = tmp_path / "codes"
    agentmail = f"{shlex.quote(sys.executable)} -m agentmail"
    command = f'{agentmail} reply "$AGENTMAIL_LETTER_ID" -b "Thanks!" 2>>{log}.err; echo "$AGENTMAIL_TYPE $?" >> {log}'
    env_path = os.pathsep.join(sys.path)
    os.environ["PYTHONPATH"] = env_path
    try:
        assert Watcher(beta, command, jobs=1, log=lambda _line: None).run(once=True) == 1
    finally:
        del os.environ["PYTHONPATH"]
    assert log.read_text().split() == ["ack", "4"]
    assert "is an ack, which is never answered" in Path(f"{log}.err").read_text()


def test_send_and_note_pass_the_same_guard(alpha: AgentMail, counted: list[str]) -> None:
    with pytest.raises(Refused, match="private key"):
        alpha.send("beta", "Key", "-----BEGIN OPENSSH PRIVATE KEY-----\nabc")
    with pytest.raises(Refused, match="only a path"):
        alpha.note("Logs", "/var/log/alpha/error.log")
    assert alpha.note("Handover", "The quota fix is on branch fix-quota.").state == "sent"
    assert len(counted) == 3


# --- follow-ups -----------------------------------------------------------------------------


def test_a_follow_up_never_answers_the_other_sides_ack_or_an_open_letter(alpha: AgentMail, beta: AgentMail) -> None:
    report = beta.send("alpha", "Quota", OPENER)
    with pytest.raises(Refused, match="a follow-up continues only after your own last letter"):
        alpha.follow_up(report.thread, "Fixed.", type="fix-notice")  # alpha owes a reply, not a follow-up
    (got,) = alpha.inbox()
    alpha.reply(got, "Reproduced.", type="ack")
    with pytest.raises(Refused, match="ends with alpha's ack"):
        beta.follow_up(report.thread, "Any news?", type="question")  # today's bug: this went out
    fix = alpha.follow_up(report.thread, "Fixed in 2.4.2.", type="fix-notice")  # after its own ack: fine
    assert fix.state == "sent" and fix.depth == 2
    more = alpha.follow_up(report.thread, "Also released as 2.4.3.", type="fix-notice")
    assert more.in_reply_to == fix.message_id and more.depth == 3
    from agentmail.errors import BadInput

    with pytest.raises(BadInput, match="thread id"):
        alpha.follow_up("../meta", "x", type="question")  # never a path


# --- one reply per letter per platform --------------------------------------------------------


def test_two_agents_of_one_platform_answer_a_letter_once(registry: Registry, alpha: AgentMail, home: Path) -> None:
    alice = AgentMail(registry, Identity("beta", "alice"), home)
    bob = AgentMail(registry, Identity("beta", "bob"), home)
    for agent in (alice, bob):
        agent.sync()  # both read before the letter comes (a new agent starts at the platform's position)
    report = alpha.send("beta", "Quota", OPENER)
    (for_alice,), (for_bob,) = alice.inbox(), bob.inbox()
    ack = alice.reply(for_alice, "Reproduced; fixing.", type="ack")
    assert ack is not None
    assert bob.reply(for_bob, "Me too.", type="ack") is None
    assert f"already answered (by beta@alice, letter {ack.id})" in (bob.why_refused(for_bob) or "")
    assert hooks.needs_answer(bob, bob.inbox(sync=False)) == []  # his hook does not hold his stop for it
    # The platform's last letter is alice's ack: bob may follow it up (it is his platform's).
    fix = bob.follow_up(report.thread, "Fixed in 2.4.2.", type="fix-notice")
    assert fix.in_reply_to == ack.message_id and fix.depth == 2
    assert [x.type for x in alpha.inbox()] == ["ack", "fix-notice"]  # the sender got one ack


def test_two_processes_of_sibling_agents_race_for_the_same_letters(
    registry: Registry, alpha: AgentMail, home: Path
) -> None:
    for agent in ("alice", "bob"):  # both read before the letters come: a mailbox that never read starts
        AgentMail(registry, Identity("beta", agent), home).sync()  # where its siblings are, whoever syncs first
    reports = [alpha.send("beta", f"Report {i}", OPENER).message_id for i in range(12)]
    env = dict(os.environ, AGENTMAIL_HOME=str(home))
    procs, outs = [], []
    for agent in ("alice", "bob"):
        out = home.parent / f"reply-{agent}.json"
        outs.append(out)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), "beta", agent, str(out), *reports],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        )
    try:
        for proc in procs:  # both ready (synced, imports done) before either starts
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready and proc.stdout.readline().strip() == b"ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        assert [proc.wait(120) for proc in procs] == [0, 0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    results = {agent: json.loads(out.read_text())["results"] for agent, out in zip(("alice", "bob"), outs, strict=True)}
    for n, message_id in enumerate(reports):
        outcome = {agent: results[agent][n] for agent in results}
        assert outcome["alice"]["message_id"] == outcome["bob"]["message_id"] == message_id
        codes = sorted(r["exit"] for r in outcome.values())
        assert codes == [0, 4], f"{message_id}: {outcome}"
        winner = next(agent for agent, r in outcome.items() if r["exit"] == 0)
        loser = outcome["bob" if winner == "alice" else "alice"]
        assert f"already answered (by beta@{winner}, letter " in loser["stderr"], loser
    # What alpha's post office holds: exactly one ack per report.
    answered = []
    for folder in ("new", "cur"):
        for path in sorted((home / "postoffice" / "alpha" / folder).iterdir()):
            with open(path, "rb") as f:
                answered.append(str(BytesHeaderParser().parse(f)["In-Reply-To"]).strip())
    assert sorted(answered) == sorted(reports)
    wins = {agent: sum(r["exit"] == 0 for r in rs) for agent, rs in results.items()}
    print(f"\nsibling reply race: answers per agent {wins}")


CLAIMER = """
import os, sys
from agentmail.client.facade import AgentMail
from agentmail.spool.layout import reply_key
am = AgentMail.from_env("beta", agent="alice")
(letter,) = am.inbox()
with am.spool.home_claims.claim_reply(reply_key(letter.message_id, letter.sender), "01deadclaim0000000000000000") as holder:
    assert holder is None
    print("claimed", flush=True)
    sys.stdin.readline()  # killed here: the claim is on disk, its reply never filed
"""


def test_a_claim_whose_reply_never_got_filed_is_taken_over(registry: Registry, alpha: AgentMail, home: Path) -> None:
    bob = AgentMail(registry, Identity("beta", "bob"), home)
    bob.sync()  # bob reads before the letter comes (a new agent starts at the platform's position)
    alpha.send("beta", "Quota", OPENER)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLAIMER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, AGENTMAIL_HOME=str(home)),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"claimed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def claims() -> list[str]:  # the platform's claims, in its spool.db
        with closing(sqlite3.connect(home / "spool" / "beta" / "spool.db")) as db:
            return [holder for (holder,) in db.execute("SELECT holder FROM claims")]

    assert claims() == ["beta@alice 01deadclaim0000000000000000"]
    (letter,) = bob.inbox()
    assert bob.why_refused(letter) is None  # a claim without its reply answers nothing
    ack = bob.reply(letter, "Reproduced.", type="ack")
    assert ack is not None and claims() == [f"beta@bob {ack.id}"]


# --- ids, and keygen ---------------------------------------------------------------------------


def test_letter_ids_are_accepted_in_any_case_and_an_unknown_id_is_exit_1(
    alpha: AgentMail, beta: AgentMail, cli: Cli
) -> None:
    alpha.send("beta", "One", OPENER)
    alpha.send("beta", "Two", OPENER)
    first, second = beta.inbox()
    code, out, _ = cli("--as", "beta", "show", first.id.upper())
    assert code == 0 and 'subject:  "One"' in out
    assert cli("--as", "beta", "done", first.id.upper()) == (0, "marked 1 read\n", "")
    code, _, err = cli("--as", "beta", "reply", second.id.upper(), "-b", "Reproduced.", "-t", "ack")
    assert code == 0, err
    assert beta.inbox(sync=False) == []
    code, out, err = cli("--as", "beta", "done", "01nosuchletter")
    assert (code, out) == (1, "") and "no letter 01nosuchletter" in err
    assert cli("--as", "beta", "show", "01NOSUCHLETTER")[0] == 1


def test_keygen_writes_the_private_key_before_it_pins_the_public_key(registry: Registry, home: Path, cli: Cli) -> None:
    from agentmail.config.registry import load

    entry = registry.root / "platforms" / "alpha.toml"
    pinned = entry.read_text()
    key_file = home / "secrets" / "alpha.key"
    old_key = key_file.read_text()
    key_file.unlink()
    key_file.mkdir()  # the private key cannot be written...
    assert cli("--as", "alpha", "keygen")[0] != 0
    assert entry.read_text() == pinned  # ...so the public key was not pinned either
    key_file.rmdir()
    key_file.write_text(old_key)
    key_file.chmod(0o600)
    assert cli("--as", "alpha", "keygen")[0] == 0
    assert entry.read_text() != pinned
    reg = load(registry.root)
    alpha, beta = AgentMail(reg, Identity("alpha"), home), AgentMail(reg, Identity("beta"), home)
    alpha.send("beta", "After rotation", OPENER)
    assert [x.subject for x in beta.inbox()] == ["After rotation"]  # the new pair works end to end


# --- depth: from the chain, never shallower than the letter says --------------------------------


def _hostile_answer(
    beta: AgentMail, registry: Registry, home: Path, parent: Any, *, to: str, references: tuple[str, ...]
) -> None:
    """beta (authenticated, but hostile) answers ``parent`` with the headers it likes, into alpha's mailbox."""
    from agentmail.config.credentials import read_private_key
    from agentmail.letter import wire
    from agentmail.trust import signing

    outline = wire.draft_letter(
        "beta@bus.test",
        "",
        to,
        "question",
        parent.thread,
        "Re: deep",
        "And again?",
        in_reply_to=parent.message_id,
        references=references,
        message_id=wire.new_message_id("beta", "bus.test"),
    )
    raw = signing.sign(
        wire.render(outline), "bus.test", registry.platforms["beta"].selector, read_private_key(home, "beta")
    )
    deliver(home / "postoffice" / "alpha", raw)


def test_a_hostile_letter_cannot_make_a_thread_shallower(
    alpha: AgentMail, beta: AgentMail, registry: Registry, home: Path
) -> None:
    thread, _ = _twenty_deep(alpha, beta)
    deepest = max(alpha.thread(thread), key=lambda x: x.depth)
    assert deepest.sender == "alpha" and deepest.depth == 19
    # A To that is not alpha never reaches alpha's inbox (misaddressed, issue 37) ...
    _hostile_answer(beta, registry, home, deepest, to="someone-else@bus.test", references=())
    assert [x for x in alpha.inbox() if x.thread == thread] == []
    assert [q.reason for q in alpha.quarantined(sync=False)] == ["misaddressed"]
    # ... and without References the chain still finds alpha's own letter.
    _hostile_answer(beta, registry, home, deepest, to="alpha@bus.test", references=())
    (got,) = [x for x in alpha.inbox() if x.thread == thread]
    assert got.depth == 20
    assert alpha.reply(got, "No.") is None and "cap 20" in (alpha.why_refused(got) or "")


def test_made_up_references_never_deepen_a_thread(
    alpha: AgentMail, beta: AgentMail, registry: Registry, home: Path
) -> None:
    opened = alpha.send("beta", "Shallow", OPENER, type="question")
    fake = tuple(f"<0{i}fake.beta@bus.test>" for i in range(25))
    _hostile_answer(beta, registry, home, opened, to="alpha@bus.test", references=fake)
    (got,) = alpha.inbox()
    assert got.depth == 1  # only letters filed here count: one letter cannot put a thread at the cap
    assert alpha.why_refused(got) is None
