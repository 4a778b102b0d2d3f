"""The coding-agent hosts agentmail's hooks are written for (``hook install``), where each keeps
them in a checkout, which ``agentmail`` a hook runs, and whether that one still starts (``doctor``).

A hook names the agentmail it runs by its absolute path: a host starts hooks with its own PATH,
which seldom holds the virtual environment agentmail was installed in, and a hook that is not
found fails without a word, so the agent never hears of its mail.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._value import Frozen, field
from ..errors import ConfigError


class Host(Frozen):
    settings: str | None  # the checkout's settings file, relative to its root
    events: dict[str, str] = field(default_factory=dict)  # our event -> the host's event name
    block: str = "block"  # the host's word for "do not stop yet"
    matcher: bool = True  # an entry carries a matcher ("" = every session); Codex's Stop takes none


HOSTS = {
    "claude": Host(".claude/settings.json", {"session-start": "SessionStart", "stop": "Stop"}),
    "codex": Host(".codex/hooks.json", {"session-start": "SessionStart", "stop": "Stop"}, matcher=False),
    "gemini": Host(".gemini/settings.json", {"session-start": "SessionStart", "stop": "AfterAgent"}, "deny"),
    "generic": Host(None),  # any host that can run a shell command and show its output
}
FIX = "install it where the host can start it (pipx install agentmail), or run this through the agentmail you installed"


def _on_path(name: str) -> str | None:
    """``name`` in PATH's absolute folders only: a relative entry (``bin``, ``node_modules/.bin``)
    names a folder of whatever checkout the command runs in, where a partner's patch can plant one."""
    folders = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(entry)]
    return shutil.which(name, path=os.pathsep.join(folders)) if folders else None


def agentmail_command(
    argv0: str | None = None, python: str | None = None, which: Callable[[str], str | None] = _on_path
) -> str:
    """The absolute path of the ``agentmail`` running now: the script it was started as, else the
    one beside this interpreter (``python -m agentmail`` in a virtual environment), else the one on
    PATH (its absolute folders only). ConfigError with the fix when there is none."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    python = sys.executable if python is None else python
    candidates = []
    if Path(argv0).name == "agentmail":
        candidates.append(Path(argv0).absolute())
    if python:
        candidates.append(Path(python).absolute().parent / "agentmail")
    found = which("agentmail")
    if found:
        candidates.append(Path(found).absolute())
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise ConfigError(f"cannot find the agentmail command a host would run (none beside {python}, none on PATH); {FIX}")


def installed(root: Path) -> list[tuple[str, Path, str]]:
    """Every agentmail hook installed in the checkout at ``root``: (host, settings file, command)."""
    found = []
    for name, host in HOSTS.items():
        if host.settings is None:
            continue
        path = root / host.settings
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        hooks = data.get("hooks") if isinstance(data, dict) else None
        for entries in hooks.values() if isinstance(hooks, dict) else ():
            for entry in entries if isinstance(entries, list) else ():
                for hook in (entry.get("hooks") or []) if isinstance(entry, dict) else []:
                    command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
                    if f" hook {name} " in command and "agentmail" in command:
                        found.append((name, path, command))
    return found


def starts(command: str) -> str | None:
    """None when the program a hook's ``command`` runs is an absolute path that starts
    (``--version`` exits 0), else what is wrong, in a few words."""
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        return "not a command a shell can read"
    if not os.path.isabs(program):
        return f"{program!r} is not an absolute path: a host whose PATH lacks it never runs the hook"
    try:
        done = subprocess.run([program, "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{program} does not start ({exc.__class__.__name__})"
    return None if done.returncode == 0 else f"{program} --version exited {done.returncode}"


def check(root: Path) -> tuple[bool, str] | None:
    """``doctor``'s line on the hooks of the checkout at ``root`` (None: none installed)."""
    hooks = installed(root)
    if not hooks:
        return None
    broken = [(host, path, why) for host, path, command in hooks if (why := starts(command)) is not None]
    if not broken:
        return True, f"{len(hooks)} hook(s) installed; each runs an agentmail that starts"
    host, path, why = broken[0]
    return False, f"{path}: {why}; run 'agentmail hook install {host}' again" + (
        f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
    )


def as_command(words: list[str]) -> str:
    return shlex.join(words)


def load_settings(path: Path) -> Any:
    """A host's settings file as JSON (an absent file is {}); ConfigError, never an overwrite, on a bad one."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); fix it by hand, agentmail will not overwrite it"
        ) from None
