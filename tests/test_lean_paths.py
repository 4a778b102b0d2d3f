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

import pytest

from agentmail import guards
from agentmail.client import AgentMail

from .conftest import OPENER


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
    assert advice_calls == ["report"] and alpha.last_warnings  # the opener is advised
    (got,) = beta.inbox()
    answer = beta.reply(got, "it broke again", type="question")  # thin, yet never advised
    assert answer is not None and beta.last_warnings == []
    (back,) = alpha.inbox()
    alpha.reply(back, "it broke again", type="question")
    alpha.send("beta", "ignored", "it broke again", type="question", thread=opened.thread)  # a follow-up
    alpha.note("For my sibling", "it broke again")
    assert advice_calls == ["report"]


_HEAVY = ("dkim", "nacl", "yaml", "frontmatter", "email", "asyncio", "ssl", "aiosmtplib", "imapclient", "dns",
          "authres", "configparser", "socket", "mcp")  # fmt: skip


def _imported(home: Path, *argv: str) -> set[str]:
    code = (
        "import sys, json\n"
        "from agentmail.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "sys.stdout.flush()\n"
        "print('\\n' + json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    # Not the test run's coverage either: its start-up hook (COVERAGE_PROCESS_START) imports plenty.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return {name.split(".")[0] for name in json.loads(done.stderr.strip().splitlines()[-1])}


def test_help_and_inbox_no_sync_import_none_of_the_heavy_libraries(
    alpha: AgentMail, beta: AgentMail, home: Path
) -> None:
    alpha.send("beta", "Quota", OPENER)
    assert len(beta.inbox()) == 1  # a spool with a letter to list
    for argv in (["--help"], ["--as", "beta", "inbox", "--no-sync"], ["--as", "beta", "inbox"]):
        heavy = set(_HEAVY) & _imported(home, *argv)
        assert not heavy, f"agentmail {' '.join(argv)} imported {sorted(heavy)}"


# What the start-up of the light commands does without (issue 11, start-up): OpenSSL's hashes
# (secrets, hashlib), logging and its traceback, shutil with bz2/lzma.
_LIGHT_SKIPS = ("hashlib", "_hashlib", "secrets", "random", "base64", "logging", "traceback", "shutil", "bz2", "lzma")


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
    """main() installs no logging at start: the root logger's NullHandler comes when a library
    first imports logging, so logging's last resort never prints to the user."""
    code = (
        "import sys\n"
        "from agentmail.cli import main\n"
        "main(['--help'])\n"
        "assert 'logging' not in sys.modules\n"
        "import logging\n"
        "logging.getLogger('asyncio').error('a TLS error nobody asked to see')\n"
        "print(sum(isinstance(h, logging.NullHandler) for h in logging.getLogger().handlers))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "COVERAGE_"))}
    env["AGENTMAIL_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "1" and "TLS error" not in done.stderr


def test_a_plain_send_writes_its_block_without_yaml(alpha: AgentMail, home: Path) -> None:
    imported = _imported(home, "--as", "alpha", "send", "beta", "-s", "Quota", "-b", OPENER)
    assert not {"yaml", "frontmatter"} & imported


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


def test_the_logging_hook_quiets_the_logging_it_finds_and_passes_over_the_rest() -> None:
    """In-process: the hook answers only for ``logging``, leaves sys.meta_path as it found it,
    and the module it loads has the root NullHandler (a fresh module object, not sys.modules')."""
    import importlib.util

    from agentmail.cli import _NullHandlerOnImport

    hook = _NullHandlerOnImport()
    assert hook.find_spec("json") is None
    sys.meta_path.insert(0, hook)
    spec = hook.find_spec("logging")
    assert hook not in sys.meta_path and spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert any(isinstance(h, module.NullHandler) for h in module.getLogger().handlers)
