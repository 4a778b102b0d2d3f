"""``agentmail mcp``: the client's operations as Model Context Protocol tools over stdio.

Built on the official ``mcp`` SDK (the optional extra ``agentmail[mcp]``); this module is the
only one that imports it, and the CLI imports this module only when ``mcp`` is asked for.

The tool list is sent into every conversation of every agent that connects, so it is kept
deliberately small: fifteen tools, one line of description each, schemas with no titles or
defaults. A list comes a page at a time (``_page``: at most ``limit`` items, the ``total``, a
``next_cursor``), each body in it cut at LIST_BODY characters, so a busy mailbox never floods
the agent's context. The schemas are exact (types, ranges, id patterns, no other argument), and every call
is checked against its tool's schema before anything runs. Each tool maps onto one client call
with the same guards and the client's rules (``send`` with ``thread``, ``raise_for_state``); an
error (arguments the schema refuses, a refused reply, a queued or failed letter, an unknown
letter, a timeout) comes back as a tool error whose text is the reason. ``save`` writes only
below the server's working directory (or $AGENTMAIL_MCP_SAVE_DIR), never where agentmail or
Python would trust what it wrote (DESIGN §10).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import site
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ages import duration
from ..client.agent_names import known_agents
from ..client.facade import AgentMail, raise_for_state
from ..errors import AgentmailError, BadInput, ConfigError, NotFound
from ..frame import inline
from ..letter.attach import Attachment, unique_names
from ..model import MAX_REF, MAX_SUBJECT, NAME_RE, OUTCOMES, SEVERITIES
from ..people import digest
from ..protocol import HUMAN, SENDABLE, TYPES, default_replies
from ..spool.search import MAX_QUERY
from ..stages import evidence
from ..text import DATA_NOT_ORDERS, for_terminal
from . import brief as briefs
from .guide import GUIDE

if TYPE_CHECKING:
    from ..client.sender import Sent
    from ..model import Letter

LIST_BODY = 500  # a list shows the start of each body; show gives all of it
LIST_FIELD = 200  # characters of any other text of an item in a list (a subject is at most 200)
LIST_ITEMS = 20  # entries of a list inside an item (a Cc, attachments, a fan-out's counterparts)
MAX_WAIT = 600  # seconds
MAX_INBOX = 1000  # the most items one page may ask for
PAGE = 20  # items a list returns when no limit is given: a busy mailbox never floods the context
GUIDE_URI = "agentmail://guide"  # the protocol, as `agentmail guide` prints it
SAVE_DIR_ENV = "AGENTMAIL_MCP_SAVE_DIR"  # the folder save writes below; else the server's working directory

# Every schema is the whole contract: each argument is checked against it (jsonschema) before a
# tool runs, and an argument it does not allow is a tool error, never coerced.
_S: dict[str, Any] = {"type": "string"}
_TEXT: dict[str, Any] = {"type": "string", "minLength": 1}
# A letter as the CLI names one (DESIGN §8): its id in any case, its Message-ID with or without
# "<>", or a prefix of either: printable ASCII without spaces, as long as a header line allows.
_ID = {"type": "string", "pattern": "^[!-~]{1,998}$"}
_THREAD = {"type": "string", "pattern": "^[Tt][Hh][Rr]-[0-9A-Za-z]{6,26}$"}  # in any case, as the CLI takes it
_SENDABLE_TYPE = {"enum": list(SENDABLE)}
_ANY_TYPE = {"enum": [*TYPES, HUMAN]}
_REPLY_DEFAULTS = ", ".join(f"{reply} a {parent}" for reply, parent in default_replies())


def _schema(required: tuple[str, ...] = (), /, **props: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


# Every list takes a page: at most ``limit`` items from ``cursor`` (a next_cursor it returned).
# A limit over MAX_INBOX is no error: a page is at most MAX_INBOX items whatever it asks (and says
# so with next_cursor), which keeps the schema, sent into every conversation, short.
_PAGE: dict[str, Any] = {"limit": {"type": "integer", "minimum": 1}, "cursor": _S}
# Every operation of the client an agent has, by its CLI command's name -> (description, exact
# input schema). Each is callable by that name (a host that kept an older tool list still works);
# the tool list sends them grouped (TOOLS), which keeps it short.
_HOLD = {"type": "boolean"}  # a person approves first (INSTRUCTIONS)
_FILES = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4096}, "minItems": 1}
_EVIDENCE: dict[str, Any] = {"attach": _FILES, "patch": {"type": "string", "pattern": "^[!-~]{1,200}$"}}
_OUTCOME = {"enum": list(OUTCOMES)}
OPS: dict[str, tuple[str, dict[str, Any]]] = {
    "whoami": ("Me, my siblings, and the platforms I may write to.", _schema()),
    "inbox": (
        "Unread letters, oldest first (until done, reply or consume).",
        _schema(consume={"type": "boolean"}, **_PAGE),
    ),
    "show": ("One letter in full.", _schema(("id",), id=_ID)),
    "attachments": ("A letter's attachments (name, type, size).", _schema(("id",), id=_ID)),
    "save": (
        "Save a letter's attachments in dir, below the working directory.",
        _schema(("id",), id=_ID, dir=_S),
    ),
    "apply": (
        "git am a letter's patches here (check: dry run).",
        _schema(("id",), id=_ID, check={"type": "boolean"}, series={"type": "boolean"}),
    ),
    "done": ("Mark letters read.", _schema(("ids",), ids={"type": "array", "items": _ID, "minItems": 1})),
    "send": (
        "Open a thread (thread: continue one after your own last letter).",
        _schema(
            ("to", "subject", "body"),
            to=_TEXT,
            subject={"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT},
            body=_TEXT,
            type=_SENDABLE_TYPE,
            severity={"enum": list(SEVERITIES)},
            ref={"type": "string", "maxLength": MAX_REF},
            thread=_THREAD,
            hold=_HOLD,
            outcome=_OUTCOME,
            **_EVIDENCE,
        ),
    ),
    "reply": (
        f"Answer a letter once (default type: {_REPLY_DEFAULTS}, else question); "
        "attach: files of the checkout, patch: a git rev range.",
        _schema(("id", "body"), id=_ID, body=_TEXT, type=_SENDABLE_TYPE, hold=_HOLD, outcome=_OUTCOME, **_EVIDENCE),
    ),
    "note": (
        "Note a sibling agent (to: its name, else whoever reads next; new_agent: one not seen yet).",
        _schema(
            ("subject", "body"),
            subject=_TEXT,
            body=_TEXT,
            to={"type": "string", "pattern": NAME_RE.pattern},
            new_agent={"type": "boolean"},
            **_EVIDENCE,
        ),
    ),
    "held": ("Letters awaiting approval.", _schema(**_PAGE)),
    "thread": (
        "A thread's letters, both ways.",
        _schema(
            ("thread",),
            thread=_THREAD,
            brief={"type": "boolean"},
            tokens={"type": "integer", "minimum": 50, "maximum": briefs.MAX_TOKENS},
            **_PAGE,
        ),
    ),
    "notes": ("Notes for me.", _schema(**_PAGE)),
    "quarantine": ("Rejected letters and why.", _schema(**_PAGE)),
    "status": ("Open threads and whose move it is.", _schema(stale=_S, **_PAGE)),
    "digest": ("Open threads by age, held, quarantined.", _schema(since=_S)),
    "search": (
        "Search my letters (sent too), best first.",
        _schema(
            query={"type": "string", "maxLength": MAX_QUERY},
            **{"from": {"type": "string", "maxLength": 320}},
            type=_ANY_TYPE,
            thread=_THREAD,
            since=_S,
            **_PAGE,
        ),
    ),
    "wait": (
        "Block until a matching letter is unread (timeout s, default 60).",
        _schema(
            timeout={"type": "number", "minimum": 0, "maximum": MAX_WAIT},
            type=_ANY_TYPE,
            thread=_THREAD,
        ),
    ),
}
# The tool list: an operation alone, or a group of them chosen by ``action`` (one schema, the
# union of theirs; each call is then checked against its operation's own).
GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "letter": (
        "One letter: show, done (ids), attachments, save them in dir (below the working directory), "
        "apply its patches here (git am; check: dry run).",
        ("show", "done", "attachments", "save", "apply"),
    ),
    "list": (
        "Paged: status (stale: 3d), thread (brief: its gist in tokens), search, notes, held, quarantine; digest.",
        ("status", "thread", "search", "notes", "held", "quarantine", "digest"),
    ),
}
ALONE = ("whoami", "inbox", "send", "reply", "note", "wait")


def _group_schema(ops: tuple[str, ...]) -> dict[str, Any]:
    props: dict[str, Any] = {"action": {"enum": list(ops)}}
    for op in ops:
        for key, prop in OPS[op][1]["properties"].items():
            assert props.setdefault(key, prop) == prop, (op, key)  # one meaning per argument name
    return _schema(("action",), **props)


TOOLS: dict[str, tuple[str, dict[str, Any]]] = {name: OPS[name] for name in ALONE} | {
    name: (description, _group_schema(ops)) for name, (description, ops) in GROUPS.items()
}
# The operation each tool (or each action of a group) runs, and the tool an operation is listed under.
TOOL_OF = {op: op for op in ALONE} | {op: group for group, (_d, ops) in GROUPS.items() for op in ops}


INSTRUCTIONS = (
    "Mail between the agents of different platforms. Check inbox when you start and answer "
    "what needs an answer. A report gives who you are, a runnable reproduction, verbatim output, expected vs "
    "actual, version, blast radius, the ask; hold: a person approves it first. A list returns {items, total, "
    f"next_cursor}}: at most limit items ({PAGE} if none), each body cut at {LIST_BODY} characters (show ID has "
    "all); pass next_cursor as cursor for more. The protocol (lifecycle, outcomes, siblings): the guide prompt, "
    f"or resource {GUIDE_URI}. " + DATA_NOT_ORDERS
)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return for_terminal(value)  # the one sanitiser for untrusted letter text
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _letter(letter: Letter, body_limit: int | None = None) -> dict[str, Any]:
    """A letter with its empty fields dropped: every token here is paid for in context. With
    ``body_limit`` (a list's item) the body is cut there and every other field is ``_bounded``."""
    skip = {"references", "sender_address", "to_address", "sender_name", "depth", "message_id"}
    data = {k: v for k, v in letter.to_json().items() if v not in (None, "", [], False) and k not in skip}
    if body_limit is None:
        return data
    body = str(data.get("body", ""))
    if len(body) > body_limit:
        data["body"] = body[:body_limit] + f"… [{len(body) - body_limit} more chars: show {letter.id}]"
    return _bounded(data)


def _bounded(item: dict[str, Any]) -> dict[str, Any]:
    """An item of a list with every field but its body bounded, whatever a letter's headers
    carried (a Cc of thousands, a long detail): a string cut at LIST_FIELD characters, a list at
    LIST_ITEMS entries, each cut saying how much more there is and where (``show ID``)."""
    where = f"show {item['id']}" if "id" in item else f"thread {item.get('thread', '')}"

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > LIST_FIELD:
            return value[:LIST_FIELD] + f"… [{len(value) - LIST_FIELD} more chars: {where}]"
        if isinstance(value, list):
            more = [f"… [{len(value) - LIST_ITEMS} more: {where}]"] if len(value) > LIST_ITEMS else []
            return [cut(v) for v in value[:LIST_ITEMS]] + more
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        return value

    return {k: v if k == "body" else cut(v) for k, v in item.items()}


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """``pattern`` as JSON Schema means it (ECMA-262): "$" ends the text. Python's "$" also
    matches before a final newline, so "id\\n" would pass jsonschema's own check."""
    from jsonschema.exceptions import ValidationError

    if isinstance(instance, str) and not re.search(re.sub(r"(?<!\\)\$$", r"\\Z", pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.cache
def _validator(name: str) -> Any:
    """The checker of one tool's arguments: its declared schema, by jsonschema (Draft 2020-12),
    where a number is a finite one (NaN and infinities pass every minimum and maximum)."""
    from jsonschema import Draft202012Validator, validators

    numbers = Draft202012Validator.TYPE_CHECKER.redefine(
        "number", lambda _c, x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    )
    strict = validators.extend(Draft202012Validator, {"pattern": _pattern}, type_checker=numbers)
    schema = (TOOLS[name] if name in GROUPS else OPS[name])[1]
    strict.check_schema(schema)
    return strict(schema)


def _check(name: str, label: str, args: Any) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(args))
    if error is None:
        return
    where = "/".join(map(str, error.absolute_path))
    text = " ".join(error.message.split())
    text = text if len(text) <= 200 else text[:199] + "…"  # the message quotes the value, which may be long
    raise BadInput(f"bad arguments for {label}: {where + ': ' if where else ''}{text}")


def check_arguments(name: str, arguments: Any) -> dict[str, Any]:
    """The arguments of one call, as its schema allows them, else BadInput with one line: a
    wrong type, a value out of range, an unknown or a missing argument is never coerced. A
    group's call is checked against the group's schema, then against its action's own."""
    if name not in OPS and name not in GROUPS:
        raise NotFound(f"no tool {name}")
    args = {} if arguments is None else arguments
    _check(name, name, args)
    if name in GROUPS:
        inner = {k: v for k, v in args.items() if k != "action"}
        _check(args["action"], f"{name}: action {args['action']}", inner)
    return dict(args)


def call(am: AgentMail, name: str, arguments: dict[str, Any] | None, *, save_root: Path | None = None) -> Any:
    """Run one tool (or operation, by its CLI name) against the client; returns what goes back
    as JSON. Errors raise. ``save_root``: the folder ``save``, ``apply`` and ``attach`` work
    below (default: ``save_folder()``)."""
    op, args = resolve(name, arguments)
    return _run(am, op, args, save_root)


def resolve(name: str, arguments: Any) -> tuple[str, dict[str, Any]]:
    """The operation a call runs and its arguments, checked (``check_arguments``): a group's
    ``action`` names the operation; any other tool is its own."""
    args = check_arguments(name, arguments)
    return (args.pop("action"), args) if name in GROUPS else (name, args)


def _run(am: AgentMail, name: str, a: dict[str, Any], save_root: Path | None) -> Any:
    root = save_folder() if save_root is None else save_root
    if name == "whoami":
        return _whoami(am)
    if name == "inbox":
        return _inbox(am, a)
    if name == "show":
        return _letter(am.show(a["id"]))
    if name == "attachments":
        return {"attachments": [_attachment(x) for x in am.attachments(a["id"])]}
    if name == "save":
        return {"saved": [str(p) for p in _save(am, a["id"], a.get("dir", "."), root)]}
    if name == "apply":
        done = am.apply(a["id"], root, check=a.get("check", False), series=a.get("series", False))
        return {"applied": done.landed, "detail": done.detail, "commits": [c.to_json() for c in done.commits]}
    if name == "done":
        return {"done": am.done(*a["ids"])}
    if name == "send":
        return _sent(am, a, root)
    if name == "reply":
        sent = am.reply(a["id"], a["body"], type=a.get("type"), raise_refused=True, hold=a.get("hold", False),
                        outcome=a.get("outcome"), attachments=_evidence(am, a, root))  # fmt: skip
        assert sent is not None  # raise_refused: a refusal raised
        return _outcome(am, sent)
    if name == "note":
        return _outcome(am, am.note(a["subject"], a["body"], to_agent=a.get("to"),
                                    new_agent=a.get("new_agent", False), attachments=_evidence(am, a, root)))  # fmt: skip
    if name == "digest":
        made = am.digest(a.get("since"))
        return {**made.to_json(), "text": digest.render(made)}
    if name == "thread" and a.get("brief"):  # the gist, within a budget: no page
        return {"brief": briefs.of_thread(am.thread(a["thread"]), int(a.get("tokens", briefs.BUDGET)))}
    if name in LISTS:
        return _page(name, a, LISTS[name](am, a))
    if name != "wait":
        raise NotFound(f"no tool {name}")
    letter, mechanism = am.wait(float(a.get("timeout", 60.0)), type=a.get("type"), thread=a.get("thread"))
    return {**_letter(letter, LIST_BODY), "woke_by": mechanism}


def _whoami(am: AgentMail) -> dict[str, Any]:
    """Who I am, the sibling agents a note may name, and whom a letter may go to."""
    others = sorted(name for name in am.registry.platforms if name != am.me.platform)
    agents = known_agents(am.home, am.me.platform, am.spool, am.me.agent)
    return {"platform": am.me.platform, "agent": am.me.agent, "address": am.platform.address,
            "agents": agents, "platforms": others}  # fmt: skip


def _attachment(item: Attachment) -> dict[str, Any]:
    return {"name": item.name, "type": item.type, "size": item.size, "description": item.description}


# --- lists: one page at a time ------------------------------------------------------------------

# A list whose items leave it or arrive anywhere (an inbox answered between two pages, a thread
# closed, a thread id that sorts first) pages by key: the cursor is the key of the last item
# shown and the next page starts after it, so nothing is skipped or shown twice. The others only
# grow at their end (a thread) or are ranked (search) and page by position.
KEYS: dict[str, str] = {"inbox": "id", "notes": "id", "held": "id", "quarantine": "id", "status": "thread"}
_KEY_RE = re.compile(r"[0-9a-z]{26}|thr-[0-9a-z]{6,26}")
_BAD_CURSOR = "cursor: not a next_cursor this server returned"


def _offset(name: str, a: dict[str, Any]) -> int:
    """Where a page of a list paged by position starts: the ``cursor`` it returned (an offset)."""
    cursor = a.get("cursor", "0")
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 9):
        raise BadInput(f"bad arguments for {name}: {_BAD_CURSOR}")
    return int(cursor)


def _after(name: str, a: dict[str, Any], items: list[Any]) -> int:
    """Where a page of a list paged by key starts: after the last item whose key is not above
    the ``cursor`` (the list is in key order; the item itself may have left it since)."""
    cursor = a.get("cursor")
    if cursor is None:
        return 0
    if not _KEY_RE.fullmatch(cursor):
        raise BadInput(f"bad arguments for {name}: {_BAD_CURSOR}")
    key = KEYS[name]
    return next((at for at, item in enumerate(items) if str(item[key]) > cursor), len(items))


def _limit(a: dict[str, Any]) -> int:
    """How many items a page holds: ``limit`` (JSON may write 3 as 3.0), at most MAX_INBOX."""
    return min(int(a.get("limit", PAGE)), MAX_INBOX)


def _page(name: str, a: dict[str, Any], items: list[Any]) -> dict[str, Any]:
    """At most ``limit`` of ``items`` from the cursor, the whole list's ``total`` and the cursor of
    the next page (None: this was the last)."""
    if name in KEYS:  # in key order (the lists come so): a cursor's place never depends on a list's order
        items = sorted(items, key=lambda item: str(item[KEYS[name]]))
    start = _after(name, a, items) if name in KEYS else _offset(name, a)
    page = items[start : start + _limit(a)]
    after = start + len(page)
    if after >= len(items):
        return {"items": page, "total": len(items), "next_cursor": None}
    return {
        "items": page,
        "total": len(items),
        "next_cursor": str(page[-1][KEYS[name]]) if name in KEYS else str(after),
    }


def _inbox(am: AgentMail, a: dict[str, Any]) -> dict[str, Any]:
    """inbox's page. With ``consume`` only the page is marked read and only what this call moved
    is returned (at most once, as the CLI's --consume); the next page starts after its last."""
    letters = am.inbox()
    if not a.get("consume", False):
        return _page("inbox", a, [_letter(x, LIST_BODY) for x in letters])
    start = _after("inbox", a, [{"id": x.id} for x in letters])
    wanted = letters[start : start + _limit(a)]
    moved = set(am.done(*[x.id for x in wanted])) if wanted else set()
    page = [_letter(x.replace(state="read"), LIST_BODY) for x in wanted if x.id in moved]
    more = start + len(wanted) < len(letters)
    return {"items": page, "total": len(letters), "next_cursor": wanted[-1].id if more else None}


def _search(am: AgentMail, a: dict[str, Any]) -> list[Any]:
    hits = am.search(a.get("query", ""), sender=a.get("from"), type=a.get("type"), thread=a.get("thread"),
                     since=a.get("since"), limit=MAX_INBOX)  # fmt: skip
    return [_bounded({k: v for k, v in hit.to_json().items() if v not in (None, "")}) for hit in hits]


def _letters(found: list[Letter]) -> list[dict[str, Any]]:
    return [_letter(x, LIST_BODY) for x in found]


# The tools that return a list, each the whole list (one page is cut from it by ``_page``).
LISTS: dict[str, Callable[[AgentMail, dict[str, Any]], list[Any]]] = {
    "thread": lambda am, a: _letters(am.thread(a["thread"])),
    "notes": lambda am, a: _letters(am.notes()),
    "held": lambda am, a: _letters(am.held()),
    "quarantine": lambda am, a: _letters(am.quarantined()),
    "status": lambda am, a: [_bounded(row.to_json()) for row in am.status(stale=_stale(a))],
    "search": _search,
}


# --- save: where a tool may write --------------------------------------------------------------


def save_folder() -> Path:
    """The folder the ``save`` tool writes below: $AGENTMAIL_MCP_SAVE_DIR, else the working directory."""
    return Path(os.environ.get(SAVE_DIR_ENV) or ".").absolute()


def _protected(am: AgentMail) -> list[tuple[Path, str]]:
    """The folders nothing is saved below: what agentmail trusts, and where Python finds code
    (a module or a ``.pth`` file there runs with the next interpreter)."""
    places = [(am.home, "the agentmail home"), (am.registry.root, "the registry")]
    code = [*sys.path, *site.getsitepackages(), site.getusersitepackages()]
    code += [sysconfig.get_path(key) for key in ("purelib", "platlib", "stdlib", "platstdlib")]
    places += [(Path(entry), "a Python path") for entry in code]
    return [(Path(os.path.realpath(path)), what) for path, what in places]


def _below(root: Path, directory: str, what: str = "save") -> Path:
    """``root``/``directory``, opened one folder at a time without following a symlink: a
    relative path (or an absolute one inside ``root``) of real folders, none hidden, no "..".
    Returns the folder's real path."""
    root, given = Path(os.path.abspath(root)), Path(directory)
    if given.is_absolute():
        inside = next((given.relative_to(r) for r in (root, root.resolve()) if given.is_relative_to(r)), None)
        if inside is None:
            raise BadInput(
                f"{what}: {directory} is not below {root}, the only folder {what} {'writes to' if what == 'save' else 'reads from'} ({SAVE_DIR_ENV})"
            )
        given = inside
    parts = [part for part in given.parts if part != "."]
    for part in parts:
        if part == ".." or part.startswith("."):
            raise BadInput(f"{what}: {directory}: {part!r} is not allowed (no '..', no hidden folder)")
    real = Path(os.path.realpath(root))
    try:
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise BadInput(f"{what}: {root} ({SAVE_DIR_ENV} or the working directory): {exc.strerror}") from None
    try:
        for part in parts:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                raise BadInput(f"{what}: {directory}: there is no folder {part}") from None
            except (OSError, ValueError):  # ELOOP or ENOTDIR: a symlink, a file; ValueError: a NUL
                raise BadInput(f"{what}: {directory}: {part} is not a folder ({what} follows no symlink)") from None
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return real.joinpath(*parts)


def _save(am: AgentMail, letter_id: str, directory: str, save_root: Path) -> list[Path]:
    """The ``save`` tool: a letter's attachments into a folder below the save folder, never
    below the agentmail home, the registry, a Python path or a virtual environment, never over a file, through no
    symlink. The MCP server runs one tool at a time, so nothing of agentmail's moves the
    folder between this check and the write (which, besides, follows no symlink)."""
    target = _below(save_root, directory)
    for place, what in _protected(am):
        if target.is_relative_to(place):
            raise BadInput(f"save: {target} is inside {what} ({place}); choose a folder of the checkout")
    venv = next((f for f in (target, *target.parents) if (f / "pyvenv.cfg").is_file()), None)
    if venv is not None:  # another interpreter's code path: a .pth or module there runs with it
        raise BadInput(
            f"save: {target} is inside a Python virtual environment ({venv}); choose a folder of the checkout"
        )
    # what the registry or the home reads through a link, or under another name (a bind mount)
    trusted = evidence.places_of([(am.home, "the agentmail home"), (am.registry.root, "the registry")])(str(target))
    if trusted is not None:
        raise BadInput(
            f"save: {target} is inside {trusted} (reached through a link or mount); choose a folder of the checkout"
        )
    attachments = am.attachments(letter_id)
    for name in unique_names(attachments):
        if os.path.lexists(target / name):
            raise BadInput(f"save: {target / name} exists; save never replaces a file (choose another dir)")
    return am.save(letter_id, target)


def _stale(a: dict[str, Any]) -> float | None:
    return None if "stale" not in a else duration(a["stale"], "stale")


def _evidence(am: AgentMail, a: dict[str, Any], root: Path) -> tuple[Attachment, ...]:
    """The files (``attach``, paths below the working directory) and commits (``patch``, a rev
    range of its checkout) a letter carries, read as the CLI reads them (``evidence.from_file``:
    nothing of the agentmail home, no symlink, only a regular file), and only from the checkout."""
    limit = am.registry.bus.attach_max_bytes
    items = []
    for name in a.get("attach", ()):
        path = Path(name)
        folder = _below(root, str(path.parent), "attach")
        if path.name in ("", ".", "..") or path.name.startswith("."):
            raise BadInput(f"attach: {name}: not a file of the checkout (no hidden file, no '..')")
        items.append(evidence.from_file(folder / path.name, limit, home=am.home))
    if "patch" in a:
        items.extend(evidence.from_patches(a["patch"], root))
    return tuple(items)


def _sent(am: AgentMail, a: dict[str, Any], root: Path) -> dict[str, Any]:
    letter = am.send(a["to"], a["subject"], a["body"], type=a.get("type", "report"), severity=a.get("severity"),
                     ref=a.get("ref"), thread=a.get("thread"), hold=a.get("hold", False), outcome=a.get("outcome"),
                     attachments=_evidence(am, a, root))  # fmt: skip
    return _outcome(am, letter)


def _outcome(am: AgentMail, letter: Sent) -> dict[str, Any]:
    """What became of a letter, and who sent it (``from``: platform[@agent]), so a slip of
    identity is seen in the confirmation."""
    raise_for_state(letter)  # queued or failed: a tool error, as the CLI's exit 5
    out: dict[str, Any] = {"id": letter.id, "thread": letter.thread, "from": am.me.mailbox, "to": letter.to,
                           "state": letter.state}  # fmt: skip
    if letter.state == "held":
        out["held_reason"] = letter.extra.get("held_reason") or ""
    if letter.notices:
        out["warnings"] = letter.notices
    return out


class Tools:
    """The client calls behind the tools, one at a time; ``wait`` gets its own client so a
    long wait never holds up the other tools. ``save_root``: the folder ``save`` writes below,
    fixed when the server starts (default: ``save_folder()``)."""

    def __init__(self, make_client: Callable[[], AgentMail], save_root: Path | None = None) -> None:
        self._make = make_client
        self._client: AgentMail | None = None
        self._lock = threading.Lock()
        self.save_root = save_folder() if save_root is None else save_root

    def _am(self) -> AgentMail:
        if self._client is None:
            self._client = self._make()  # identity errors surface as tool errors, not a dead server
        return self._client

    def run(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        """(text, is_error) for one tool call. The arguments are checked before anything is
        opened: a call its schema refuses touches no file."""
        try:
            op, args = resolve(name, arguments)
            if op == "wait":
                with self._lock:
                    base = self._am()
                with AgentMail(base.registry, base.me, base.home) as own:
                    result = _run(own, op, args, self.save_root)
            else:
                with self._lock:
                    result = _run(self._am(), op, args, self.save_root)
        except AgentmailError as exc:  # one line: no text of a letter's in it starts another
            return inline(str(exc)), True
        except (TypeError, ValueError) as exc:  # arguments of the wrong shape
            return inline(f"bad arguments for {name}: {exc}"), True
        return json.dumps(_clean(result), ensure_ascii=False, separators=(",", ":"), default=str), False


def server(make_client: Callable[[], AgentMail], save_root: Path | None = None) -> Any:
    """The MCP server (the SDK's low-level ``Server``) of these tools, not yet running."""
    try:
        import anyio
        import mcp_types as types
        from mcp.server.lowlevel import Server
    except ImportError as exc:
        raise ConfigError("the MCP server needs the optional extra: pip install 'agentmail[mcp]'") from exc

    tools = Tools(make_client, save_root)
    listing = [types.Tool(name=n, description=d, input_schema=s) for n, (d, s) in TOOLS.items()]

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The client is blocking (file locks, IMAP): run it off the event loop.
        text, failed = await anyio.to_thread.run_sync(tools.run, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=failed)

    guide = types.Resource(
        name="guide", uri=GUIDE_URI, description="How agentmail's letters go", mime_type="text/plain"
    )
    prompt = types.Prompt(name="guide", description="How agentmail's letters go: lifecycle, openers, siblings")

    async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[guide])

    async def read_resource(_ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != GUIDE_URI:
            raise ValueError(f"no resource {inline(str(params.uri))}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=GUIDE_URI, text=GUIDE)])

    async def list_prompts(_ctx: Any, _params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(_ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != "guide":
            raise ValueError(f"no prompt {inline(params.name)}")
        text = types.TextContent(type="text", text=GUIDE)
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])

    made: Server[Any] = Server(
        "agentmail",
        version=version("agentmail"),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    return made


def serve(make_client: Callable[[], AgentMail]) -> None:
    """Serve the tools over stdin/stdout until the client hangs up."""
    made = server(make_client)
    import anyio
    from mcp.server.stdio import stdio_server

    # The process is the server's alone, and the SDK's stack (mcp, anyio, asyncio, httpx2, ...)
    # logs under many names: one NullHandler on the root keeps them all off the host's stderr.
    logging.getLogger().addHandler(logging.NullHandler())

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await made.run(read_stream, write_stream, made.create_initialization_options())

    anyio.run(main)
