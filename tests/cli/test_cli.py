"""The CLI contract (DESIGN §8): names, --json fields, exit codes, one-line errors, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import OPENER, Cli


@pytest.fixture
def bus_home(cli: Cli) -> None:
    assert cli("init", "--domain", "bus.test", "alpha", "beta")[0] == 0


def test_send_inbox_reply_thread_round_trip(cli: Cli, bus_home: None) -> None:
    code, out, err = cli(
        "--as", "alpha", "send", "beta", "-s", "Quota 500s", "-b", OPENER, "-S", "high", "-r", "alpha#3"
    )
    assert code == 0 and err == ""
    thread = out.split()[0]
    code, out, _ = cli("--as", "beta", "--json", "inbox")
    (letter,) = json.loads(out)
    for key in (
        "id",
        "message_id",
        "from",
        "to",
        "type",
        "thread",
        "severity",
        "ref",
        "subject",
        "body",
        "date",
        "in_reply_to",
        "state",
    ):
        assert key in letter
    assert (letter["from"], letter["to"], letter["thread"], letter["state"]) == ("alpha", "beta", thread, "unread")
    assert "agentmail v1" not in letter["body"]
    assert cli("--as", "beta", "reply", letter["id"], "-b", "Reproduced.", "-t", "ack")[0] == 0
    code, out, err = cli("--as", "beta", "reply", letter["id"], "-b", "Again.")
    assert code == 4 and "already answered" in err and err.count("\n") == 1
    code, out, _ = cli("thread", thread, "--as", "alpha", "--json")  # options after the command
    assert [x["type"] for x in json.loads(out)] == ["report", "ack"]


def test_exit_codes(cli: Cli, bus_home: None) -> None:
    assert cli("--as", "alpha", "show", "01nosuchletter")[0] == 1
    assert cli("--as", "alpha", "send", "beta", "-s", "a\r\nBcc: x@y", "-b", "text")[0] == 2
    assert cli("--as", "alpha", "send", "beta", "-s", "x", "-b", "text", "-t", "rant")[0] == 2
    assert cli("--as", "alpha", "send", "beta", "-s", "x", "-b", "@/nonexistent/file.md")[0] == 2
    assert cli("--as", "alpha", "wait", "--timeout", "0.1")[0] == 3
    assert cli("--as", "alpha", "send", "beta", "-s", "x", "-b", "PASSWORD=hunter22")[0] == 4
    assert cli("--as", "nobody", "inbox")[0] == 2  # a mistyped platform is bad input everywhere
    assert cli("no-such-command")[0] == 2
    assert cli("inbox", "--limit", "0", "--as", "alpha")[0] == 2


def test_whoami_exits_1_without_an_identity(cli: Cli, bus_home: None) -> None:
    code, _, err = cli("whoami")
    assert code == 1 and "cannot tell which platform" in err
    assert cli("--as", "alpha", "whoami") == (0, "alpha\n", "")


def test_untrusted_text_is_refused_on_send_with_its_character_named(cli: Cli, bus_home: None) -> None:
    """Terminal escapes and bidi overrides never leave in a letter (one character policy, text.py);
    what arrives with them anyway is made visible (tests/letter/test_shown_text.py)."""
    evil = "Hello \x1b]8;;http://evil\x07click\x1b[2J and \u202ereversed"
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Esc", "-b", evil + "\n" + OPENER)
    assert code == 2 and out == "" and "U+001B" in err and len(err.splitlines()) == 1
    assert cli("--as", "beta", "inbox")[1].startswith("no unread")


def test_platforms_and_quarantine_json(cli: Cli, bus_home: None, home: Path) -> None:
    from agentmail.transport.local import deliver

    code, out, _ = cli("platforms", "--json")
    assert [p["name"] for p in json.loads(out)["platforms"]] == ["alpha", "beta"]
    deliver(
        home / "postoffice" / "beta", b"From: mallory@evil.test\r\nMessage-ID: <1@evil.test>\r\nSubject: hi\r\n\r\nhi"
    )
    code, out, _ = cli("--as", "beta", "quarantine", "--json")
    (entry,) = json.loads(out)
    assert entry["reason"] == "unregistered-sender" and entry["detail"].endswith("of this bus")


def test_an_unexpected_error_is_one_line_not_a_traceback(cli: Cli, bus_home: None, home: Path) -> None:
    (home / "registry" / "bus.toml").write_text("domain = [")
    code, out, err = cli("--as", "alpha", "inbox")
    assert code == 6 and "Traceback" not in err and err.count("\n") == 1


def test_the_installed_command_runs_the_demo(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTMAIL_HOME": str(tmp_path / "h")}
    done = subprocess.run(
        [sys.executable, "-m", "agentmail", "demo", "--home", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "quarantined as unauthenticated" in done.stdout
    assert "close" in done.stdout and "refused" in done.stdout
    assert done.stderr == ""


def test_a_send_stopped_by_ctrl_c_says_whether_its_letter_left(
    cli: Cli, bus_home: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentmail.cli import render
    from agentmail.transport.local import LocalTransport

    def ctrl_c(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    send = ("--as", "alpha", "send", "beta", "-s", "Quota 500s", "-b", OPENER)
    with monkeypatch.context() as patched:  # while the server takes it: it stays queued
        patched.setattr(LocalTransport, "submit", ctrl_c)
        code, out, err = cli(*send)
    assert (code, out) == (130, "")
    assert err.startswith("agentmail: interrupted: letter ") and err.count("\n") == 1
    assert "is in the outbox and may not have left: it goes out with the next command" in err
    letter_id = err.split()[3]
    code, out, _ = cli("--as", "alpha", "--json", "flush")
    assert code == 0 and [(r["id"], r["status"]) for r in json.loads(out)] == [
        (letter_id, "sent")
    ]  # sent once, by the next command
    with monkeypatch.context() as patched:  # after it left
        patched.setattr(render, "sent_outcome", ctrl_c)
        code, _, err = cli(*send)
    assert code == 130 and err.startswith("agentmail: interrupted: letter ") and err.endswith(" had been sent\n")
    with monkeypatch.context() as patched:  # before anything was filed
        patched.setattr("agentmail.cli.agent.read_body", ctrl_c)
        code, _, err = cli(*send)
    assert (code, err) == (130, "agentmail: interrupted: no letter was filed: nothing was sent\n")
    code, out, _ = cli("--as", "beta", "--json", "inbox")
    assert len(json.loads(out)) == 2  # the queued one and the sent one, each once
    with monkeypatch.context() as patched:  # a command that sends nothing says nothing more
        patched.setattr(render, "letters", ctrl_c)
        assert cli("--as", "beta", "inbox")[2] == "agentmail: interrupted\n"


def test_a_letter_not_in_the_mailbox_asked_names_that_mailbox_what_chose_it_and_where_the_letter_is(
    cli: Cli, bus_home: None, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("--as", "alpha", "send", "beta", "-s", "Quota 500s", "-b", OPENER)[0] == 0
    (got,) = json.loads(cli("--as", "beta", "--json", "inbox")[1])
    clone = tmp_path / "clone-of-alpha"  # the fixer's checkout, cloned to verify: its marker names alpha
    clone.mkdir()
    (clone / ".agentmail").write_text('platform = "alpha"\n')
    monkeypatch.chdir(clone)
    monkeypatch.delenv("AGENTMAIL_PLATFORM", raising=False)
    code, out, err = cli("reply", got["id"], "-b", "Confirmed fixed.")
    assert (code, out) == (1, "")
    assert err == (
        f"agentmail: no letter {got['id']} in the mailbox alpha, chosen by the marker {clone / '.agentmail'}; "
        f"it is in the mailbox beta on this machine: add --as beta\n"
    )
    assert cli("show", got["message_id"])[0] == 0  # by its Message-ID: alpha's own copy, the one it sent
    (home / "spool" / "gamma").mkdir()
    (home / "spool" / "gamma" / "spool.db").write_bytes(b"not a database")  # a damaged spool says nothing
    code, _, err = cli("--as", "alpha", "show", "01nosuchletter")  # held nowhere: nowhere suggested
    assert err == "agentmail: no letter 01nosuchletter in the mailbox alpha, chosen by --as\n"
