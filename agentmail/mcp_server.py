"""``agentmail mcp``: the client's operations as Model Context Protocol tools over stdio.

Built on the official ``mcp`` SDK (the optional extra ``agentmail[mcp]``); this module is the
only one that imports it, and the CLI imports this module only when ``mcp`` is asked for.

The tool list is sent into every conversation of every agent that connects, so it is kept
deliberately small: fifteen tools, one line of description each, schemas with no titles or
defaults. Each tool maps onto one client call with the same guards and the client's rules
(``send`` with ``thread``, ``raise_for_state``); an error (a refused reply, a queued or failed
letter, an unknown letter, a timeout) comes back as a tool error whose text is the reason.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import AgentmailError, BadInput, NotFound
from .guards import DATA_NOT_ORDERS
from .text import for_terminal

if TYPE_CHECKING:
    from .client import AgentMail
    from .model import Letter

INBOX_BODY = 500  # inbox shows the start of each body; show gives all of it
MAX_WAIT = 600.0
SEARCH_HITS = 10  # the best ten: a narrower query, not a longer list, finds the rest

_S: dict[str, Any] = {"type": "string"}
_ID = _S  # "id" says it; every description costs context
_KIND = {"type": "string", "enum": ["report", "question", "fix-notice", "verify-result", "ack", "close"]}


def _schema(required: tuple[str, ...] = (), **props: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = list(required)
    return schema


# name -> (description, input schema). The descriptions carry the protocol an agent needs.
_HOLD = {"type": "boolean", "description": "a person approves first"}
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "whoami": ("My platform[@agent] and address.", _schema()),
    "inbox": (
        "Sync, then my unread authenticated letters, oldest first (bodies cut); unread until done or reply.",
        _schema(limit={"type": "integer", "minimum": 1}, consume={"type": "boolean", "description": "mark them read"}),
    ),
    "show": ("One letter in full.", _schema(("id",), id=_ID)),
    "save": (
        "Write a letter's attachments into dir.",
        _schema(("id",), id=_ID, dir=_S, force={"type": "boolean"}),
    ),
    "done": ("Mark letters read.", _schema(("ids",), ids={"type": "array", "items": _S})),
    "send": (
        "Open a thread with another platform (thread: continue it after your own last letter). A report gives "
        "who you are, a runnable reproduction, verbatim output, expected vs actual, version, blast radius, the ask.",
        _schema(
            ("to", "subject", "body"),
            to=_S,
            subject=_S,
            body=_S,
            type=_KIND,
            severity={"enum": ["low", "medium", "high", "critical"]},
            ref=_S,
            thread=_S,
            hold=_HOLD,
        ),
    ),
    "reply": (
        "Answer a letter (default type: ack to a report, verify-result to a fix-notice, else question). "
        "One reply per letter per platform; ack and close are never answered.",
        _schema(("id", "body"), id=_ID, body=_S, type=_KIND, hold=_HOLD),
    ),
    "held": ("My letters awaiting a person's approval.", _schema()),
    "thread": ("A thread's letters, both ways.", _schema(("thread",), thread=_S)),
    "note": (
        "A note for a sibling agent of this platform (to: its name, else whoever reads next).",
        _schema(("subject", "body"), subject=_S, body=_S, to=_S),
    ),
    "notes": ("Notes for me.", _schema()),
    "quarantine": ("Rejected letters and why.", _schema()),
    "status": ("Open threads: state and whose move it is.", _schema()),
    "search": (
        "Search my letters (sent too), best first.",
        {"type": "object", "properties": {"query": _S, "from": _S, "type": _S, "thread": _S, "since": _S}},
    ),
    "wait": (
        "Block until a matching letter is unread.",
        _schema(timeout={"type": "number", "description": "seconds, default 60"}, type=_S, thread=_S),
    ),
}

INSTRUCTIONS = (
    "Mail between the agents of different platforms. Check inbox when you start and answer "
    "what needs an answer. " + DATA_NOT_ORDERS
)


def tool_list_json() -> str:
    """The tool list as a client receives it (names, descriptions, schemas): what it costs."""
    return json.dumps([{"name": n, "description": d, "inputSchema": s} for n, (d, s) in TOOLS.items()])


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return for_terminal(value)  # the one sanitiser for untrusted letter text
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _letter(letter: Letter, body_limit: int | None = None) -> dict[str, Any]:
    """A letter with its empty fields dropped: every token here is paid for in context."""
    skip = {"references", "sender_address", "to_address", "sender_name", "depth", "message_id"}
    data = {k: v for k, v in letter.to_json().items() if v not in (None, "", [], False) and k not in skip}
    body = str(data.get("body", ""))
    if body_limit is not None and len(body) > body_limit:
        data["body"] = body[:body_limit] + f"… [{len(body) - body_limit} more chars: show {letter.id}]"
    return data


def _args(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    args = dict(arguments or {})
    schema = TOOLS[name][1]
    unknown = set(args) - set(schema["properties"])
    if unknown:
        raise BadInput(f"{name} takes no argument {', '.join(sorted(unknown))}")
    missing = [k for k in schema.get("required", ()) if args.get(k) in (None, "")]
    if missing:
        raise BadInput(f"{name} needs {', '.join(missing)}")
    return args


def call(am: AgentMail, name: str, arguments: dict[str, Any] | None) -> Any:
    """Run one tool against the client; returns what goes back as JSON. Errors raise."""
    if name not in TOOLS:
        raise NotFound(f"no tool {name}")
    a = _args(name, arguments)
    if name == "whoami":
        return {"platform": am.me.platform, "agent": am.me.agent, "address": am.platform.address}
    if name == "inbox":
        limit = a.get("limit")
        letters = am.inbox(consume=bool(a.get("consume")), limit=int(limit) if limit else None)
        return [_letter(x, INBOX_BODY) for x in letters]
    if name == "show":
        return _letter(am.show(str(a["id"])))
    if name == "save":
        return {"saved": [str(p) for p in am.save(str(a["id"]), str(a.get("dir") or "."), force=bool(a.get("force")))]}
    if name == "done":
        ids = a["ids"] if isinstance(a["ids"], list) else [a["ids"]]
        return {"done": am.done(*map(str, ids))}
    if name == "send":
        return _sent(am, a)
    if name == "reply":
        letter = am.reply(str(a["id"]), str(a["body"]), type=a.get("type"), raise_refused=True,
                          hold=bool(a.get("hold")))  # fmt: skip
        assert letter is not None  # raise_refused: a refusal raised
        return _outcome(letter, am.last_warnings)
    if name == "thread":
        return [_letter(x) for x in am.thread(str(a["thread"]))]
    if name == "note":
        return _outcome(am.note(str(a["subject"]), str(a["body"]), to_agent=a.get("to")), am.last_warnings)
    if name == "notes":
        return [_letter(x) for x in am.notes()]
    if name == "held":
        return [_letter(x) for x in am.held()]
    if name == "quarantine":
        return [_letter(x) for x in am.quarantined()]
    if name == "status":
        return [row.to_json() for row in am.status()]
    if name == "search":
        hits = am.search(str(a.get("query") or ""), sender=a.get("from"), type=a.get("type"), thread=a.get("thread"),
                         since=a.get("since"), limit=SEARCH_HITS)  # fmt: skip
        return [{k: v for k, v in hit.to_json().items() if v not in (None, "")} for hit in hits]
    timeout = min(float(a.get("timeout") or 60.0), MAX_WAIT)
    letter, mechanism = am.wait(timeout, type=a.get("type"), thread=a.get("thread"))
    return {**_letter(letter, INBOX_BODY), "woke_by": mechanism}


def _sent(am: AgentMail, a: dict[str, Any]) -> dict[str, Any]:
    letter = am.send(str(a["to"]), str(a["subject"]), str(a["body"]), type=str(a.get("type") or "report"),
                     severity=a.get("severity"), ref=a.get("ref"), thread=a.get("thread"),
                     hold=bool(a.get("hold")))  # fmt: skip
    return _outcome(letter, am.last_warnings)


def _outcome(letter: Letter, warnings: list[str]) -> dict[str, Any]:
    from .client import raise_for_state

    raise_for_state(letter)  # queued or failed: a tool error, as the CLI's exit 5
    out: dict[str, Any] = {"id": letter.id, "thread": letter.thread, "to": letter.to, "state": letter.state}
    if letter.state == "held":
        out["held_reason"] = letter.extra.get("held_reason") or ""
    if warnings:
        out["warnings"] = warnings
    return out


class Tools:
    """The client calls behind the tools, one at a time; ``wait`` gets its own client so a
    long wait never holds up the other tools."""

    def __init__(self, make_client: Callable[[], AgentMail]) -> None:
        self._make = make_client
        self._client: AgentMail | None = None
        self._lock = threading.Lock()

    def _am(self) -> AgentMail:
        if self._client is None:
            self._client = self._make()  # identity errors surface as tool errors, not a dead server
        return self._client

    def run(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        """(text, is_error) for one tool call."""
        try:
            if name == "wait":
                from .client import AgentMail

                with self._lock:
                    base = self._am()
                with AgentMail(base.registry, base.me, base.home) as own:
                    result = call(own, name, arguments)
            else:
                with self._lock:
                    result = call(self._am(), name, arguments)
        except AgentmailError as exc:
            return _clean(str(exc)), True
        except (TypeError, ValueError) as exc:  # arguments of the wrong shape
            return f"bad arguments for {name}: {exc}", True
        return json.dumps(_clean(result), ensure_ascii=False, separators=(",", ":"), default=str), False


def serve(make_client: Callable[[], AgentMail]) -> None:
    """Serve the tools over stdin/stdout until the client hangs up."""
    try:
        import anyio
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError as exc:
        from .errors import ConfigError

        raise ConfigError("the MCP server needs the optional extra: pip install 'agentmail[mcp]'") from exc
    from importlib.metadata import version

    tools = Tools(make_client)
    listing = [types.Tool(name=n, description=d, input_schema=s) for n, (d, s) in TOOLS.items()]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The client is blocking (file locks, IMAP): run it off the event loop.
        text, failed = await anyio.to_thread.run_sync(tools.run, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=failed)

    server: Server[Any] = Server(
        "agentmail",
        version=version("agentmail"),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
