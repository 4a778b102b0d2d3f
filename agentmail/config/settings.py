"""The bus's settings as one table (DESIGN §4): each ``bus set`` key, how ``bus set`` reads its
values, its default, the check a loaded value passes, its words in ``bus set``'s help, and
whether a change of it loosens a guard against the agent (``loosens``: with approvers listed,
``admin/bus.change_setting`` asks them first, whoever calls). Loading
(``registry.parse_bus``, ``TOP_KEYS``), ``bus set`` (``admin/bus.set_setting``, its list of
settings) and its help (``cli/operator``) read the rows. Adding a setting is a row here and its
field in ``registry.Bus`` (tests/config/test_settings_table.py holds the two equal).

Its patterns are text (``re`` compiles each on first use): ``bus set --help`` loads the table
for its help lines and checks nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..ages import duration
from ..errors import BadInput, ConfigError

DOMAIN = r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)+"
# A hold rule: a domain (every address in it) or one address (a plus tag allowed).
HOLD = r"(?:[a-z0-9][a-z0-9._+-]{0,63}@)?" + DOMAIN
ATTACH_TYPE = r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}"
POLICIES = ("pinned", "aligned")
TRANSPORTS = ("local", "smtp+imap")
# How a mailbox login is proved (DESIGN §2): a password, or an OAuth2 access token by SASL
# XOAUTH2 (Google's and Microsoft's) or OAUTHBEARER (RFC 7628).
AUTH_MECHANISMS = ("password", "xoauth2", "oauthbearer")
# The attachment types a bus takes unless bus.toml's attach_types says otherwise: evidence
# (logs, HAR/JSON, CSV, screenshots, PDFs, archives) and patches.
ATTACH_TYPES = (
    "text/plain",
    "text/x-diff",
    "text/x-log",
    "text/csv",
    "text/markdown",
    "application/json",
    "application/pdf",
    "application/gzip",
    "application/zip",
    "image/png",
    "image/jpeg",
)
# A bus's attachment limits unless bus.toml says otherwise (decoded bytes; base64 adds a third).
ATTACH_MAX_BYTES = 512 * 1024  # per attachment
ATTACH_MAX_TOTAL = 700 * 1024  # per letter
ATTACH_MAX_COUNT = 10

Reader = Callable[[dict[str, Any], str, list[str]], Any]  # bus set: (bus.toml's data, key, VALUEs) -> stored
Check = Callable[[str, Any], Any]  # a loaded value -> the Bus field's (ConfigError saying why)


# What a change of a setting loosens, from the Bus field's value before and after it: one
# sentence for the approvers asked first, "" when it loosens nothing (DESIGN §6).
Loosens = Callable[[Any, Any], str]


class Setting:
    """One row. ``read`` None: ``bus set`` does it in admin/bus (a table, a file to copy).
    ``check`` None: not a top-level key of bus.toml (a table's, read by registry's own parser).
    ``loosens``: what a change loosens (decided for every row: no default). ``field``: the Bus
    field it changes (default: its name)."""

    __slots__ = ("name", "read", "default", "check", "help", "loosens", "field")

    def __init__(self, name: str, read: Reader | None, default: Any, check: Check | None, help: str,  # noqa: A002
                 *, loosens: Loosens, field: str = "") -> None:  # fmt: skip
        self.name, self.read, self.default, self.check, self.help = name, read, default, check, help
        self.loosens, self.field = loosens, field or name


def one(key: str, values: list[str]) -> str:
    if len(values) != 1:
        raise BadInput(f"'bus set {key}' takes one value")
    return values[0]


# --- how bus set reads a value (each stores it in bus.toml's data and returns what it stored) ---


def _text(data: dict[str, Any], key: str, values: list[str]) -> Any:
    data[key] = one(key, values)
    return data[key]


def _number(what: str) -> Reader:
    def read(data: dict[str, Any], key: str, values: list[str]) -> Any:
        value = one(key, values)  # (outside the try: BadInput is a ValueError, its sentence is its own)
        try:
            data[key] = int(value)
        except ValueError:
            raise BadInput(f"{key} is {what}") from None
        return data[key]

    return read


def _names(data: dict[str, Any], key: str, values: list[str]) -> Any:
    data[key] = [v for v in values if v]
    return data[key]


def _lowered(data: dict[str, Any], key: str, values: list[str]) -> Any:
    data[key] = [v.strip().lower() for v in values if v.strip()]
    return data[key]


def read_auth(value: str) -> str:
    if value not in AUTH_MECHANISMS:
        raise BadInput(f"auth must be one of {', '.join(AUTH_MECHANISMS)}, not {value!r}")
    return value


def _auth(data: dict[str, Any], key: str, values: list[str]) -> Any:
    data[key] = read_auth(one(key, values))
    return data[key]


def _duration(data: dict[str, Any], key: str, values: list[str]) -> Any:
    """A duration kept as written (``3d``); "" takes the key off."""
    stored = one(key, values).strip()
    if stored:
        duration(stored, key)
        data[key] = stored
    else:
        data.pop(key, None)
    return stored


# --- what a change loosens (each returns its sentence, or "" when the change loosens nothing) ---


def never(_before: Any, _after: Any) -> str:
    return ""


def changed(effect: str) -> Loosens:
    """Any change: the setting says whose word is trusted, and no direction of it is the safe one."""

    def loosens(before: Any, after: Any) -> str:
        return effect if after != before else ""

    return loosens


def every_set(effect: str) -> Loosens:
    """Every ``bus set``: the value stored stays the same (a copy's path) while what it names changes."""

    def loosens(_before: Any, _after: Any) -> str:
        return effect

    return loosens


def raised(effect: str) -> Loosens:
    """A limit raised lets more through; lowered, less."""

    def loosens(before: int, after: int) -> str:
        return effect if after > before else ""

    return loosens


def uncapped(effect: str) -> Loosens:
    """A cap where 0 is no cap at all: raised, or 0 set where there was a cap."""

    def loosens(before: int, after: int) -> str:
        return effect if before != 0 and (after == 0 or after > before) else ""

    return loosens


def later_or_off(effect: str) -> Loosens:
    """A time after which people are told (None: never): later, or never where there was one."""

    def loosens(before: int | None, after: int | None) -> str:
        return effect if before is not None and (after is None or after > before) else ""

    return loosens


def added(effect: str) -> Loosens:
    """An allow-list: an entry added lets more through; one taken off, less."""

    def loosens(before: tuple[str, ...], after: tuple[str, ...]) -> str:
        return effect if any(entry not in before for entry in after) else ""

    return loosens


def towards(value: str, effect: str) -> Loosens:
    """Two values, one of them the looser: changing to it."""

    def loosens(before: Any, after: Any) -> str:
        return effect if after == value != before else ""

    return loosens


def moved_or_off(effect: str) -> Loosens:
    """A copy people read (``""``: none): moved elsewhere or stopped; turned on where there was none is not."""

    def loosens(before: str | None, after: str | None) -> str:
        return effect if after != before and before != "" else ""

    return loosens


def plaintext(effect: str) -> Loosens:
    """An endpoint's TLS mode: implicit and starttls both prove the server's certificate, none does not."""

    def loosens(before: Any, after: Any) -> str:
        was = before is not None and before.tls == "none"
        return effect if after is not None and after.tls == "none" and not was else ""

    return loosens


def lifted(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    """The hold rule: a rule taken off (an address whose domain is still held stays held) lets
    the letters it held leave without a person."""
    gone = [rule for rule in before if rule not in after and rule.partition("@")[2] not in after]
    return f"The hold rule stops holding letters for {', '.join(gone)}." if gone else ""


# Where the word that authenticates a letter comes from (an approver's answer among them).
VERDICTS = "Changes which mail server's Authentication-Results are trusted, approvers' answers among them."


# --- the check a loaded value passes (returns the Bus field's value) ---


def _name(_key: str, value: Any) -> Any:
    return None if value is None else str(value)  # None: the bus is named after its domain


def _domain(key: str, value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(DOMAIN, value):
        raise ConfigError(f"bus.toml: {key} {value!r} is not a valid domain")
    return value


def _transport(key: str, value: Any) -> str:
    if value not in TRANSPORTS:
        raise ConfigError(f"bus.toml: {key} must be 'local' or 'smtp+imap', not {value!r}")
    return str(value)


def _policy(key: str, value: Any) -> str:
    if value not in POLICIES:
        raise ConfigError(f"bus.toml: {key} must be one of {', '.join(POLICIES)}")
    return str(value)


def _authserv_ids(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
        raise ConfigError(f"bus.toml: {key} must be a list of names")
    return tuple(value)


def _ca_file(key: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"bus.toml: {key} must be a path (relative to the registry directory)")
    return value or None


def _sent_folder(key: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ConfigError(f'bus.toml: {key} must be a folder name ("" for none)')
    return value


def _max_size(key: str, value: Any) -> int:
    if not isinstance(value, int) or value < 4096:
        raise ConfigError(f"bus.toml: {key} must be a number of bytes >= 4096")
    return value


def _hold(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(h, str) and re.fullmatch(HOLD, h) for h in value):
        raise ConfigError(
            f'bus.toml: {key} must be a list of lowercase domains or addresses (e.g. ["partner.example"])'
        )
    return tuple(dict.fromkeys(value))


def _count(key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"bus.toml: {key} must be a whole number >= 0")
    return value


def _attach_types(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and re.fullmatch(ATTACH_TYPE, t) for t in value):
        raise ConfigError(f'bus.toml: {key} must be a list of lowercase MIME types (e.g. ["text/x-diff"])')
    return tuple(dict.fromkeys(value))


def parse_auth(value: Any, where: str) -> str:
    if value not in AUTH_MECHANISMS:
        raise ConfigError(f"{where} must be one of {', '.join(AUTH_MECHANISMS)}, not {value!r}")
    return str(value)


def parse_stale_after(value: Any) -> int | None:
    """``stale_after``: a duration as a person writes it (``3d``), kept as text in bus.toml."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            return duration(value)  # its sentence is not shown: the one below is
    except BadInput:
        pass
    raise ConfigError(f"bus.toml: stale_after must be a duration such as 3d, not {str(value)[:40]!r}")


# The rows: bus.toml's top-level keys first, in the order its "unknown key" error lists them,
# then the keys of its tables, which registry and admin/bus read with their own code. Each row's
# ``loosens`` is decided with the reason beside it: a guard against the agent is whatever decides
# which letters it may send, which it is shown as authentic, and what people see of it.
# fmt: off
SETTINGS = (
    # a label in listings: guards nothing
    Setting("name", _text, None, _name, "name NAME (the domain unless given)", loosens=never),
    # its mail server's DKIM/DMARC vouches for delivery reports: whose word counts changes
    Setting("domain", _text, None, _domain, "domain DOMAIN",
            loosens=changed("Changes the domain whose mail server's word vouches for delivery reports.")),
    # local post office or a mail server: where letters travel and whose word authenticates them
    Setting("transport", _text, "local", _transport, f"transport {'|'.join(TRANSPORTS)}",
            loosens=changed("Changes where letters travel and whose word authenticates them, "
                            "approvers' answers among them.")),
    # aligned also takes a trusted server's aligned DKIM pass: pinned keys only is the tighter
    Setting("policy", _text, "pinned", _policy, f"policy {'|'.join(POLICIES)}",
            loosens=towards("aligned", "Also accepts letters on a trusted mail server's aligned DKIM pass, "
                            "not only on a platform's pinned key.")),
    # whose Authentication-Results count (an approver's answer is judged on them): any change
    Setting("trusted_authserv_ids", _names, [], _authserv_ids, "trusted_authserv_ids ID...",
            loosens=changed(VERDICTS)),
    # the CA that proves the servers are the ones named: stored as ca.pem whatever it holds
    Setting("ca_file", None, None, _ca_file, "ca_file PEM (copied into the registry)", loosens=every_set(VERDICTS)),
    # the copy of each sent letter people audit in their mail client: moved or stopped
    Setting("sent_folder", _text, None, _sent_folder, 'sent_folder NAME ("" for none)',
            loosens=moved_or_off("Moves or stops the copy of every sent letter that people read in the "
                                 "mailbox's sent folder.")),
    # the size of a letter sent or taken in (what reaches the agent from outside too)
    Setting("max_size", _number("a number of bytes"), 1_048_576, _max_size, "max_size BYTES",
            loosens=raised("Lets bigger letters through, sent and received.")),
    # the letters that wait for a person: a rule taken off lets them leave unseen
    Setting("hold", _lowered, [], _hold, 'hold DOMAIN|ADDRESS... ("" for none)', loosens=lifted),
    # the loop guard's cap on new threads (0: none)
    Setting("new_threads_per_hour", _number("a whole number"), 20, _count, "new_threads_per_hour N (0: no cap)",
            loosens=uncapped("Lets the agents open more new threads an hour (0: no cap at all).")),
    # what a letter may carry out (and in): raised, more
    Setting("attach_max_bytes", _number("a whole number"), ATTACH_MAX_BYTES, _count, "attach_max_bytes BYTES (each)",
            loosens=raised("Lets bigger attachments through.")),
    Setting("attach_max_total", _number("a whole number"), ATTACH_MAX_TOTAL, _count,
            "attach_max_total BYTES (per letter)", loosens=raised("Lets more attachment bytes through a letter.")),
    Setting("attach_max_count", _number("a whole number"), ATTACH_MAX_COUNT, _count, "attach_max_count N",
            loosens=raised("Lets more attachments through a letter.")),
    Setting("attach_types", _lowered, list(ATTACH_TYPES), _attach_types, "attach_types TYPE... (the allow-list)",
            loosens=added("Lets attachments of more types through.")),
    # how a platform proves its own login to its own mailbox: judges no letter
    Setting("auth", _auth, "password", lambda key, value: parse_auth(value, f"bus.toml: {key}"),
            f"auth {'|'.join(AUTH_MECHANISMS)} (how platforms log in to their mailboxes; with --platform NAME "
            "for one platform, written into its entry)", loosens=never),
    # when followers hear of a stalled thread (None: never)
    Setting("stale_after", _duration, None, lambda _key, value: parse_stale_after(value),
            'stale_after DURATION (e.g. 3d: an open thread without a move that long is announced; "" takes it off)',
            loosens=later_or_off("Followers hear of a stalled thread later, or never.")),
    # where letters leave, people's copies and the approvers' announcements among them
    Setting("smtp", None, None, None, "smtp HOST:PORT",
            loosens=changed("Changes the server letters leave by, the copies for people and the approvers' "
                            "announcements among them.")),
    # the server letters are read from, whose verdicts authenticate an approver's answer
    Setting("imap", None, None, None, "imap HOST:PORT", loosens=changed(VERDICTS)),
    Setting("smtp.tls", None, None, None, "smtp.tls MODE", field="smtp",
            loosens=plaintext("Submits letters in plaintext: nothing proves the server is the one named.")),
    Setting("imap.tls", None, None, None, "imap.tls MODE", field="imap", loosens=changed(VERDICTS)),
    # how often IMAP is polled instead of IDLE: letters arrive later or sooner, none judged otherwise
    Setting("poll_interval", None, None, None, "poll_interval SECONDS", loosens=never),
    # a name for platforms one could name one by one: every letter passes the same guards
    Setting("groups.NAME", None, None, None, "groups.NAME PLATFORM... (for 'send @NAME'; \"\" removes it)",
            field="groups", loosens=never),
)
# fmt: on
TOP_KEYS = tuple(s.name for s in SETTINGS if s.check is not None)
NAMES = tuple(s.name for s in SETTINGS)


def setting(key: str) -> Setting | None:
    """The row ``bus set KEY`` names (``groups.NAME``'s for any group, ``group.NAME`` too)."""
    if key.startswith(("groups.", "group.")):
        key = "groups.NAME"
    return next((s for s in SETTINGS if s.name == key), None)


def help_text() -> str:
    """``bus set``'s help: every row's words, in the table's order."""
    return "Set KEY in bus.toml: " + ", ".join(s.help for s in SETTINGS) + "."
