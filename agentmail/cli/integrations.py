"""The commands that hand the mailbox to something else: ``mcp`` (the MCP server), ``hook`` (a
coding-agent host's session hooks) and ``watch`` (a command run on each new letter).

Each module behind them (``mcp_server``, ``hooks``, ``watch``) is imported only when its command
runs. ``commands`` is taken in by the command line's root (``app``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .args import Command, Commands, Group, UsageError, argument, at_least, echo, option, seconds
from .context import Ctx, json_option
from .render import emit

commands = Commands()


@commands.command()
@json_option
def mcp(ctx: Ctx) -> None:
    """The same operations as MCP tools over stdio (needs the extra agentmail[mcp])."""
    from .mcp_server import serve

    if sys.stdin.isatty():  # typed in a terminal, where it would otherwise wait in silence
        echo("agentmail mcp: speaks MCP (JSON-RPC) on stdin/stdout to the host that starts it "
             "(e.g. 'claude mcp add agentmail -- agentmail mcp'); Ctrl-C ends it", err=True)  # fmt: skip

    serve(ctx.client)


class HookUsageError(UsageError):
    """A usage error in ``hook HOST EVENT``: exit 1, never 2, which a host reads as "block"."""

    exit_code = 1


class _HookGroup(Group):
    """``hook HOST EVENT`` is run by a host, which reads exit 2 as "block" (keep the agent going):
    any mistake in it, a usage error too, exits 1 with its line (hooks.py). ``hook install`` is a
    person's command: bad input there is exit 2, as everywhere."""

    def resolve(self, argv: Sequence[str], prog: str, ctx: Any) -> tuple[Command, dict[str, Any]]:
        try:
            return super().resolve(argv, prog, ctx)
        except UsageError as exc:
            if argv and argv[0] == "install":
                raise
            from .hooks import NEVER_BLOCK

            raise HookUsageError(f"{exc}; {NEVER_BLOCK}") from None


def _hook(_ctx: Ctx) -> None:
    """Session hooks for coding-agent hosts: HOST EVENT, or install HOST."""


hook = commands.commands["hook"] = _HookGroup("hook", _hook)


def _hook_command(host: str, label: str) -> None:
    @hook.command(host, help=f"{label}: EVENT is session-start or stop; silent when there is nothing to say.")
    @argument("event", help="session-start or stop.")
    @json_option
    def command(ctx: Ctx, event: str) -> int:
        from ..client.facade import AgentMail
        from . import hooks

        # A generic host may never close stdin; the others send one JSON object and close it.
        payload = "" if host == "generic" or sys.stdin.isatty() else sys.stdin.read()
        outcome = hooks.run(
            host,
            event,
            payload,
            lambda cwd: AgentMail.from_env(ctx.platform, agent=ctx.agent, registry=ctx.registry_root(), cwd=cwd),
        )
        if outcome.stdout:
            echo(outcome.stdout)
        if outcome.stderr:
            echo(outcome.stderr, err=True)
        return outcome.exit_code


for _host, _label in (
    ("claude", "Claude Code"),
    ("codex", "Codex CLI"),
    ("gemini", "Gemini CLI"),
    ("generic", "Any host that runs a shell command"),
):
    _hook_command(_host, _label)


@hook.command("install")
@argument("host", help="claude, codex, gemini or generic (which prints what to run).")
@option("--dir", "root", metavar="DIR", help="The checkout (default: the git checkout holding the current directory).")
@json_option
def hook_install(ctx: Ctx, host: str, root: str | None) -> None:
    """Merge agentmail's hooks into HOST's settings in this checkout (idempotent), naming this
    agentmail by its absolute path (a host's PATH may lack its virtual environment)."""
    from . import hooks

    words = [hooks.agentmail_command()]
    words += (["--as", ctx.platform] if ctx.platform else []) + (["--agent", ctx.agent] if ctx.agent else [])
    prefix = hooks.as_command(words)
    path, added = hooks.install(host, Path(root) if root else hooks.checkout_root(Path.cwd()), prefix)
    emit(
        ctx,
        {"settings": str(path), "added": added},
        lambda: echo(f"{path}: added {', '.join(added)}" if added else f"{path}: already installed"),
    )


@commands.command()
@option("--exec", "command", required=True, metavar="CMD", help="Shell command run once per new letter.")
@option("--jobs", type=at_least(1), default=4, show_default=True, help="Commands running at once.")
@option("--budget", type=at_least(1), default=6, show_default=True, help="Runs per thread per hour, at most.")
@option("--once", is_flag=True, help="Handle the letters unread now, then exit.")
@option("--timeout", type=seconds, metavar="S", help="Stop after S seconds.")
@json_option
def watch(ctx: Ctx, command: str, jobs: int, budget: int, once: bool, timeout: float | None) -> None:
    """Run CMD once per new authenticated letter, with AGENTMAIL_LETTER_ID, _THREAD, _TYPE... set."""
    import signal

    from .watch import Watcher

    def terminate(*_: object) -> None:
        raise KeyboardInterrupt  # like Ctrl-C: interrupt the wait, finish running commands, start no new ones

    watcher = Watcher(ctx.client(), command, jobs=jobs, budget=budget)
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        runs = watcher.run(timeout=timeout, once=once)
    finally:
        signal.signal(signal.SIGTERM, previous)  # main() run in-process (tests, embedders) keeps its own handler
    emit(ctx, {"runs": runs}, lambda: echo(f"agentmail watch: {runs} run(s)", err=True))
