"""The command line's grammar (``agentmail/cli/args.py`` on argparse): any argv parses into the named
command's keywords or fails as a usage error, never otherwise; and what click allowed still parses."""

from __future__ import annotations

import contextlib
import inspect
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmail.cli.app import Ctx, main_group
from agentmail.cli.args import Command, Exit, Group, UsageError

from ..depth import examples


def command_paths(group: Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Command]]:
    """Every command and group under ``group``, each with the words that name it."""
    found: list[tuple[tuple[str, ...], Command]] = []
    for name, command in sorted(group.commands.items()):
        found.append(((*prefix, name), command))
        if isinstance(command, Group):
            found += command_paths(command, (*prefix, name))
    return found


PATHS = [(path, command) for path, command in command_paths(main_group) if not isinstance(command, Group)]
FLAGS = sorted({d for _, c in PATHS for p in c.params for d in p.decls if d.startswith("-")} | {"-", "--", "-h"})


def _resolve(argv: list[str]) -> tuple[Command, dict[str, Any], Ctx]:
    ctx = Ctx(None, None, None, False)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        command, keywords = main_group.resolve(argv, "agentmail", ctx)
    return command, keywords, ctx


@settings(max_examples=examples(400), deadline=None)
@given(
    which=st.sampled_from(PATHS),
    tokens=st.lists(st.one_of(st.sampled_from(FLAGS), st.text(max_size=12)), max_size=8),
)
def test_any_argv_gives_the_commands_keywords_or_a_usage_error(
    which: tuple[tuple[str, ...], Command], tokens: list[str]
) -> None:
    path, expected = which
    try:
        command, keywords, _ = _resolve([*path, *tokens])
    except UsageError as exc:
        run_by_a_host = path[0] == "hook" and path[1] != "install"  # exit 2 reads as "block" there
        assert exc.exit_code == (1 if run_by_a_host else 2) and "\n" not in str(exc) and "--help')" in str(exc)
        return
    except Exit as exc:  # --help or --version was asked for
        assert exc.code == 0 and ("-h" in tokens or "--help" in tokens or "--version" in tokens)
        return
    assert command is expected
    wanted = list(inspect.signature(command.func).parameters)[1:]  # all but the context
    assert sorted(keywords) == sorted(wanted)


def test_options_and_arguments_parse_as_click_parsed_them() -> None:
    command, keywords, ctx = _resolve(["done", "A", "--json", "B", "--as", "beta", "--agent", "qa"])
    assert command.name == "done" and keywords == {"letter_ids": ("A", "B")}
    assert (ctx.json, ctx.platform, ctx.agent) == (True, "beta", "qa")
    _, keywords, _ = _resolve(["send", "beta", "-sQuota", "-b=-x", "--attach", "a", "--attach", "b", "-S", "high"])
    assert (keywords["subject"], keywords["body"], keywords["attach"]) == ("Quota", "-x", ("a", "b"))
    assert (keywords["letter_type"], keywords["severity"], keywords["force"], keywords["patch"]) == (
        "report",
        "high",
        False,
        None,
    )
    _, keywords, _ = _resolve(["send", "beta", "-s", "Q", "-b", "-"])  # '-' is standard input, a value
    assert keywords["body"] == "-"
    _, keywords, _ = _resolve(["search"])
    assert keywords["query"] == "" and keywords["limit"] == 20
    _, keywords, ctx = _resolve(["--json", "--as", "alpha", "hook", "claude", "stop"])
    assert keywords == {"event": "stop"} and ctx.json and ctx.platform == "alpha"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["send", "beta", "-s", "Q", "--bod", "x"], "no such option '--bod'; did you mean '--body'?"),
        (["inbox", "--limit", "0"], "argument --limit: 0 is not at least 1"),
        (["search", "--limit", "1001"], "argument --limit: 1001 is not from 1 to 1000"),
        (["init", "a", "--transport", "uucp"], "argument --transport: invalid choice: 'uucp'"),
        (["bus", "sett", "x", "y"], "no such command 'sett'; did you mean 'set'?"),
        (["done"], "the following arguments are required: ID"),
    ],
)
def test_a_usage_error_says_what_and_where_the_help_is(argv: list[str], error: str) -> None:
    with pytest.raises(UsageError) as raised:
        _resolve(argv)
    assert str(raised.value).startswith(error) and str(raised.value).endswith("--help')")


def test_the_grammar_touches_no_private_part_of_argparse() -> None:
    """Issue 27: ``cli/args`` uses argparse's public API, its words and its width (no hook of its
    help formatter overridden); the one underscore name it reaches is its own ``Group._listing``."""
    import ast
    from pathlib import Path

    from agentmail.cli import args

    tree = ast.parse(Path(args.__file__).read_text())
    private = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
    }
    assert private == {"_listing"}


def test_every_module_of_commands_is_in_the_root_and_no_name_twice() -> None:
    from agentmail.cli import agent, integrations, operator, people_view
    from agentmail.cli.args import Commands

    parts = (agent.commands, operator.commands, integrations.commands, people_view.commands)
    assert set(main_group.commands) == {name for part in parts for name in part.commands}
    assert sum(len(part.commands) for part in parts) == len(main_group.commands)
    again = Commands()
    again.command("inbox")(lambda ctx: None)
    with pytest.raises(ValueError, match=r"commands declared twice: \['inbox'\]"):
        Group("agentmail", lambda ctx: None, parts=[agent.commands, again])


@pytest.mark.parametrize("columns", [60, 200])
def test_help_is_argparses_own_at_the_terminals_width(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """argparse's words (``usage:``, ``options:``, ``show this help message and exit``) and its
    width, the terminal's less 2, for the options it wraps; every command listed with its help."""
    from agentmail.cli import args
    from agentmail.cli.app import main

    monkeypatch.setenv("COLUMNS", str(columns))
    args._columns.cache_clear()
    try:
        assert main(["send", "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: agentmail send [-h] ")
        options = out[out.index("\noptions:\n") :]
        assert "  -h, --help            show this help message and exit\n" in options
        widest = max(len(line) for line in options.splitlines())
        assert widest <= columns - 2 and (columns < 100 or widest > 80), widest
        assert main(["--help"]) == 0
        out = capsys.readouterr().out
        listing = out[out.index("\ncommands:\n") + 11 :].split("\n\n")[0].splitlines()
        assert sorted(line.split()[0] for line in listing) == sorted(main_group.commands)
        assert all(len(line.split()) > 1 and len(line) <= max(columns - 2, 60) for line in listing)
    finally:
        args._columns.cache_clear()
