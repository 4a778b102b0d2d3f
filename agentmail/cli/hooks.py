"""Session hooks for coding-agent hosts: ``agentmail hook <host> <event>`` and ``hook install``.

Busy agents do not look at their mail; their host can make them. At session start the agent
is shown its unread letters in a few lines; when it tries to stop while letters still need an
answer, the stop is held once with a one-line reason. Each letter holds a stop at most once
(remembered under the mailbox's spool), and never while the host says a hook already made
the agent continue, so a hook can never keep an agent going in a loop.

A hook must never break a session: a checkout that is no platform, or a transport that is
down, is silence (the spool as last synced is shown); only a broken setup exits 1, which hosts
show as a warning. Nothing here ever exits 2, the code hosts read as "block".
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._fs import write_atomic
from .._value import Frozen
from ..admin.hosts import HOSTS as HOSTS
from ..admin.hosts import Host as Host
from ..admin.hosts import agentmail_command as agentmail_command
from ..admin.hosts import as_command as as_command
from ..admin.hosts import load_settings
from ..config.identity import checkout_root as checkout_root  # re-exported: `hook install` roots at the checkout
from ..errors import AgentmailError, BadInput, ConfigError, NotFound, TransportError
from ..frame import inline, quoted
from ..stages.guards import DATA_NOT_ORDERS

if TYPE_CHECKING:
    from ..client.facade import AgentMail
    from ..model import Letter

EVENTS = ("session-start", "stop")
NEVER_BLOCK = "a hook exits 1 on a mistake, never 2 (hosts read 2 as 'block')"
MAX_LINES = 20
SUBJECT = 48  # characters of a subject a line shows


class Outcome(Frozen):
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


def _compact(letter: Letter) -> str:
    """One letter as one line, its subject last and quoted (frame.py): nothing in it can start
    another entry or end the list. Short: every character is paid for in a woken agent's context."""
    flag = f" [{inline(letter.severity)}]" if letter.severity else ""
    person = letter.extra.get("person")  # a person's letter: "PERSON for PLATFORM"
    sender = inline(f"{person} for {letter.sender}" if person else letter.sender or letter.sender_address or "?")
    letter_type = inline(letter.type) or "-"
    return f"{letter.id} {letter_type}{flag} {sender} {quoted(letter.subject, SUBJECT)}"


def inbox_text(am: AgentMail, letters: list[Letter]) -> str:
    """Unread letters in a compact form for the agent's context (at most MAX_LINES of them)."""
    noun = "letter" if len(letters) == 1 else "letters"
    lines = [
        f"agentmail: {len(letters)} unread {noun} for {am.me.mailbox} (agentmail reply ID -b TEXT, show ID, "
        "done ID; guide). " + DATA_NOT_ORDERS
    ]
    lines += [_compact(x) for x in letters[:MAX_LINES]]
    if len(letters) > MAX_LINES:
        lines.append(f"… and {len(letters) - MAX_LINES} more: agentmail inbox")
    return "\n".join(lines)


def needs_answer(am: AgentMail, letters: list[Letter]) -> list[Letter]:
    """Unread letters a reply is expected to and the guards would let through."""
    return [x for x in letters if am.why_refused(x) is None]  # the one guard every reply passes


class Nagged:
    """Which letters already held a stop: each letter holds one stop, once."""

    def __init__(self, am: AgentMail) -> None:
        self.path = am.spool.root / "hooks" / "nagged.json"

    def load(self) -> set[str]:
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return set()
        return {str(x) for x in data.get("nagged", [])} if isinstance(data, dict) else set()

    def save(self, ids: set[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(self.path, json.dumps({"nagged": sorted(ids)}).encode())


def _unread(am: AgentMail) -> list[Letter]:
    try:
        am.sync()
    except (TransportError, OSError):
        pass  # the server is away: the spool as last synced is still worth showing
    return am.inbox(sync=False)


def session_start(am: AgentMail) -> str | None:
    letters = _unread(am)
    return inbox_text(am, letters) if letters else None


def stop(am: AgentMail) -> str | None:
    """The one-line reason to hold the stop, or None to let the agent stop."""
    letters = _unread(am)
    nagged = Nagged(am)
    seen = nagged.load()
    unread_ids = {x.id for x in letters}
    fresh = [x for x in needs_answer(am, letters) if x.id not in seen]
    if not fresh:
        if seen - unread_ids:
            nagged.save(seen & unread_ids)  # forget letters that are no longer unread
        return None
    nagged.save((seen & unread_ids) | {x.id for x in fresh})
    listed = "; ".join(_compact(x) for x in fresh[:5]) + (f"; and {len(fresh) - 5} more" if len(fresh) > 5 else "")
    noun = "letter needs" if len(fresh) == 1 else "letters need"
    return (
        f"agentmail: {len(fresh)} unread {noun} an answer before you stop: {listed}. Read with "
        "`agentmail show ID`, answer with `agentmail reply ID -b TEXT`, or `agentmail done ID` if none is due. "
        + DATA_NOT_ORDERS
    )


def run(host: str, event: str, payload: str, make_client: Callable[[Path], AgentMail]) -> Outcome:
    """Speak one host's hook protocol for one event. ``payload`` is what the host sent on stdin."""
    spec = HOSTS.get(host)
    if spec is None or event not in EVENTS:
        return Outcome(
            stderr=inline(f"agentmail: unknown hook {host} {event}")
            + f" (hosts: {', '.join(HOSTS)}; events: {', '.join(EVENTS)}); "
            + NEVER_BLOCK,
            exit_code=1,
        )
    data: dict[str, Any] = {}
    if spec.settings is not None and payload.strip():
        try:
            loaded = json.loads(payload)
            data = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            data = {}
    if event == "stop" and data.get("stop_hook_active"):
        return Outcome()  # the agent is already continuing because of a stop hook: never twice
    cwd = Path(str(data.get("cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()))
    try:
        with make_client(cwd) as am:
            text = session_start(am) if event == "session-start" else stop(am)
    except NotFound:
        return Outcome()  # this checkout is no platform on this bus: nothing to say
    except AgentmailError as exc:
        return Outcome(stderr=inline(f"agentmail: hook {host} {event}: {exc}"), exit_code=1)
    if text is None:
        return Outcome()
    if spec.settings is None:  # generic: plain text; a held stop exits 1
        return Outcome(stdout=text, exit_code=1 if event == "stop" else 0)
    out: dict[str, object]
    if event == "session-start":
        out = {"hookSpecificOutput": {"hookEventName": spec.events[event], "additionalContext": text}}
    else:
        out = {"decision": spec.block, "reason": text}
    return Outcome(stdout=json.dumps(out, ensure_ascii=False))


# --- install -------------------------------------------------------------------------------


def _ours(entries: list[Any], host: str, event: str) -> dict[str, Any] | None:
    """The hook of agentmail's for ``host`` and ``event`` among ``entries``, if there is one."""
    needle = f"hook {host} {event}"
    for entry in entries:
        for hook in (entry.get("hooks") or []) if isinstance(entry, dict) else []:
            command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
            if "agentmail" in command and command.rstrip().endswith(needle):
                return hook  # type: ignore[no-any-return]
    return None


def install(host: str, root: Path, prefix: str = "agentmail") -> tuple[Path, list[str]]:
    """Merge this host's hooks into the checkout's settings; returns (file, commands added or
    changed). ``prefix``: the command that runs agentmail (its absolute path, and --as/--agent).

    Other settings and other hooks are kept as they are; a hook of agentmail's already there is
    left, or given the new command when it runs another (a bare ``agentmail`` a host's PATH may
    lack); a settings file that is not a JSON object is refused, never overwritten."""
    spec = HOSTS.get(host)
    if spec is None:
        raise BadInput(f"unknown host {host!r}; one of: {', '.join(HOSTS)}")
    if spec.settings is None:
        raise BadInput(
            f"a generic host has no settings file to edit: have it run `{prefix} hook generic session-start` "
            f"when a session starts and `{prefix} hook generic stop` before it stops"
        )
    path = root / spec.settings
    data = load_settings(path)
    hooks = data.setdefault("hooks", {}) if isinstance(data, dict) else None
    if not isinstance(hooks, dict):
        raise ConfigError(f'{path}: expected a JSON object with a "hooks" object; agentmail will not overwrite it')
    added = []
    for event, name in spec.events.items():
        entries = hooks.setdefault(name, [])
        if not isinstance(entries, list):
            raise ConfigError(f"{path}: hooks.{name} is not a list; agentmail will not overwrite it")
        command = f"{prefix} hook {host} {event}"
        there = _ours(entries, host, event)
        if there is not None:
            if there.get("command") != command:
                there["command"] = command
                added.append(command)
            continue
        hook: dict[str, Any] = {"type": "command", "command": command}
        if host == "gemini":
            entries.append({"hooks": [{"name": f"agentmail-{event}", **hook}]})  # gemini: matcher omitted = all
        elif not spec.matcher:
            entries.append({"hooks": [hook]})  # codex: no matcher is every session (Stop takes none)
        else:
            entries.append({"matcher": "", "hooks": [hook]})
        added.append(command)
    if added:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644  # a settings file is committed
        write_atomic(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(), mode=mode)
    return path, added
