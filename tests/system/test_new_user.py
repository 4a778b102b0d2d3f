"""What a new user tripped over (issue 29): the CLI's answers, exit codes and views where it
did not say, in one actionable line, what happened and what to do. Each test pins the answer."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail import ages
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config import registry as registry_mod
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.errors import BadInput, NotFound

from ..conftest import OPENER, Cli
from ..depth import examples

NOT_TEXT = "the body must be UTF-8 text; convert it (iconv) or send the file with --attach"


@pytest.fixture
def three(home: Path) -> Registry:
    return bus.init(home, home / "registry", ["alpha", "beta", "gamma"], domain="bus.test",
                    endpoints={"new_threads_per_hour": 0})  # fmt: skip


def mailbox(reg: Registry, home: Path, name: str) -> AgentMail:
    return AgentMail(reg, Identity(name), home)


# --- 2. a fan-out thread stays listed while any part of it is open --------------------------


def test_closing_one_part_of_a_fan_out_keeps_the_thread_listed_while_another_is_open(
    three: Registry, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alpha, beta, gamma = (mailbox(three, home, n) for n in ("alpha", "beta", "gamma"))
    report = alpha.send("beta,gamma", "Quota 500s", OPENER)
    (to_gamma,) = gamma.inbox()
    assert gamma.reply(to_gamma, "Not ours: we never call /quota. Closing our part.", type="close") is not None
    (row,) = alpha.status()
    assert row.thread == report.thread and row.state == "reported"  # beta's part is still going
    assert {p["with"]: p["state"] for p in row.recipients} == {"beta": "reported", "gamma": "closed"}
    alpha.spool.drop_caches()  # the threads cache is rebuilt from the letters: the same answer
    assert [r.thread for r in mailbox(three, home, "alpha").status()] == [report.thread]
    (to_beta,) = beta.inbox()
    assert beta.reply(to_beta, "Fixed, closing.", type="close") is not None
    assert alpha.status() == []  # every part closed: the thread is closed
    assert [r.state for r in alpha.status(closed=True)] == ["closed"]
    alpha.spool.drop_caches()
    assert mailbox(three, home, "alpha").status() == []


def test_a_recipient_closing_its_fan_out_letter_closes_the_thread_on_its_side(three: Registry, home: Path) -> None:
    alpha, beta = mailbox(three, home, "alpha"), mailbox(three, home, "beta")
    alpha.send("beta,gamma", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    beta.reply(got, "Not ours; closing.", type="close")
    assert beta.status() == []  # beta's part is all beta has: the fan-out is alpha's to follow


# --- 3. a failed letter can be dismissed ----------------------------------------------------


def test_a_rejected_letter_is_dismissed_by_done_and_the_failed_line_says_so(alpha: AgentMail, cli: Cli) -> None:
    held = alpha.send("beta", "Quota 500s", OPENER, hold=True)
    alpha.reject(held.id, "not this week")
    code, out, _ = cli("--as", "alpha", "status", "--no-sync")
    assert code == 0 and f"FAILED: rejected by a person: not this week ('agentmail done {held.id}' dismisses it)" in out
    code, out, _ = cli("--as", "alpha", "--json", "status", "--no-sync")
    assert json.loads(out)[0]["delivery_id"] == held.id
    assert cli("--as", "alpha", "done", held.id) == (0, "marked 0 read, dismissed 1 failed letter(s)\n", "")
    assert cli("--as", "alpha", "status", "--no-sync")[1] == "no threads\n"
    assert "(FAILED (rejected): not this week)" in cli("--as", "alpha", "sent")[1]  # still listed there
    code, out, _ = cli("--as", "alpha", "--json", "done", held.id)  # once: nothing left to dismiss
    assert json.loads(out) == {"done": []}


def test_dismissing_a_failed_follow_up_leaves_the_thread_as_it_stood(alpha: AgentMail, beta: AgentMail) -> None:
    opened = alpha.send("beta", "Quota 500s", OPENER)
    follow = alpha.send("beta", "", "Also on 2.4.2, please look.", type="question", thread=opened.thread, hold=True)
    alpha.reject(follow.id, "say it later")
    assert alpha.status(sync=False)[0].delivery == "failed"
    assert alpha.done(follow.id) == [follow.id] and alpha.show(follow.id).state == "failed"
    assert alpha.spool.read.annotations(follow.id)["dismissed"] == "true"
    (row,) = alpha.status(sync=False)
    assert (row.delivery, row.last_id, row.whose_move, row.letters) == ("sent", opened.id, "beta", 1)


# --- 4. a letter to oneself ------------------------------------------------------------------


def test_a_letter_to_ones_own_platform_is_refused_as_bad_input(alpha: AgentMail, cli: Cli) -> None:
    code, out, err = cli("--as", "alpha", "send", "alpha", "-s", "Hi me", "-b", OPENER)
    assert (code, out) == (2, "")
    assert err == (
        "agentmail: alpha is the sending platform itself; a letter goes to other platforms "
        "(a handover to a sibling agent is 'agentmail note')\n"
    )
    assert alpha.sent() == [] and alpha.status(sync=False) == []


# --- 5. whom a fan-out letter went to -------------------------------------------------------


def test_thread_and_sent_name_every_recipient_of_a_fan_out(three: Registry, home: Path, cli: Cli) -> None:
    alpha = mailbox(three, home, "alpha")
    letter = alpha.send("beta,gamma", "Quota 500s", OPENER)
    out = cli("--as", "alpha", "thread", letter.thread, "--no-sync")[1]
    assert f"── → report from alpha to beta,gamma · {letter.date} · {letter.id}" in out
    (shown,) = json.loads(cli("--as", "alpha", "--json", "thread", letter.thread, "--no-sync")[1])
    assert (shown["to"], shown["to_platforms"]) == ("beta", ["beta", "gamma"])
    sent = cli("--as", "alpha", "sent")[1]
    assert sent.startswith(f"{letter.id}  report        → beta,gamma ") and "alpha " not in sent
    single = alpha.send("beta", "Login", OPENER)
    assert f"{single.id}  report        → beta " in cli("--as", "alpha", "sent")[1]


# --- 7. status when every thread is closed --------------------------------------------------


def test_status_with_only_closed_threads_says_how_many_and_how_to_list_them(
    alpha: AgentMail, beta: AgentMail, cli: Cli
) -> None:
    assert cli("--as", "alpha", "status")[1] == "no threads\n"
    alpha.send("beta", "Quota 500s", OPENER)
    alpha.note("Handover", "The quota thread is yours now.")  # a note's thread is not a closed thread
    (got,) = beta.inbox()
    beta.reply(got, "Fixed in 2.4.2; closing.", type="close")
    code, out, _ = cli("--as", "alpha", "status")
    assert (code, out) == (0, "no open threads (1 closed: 'agentmail status --closed' lists them)\n")
    assert "closed" in cli("--as", "alpha", "status", "--closed", "--no-sync")[1]


# --- 8. exit codes: bad input is 2 ----------------------------------------------------------


def test_a_mistyped_platform_is_bad_input_with_one_suggestion(alpha: AgentMail, cli: Cli, home: Path) -> None:
    code, out, err = cli("--as", "alpha", "send", "betta", "-s", "Hi", "-b", OPENER)
    assert (code, out) == (2, "")
    assert err == (
        f"agentmail: no platform 'betta' in the registry at {home / 'registry'}; did you mean beta? "
        "(known: alpha, beta)\n"
    )
    assert cli("--as", "alpha", "bind", "betta")[0] == 2


def test_an_unknown_identity_has_no_stray_separator(alpha: AgentMail, cli: Cli) -> None:
    code, _, err = cli("--as", "zzz", "inbox")
    assert code == 2 and "; (" not in err and err.endswith("/registry (known: alpha, beta)\n")  # typed: exit 2


@pytest.mark.parametrize("body", ["", "   \n\t"])
def test_an_empty_body_is_bad_input_everywhere(alpha: AgentMail, beta: AgentMail, cli: Cli, body: str) -> None:
    opened = alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    for args in (
        ("--as", "alpha", "send", "beta", "-s", "Hi", "-b", body),
        ("--as", "alpha", "send", "beta", "--thread", opened.thread, "-t", "question", "-b", body),
        ("--as", "beta", "reply", got.id, "-b", body),
        ("--as", "alpha", "note", "-s", "Handover", "-b", body),
    ):
        code, out, err = cli(*args)
        assert (code, out) == (2, ""), args
        assert err == (
            "agentmail: the body is empty: write what the reader needs (-b TEXT, -b @FILE or -b - for standard input)\n"
        )
    with pytest.raises(BadInput, match="the body is empty"):
        beta.reply(got, body)  # the API: bad input raises, as an unknown type does
    assert beta.why_refused(got) is None  # nothing was refused


# --- 9. thread ids in any case ---------------------------------------------------------------


def test_thread_ids_are_accepted_in_any_case(alpha: AgentMail, beta: AgentMail, cli: Cli) -> None:
    opened = alpha.send("beta", "Quota 500s", OPENER)
    upper = opened.thread.upper()
    code, out, _ = cli("--as", "alpha", "--json", "thread", upper, "--no-sync")
    assert code == 0 and [x["id"] for x in json.loads(out)] == [opened.id]
    (got,) = beta.inbox()
    code, _, err = cli("--as", "beta", "wait", "--thread", f" {upper} ", "--timeout", "0")
    assert code == 0, err
    beta.reply(got, "Reproduced; fixing.", type="ack")
    beta.follow_up(upper, "Fixed in 2.4.2; please re-verify.", type="fix-notice")
    code, out, err = cli("--as", "beta", "send", "alpha", "--thread", upper, "-t", "question", "-b", "Any news?")
    assert (code, out.split()[0]) == (0, opened.thread), err
    assert {h.thread for h in beta.search("quota", sync=False, thread=upper)} == {opened.thread}
    code, _, err = cli("--as", "alpha", "thread", "THR-!!")
    assert code == 2 and "must match thr-" in err


# --- 10. bodies that are not UTF-8 text ------------------------------------------------------


def test_a_body_file_that_is_not_utf8_says_how_to_send_it(alpha: AgentMail, cli: Cli, tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Caf\u00e9 au lait\n".encode("latin-1"))
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)))
    zeros = tmp_path / "zeros.bin"
    zeros.write_bytes(b"\0" * 64)  # decodes, but is no text
    for path in (latin1, binary, zeros):
        code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", f"@{path}")
        assert (code, out, err) == (2, "", f"agentmail: {path}: {NOT_TEXT}\n")
    assert alpha.sent() == []


def test_standard_input_that_is_not_utf8_says_how_to_send_it(
    alpha: AgentMail, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9\r\n"), encoding="utf-8"))
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", "-")
    assert (code, out, err) == (2, "", f"agentmail: standard input: {NOT_TEXT}\n")
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", "caf\udce9")  # an argv byte
    assert (code, err) == (2, f"agentmail: -b: {NOT_TEXT}\n")
    text = OPENER.replace("\n", "\r\n").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text), encoding="utf-8"))
    assert cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", "-")[0] == 0
    assert alpha.sent()[0].body.rstrip("\n") == OPENER.rstrip("\n")  # newlines read as text mode reads them


def test_standard_input_is_decoded_as_utf8_whatever_the_locale(tmp_path: Path, home: Path) -> None:
    bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test")
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    command = [sys.executable, "-m", "agentmail", "--as", "alpha", "send", "beta", "-s", "Hi", "-b", "-"]
    done = subprocess.run(command, input=b"caf\xe9\n", capture_output=True, env=env, timeout=60)
    assert (done.returncode, done.stderr.decode()) == (2, f"agentmail: standard input: {NOT_TEXT}\n")
    good = subprocess.run(command, input=("Caf\u00e9 " + OPENER).encode(), capture_output=True, env=env, timeout=60)
    assert good.returncode == 0, good.stderr
    (letter,) = AgentMail(registry_mod.load(home / "registry"), Identity("alpha"), home).sent()
    assert letter.body.startswith("Caf\u00e9 I am the agent")


# --- 11. small wrong answers ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_a_timeout_must_be_seconds_from_zero_up(alpha: AgentMail, cli: Cli, value: str) -> None:
    for command in (("wait",), ("doctor",), ("watch", "--exec", "true")):
        code, out, err = cli("--as", "alpha", *command, f"--timeout={value}")
        assert (code, out) == (2, "") and "is not a number of seconds" in err and err.count("\n") == 1, command


def test_save_into_a_missing_directory_says_it_does_not_exist(
    alpha: AgentMail, beta: AgentMail, cli: Cli, tmp_path: Path
) -> None:
    log = tmp_path / "run.log"
    log.write_text("500 Internal Server Error\n")
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER, "--attach", str(log))
    assert code == 0, err
    (got,) = beta.inbox()
    code, _, err = cli("--as", "beta", "save", got.id, "--dir", "no/such/dir")
    assert (code, err) == (2, "agentmail: --dir no/such/dir: does not exist (create it first)\n")
    code, _, err = cli("--as", "beta", "save", got.id, "--dir", str(log))
    assert (code, err) == (2, f"agentmail: --dir {log}: not a directory\n")


def test_opener_advice_for_a_held_letter_does_not_say_it_was_sent(
    alpha: AgentMail, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", "It broke.", "--hold")
    assert code == 0 and " held (not sent): " in out
    assert err.startswith("agentmail: advice for an opener (held anyway; ") and "sent anyway" not in err
    monkeypatch.setattr(ages, "clock", lambda: time.time() + 86400)  # said once a day: the next day
    code, _, err = cli("--as", "alpha", "send", "beta", "-s", "Hi", "-b", "It broke.")
    assert code == 0 and err.startswith("agentmail: advice for an opener (sent anyway; said once a day): ")


def test_a_person_given_with_a_display_name_is_echoed_as_typed(alpha: AgentMail, cli: Cli) -> None:
    code, out, err = cli("person", "beta", "Carol <Carol@Example.org>", "--follows")
    assert (code, out) == (2, "")
    assert err == (
        "agentmail: 'Carol <Carol@Example.org>' is not a plain lowercase ASCII address (user@domain); "
        "give the address alone, e.g. 'carol@example.org'\n"
    )
    assert cli("person", "delta", "carol@example.org")[0] == 2  # a mistyped platform: bad input


# --- 12. Ctrl-C while the command is still loading ------------------------------------------

INTERRUPT_AT_IMPORT = """\
import sys

class Interrupt:
    '''Ctrl-C, deterministically: the moment the command's modules start loading.'''

    def find_spec(self, name, path=None, target=None):
        if name == "agentmail.cli.app":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_while_the_command_loads_is_one_line_and_exit_130(tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(INTERRUPT_AT_IMPORT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])}
    script = Path(sys.executable).with_name("agentmail")  # the console script pip wrote
    for command in ([sys.executable, "-m", "agentmail", "inbox"], [str(script), "inbox"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (130, "", "agentmail: interrupted\n"), command


INTERRUPT_AT_FIRST_IMPORT = """\
import sys

class Interrupt:
    '''Ctrl-C at the first import once the package starts loading, whatever it is.'''

    def find_spec(self, name, path=None, target=None):
        if "agentmail" in sys.modules and name != "agentmail.__main__":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_at_the_first_import_of_the_package_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """The package itself is reached before the entry point's handler: it imports nothing."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(INTERRUPT_AT_FIRST_IMPORT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])}
    script = Path(sys.executable).with_name("agentmail")
    for command in ([sys.executable, "-m", "agentmail", "inbox"], [str(script), "inbox"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
        assert (done.returncode, done.stdout, done.stderr) == (130, "", "agentmail: interrupted\n"), command


def test_the_entry_point_imports_nothing_but_sys_before_the_command() -> None:
    """Start-up time is a measured figure: the guard around it costs no import."""
    import ast

    import agentmail.__main__ as entry

    tree = ast.parse(Path(entry.__file__).read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [alias.name for n in top for alias in n.names] == ["sys"]


# --- 13. every option and argument says what it is ------------------------------------------


def test_every_option_and_argument_has_help_text() -> None:
    from agentmail.cli.app import main_group

    from ..cli.test_cli_args import command_paths

    missing = []
    for path, command in command_paths(main_group):
        for param in command.params:
            if param.attrs.get("hidden"):
                continue
            if not str(param.attrs.get("help") or "").strip():
                missing.append(f"agentmail {' '.join(path)} {param.decls[-1]}")
    for param in main_group.params:
        if not param.attrs.get("hidden") and not str(param.attrs.get("help") or "").strip():
            missing.append(f"agentmail {param.decls[-1]}")
    assert missing == []


def test_the_type_help_and_the_type_error_list_the_same_types(alpha: AgentMail) -> None:
    from agentmail.cli.context import TYPES_HELP as _TYPES_HELP

    with pytest.raises(BadInput) as caught:
        alpha.send("beta", "Hi", OPENER, type="rant")
    listed = str(caught.value).split("one of: ")[1].split(" (")[0]
    assert listed.split(", ") == _TYPES_HELP.split("|")
    with pytest.raises(BadInput, match="'agentmail note' on the command line"):
        alpha.send("beta", "Hi", OPENER, type="note")


# --- 14. demo --json ------------------------------------------------------------------------


def test_demo_json_is_a_summary_and_nothing_else(tmp_path: Path, cli: Cli) -> None:
    code, out, err = cli("demo", "--json", "--home", str(tmp_path / "demo"))
    assert (code, err) == (0, "")
    summary = json.loads(out)
    assert [x["type"] for x in summary["letters"]] == ["report", "ack", "fix-notice", "verify-result", "close"]
    assert summary["forgery"]["reason"] == "unauthenticated" and summary["status"]["state"] == "closed"
    assert "never answered" in summary["refused_answer_to_close"]
    assert summary["home"] == str(tmp_path / "demo")


# --- 15. one name for a letter on both sides: its Message-ID ---------------------------------


def test_every_id_taking_command_takes_the_message_id_or_a_unique_prefix(
    alpha: AgentMail, beta: AgentMail, cli: Cli
) -> None:
    sent = alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    assert sent.id != got.id and sent.message_id == got.message_id
    mid = got.message_id  # <ULID.alpha@bus.test>
    for ref in (mid, mid[1:-1], mid[1:-1].upper(), mid[:14], mid[1:14]):
        code, out, err = cli("--as", "beta", "--json", "show", ref)
        assert (code, json.loads(out)["id"]) == (0, got.id), (ref, err)
        code, out, _ = cli("--as", "alpha", "--json", "show", ref)
        assert (code, json.loads(out)["id"]) == (0, sent.id), ref  # the same name on the other side
    assert cli("--as", "beta", "show", got.id[:10])[0] == 0  # a prefix of the id here
    assert cli("--as", "beta", "reply", mid, "-b", "Reproduced; fixing.", "-t", "ack")[0] == 0
    assert beta.show(got.id).state == "read"
    (ack,) = alpha.inbox()
    assert cli("--as", "alpha", "done", ack.message_id[1:-1]) == (0, "marked 1 read\n", "")
    code, _, err = cli("--as", "alpha", "show", "<nosuch.alpha@bus.test>")
    assert (code, err) == (
        1,
        "agentmail: no letter with Message-ID <nosuch.alpha@bus.test> in the mailbox alpha, chosen by --as\n",
    )


def test_an_ambiguous_prefix_is_bad_input_naming_the_letters(alpha: AgentMail, beta: AgentMail) -> None:
    first = alpha.send("beta", "Quota 500s", OPENER)
    second = alpha.send("beta", "Login", OPENER)
    common = os.path.commonprefix([first.message_id, second.message_id])
    assert len(common) >= 7  # made the same second: ULIDs share their time
    with pytest.raises(BadInput, match="names several letters") as caught:
        alpha.show(common)
    assert first.id in str(caught.value) and second.id in str(caught.value)
    with pytest.raises(BadInput, match="is not a letter id or Message-ID"):
        alpha.show("no such thing")
    with pytest.raises(NotFound):
        alpha.show("01nosuchletter")


def test_a_forger_reusing_a_message_id_never_takes_the_name_of_the_real_letter(
    alpha: AgentMail, beta: AgentMail
) -> None:
    from agentmail.model import Letter

    alpha.send("beta", "Quota 500s", OPENER)
    (got,) = beta.inbox()
    forged = Letter(message_id=got.message_id, sender="", sender_address="mallory@evil.test", to="beta",
                    to_address="beta@bus.test", type="", thread="", subject="Re: key", body="", date="",
                    reason="unauthenticated", detail="no valid signature")  # fmt: skip
    stored = beta.spool.write.store("quarantine", forged, b"X-Forged: yes\r\n\r\nhi\r\n", index=False)
    assert beta.show(got.message_id).id == got.id
    assert beta.show(stored.id).state == "quarantine"  # its own id still names it


# --- hostile input: any text as an id, any bytes as a body ----------------------------------


@pytest.fixture(scope="module")
def named_spool(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentMail, list[tuple[str, str]]]:
    home = tmp_path_factory.mktemp("named")
    reg = bus.init(home, home / "registry", ["alpha", "beta"], domain="bus.test", endpoints={"new_threads_per_hour": 0})
    alpha = AgentMail(reg, Identity("alpha"), home)
    letters = [alpha.send("beta", f"Letter {n}", OPENER) for n in range(3)]
    return alpha, [(x.id, x.message_id) for x in letters]


@settings(max_examples=examples(300), deadline=None)
@given(ref=st.one_of(st.text(max_size=40), st.sampled_from(["<", ">", "<>", "@", "%", "_", "~", "\0", " <x@y> "])))
def test_any_text_as_an_id_names_one_letter_it_matches_or_is_one_line_of_bad_input_or_not_found(
    named_spool: tuple[AgentMail, list[tuple[str, str]]], ref: str
) -> None:
    alpha, letters = named_spool
    try:
        letter_id = alpha.box.id_of(ref)
    except (BadInput, NotFound) as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    match = [i for i, mid in letters if i == letter_id]
    if match:  # it named a letter: the text is its id, its Message-ID, or a prefix of one of them
        mid = dict(letters)[letter_id]
        bare = ref.strip().removeprefix("<").removesuffix(">")
        assert len(bare) >= 6 or ref.strip().lower() == letter_id
        assert letter_id.startswith(ref.strip().lower()) or mid.lower().startswith("<" + bare.lower())


@pytest.mark.parametrize("ref", ["id", "mid", "bare", "prefix"])
def test_each_form_of_a_letters_name_names_it(named_spool: tuple[AgentMail, list[tuple[str, str]]], ref: str) -> None:
    alpha, letters = named_spool
    letter_id, mid = letters[1]
    typed = {"id": letter_id.upper(), "mid": mid, "bare": mid[1:-1], "prefix": mid[:-1]}[ref]
    assert alpha.box.id_of(typed) == letter_id


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=64))
def test_any_bytes_as_a_body_are_utf8_text_or_one_line_saying_so(data: bytes) -> None:
    from agentmail.cli.context import read_body

    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        text = read_body("-")
    except BadInput as exc:
        assert str(exc) == f"standard input: {NOT_TEXT}"
        return
    finally:
        sys.stdin = stdin
    assert "\0" not in text and "\r" not in text
    assert text == data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
