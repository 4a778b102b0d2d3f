"""The lean send and start-up paths of issue 11, pinned by what runs, never by how long it takes:
opener advice only for a letter that opens a thread, and the CLI's light commands import none of
the heavy libraries (checked in sys.modules of a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmail.client.facade import AgentMail
from agentmail.stages import guards

from ..cli.test_cli_args import command_paths
from ..conftest import OPENER


@pytest.fixture
def advice_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the real opener advice (recorded, then run as it is)."""
    calls: list[str] = []
    real: Callable[[str, str], list[str]] = guards.opener_warnings

    def recording(kind: str, body: str) -> list[str]:
        calls.append(kind)
        return real(kind, body)

    monkeypatch.setattr(guards, "opener_warnings", recording)
    return calls


def test_opener_advice_runs_for_a_thread_opener_only(
    alpha: AgentMail, beta: AgentMail, advice_calls: list[str]
) -> None:
    opened = alpha.send("beta", "Quota", "it broke again")
    assert advice_calls == ["report"] and opened.notices  # the opener is advised
    (got,) = beta.inbox()
    answer = beta.reply(got, "it broke again", type="question")  # thin, yet never advised
    assert answer is not None and answer.notices == []
    (back,) = alpha.inbox()
    alpha.reply(back, "it broke again", type="question")
    alpha.send("beta", "ignored", "it broke again", type="question", thread=opened.thread)  # a follow-up
    alpha.note("For my sibling", "it broke again")
    assert advice_calls == ["report"]


_HEAVY = ("dkim", "nacl", "yaml", "frontmatter", "email", "asyncio", "ssl", "aiosmtplib", "imapclient", "dns",
          "authres", "configparser", "socket", "mcp")  # fmt: skip


def _imported(home: Path, *argv: str) -> set[str]:
    return {name.split(".")[0] for name in _after_main(home, "sorted(sys.modules)", *argv)}


def _after_main(home: Path, expression: str, *argv: str) -> list[str]:
    """``expression`` (a list of str) evaluated in a real CLI process once ``main(argv)`` is done."""
    code = (
        "import sys, json, re\n"
        "from agentmail.cli.app import main\n"
        "code = main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        f"print('\\n' + json.dumps({expression}), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    # Not the test run's coverage either: its start-up hook (COVERAGE_PROCESS_START) imports plenty.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return result


def test_help_and_inbox_no_sync_import_none_of_the_heavy_libraries(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    alpha.send("beta", "Quota", OPENER)
    assert len(beta.inbox()) == 1  # a spool with a letter to list
    for argv in (["--help"], ["--as", "beta", "inbox", "--no-sync"], ["--as", "beta", "inbox"]):
        heavy = set(_HEAVY) & _imported(home, *argv)
        assert not heavy, f"agentmail {' '.join(argv)} imported {sorted(heavy)}"


# What the start-up of the light commands does without (issue 11, start-up): hashes (secrets,
# hashlib with OpenSSL, and the interpreter's own SHA-256, loaded with the first hash), logging
# and its traceback, shutil with bz2/lzma.
_LIGHT_SKIPS = ("hashlib", "_hashlib", "_sha256", "_sha2", "secrets", "random", "base64", "logging", "traceback",
                "shutil", "bz2", "lzma")  # fmt: skip


def test_help_loads_no_clock_dates_or_math(home: Path) -> None:
    """The durations a person types are read by ``ages`` (with datetime, and its math) only when
    one is typed: a window's option type is declared on ``keygen``, never called by its help; the
    token estimate the guide module offers counts in whole numbers."""
    for argv in (["--help"], ["keygen", "--help"], ["status", "--help"]):
        loaded = {"agentmail.ages", "datetime", "math"} & set(_after_main(home, "list(sys.modules)", *argv))
        assert not loaded, f"agentmail {' '.join(argv)} imported {sorted(loaded)}"


def test_help_and_inbox_no_sync_load_no_hashing_logging_or_archives(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    alpha.send("beta", "Quota", OPENER)
    assert len(beta.inbox()) == 1
    for argv in (
        ["--help"],
        ["send", "--help"],
        ["--as", "beta", "inbox", "--no-sync"],
    ):
        loaded = set(_LIGHT_SKIPS) & _imported(home, *argv)
        assert not loaded, f"agentmail {' '.join(argv)} imported {sorted(loaded)}"


def test_a_library_that_loads_logging_after_start_up_still_logs_nothing(home: Path) -> None:
    """--help loads no logging; the modules that bring a library which logs give its logger a
    NullHandler where they import it (issue 27: no import hook), so logging's last resort never
    prints e.g. asyncio's TLS errors or keyring's backend warnings to the user."""
    code = (
        "import sys\n"
        "from agentmail.cli.app import main\n"
        "main(['--help'])\n"
        "assert 'logging' not in sys.modules\n"
        "import agentmail.transport.smtpimap\n"
        "from agentmail.config.credentials import keyring_secret\n"
        "from agentmail.errors import ConfigError\n"
        "try:\n"
        "    keyring_secret('agentmail-test-none', 'nobody', 'the test')\n"
        "except ConfigError:\n"
        "    pass\n"
        "import logging\n"
        "for name in ('asyncio', 'imapclient', 'keyring', 'keyring.backend'):\n"
        "    logging.getLogger(name).error('a %s error nobody asked to see', name)\n"
        "print(logging.getLogger().handlers)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"  # the root logger is the application's: left alone
    assert "nobody asked" not in done.stderr, done.stderr


def test_an_application_that_configures_logging_still_gets_the_libraries_records(home: Path) -> None:
    """The trade-off of a NullHandler on a library's logger (DESIGN §8): it only keeps logging's
    last resort quiet; records still propagate to whatever handler an embedder configured."""
    code = (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, format='%(name)s: %(message)s')\n"
        "import agentmail.transport.smtpimap\n"
        "logging.getLogger('asyncio').error('seen')\n"
        "logging.getLogger('imapclient').warning('seen too')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["asyncio: seen", "imapclient: seen too"]


def test_a_plain_send_writes_its_block_without_yaml(alpha: AgentMail, home: Path) -> None:
    imported = _imported(home, "--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert not {"yaml", "frontmatter"} & imported


def test_a_send_and_a_reply_load_no_email_package_nor_socket(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    """Issue 11, second pass: a letter is written without the email package (its Date too, by
    wire.format_date): that and the socket module it loads are for reading letters."""
    skipped = {"email", "socket", "selectors", "calendar"}
    imported = _imported(home, "--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert not skipped & imported, sorted(skipped & imported)
    (got,) = beta.inbox()
    imported = _imported(home, "--as", "beta", "reply", got.id, "-b", "Reproduced; fixing it.", "-t", "ack")
    assert not skipped & imported, sorted(skipped & imported)
    assert [letter.type for letter in alpha.inbox()] == ["ack"]


def test_the_round_trip_loads_no_dkimpy_logging_traceback_or_secrets(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """Issue 40: dkim_lean signs and passes agentmail's own letters, so neither process of a round
    trip loads dkimpy (nor the logging and traceback it brings; its stand-in ``dkim.dnsplug`` only);
    a quarantine's stage is found without the traceback module, file names and MIME boundaries
    take os.urandom, not secrets, every hash is the interpreter's own SHA-256 (no OpenSSL), and
    authres parses Authentication-Results only when a letter has them (the local post office's have
    none); ``copy`` only for a letter whose ``extra`` holds something."""
    skipped = {
        "dkim",
        "logging",
        "traceback",
        "linecache",
        "tokenize",
        "secrets",
        "hashlib",
        "_hashlib",
        "authres",
        "copy",
    }
    send = ["--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER, "-t", "question"]
    for argv in (send, ["--as", "beta", "inbox", "--json"]):
        modules = set(_after_main(home, "list(sys.modules)", *argv))
        assert not skipped & modules, f"agentmail {' '.join(argv[:4])} imported {sorted(skipped & modules)}"
    assert "agentmail.trust.authenticity" in modules  # the read judged the letter
    (got,) = beta.inbox(sync=False)
    assert got.subject == "Quota" and got.state == "unread"


def test_a_letter_dkim_lean_cannot_pass_is_still_judged_by_dkimpy(alpha: AgentMail, beta: AgentMail) -> None:
    """dkimpy loads where dkim_lean stops: a signature over a changed body fails with dkimpy's reason."""
    from agentmail.trust import signing

    raw = signing.sign(b"From: a@alpha.test\r\nSubject: x\r\n\r\nbody\r\n", "alpha.test", "s1", _seed())
    key = signing.PinnedKey("alpha.test", "s1", "ed25519", signing.public_key_of(_seed()))
    assert signing.verify(raw, key).ok
    result = signing.verify(raw.replace(b"body", b"bodY"), key)
    assert not result.ok and "the body changed after signing" in result.detail, result.detail
    assert "dkim" in sys.modules


def test_a_letters_extra_is_still_copied_for_json(alpha: AgentMail) -> None:
    """``copy`` loads only for a letter whose ``extra`` holds something, and still copies it."""
    letter = alpha.send("beta", "Quota", OPENER).replace(extra={"outcome": "confirmed", "notes": ["a"]})
    shown = letter.to_json()
    assert (shown["outcome"], shown["notes"]) == ("confirmed", ["a"])
    shown["notes"].append("b")  # a copy: the letter's own facts are left as they were
    assert letter.extra["notes"] == ["a"]
    assert "outcome" not in alpha.send("beta", "Q2", OPENER).to_json()


def test_close_closes_the_spool_database(alpha: AgentMail, beta: AgentMail, home: Path) -> None:
    """``close`` closes spool.db itself (SQLite checkpoints the WAL into it as it does), not the
    collector whenever the client goes: a CLI process skips that collection at exit."""
    alpha.send("beta", "Quota", OPENER)
    assert len(beta.inbox()) == 1
    spool = home / "spool" / "beta"
    assert (spool / "spool.db-wal").exists()  # open: its writes are in the WAL
    beta.close()
    assert not (spool / "spool.db-wal").exists() and not (spool / "spool.db-shm").exists()
    assert [letter.subject for letter in beta.inbox(sync=False)] == ["Quota"]  # reopened when used again


def _entry_run(home: Path, *argv: str) -> tuple[str, int, int, int]:
    """A real CLI process through the entry point: (stdout, exit code, the garbage collections
    it ran, the objects frozen when it exited)."""
    code = (
        "import gc, sys\n"
        "from agentmail import __main__ as entry\n"
        f"sys.argv = ['agentmail', *{list(argv)!r}]\n"
        "collections = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and collections.append(info))\n"
        "def leaving(code):\n"
        "    print('\\nexit', code, len(collections), gc.get_freeze_count())\n"
        "    raise SystemExit(code)\n"
        "entry.sys.exit = leaving\n"
        "entry.run()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    _, exit_code, collected, frozen = done.stdout.splitlines()[-1].split()
    return done.stdout, int(exit_code), int(collected), int(frozen)


def test_a_cli_round_trip_collects_no_garbage_and_freezes_what_is_left_at_exit(alpha: AgentMail, home: Path) -> None:
    """The entry point collects young objects every 50,000 new ones, not 700: a command's start
    makes ~25,000 that live as long as it does, which a short command never has to walk; and it
    freezes what is left before exiting (the interpreter's collections at exit would walk it all),
    after the command closed its files: no WAL is left beside spool.db."""
    out, code, collected, frozen = _entry_run(home, "--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert (code, collected) == (0, 0) and frozen > 10_000  # the modules' objects, at least
    out, code, collected, frozen = _entry_run(home, "--as", "beta", "inbox", "--json")
    assert (code, collected) == (0, 0) and frozen > 10_000
    assert '"subject": "Quota"' in out
    assert sorted(p.name for p in (home / "spool" / "beta").glob("spool.db*")) == ["spool.db"]


def test_a_command_that_runs_on_still_collects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threshold is raised, never switched off: a long wait or watch still collects its cycles."""
    import gc

    from agentmail import __main__ as entry

    monkeypatch.setattr(sys, "argv", ["agentmail", "--version"])
    before = gc.get_threshold()
    try:
        with pytest.raises(SystemExit):
            entry.run()
        assert gc.get_threshold()[0] == entry.START_THRESHOLD and gc.isenabled()
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


@pytest.mark.parametrize("data", [b"", b"abc", b"x" * 1000, "\u00e9t\u00e9".encode(), bytes(range(256)) * 9])
def test_model_sha256_is_hashlibs(data: bytes) -> None:
    import hashlib

    from agentmail.model import sha256

    assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    hasher = sha256()
    hasher.update(data[:7])
    hasher.update(data[7:])
    assert hasher.digest() == hashlib.sha256(data).digest()


def test_model_sha256_falls_back_to_hashlib_without_the_interpreters_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import importlib

    from agentmail import model

    def missing(name: str) -> object:
        raise ImportError(name)

    monkeypatch.setattr(importlib, "import_module", missing)
    assert model._own_sha256() is hashlib.sha256


def _seed() -> str:
    return "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def test_a_read_with_nothing_held_loads_no_approval_code(alpha: AgentMail, home: Path) -> None:
    """Issue 28 (figure 1): the approvers' answers are looked for after every sync, but with no
    letter held the approval code is never loaded; a waiting CLI process paid ~0.4 ms for it
    after the wake, before it showed the letter."""
    alpha.send("beta", "Quota", OPENER)
    modules = set(_after_main(home, "list(sys.modules)", "--as", "beta", "inbox"))
    assert "agentmail.client.receiver" in modules  # the read did sync
    assert "agentmail.people.approval" not in modules


def test_deliver_remakes_a_maildir_removed_under_a_long_lived_process(tmp_path: Path) -> None:
    """deliver makes a Maildir's folders once per process (issue 11); one removed since (a
    rebuilt post office) is made again, and the letter still lands in new/."""
    import shutil

    from agentmail.transport.local import deliver

    maildir = tmp_path / "postoffice" / "beta"
    first = deliver(maildir, b"Subject: one\r\n\r\nbody\r\n")
    shutil.rmtree(maildir)
    second = deliver(maildir, b"Subject: two\r\n\r\nbody\r\n")
    assert first != second and sorted(p.name for p in (maildir / "new").iterdir()) == [second]


# The patterns re has compiled (its cache; Python 3.12+ keeps a second one), as repr strings.
_COMPILED = "sorted({repr(key[1]) for cache in (re._cache, getattr(re, '_cache2', {})) for key in cache})"


def test_a_send_and_a_read_compile_only_their_side_of_the_wire_and_load_no_waiting_or_policy(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """Issue 11 (round trip): patterns a process may never use are strings compiled on first use,
    inotify (ctypes) loads only in a process that waits, and neither loads email.policy."""
    from agentmail.letter import attach, headers, matter, mime, readable, wire

    send = ["--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER]
    sent = set(_after_main(home, _COMPILED, *send))
    read = set(_after_main(home, _COMPILED, "--as", "beta", "inbox"))
    assert len(beta.inbox(sync=False)) == 1  # the read synced the letter, so it parsed one
    rendering = {wire._PLAIN_TEXT, wire._PLAIN_ID}
    parsing = {wire._QUICK_FROM, headers._PLAIN_MAILBOX, wire._NOT_A_HEADER_LINE, mime._CONTENT_TYPE, matter._END_RE}
    rare = {mime._DISPOSITION, attach._BOUNDARY_RE, readable._ATTRIBUTION, readable._FORWARDED, mime._QP_LINE}
    assert {repr(p) for p in rendering} <= sent and {repr(p) for p in parsing} <= read  # the check can see
    assert not {repr(p) for p in parsing | rare} & sent
    assert not {repr(p) for p in rendering | rare} & read
    # email.policy (its header registry and parser) serves only the rare slow paths of wire;
    # attach only a letter read (or sent) with attachments
    for argv, skipped in ((send, {"agentmail.letter.attach"}), (["--as", "beta", "inbox"], set())):
        modules = set(_after_main(home, "list(sys.modules)", *argv))
        loaded = ({"ctypes", "email.policy", "email.headerregistry"} | skipped) & modules
        assert not loaded, f"agentmail {' '.join(argv)} imported {sorted(loaded)}"


def test_no_command_on_the_start_up_paths_loads_dataclasses_or_difflib(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    """Issue 11, second pass: agentmail's values are written by hand (``@dataclass`` compiles each
    generated method with exec at import), and a short option (``-s``, ``-b``) never makes the
    parser rank close option names with difflib. The read syncs a letter: the judging path too."""
    alpha.send("beta", "Quota", OPENER)
    for argv in (
        ["--help"],
        ["--as", "beta", "inbox", "--no-sync"],
        ["--as", "beta", "inbox"],
        ["--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER],
    ):
        loaded = {"dataclasses", "difflib"} & set(_after_main(home, "list(sys.modules)", *argv))
        assert not loaded, f"agentmail {' '.join(argv[:4])} imported {sorted(loaded)}"
    assert len(beta.inbox(sync=False)) == 1  # the read above filed it


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--subjct", "Quota", "-b", "x"], "no such option '--subjct'; did you mean '--subject'?"),
        (["-x", "Quota"], "no such option '-x'"),  # named before the missing -b it also has
        (["-sQuota"], "the following arguments are required: -b/--body"),
        (["-s"], "argument -s/--subject: expected one argument"),
        (["-s", "Q", "-b", "x", "surplus"], "unexpected argument 'surplus'"),
        (["-s", "Q", "-b", "x", "-t"], "argument -t/--type: expected one argument"),
        (["-s", "Q", "-b", "x", "--subj=Q"], "no such option '--subj'; did you mean '--subject'?"),
    ],
)
def test_usage_errors_are_one_line_with_where_the_help_is(
    capsys: pytest.CaptureFixture[str], alpha: AgentMail, args: list[str], error: str
) -> None:
    """A misspelt option gets a suggestion, and long options are never abbreviated (click's
    rule, kept: ``--subj`` is not ``--subject``)."""
    from agentmail.cli.app import main

    assert main(["--as", "alpha", "send", "beta", *args]) == 2
    assert capsys.readouterr().err == f"agentmail: {error} (see 'agentmail send --help')\n"


def test_help_builds_no_commands_parser_and_every_command_parses_its_help(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command's parser is built when that command runs or helps (issue 11): ``--help`` lists
    the commands from their docstrings, and every command's own parser builds and helps."""
    from agentmail.cli import app as cli
    from agentmail.cli import args as _args

    built: list[str] = []
    real = _args._Param.add_to

    def recording(param: _args._Param, parser: Any) -> None:
        built.append(param.decls[0])
        real(param, parser)

    monkeypatch.setattr(_args._Param, "add_to", recording)
    assert cli.main(["--help"]) == 0 and "\ncommands:\n" in capsys.readouterr().out
    assert set(built) == {"--as", "--agent", "--registry", "--json", "--version"}  # the group's own
    commands = command_paths(cli.main_group)
    assert len(commands) >= 34
    for path, _ in commands:
        assert cli.main([*path, "--help"]) == 0, path
        out = capsys.readouterr().out
        assert out.startswith(f"usage: agentmail {' '.join(path)} "), out
    assert len(built) > 150  # every command's options, each added once per --help above


def test_json_as_and_agent_are_taken_after_the_command_name_too(
    capsys: pytest.CaptureFixture[str], alpha: AgentMail, beta: AgentMail
) -> None:
    from agentmail.cli.app import main

    alpha.send("beta", "Quota", OPENER)
    assert main(["inbox", "--as", "beta", "--json"]) == 0
    (letter,) = json.loads(capsys.readouterr().out)
    assert main(["done", "--as", "beta", letter["id"], "--json"]) == 0  # options between arguments
    assert json.loads(capsys.readouterr().out) == {"done": [letter["id"]]}
