"""The bus's settings as one table (DESIGN §4): each ``bus set`` key, how ``bus set`` reads its
values, its default, the check a loaded value passes, its words in ``bus set``'s help. Loading
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


class Setting:
    """One row. ``read`` None: ``bus set`` does it in admin/bus (a table, a file to copy).
    ``check`` None: not a top-level key of bus.toml (a table's, read by registry's own parser)."""

    __slots__ = ("name", "read", "default", "check", "help")

    def __init__(self, name: str, read: Reader | None, default: Any, check: Check | None, help: str) -> None:  # noqa: A002
        self.name, self.read, self.default, self.check, self.help = name, read, default, check, help


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
        try:
            data[key] = int(one(key, values))
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
# then the keys of its tables, which registry and admin/bus read with their own code.
# fmt: off
SETTINGS = (
    Setting("name", _text, None, _name, "name NAME (the domain unless given)"),
    Setting("domain", _text, None, _domain, "domain DOMAIN"),
    Setting("transport", _text, "local", _transport, f"transport {'|'.join(TRANSPORTS)}"),
    Setting("policy", _text, "pinned", _policy, f"policy {'|'.join(POLICIES)}"),
    Setting("trusted_authserv_ids", _names, [], _authserv_ids, "trusted_authserv_ids ID..."),
    Setting("ca_file", None, None, _ca_file, "ca_file PEM (copied into the registry)"),
    Setting("sent_folder", _text, None, _sent_folder, 'sent_folder NAME ("" for none)'),
    Setting("max_size", _number("a number of bytes"), 1_048_576, _max_size, "max_size BYTES"),
    Setting("hold", _lowered, [], _hold, 'hold DOMAIN|ADDRESS... ("" for none)'),
    Setting("new_threads_per_hour", _number("a whole number"), 20, _count, "new_threads_per_hour N (0: no cap)"),
    Setting("attach_max_bytes", _number("a whole number"), ATTACH_MAX_BYTES, _count, "attach_max_bytes BYTES (each)"),
    Setting("attach_max_total", _number("a whole number"), ATTACH_MAX_TOTAL, _count,
            "attach_max_total BYTES (per letter)"),
    Setting("attach_max_count", _number("a whole number"), ATTACH_MAX_COUNT, _count, "attach_max_count N"),
    Setting("attach_types", _lowered, list(ATTACH_TYPES), _attach_types, "attach_types TYPE... (the allow-list)"),
    Setting("auth", _auth, "password", lambda key, value: parse_auth(value, f"bus.toml: {key}"),
            f"auth {'|'.join(AUTH_MECHANISMS)} (how platforms log in to their mailboxes; with --platform NAME "
            "for one platform, written into its entry)"),
    Setting("stale_after", _duration, None, lambda _key, value: parse_stale_after(value),
            'stale_after DURATION (e.g. 3d: an open thread without a move that long is announced; "" takes it off)'),
    Setting("smtp", None, None, None, "smtp HOST:PORT"),
    Setting("imap", None, None, None, "imap HOST:PORT"),
    Setting("smtp.tls", None, None, None, "smtp.tls MODE"),
    Setting("imap.tls", None, None, None, "imap.tls MODE"),
    Setting("poll_interval", None, None, None, "poll_interval SECONDS"),
    Setting("groups.NAME", None, None, None, "groups.NAME PLATFORM... (for 'send @NAME'; \"\" removes it)"),
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
