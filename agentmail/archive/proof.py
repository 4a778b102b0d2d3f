"""A proof bundle (DESIGN §10): a thread's raw signed letters and, beside each, the registry entry
of its sender in force when it was signed (``history``), so anyone can check offline, after keys
rotated, that a platform wrote what the thread says it wrote.

The bundle is one JSON document (``FORMAT``): ``entries`` maps an entry id to a platform file's
TOML text and where it came from (a git commit and its time, or the current file); ``letters``
lists each letter's raw bytes (base64) and the id of its entry. ``verify`` trusts nothing else
in it: the Message-ID, date and sender it prints are read from the signed letter itself, the key
from the entry through the registry's own parser, and the signature is checked by
``trust.signing.verify`` (dkimpy) against that pinned key, or against the entry's
``[dkim.previous]`` key when the letter's date falls inside that key's window.

A bundle alone vouches only for itself: anyone can write an entry pinning a key they made. So
the key that verified must also be the one the verifier's own registry pinned for that platform
at the letter's date (its git history read as ``export`` reads it: ``Anchor``), the previous key
only inside the window that registry gave it, and the letter's From that platform's address there; without a registry to check against, each letter says its key is the bundle's own.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import tomllib
from collections.abc import Iterable
from email.utils import parsedate_to_datetime
from typing import Any

from .._value import Frozen
from ..config.registry import Platform, Registry, parse_platform
from ..errors import AgentmailError, BadInput
from ..letter import wire
from ..model import Letter, thread_id
from ..text import one_line
from ..trust import signing
from ..trust.authenticity import pinned_key
from .history import Entry, History

FORMAT = "agentmail-proof/1"
MAX_BUNDLE = 256 * 1024 * 1024  # a bundle bigger than this is refused unread
MAX_LETTERS = 10_000
MAX_LETTER = 64 * 1024 * 1024  # one letter's raw bytes; a bus's max_size is far below
# Letters that never left this machine prove nothing to anyone else.
UNSENT = ("held", "outbox", "failed")


class Checked(Frozen):
    """One letter of a bundle, as ``verify`` found it."""

    ok: bool
    message_id: str
    date: str
    sender: str  # the From address, as signed
    detail: str  # dkim=pass d=… s=…, or why not
    entry: str  # where the key came from: "git <commit> <time>" or "current registry"
    checked: str = ""  # the verifier's registry the key was found in; "" when none was asked


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _when(date: str) -> float | None:
    """A Date header in seconds since the epoch, None when it is no date."""
    try:
        parsed = parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        return None
    try:
        return parsed.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _entry_id(entry: Entry) -> str:
    return f"{entry.platform}@{entry.commit[:12] if entry.commit else 'current'}"


def build(letters: Iterable[tuple[Letter, bytes]], history: History, thread: str, exported_by: str) -> bytes:
    """The bundle of ``letters`` (each with its raw bytes, in thread order): JSON, UTF-8."""
    entries: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, str]] = []
    for letter, raw in letters:
        if letter.state in UNSENT:
            continue
        when = _when(letter.date)
        entry_id = ""
        if letter.sender and when is not None:
            entry = history.in_force(letter.sender, when)
            entry_id = _entry_id(entry)
            entries[entry_id] = {
                "platform": entry.platform,
                "toml": entry.toml,
                "source": entry.source,
                "commit": entry.commit,
                "committed": _iso(entry.committed) if entry.commit else "",
            }
        rows.append({"entry": entry_id, "raw": base64.b64encode(raw).decode("ascii")})
    if not rows:
        raise BadInput(f"thread {thread} holds no letter that left a mailbox: nothing to prove")
    bundle = {
        "format": FORMAT,
        "thread": thread,
        "exported_at": _iso(time.time()),
        "exported_by": exported_by,
        "entries": entries,
        "letters": rows,
    }
    return json.dumps(bundle, indent=1, sort_keys=True).encode("utf-8") + b"\n"


class Proof(Frozen):
    thread: str
    letters: tuple[Checked, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.letters)


def _field(data: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = data.get(name)
    if not isinstance(value, kind):
        raise BadInput(f"not a proof bundle: {where}{name} is missing or not a {kind.__name__}")
    return value


def load(data: bytes) -> tuple[str, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The bundle's thread, entries and letters, each checked for shape; BadInput naming the
    first thing wrong."""
    if len(data) > MAX_BUNDLE:
        raise BadInput(f"the bundle is {len(data)} bytes; at most {MAX_BUNDLE} are read")
    try:
        bundle = json.loads(data.decode("utf-8"))
    except (UnicodeError, ValueError, RecursionError):
        raise BadInput("not a proof bundle: not UTF-8 JSON") from None
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise BadInput(f"not a proof bundle: its format is not {FORMAT}")
    thread = _field(bundle, "thread", str, "")
    thread_id(thread)  # an id, or BadInput
    entries = _field(bundle, "entries", dict, "")
    for key, entry in entries.items():
        if not isinstance(entry, dict):
            raise BadInput(f"not a proof bundle: entry {one_line(key)[:60]!r} is not a table")
        for name in ("platform", "toml", "source", "commit", "committed"):
            _field(entry, name, str, f"entry {one_line(key)[:60]!r}: ")
    letters = _field(bundle, "letters", list, "")
    if not letters or len(letters) > MAX_LETTERS:
        raise BadInput(f"not a proof bundle: it must hold 1 to {MAX_LETTERS} letters")
    for number, row in enumerate(letters, 1):
        if not isinstance(row, dict):
            raise BadInput(f"not a proof bundle: letter {number} is not a table")
        _field(row, "raw", str, f"letter {number}: ")
        _field(row, "entry", str, f"letter {number}: ")
    return thread, entries, letters


def _platform(entry: dict[str, Any]) -> Platform:
    """The platform an entry pins, read by the registry's own parser (hostile input)."""
    name = str(entry["platform"])
    try:
        data = tomllib.loads(str(entry["toml"]))
        # The window of a previous key is judged at the letter's date below, not today's.
        return parse_platform(data, name)
    except (tomllib.TOMLDecodeError, AgentmailError, RecursionError, ValueError) as exc:
        raise _Unprovable(
            f"the registry entry of {one_line(name)[:40]!r} does not read ({one_line(str(exc))[:160]})"
        ) from None


class Anchor:
    """The verifier's own registry and its git history: the entry of a platform in force at a
    letter's date there, the only thing that makes a bundle's key more than its own claim (the
    bundle's entry, its previous key's window included, is the bundle writer's word)."""

    def __init__(self, registry: Registry) -> None:
        self.registry, self.history = registry, History(registry.root)

    def _in_force(self, name: str, when: float) -> tuple[Platform | None, str]:
        """The platform ``name`` as your registry pinned it at ``when``, and where that was read."""
        if name not in self.registry.platforms:
            return None, f"your registry at {self.registry.root}"
        entry = self.history.in_force(name, when)
        where = f"git {entry.commit[:12]}" if entry.commit else "the current file"
        try:
            return parse_platform(tomllib.loads(entry.toml), name), f"your registry at {self.registry.root} ({where})"
        except (tomllib.TOMLDecodeError, AgentmailError, RecursionError, ValueError):
            return None, f"your registry at {self.registry.root} ({where})"

    def problem(self, platform: Platform, key: str, address: str, when: float) -> str | None:
        """Why ``key`` signing for ``address`` at ``when`` is not ``platform``'s in your registry;
        None when it is its key then (or its previous key, inside the window your registry gave)."""
        mine, where = self._in_force(platform.name, when)
        keys = set()
        if mine is not None:
            keys.add(mine.public_key)
            if mine.retiring is not None and when <= mine.retiring.ends():
                keys.add(mine.retiring.public_key)
        if mine is not None and key in keys and address.lower() == mine.address.lower():
            return None
        return (f"the bundle's key is not {one_line(platform.name)[:40]}'s key at the letter's date in {where}: "
                "the bundle vouches only for itself")  # fmt: skip


class _Unprovable(Exception):
    """One letter that cannot be checked: the reason, for its line."""


def _where(entry: dict[str, Any]) -> str:
    if entry["source"] == "git" and entry["commit"]:
        return f"git {one_line(entry['commit'])[:12]} {one_line(entry['committed'])[:20]}"
    return "current registry"


def _anchored(anchor: Anchor | None, platform: Platform, key: str, head: tuple[str, str, str], when: float) -> None:
    problem = anchor.problem(platform, key, head[2], when) if anchor is not None else None
    if problem:
        raise _Unprovable(problem, *head)


def _check(raw: bytes, entry: dict[str, Any] | None, anchor: Anchor | None) -> tuple[str, str, str, str]:
    """(Message-ID, date, From address, dkim detail) of one letter that verifies; _Unprovable
    with the reason otherwise."""
    try:
        msg = wire.parse_message(raw, MAX_LETTER)
        message_id = wire.message_id_of(msg)
        address, _ = wire.sender_of(msg)
    except wire.Malformed as exc:
        raise _Unprovable(f"the letter does not parse ({one_line(str(exc))[:160]})") from None
    dates = wire.header_values(msg, "Date")
    date = one_line(dates[0])[:64] if len(dates) == 1 else ""
    when = _when(date) if date else None
    head = (message_id, date, address)
    if when is None:
        raise _Unprovable("the letter carries no single readable Date", *head)
    if entry is None:
        raise _Unprovable("no registry entry for its sender (a person's letter, or not a platform's)", *head)
    platform = _platform(entry)
    if address != platform.address:
        raise _Unprovable(f"From {address} is not {platform.name}'s address {platform.address}", *head)
    if platform.key_lookup != "pinned":
        raise _Unprovable(f"{platform.name}'s key was looked up in DNS, not pinned: nothing to check offline", *head)
    result = signing.verify(raw, pinned_key(platform))
    if result.ok:
        _anchored(anchor, platform, platform.public_key, head, when)
        return (*head, result.detail)
    old = platform.retiring
    if old is not None and old.public_key:
        domain = platform.dkim_domain or platform.domain
        previous = signing.verify(raw, signing.PinnedKey(domain, old.selector, old.algorithm, old.public_key))
        if previous.ok and when <= old.ends():
            _anchored(anchor, platform, old.public_key, head, when)
            return (*head, f"{previous.detail} (the previous key, in force until {old.until})")
        if previous.ok:
            raise _Unprovable(
                f"signed by the previous key s={old.selector} after its window ended at {old.until}", *head
            )
    raise _Unprovable(result.detail, *head)


def verify(data: bytes, anchor: Anchor | None = None) -> Proof:
    """Every letter of the bundle ``data`` checked offline (each key against ``anchor``, the
    verifier's registry, when given); BadInput when it is no bundle."""
    thread, entries, letters = load(data)
    checked: list[Checked] = []
    for row in letters:
        entry = entries.get(row["entry"]) if row["entry"] else None
        where = _where(entry) if entry is not None else "no entry"
        try:
            raw = base64.b64decode(row["raw"].encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeError):
            checked.append(Checked(False, "", "", "", "the letter's bytes are not base64", where))
            continue
        try:
            message_id, date, sender, detail = _check(raw, entry, anchor)
        except _Unprovable as exc:
            why, *head = exc.args
            message_id, date, sender = (list(head) + ["", "", ""])[:3]
            checked.append(Checked(False, message_id, date, sender, why, where))
            continue
        root = str(anchor.registry.root) if anchor is not None else ""
        checked.append(Checked(True, message_id, date, sender, detail, where, root))
    return Proof(thread, tuple(checked))
