"""The registry: which platforms exist on this bus, their addresses and pinned keys.

Data, not code: ``bus.toml`` plus ``platforms/<name>.toml``. Each platform file is validated
on its own; a bad one is reported in ``Registry.problems`` and skipped, never fatal to the rest.
"""

from __future__ import annotations

import binascii
import ipaddress
import os
import re
import time
import tomllib
from pathlib import Path
from typing import Any

from .._value import Frozen, Value, field
from ..errors import BadInput, ConfigError
from ..model import NAME_RE
from .settings import ATTACH_MAX_BYTES, ATTACH_MAX_COUNT, ATTACH_MAX_TOTAL, DOMAIN, SETTINGS, TOP_KEYS
from .settings import ATTACH_TYPES as ATTACH_TYPES
from .settings import AUTH_MECHANISMS as AUTH_MECHANISMS
from .settings import parse_auth as parse_auth
from .settings import parse_stale_after as parse_stale_after

ADDRESS_RE = re.compile(
    r"^[a-z0-9][a-z0-9.-]{0,63}@[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)+$"
)
# A person's mailbox may carry a plus tag or an underscore (a platform's may not: its plus tag is the thread)
PERSON_RE = re.compile(
    r"^[a-z0-9][a-z0-9.+_-]{0,63}@[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)+$"
)
DOMAIN_RE = re.compile(f"^{DOMAIN}$")
SELECTOR_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
TLS_MODES = ("implicit", "starttls", "none")


class Endpoint(Frozen):
    host: str
    port: int
    tls: str  # implicit | starttls | none


class Bus(Frozen):
    name: str
    domain: str
    transport: str = "local"
    policy: str = "pinned"
    trusted_authserv_ids: tuple[str, ...] = ()
    smtp: Endpoint | None = None
    imap: Endpoint | None = None
    ca_file: str | None = None
    sent_folder: str | None = None  # None: the folder marked \\Sent (RFC 6154), if any; "": no copy
    max_size: int = 1_048_576
    poll_interval: float | None = None  # seconds; IMAP NOOP polling instead of IDLE (low latency)
    hold: tuple[str, ...] = ()  # domains or addresses whose letters wait for a person's approval
    new_threads_per_hour: int = 20  # per platform; replies and follow-ups are not counted; 0: no cap
    # Attachments a letter may carry (decoded bytes; base64 adds a third: max_size stays the cap)
    attach_max_bytes: int = ATTACH_MAX_BYTES  # per attachment
    attach_max_total: int = ATTACH_MAX_TOTAL  # per letter
    attach_max_count: int = ATTACH_MAX_COUNT
    attach_types: tuple[str, ...] = ATTACH_TYPES
    # Named lists of platforms (``[groups]``): ``send @name`` writes one letter to all of them.
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    auth: str = "password"  # how every platform logs in to the mailbox, unless its entry says otherwise
    # Seconds without a move after which an open thread is announced to its followers;
    # None: never for staleness (the depth cap is announced all the same).
    stale_after: int | None = None

    def group(self, name: str) -> tuple[str, ...] | None:
        return next((members for group, members in self.groups if group == name), None)


class Person(Frozen):
    """A person in the loop of a platform's threads (DESIGN §4): ``follows`` is copied (Cc) on
    every letter of the platform's threads; ``writes`` may write into them from a mail client."""

    address: str
    follows: bool = False
    writes: bool = False
    approves: bool = False  # releases or rejects the platform's held letters by answering their announcement


class Platform(Frozen):
    name: str
    address: str
    display_name: str = ""
    remotes: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    dkim_domain: str = ""
    selector: str = ""
    algorithm: str = "ed25519"
    public_key: str = ""  # base64, as in the DNS TXT record's p=
    key_lookup: str = "pinned"  # or "dns" for partners who publish their key
    people: tuple[Person, ...] = ()
    auth: str = ""  # this platform's mailbox login mechanism; "": the bus's
    retiring: RetiringKey | None = None  # the key before ``keygen --rotate``, valid until its window ends

    @property
    def followers(self) -> tuple[str, ...]:
        return tuple(p.address for p in self.people if p.follows)

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2]

    def txt_record(self) -> str:
        return f"v=DKIM1; k={self.algorithm}; p={self.public_key}"


class Registry(Value):
    root: Path
    bus: Bus
    platforms: dict[str, Platform] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def by_address(self, address: str) -> Platform | None:
        """Exact, case-insensitive match on the whole address: never a suffix, never a name."""
        wanted = address.lower()
        for platform in self.platforms.values():
            if platform.address == wanted:
                return platform
        return None

    def get(self, name: str) -> Platform:
        try:
            return self.platforms[name]
        except KeyError:
            import difflib

            known = ", ".join(sorted(self.platforms)) or "none"
            close = difflib.get_close_matches(name, list(self.platforms), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"no platform {name!r} in the registry at {self.root}{hint} (known: {known})") from None

    def auth_of(self, name: str) -> str:
        """How platform ``name`` logs in to its mailbox: its entry's ``auth``, else the bus's."""
        return self.get(name).auth or self.bus.auth

    def named(self, name: str) -> Platform:
        """A platform a user typed (``send TO``, ``person PLATFORM``): an unknown name is bad
        input (exit 2), the same sentence as ``get``'s; ``get`` is for names the configuration
        gives (an identity, a marker), where it is a configuration problem (exit 6)."""
        try:
            return self.get(name)
        except ConfigError as exc:
            raise BadInput(str(exc)) from None


class BadToml(ValueError):
    """Not UTF-8 TOML; the message is the decoder's or tomllib's own."""


def read_toml(path: Path) -> dict[str, Any]:
    """tomllib's reading of ``path``, read whole every time (the file that pins keys is the one
    truth: no parse of it is kept anywhere); OSError as reading raises it."""
    with path.open("rb") as fh:
        try:
            return tomllib.load(fh)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise BadToml(str(exc)) from exc


# Where each bus.toml key lives: a key in the wrong place is an error that says where it goes.
# (TOML's trap: a top-level key written after [imap] silently lands inside [imap].) The top-level
# keys are the settings table's (settings.TOP_KEYS).
TABLE_KEYS = {"smtp": ("host", "port", "tls"), "imap": ("host", "port", "tls", "poll_interval")}
FREE_TABLES = ("groups",)  # tables whose keys are names the bus chooses (checked by their parser)
PLATFORM_KEYS = ("name", "address", "display_name", "remotes", "paths", "dkim", "people", "auth")
PERSON_KEYS = ("address", "follows", "writes", "approves")
DKIM_KEYS = ("domain", "selector", "algorithm", "public_key", "lookup", "previous")
PREVIOUS_KEYS = ("selector", "algorithm", "public_key", "until")
# The longest a previous key stays valid after now: a rotation's overlap is for letters in
# flight, and an entry that keeps an old key for years is a second key nobody sees.
MAX_OVERLAP_DAYS = 90
MAX_OVERLAP = MAX_OVERLAP_DAYS * 86400
_UNTIL_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


class RetiringKey(Frozen):
    """A platform's key before ``keygen --rotate`` (``[dkim.previous]``): a letter it signed is
    accepted until ``until`` (UTC, ``YYYY-MM-DDTHH:MM:SSZ``), refused after, saying why."""

    selector: str
    algorithm: str
    public_key: str  # "" when the platform's key is looked up in DNS
    until: str

    def valid_at(self, now: float) -> bool:
        return now <= self.ends()

    def ends(self) -> int:
        """``until`` in seconds since the epoch."""
        import calendar

        return calendar.timegm(time.strptime(self.until, "%Y-%m-%dT%H:%M:%SZ"))


def parse_previous(value: Any, selector: str, lookup: str, now: float | None = None) -> RetiringKey | None:
    """``[dkim.previous]``, validated as hostile input: a table of known keys, another selector
    than the current one, a pinned key when the platform pins, a real UTC time at most
    ``MAX_OVERLAP_DAYS`` after ``now`` (default: the clock)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError("[dkim.previous] must be a table")
    for key in value:
        if key not in PREVIOUS_KEYS:
            raise ConfigError(f"unknown key {key!r} in [dkim.previous] (known: {', '.join(PREVIOUS_KEYS)})")
    old = value.get("selector", "")
    if not isinstance(old, str) or not SELECTOR_RE.fullmatch(old) or old == selector:
        raise ConfigError(f"dkim.previous.selector {old!r} is missing, invalid or the current selector")
    algorithm = value.get("algorithm", "ed25519")
    if algorithm not in ("ed25519", "rsa"):
        raise ConfigError("dkim.previous.algorithm must be 'ed25519' or 'rsa'")
    public_key = value.get("public_key", "")
    if not isinstance(public_key, str) or (lookup == "pinned" and not re.fullmatch(r"[A-Za-z0-9+/=]{40,}", public_key)):
        raise ConfigError("dkim.previous.public_key (base64) is required when the key is pinned")
    until = value.get("until", "")
    if not isinstance(until, str) or not _UNTIL_RE.fullmatch(until):
        raise ConfigError(f"dkim.previous.until {until!r} must be a UTC time like 2026-12-09T14:00:00Z")

    try:
        time.strptime(until, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise ConfigError(f"dkim.previous.until {until!r} is not a real time") from None
    retiring = RetiringKey(old, algorithm, public_key if lookup == "pinned" else "", until)
    if retiring.ends() > (time.time() if now is None else now) + MAX_OVERLAP:
        raise ConfigError(
            f"dkim.previous.until {until} is more than {MAX_OVERLAP_DAYS} days away: a previous key is for "
            f"letters in flight ('keygen --rotate' keeps one at most {MAX_OVERLAP_DAYS}d; 'keygen --retire' drops it)"
        )
    return retiring


def default_tls(port: object) -> str:
    """The TLS mode a well-known port speaks: 465/993 implicit, 587/143/25 STARTTLS."""
    return "starttls" if port in (587, 143, 25) else "implicit"


def _home_of(key: str) -> str:
    if key in TOP_KEYS:
        return "at the top of bus.toml, before any [table]"
    tables = [t for t, keys in TABLE_KEYS.items() if key in keys]
    return "under " + " or ".join(f"[{t}]" for t in tables) if tables else ""


def check_bus_keys(data: dict[str, Any]) -> None:
    for key, value in data.items():
        if key in FREE_TABLES:
            continue
        if key in TABLE_KEYS:
            if not isinstance(value, dict):
                raise ConfigError(f"bus.toml: [{key}] must be a table")
            for inner in value:
                if inner not in TABLE_KEYS[key]:
                    where = _home_of(inner)
                    raise ConfigError(
                        f"bus.toml: unknown key {inner!r} in [{key}]"
                        + (f"; it belongs {where}" if where else f" (known: {', '.join(TABLE_KEYS[key])})")
                    )
        elif key not in TOP_KEYS:
            where = _home_of(key)
            raise ConfigError(
                f"bus.toml: unknown key {key!r}"
                + (f"; it belongs {where}" if where else f" (known: {', '.join(TOP_KEYS)}, [smtp], [imap], [groups])")
            )


def _check_platform_keys(data: dict[str, Any]) -> None:
    for key in data:
        if key not in PLATFORM_KEYS:
            where = "under [dkim]" if key in DKIM_KEYS else ""
            raise ConfigError(
                f"unknown key {key!r}" + (f"; it belongs {where}" if where else f" (known: {', '.join(PLATFORM_KEYS)})")
            )
    dkim = data.get("dkim")
    if isinstance(dkim, dict):
        for key in dkim:
            if key not in DKIM_KEYS:
                where = "at the top, before [dkim]" if key in PLATFORM_KEYS else ""
                raise ConfigError(
                    f"unknown key {key!r} in [dkim]"
                    + (f"; it belongs {where}" if where else f" (known: {', '.join(DKIM_KEYS)})")
                )


def _endpoint(data: Any, what: str) -> Endpoint | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ConfigError(f"bus.toml: [{what}] must be a table")
    host, port = data.get("host"), data.get("port")
    tls = data.get("tls", default_tls(port))  # a port that is no int is refused next, whatever its default
    if not isinstance(host, str) or not host or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"bus.toml: [{what}] needs host (text) and port (1-65535)")
    if tls not in TLS_MODES:
        raise ConfigError(f"bus.toml: [{what}] tls must be one of {', '.join(TLS_MODES)}")
    return Endpoint(host, port, tls)


def parse_bus(data: dict[str, Any]) -> Bus:
    """bus.toml's data as a Bus: each top-level setting checked by its row (config/settings.py),
    then the tables ([groups], [smtp], [imap])."""
    check_bus_keys(data)
    fields = {s.name: s.check(s.name, data.get(s.name, s.default)) for s in SETTINGS if s.check is not None}
    if fields["name"] is None:
        fields["name"] = fields["domain"]
    groups = parse_groups(data.get("groups", {}))
    smtp, imap = _endpoint(data.get("smtp"), "smtp"), _endpoint(data.get("imap"), "imap")
    poll = (data.get("imap") or {}).get("poll_interval")  # [imap] is a table or absent: _endpoint said so
    if poll is not None and (not isinstance(poll, int | float) or not 0 < poll <= 3600):
        raise ConfigError("bus.toml: [imap] poll_interval must be seconds between 0 and 3600")
    if fields["transport"] == "smtp+imap" and (smtp is None or imap is None):
        raise ConfigError("bus.toml: the smtp+imap transport needs [smtp] and [imap] endpoints")
    poll_interval = float(poll) if poll is not None else None
    return Bus(**fields, smtp=smtp, imap=imap, poll_interval=poll_interval, groups=groups)


def parse_groups(data: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``[groups]``: each a name (as a platform's) = a non-empty list of platform names, once each.
    Whether the members exist is the registry's to say when a letter is addressed (a platform
    file skipped for a problem must not make the whole bus unreadable)."""
    if not isinstance(data, dict):
        raise ConfigError('bus.toml: [groups] must be a table (name = ["platform", ...])')
    groups: list[tuple[str, tuple[str, ...]]] = []
    for name, members in data.items():
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ConfigError(f"bus.toml: group name {name!r} must match {NAME_RE.pattern}")
        if (
            not isinstance(members, list)
            or not members
            or not all(isinstance(m, str) and NAME_RE.fullmatch(m) for m in members)
        ):
            raise ConfigError(f"bus.toml: group {name} must be a non-empty list of platform names")
        if len(set(members)) != len(members):
            raise ConfigError(f"bus.toml: group {name} names a platform twice")
        groups.append((name, tuple(members)))
    return tuple(groups)


def parse_platform(data: dict[str, Any], stem: str) -> Platform:
    """One platform entry; raises ConfigError naming what is wrong."""
    _check_platform_keys(data)
    name = data.get("name", stem)
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ConfigError(f"name {name!r} must match {NAME_RE.pattern}")
    if name != stem:
        raise ConfigError(f"name {name!r} does not match its file name {stem}.toml")
    address = data.get("address")
    if not isinstance(address, str) or not ADDRESS_RE.fullmatch(address):
        raise ConfigError(f"address {address!r} is not a plain lowercase ASCII address")
    dkim = data.get("dkim", {})
    if not isinstance(dkim, dict):
        raise ConfigError("[dkim] must be a table")
    lookup = dkim.get("lookup", "pinned")
    if lookup not in ("pinned", "dns"):
        raise ConfigError("dkim.lookup must be 'pinned' or 'dns'")
    selector = dkim.get("selector", "")
    if not isinstance(selector, str) or not SELECTOR_RE.fullmatch(selector):
        raise ConfigError(f"dkim.selector {selector!r} is missing or invalid")
    algorithm = dkim.get("algorithm", "ed25519")
    if algorithm not in ("ed25519", "rsa"):
        raise ConfigError("dkim.algorithm must be 'ed25519' or 'rsa'")
    public_key = dkim.get("public_key", "")
    if lookup == "pinned" and not (isinstance(public_key, str) and re.fullmatch(r"[A-Za-z0-9+/=]{40,}", public_key)):
        raise ConfigError("dkim.public_key (base64) is required when the key is pinned")
    dkim_domain = dkim.get("domain", address.rpartition("@")[2])
    if not isinstance(dkim_domain, str) or not DOMAIN_RE.fullmatch(dkim_domain):
        raise ConfigError(f"dkim.domain {dkim_domain!r} is not a valid domain")
    remotes, paths = data.get("remotes", []), data.get("paths", [])
    for label, items in (("remotes", remotes), ("paths", paths)):
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise ConfigError(f"{label} must be a list of strings")
    people = parse_people(data.get("people", []))
    auth = parse_auth(data["auth"], "auth") if "auth" in data else ""
    retiring = parse_previous(dkim.get("previous"), selector, lookup)
    return Platform(
        name=name,
        address=address,
        display_name=str(data.get("display_name", "")),
        remotes=tuple(remotes),
        paths=tuple(paths),
        dkim_domain=dkim_domain,
        selector=selector,
        algorithm=algorithm,
        public_key=public_key if isinstance(public_key, str) else "",
        key_lookup=lookup,
        people=people,
        auth=auth,
        retiring=retiring,
    )


def parse_people(data: Any) -> tuple[Person, ...]:
    """``[[people]]`` entries: a plain address each (once), ``follows`` and ``writes`` true/false."""
    if not isinstance(data, list) or not all(isinstance(p, dict) for p in data):
        raise ConfigError("people must be a list of tables ([[people]] address = ..., follows = ..., writes = ...)")
    people: list[Person] = []
    for entry in data:
        for key in entry:
            if key not in PERSON_KEYS:
                raise ConfigError(f"unknown key {key!r} in [[people]] (known: {', '.join(PERSON_KEYS)})")
        address = entry.get("address")
        if not isinstance(address, str) or not PERSON_RE.fullmatch(address):
            raise ConfigError(f"people: address {address!r} is not a plain lowercase ASCII address")
        if any(p.address == address for p in people):
            raise ConfigError(f"people: {address} is listed twice")
        follows, writes = entry.get("follows", False), entry.get("writes", False)
        approves = entry.get("approves", False)
        if not all(isinstance(flag, bool) for flag in (follows, writes, approves)):
            raise ConfigError(f"people: follows, writes and approves of {address} must be true or false")
        people.append(Person(address, follows, writes, approves))
    return tuple(people)


def load(root: Path) -> Registry:
    """Read a registry directory. A missing or broken ``bus.toml`` is fatal; a bad platform is not."""
    bus_file = root / "bus.toml"
    if not bus_file.is_file():
        raise ConfigError(
            f"no registry at {root} (bus.toml missing): point at your bus's registry with "
            f"AGENTMAIL_REGISTRY=DIR or --registry DIR ('agentmail init' makes a NEW bus, with new keys)"
        )
    try:
        data = read_toml(bus_file)
    except BadToml as exc:
        raise ConfigError(f"{bus_file}: {exc}") from exc
    bus = parse_bus(data)
    if bus.ca_file and not Path(bus.ca_file).expanduser().is_absolute():
        bus = bus.replace(ca_file=str((root / bus.ca_file).resolve()))  # relative to the registry
    registry = Registry(root=root, bus=bus)
    folder = root / "platforms"
    entries = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    for path in entries:
        try:
            platform = parse_platform(read_toml(path), path.stem)
        except (ConfigError, BadToml, OSError) as exc:
            registry.problems.append(f"{path}: {exc}; skipped")
            continue
        registry.platforms[platform.name] = platform
    check_claims(registry, folder)
    return registry


def check_claims(registry: Registry, folder: Path) -> None:
    """What one entry claims that another owns: an address (whose letters would verify against
    which key would depend on file names), or a previous key that is another platform's current
    or previous key (its holder could sign as this platform). Neither entry can be the right
    one on its own word: a ConfigError naming both files (DESIGN §4)."""
    owners: dict[str, str] = {}
    keys: dict[str, list[tuple[str, str]]] = {}  # a pinned key (as verified) -> each (platform, which key of it)
    for platform in registry.platforms.values():
        other = owners.setdefault(platform.address, platform.name)
        if other != platform.name:
            raise ConfigError(
                f"{folder / (other + '.toml')} and {folder / (platform.name + '.toml')} both claim the address "
                f"{platform.address}: one address is one platform; correct or remove the entry that is wrong"
            )
        if platform.public_key and platform.key_lookup == "pinned":
            current = key_identity(platform.algorithm, platform.public_key)
            keys.setdefault(current, []).append((platform.name, f"current key (s={platform.selector})"))
        if platform.retiring is not None and platform.retiring.public_key:
            which = f"previous key (s={platform.retiring.selector})"
            previous = key_identity(platform.retiring.algorithm, platform.retiring.public_key)
            keys.setdefault(previous, []).append((platform.name, which))
    for platform in registry.platforms.values():
        old = platform.retiring
        if old is None or not old.public_key:
            continue
        owned = keys[key_identity(old.algorithm, old.public_key)]
        holder, which = next(((n, w) for n, w in owned if n != platform.name), ("", ""))
        if holder:
            raise ConfigError(
                f"{folder / (platform.name + '.toml')}: the previous key (s={old.selector}) of {platform.name} is "
                f"the {which} of {holder} ({folder / (holder + '.toml')}): {holder} could sign as "
                f"{platform.name}; a previous key is only ever the platform's own ('keygen --retire' drops it)"
            )


def key_identity(algorithm: str, public_key: str) -> str:
    """The key a pinned ``public_key`` is, as the verifier reads it, whatever its spelling: one
    key has many base64 spellings (the last character's unused bits) and an RSA key two wrappings
    (SubjectPublicKeyInfo or a bare RSAPublicKey, with any length encoding), each verifying alike."""
    try:  # what base64.b64decode does (the verifier's reading), without loading base64 on every start
        data = binascii.a2b_base64(public_key)
    except (binascii.Error, ValueError):
        return f"text:{public_key}"
    numbers = _rsa_numbers(data) if algorithm == "rsa" else None
    return f"rsa:{numbers[0]:x}:{numbers[1]:x}" if numbers else f"{algorithm}:{data.hex()}"


def _tlv(data: bytes, at: int, tag: int) -> tuple[bytes, int] | None:
    """One ASN.1 element of ``tag`` at ``at`` read as dkimpy reads it: (its content, where the next starts)."""
    if at + 2 > len(data) or data[at] != tag:
        return None
    length, at = data[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        if at + count > len(data):
            return None
        length, at = int.from_bytes(data[at : at + count], "big"), at + count
    if tag == 0x02 and at + length > len(data):  # an integer is read byte by byte: a short one fails
        return None
    return data[at : at + length], at + length


def _rsa_numbers(data: bytes) -> tuple[int, int] | None:
    """(modulus, exponent) of an RSA key: SubjectPublicKeyInfo first, else a bare RSAPublicKey."""
    outer = _tlv(data, 0, 0x30)
    algorithm = _tlv(outer[0], 0, 0x30) if outer else None
    oid = _tlv(algorithm[0], 0, 0x06) if algorithm else None
    null = _tlv(algorithm[0], oid[1], 0x05) if algorithm and oid else None
    bits = _tlv(outer[0], algorithm[1], 0x03) if outer and algorithm and null and not null[0] else None
    return (_rsa_public_key(bits[0][1:]) if bits else None) or _rsa_public_key(data)


def _rsa_public_key(data: bytes) -> tuple[int, int] | None:
    sequence = _tlv(data, 0, 0x30)
    modulus = _tlv(sequence[0], 0, 0x02) if sequence else None
    exponent = _tlv(sequence[0], modulus[1], 0x02) if sequence and modulus else None
    if modulus is None or exponent is None:
        return None
    return int.from_bytes(modulus[0], "big"), int.from_bytes(exponent[0], "big")


def is_loopback(host: str) -> bool:
    """Plaintext is allowed only to these: the traffic never leaves the machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def registry_dir(explicit: str | None, home: Path) -> Path:
    """``--registry``, else AGENTMAIL_REGISTRY, else ``$AGENTMAIL_HOME/registry``."""
    chosen = explicit or os.environ.get("AGENTMAIL_REGISTRY")
    return Path(chosen).expanduser() if chosen else home / "registry"
