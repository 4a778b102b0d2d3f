"""Creating and changing a bus: ``init``, ``add``, ``keygen`` (DESIGN §4, §8).

Writes registry data files and key pairs. The private half goes to
``$AGENTMAIL_HOME/secrets/<platform>.key`` (0600, folder 0700); the public half is pinned in
``platforms/<platform>.toml`` and printed as the DNS TXT record a partner may publish.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import secrets
import shutil
import ssl
import time
import tomllib
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import tomli_w

from .._fs import read_plain, write_atomic
from .._value import Frozen, field
from ..ages import now_ms
from ..client.facade import AgentMail
from ..config.credentials import key_path, read_owner_only, write_private_key
from ..config.identity import Identity
from ..config.recipients import split
from ..config.registry import (
    DOMAIN_RE,
    MAX_OVERLAP,
    MAX_OVERLAP_DAYS,
    PERSON_RE,
    TLS_MODES,
    Person,
    Platform,
    Registry,
    RetiringKey,
    default_tls,
    is_loopback,
    load,
    parse_bus,
)
from ..config.settings import NAMES, one, read_auth, setting
from ..errors import AgentmailError, BadInput, ConfigError, NotFound
from ..home import agentmail_home
from ..model import check_name
from ..people import approval
from ..transport.logins import tls_context
from ..trust import signing
from .exposure import refuse_exposed as refuse_exposed  # bind asks it too


def _selector(name: str) -> str:
    """A fresh selector per platform and key: two platforms of one domain never share a DNS
    name (``<selector>._domainkey.<domain>``), and a rotated key never collides with an old one."""
    return f"{name}-" + time.strftime("%Y%m%d", time.gmtime()) + secrets.token_hex(2)


def _write_toml(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, _dumps(data).encode(), mode=0o644)


def _dumps(data: dict[str, Any]) -> str:
    """TOML as a person writes it: an entry's people as ``[[people]]`` tables, one a person (as
    ONBOARDING shows them), where tomli-w would write short ones as inline tables."""
    people = data.get("people")
    if not people:
        return tomli_w.dumps(data)
    text = tomli_w.dumps({k: v for k, v in data.items() if k != "people"})
    return text + "".join(f"\n[[people]]\n{tomli_w.dumps(person)}" for person in people)


def platform_entry(platform: Platform) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": platform.name, "address": platform.address}
    if platform.display_name:
        entry["display_name"] = platform.display_name
    entry["remotes"] = list(platform.remotes)
    entry["paths"] = list(platform.paths)
    dkim: dict[str, Any] = {
        "domain": platform.dkim_domain,
        "selector": platform.selector,
        "algorithm": platform.algorithm,
    }
    if platform.key_lookup == "dns":
        dkim["lookup"] = "dns"
    else:
        dkim["public_key"] = platform.public_key
    old = platform.retiring
    if old is not None:  # ``keygen --rotate``: the key before, until its window ends
        dkim["previous"] = {"selector": old.selector, "algorithm": old.algorithm, "until": old.until}
        if old.public_key:
            dkim["previous"]["public_key"] = old.public_key
    entry["dkim"] = dkim
    if platform.auth:
        entry["auth"] = platform.auth
    if platform.people:
        entry["people"] = [
            {
                "address": p.address,
                "follows": p.follows,
                "writes": p.writes,
                **({"approves": True} if p.approves else {}),
            }
            for p in platform.people
        ]
    return entry


def entry_toml(platform: Platform) -> str:
    return _dumps(platform_entry(platform))


def _repo_hint(repo: str | None) -> tuple[list[str], list[str]]:
    """(remotes, paths): an existing directory is a path hint, anything else a git remote."""
    if not repo:
        return [], []
    if Path(repo).expanduser().exists():
        return [], [str(Path(repo).expanduser().resolve())]
    return [repo], []


def _existing_public_key(home: Path, name: str) -> str | None:
    """The public half of ``secrets/<name>.key`` if that file exists (never regenerated here)."""
    if not key_path(home, name).exists():
        return None
    try:
        return signing.public_key_of(read_owner_only(key_path(home, name)).strip())
    except AgentmailError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"{key_path(home, name)} exists but is not a valid ed25519 key ({exc.__class__.__name__}); "
            f"move it away yourself if it is really not needed"
        ) from None


def _new_platform(home: Path, name: str, domain: str, repo: str | None, *, reuse_key: bool = False) -> Platform:
    check_name("platform", name)
    public = _existing_public_key(home, name) if reuse_key else None
    if public is None:
        private, public = signing.generate_keypair()
        write_private_key(home, name, private)
    remotes, paths = _repo_hint(repo)
    return Platform(
        name=name,
        address=f"{name}@{domain}",
        display_name=f"{name} agent",
        remotes=tuple(remotes),
        paths=tuple(paths),
        dkim_domain=domain,
        selector=_selector(name),
        public_key=public,
    )


def existing_state(home: Path, root: Path, platforms: list[str]) -> list[Path]:
    """What ``init`` would replace: the registry's bus.toml and any of the platforms' keys."""
    found = [root / "bus.toml"] if (root / "bus.toml").exists() else []
    return found + [key_path(home, name) for name in platforms if key_path(home, name).exists()]


def init(
    home: Path,
    root: Path,
    platforms: list[str],
    *,
    domain: str = "bus.localhost",
    transport: str = "local",
    endpoints: dict[str, Any] | None = None,
    force: bool = False,
    teller: Callable[[Registry], AgentMail] | None = None,
) -> Registry:
    """A new bus at ``root`` with ``platforms``, each with a fresh key pair. ``force`` over an
    existing registry drops its hold rule, people and approvers: with approvers listed there, it
    goes ahead only once an approver of each platform approved it by mail (``_ask``)."""
    if not platforms:
        raise BadInput("name at least one platform")
    if not DOMAIN_RE.fullmatch(domain):
        raise BadInput(f"{domain!r} is not a valid domain")
    for name in platforms:
        check_name("platform", name)
    refuse_exposed(home, "init")
    existing = existing_state(home, root, platforms)
    if existing and not force:
        raise ConfigError(
            f"refusing to init: {', '.join(map(str, existing))} already exist(s), and init makes a NEW bus. "
            f"To use the existing bus set AGENTMAIL_REGISTRY={root} (or --registry); to add a platform run "
            f"'agentmail add NAME'; to rotate a key 'agentmail keygen --as NAME'. --force rewrites the registry "
            f"files but keeps (re-pins) existing keys; it never regenerates one"
        )
    bus: dict[str, Any] = {
        "name": domain,
        "domain": domain,
        "transport": transport,
        "policy": "pinned",
        "trusted_authserv_ids": [],
    }
    bus.update(endpoints or {})
    parse_bus(bus)  # refuse a configuration we could not load back
    if force and (root / "bus.toml").exists():
        _ask(load(root), "agentmail init --force " + " ".join(platforms), INIT_EFFECT, teller, home, whole_bus=True)
    if bus.get("ca_file"):
        bus["ca_file"] = _copy_ca(root, Path(bus["ca_file"]))
    _write_toml(root / "bus.toml", bus)
    for name in platforms:
        entry = platform_entry(_new_platform(home, name, domain, None, reuse_key=True))
        _write_toml(root / "platforms" / f"{name}.toml", entry)
    return load(root)


def add(home: Path, registry: Registry, name: str, *, repo: str | None = None, domain: str | None = None) -> Platform:
    """A new platform with a fresh key pair; on an existing platform ``repo`` only adds a hint."""
    if name in registry.platforms:
        if repo and not domain:
            return attach_repo(registry, name, repo)
        raise ConfigError(
            f"platform {name} is already on this bus; 'agentmail add {name} --repo PATH|REMOTE' adds a "
            f"checkout to it, 'agentmail keygen --as {name}' rotates its key"
        )
    refuse_exposed(home, f"add {name}")
    if key_path(home, name).exists():
        raise ConfigError(
            f"{key_path(home, name)} already exists: a key for {name} from another bus? add never "
            f"overwrites a key; move it away yourself, or use another name"
        )
    platform = _new_platform(home, name, domain or registry.bus.domain, repo)
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(platform))
    return platform


def attach_repo(registry: Registry, name: str, repo: str) -> Platform:
    """Add a checkout (path) or git remote to an existing platform's entry, for ``whoami``."""
    old = registry.get(name)
    remotes, paths = _repo_hint(repo)
    updated = old.replace(
        remotes=tuple(dict.fromkeys([*old.remotes, *remotes])), paths=tuple(dict.fromkeys([*old.paths, *paths]))
    )
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(updated))
    return updated


def set_person(
    registry: Registry,
    name: str,
    address: str,
    *,
    follows: bool,
    writes: bool,
    remove: bool = False,
    approves: bool = False,
    teller: Callable[[Registry], AgentMail] | None = None,
    home: Path | None = None,
) -> Platform:
    """Add, change or (``remove``) remove a person of platform ``name``; the entry is validated
    before it is written, and nothing else in it changes. With approvers listed, a change of who
    approves, or an address newly following or writing (``person_effect``), goes ahead only once
    one of ``name``'s approvers approved exactly it by mail (``AgentMail.ask_approvers``: Refused,
    exit 4, until then), for every caller; ``teller`` and ``home`` as for ``change_setting``."""
    old = registry.named(name)
    typed, address = address, address.strip().lower()
    if not PERSON_RE.fullmatch(address):
        inner = re.search(r"<([^<>]*)>", typed)  # "Carol <carol@example.org>": the address alone is wanted
        hint = f"; give the address alone, e.g. {inner.group(1).strip().lower()!r}" if inner else ""
        raise BadInput(f"{typed!r} is not a plain lowercase ASCII address (user@domain){hint}")
    effect = person_effect(old, address, follows, writes, approves, remove)
    if effect:
        flags = " ".join(f for f, on in (("--follows", follows), ("--writes", writes), ("--approves", approves),
                                           ("--remove", remove)) if on)  # fmt: skip
        _ask(registry, f"agentmail person {name} {address} {flags}".rstrip(), effect, teller, home, platform=name)
    others = tuple(p for p in old.people if p.address != address)
    if remove:
        if len(others) == len(old.people):
            raise NotFound(f"{address} is not a person of {name}")
        people = others
    else:
        kept = [p for p in old.people if p.address == address]
        person = Person(address, follows, writes, approves)
        # a change keeps the person's place in the list, so the file's order stays stable
        people = tuple(person if p.address == address else p for p in old.people) if kept else (*old.people, person)
    updated = old.replace(people=people)
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(updated))
    return updated


def keygen(
    home: Path,
    registry: Registry,
    name: str,
    *,
    overlap: float | None = None,
    teller: Callable[[Registry], AgentMail] | None = None,
) -> Platform:
    """Rotate ``name``'s key: new selector, new pair, registry entry re-pinned. ``overlap``
    (seconds, ``keygen --rotate``): the old key stays pinned beside the new one as
    ``[dkim.previous]`` until now + overlap, so letters it signed that are still in flight are
    accepted; without it the old key is dropped at once (as before). With approvers listed it
    goes ahead only once one of ``name``'s approved it by mail (``_ask``), for every caller."""
    old = registry.get(name)
    if overlap is not None and overlap > MAX_OVERLAP:
        raise BadInput(f"keygen --rotate: the old key stays valid at most {MAX_OVERLAP_DAYS} days (90d), "
                       f"the longest the registry takes")  # fmt: skip
    refuse_exposed(home, "make a key")
    how = " --rotate" if overlap is not None else ""
    _ask(registry, f"agentmail --as {name} keygen{how}", _key_effect(name), teller, home, platform=name)
    private, public = signing.generate_keypair()
    retiring = None
    if overlap is not None:
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now_ms() / 1000 + overlap))
        retiring = RetiringKey(old.selector, old.algorithm, old.public_key if old.key_lookup == "pinned" else "", until)
    selector = _selector(name)
    while selector == old.selector:  # two random hex digits a day: a rotation never reuses one
        selector = _selector(name)
    updated = old.replace(selector=selector, public_key=public, algorithm="ed25519", key_lookup="pinned",
                          retiring=retiring)  # fmt: skip
    # The private key first, written and fsynced: a crash in between leaves a pinned key whose
    # private half exists (run keygen again), never a pin whose private half is lost.
    write_private_key(home, name, private)
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(updated))
    return updated


def retire(
    registry: Registry,
    name: str,
    *,
    force: bool = False,
    teller: Callable[[Registry], AgentMail] | None = None,
    home: Path | None = None,
) -> Platform:
    """``keygen --retire``: drop the key a rotation kept beside the new one. NotFound when none is.
    Refused (BadInput) while its window lasts, unless ``force``: letters it signed before the
    rotation may still be in flight, and once it is gone no recheck can let them in. With
    approvers listed it goes ahead only once one of ``name``'s approved it by mail (``_ask``)."""
    platform = registry.get(name)
    old = platform.retiring
    if old is None:
        raise NotFound(f"{name} has no previous key to retire ('keygen --rotate DURATION' keeps one)")
    if not force and old.valid_at(now_ms() / 1000):
        raise BadInput(
            f"{name}'s previous key (s={old.selector}) is valid until {old.until}: letters it signed may still "
            f"be in flight, and retiring it now quarantines them for good; retire after {old.until}, or --force"
        )
    _ask(registry, f"agentmail --as {name} keygen --retire", _key_effect(name), teller, home, platform=name)
    updated = platform.replace(retiring=None)
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(updated))
    return updated


def tls_mode(value: str) -> str:
    if value not in TLS_MODES:
        raise BadInput(f"the TLS mode must be one of {', '.join(TLS_MODES)}")
    return value


def _host_port(value: str | None, what: str) -> tuple[str, int]:
    if not value or ":" not in value:
        raise BadInput(f"the {what} endpoint must be HOST:PORT")
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"the {what} endpoint must be HOST:PORT, not {value!r}")
    return host, int(port)


def tls_chosen(what: str, host: str, port: int) -> str | None:
    """Why the TLS mode of an endpoint given without --tls is what it is, when its port does not
    say (465/993 implicit, 587/143/25 STARTTLS): a line for the user; None for a well-known port."""
    if port in (465, 993, 587, 143, 25):
        return None
    mode = default_tls(port)
    return (
        f'{what} {host}:{port}: tls = "{mode}", chosen because --tls was not given and {port} is not a '
        f"well-known {what.upper()} port; if the server wants STARTTLS (port 2525 usually does): "
        f"'agentmail bus set {what}.tls starttls'"
    )


def endpoints(
    smtp: str | None, imap: str | None, tls: tuple[str, ...], ca_file: str | None, trust: tuple[str, ...]
) -> dict[str, Any]:
    """The ``bus.toml`` tables for an smtp+imap bus; no secrets ever go here."""
    if len(tls) > 2:
        raise BadInput("a TLS mode is given once (both endpoints) or twice (SMTP, then IMAP)")
    modes = [tls_mode(t) for t in tls]
    result: dict[str, Any] = {}
    for index, (what, value) in enumerate((("smtp", smtp), ("imap", imap))):
        host, port = _host_port(value, what)
        mode = modes[min(index, len(modes) - 1)] if modes else default_tls(port)
        if mode == "none" and not is_loopback(host):
            raise BadInput(f"TLS mode none is refused for {host}: plaintext is allowed only to a loopback address")
        result[what] = {"host": host, "port": port, "tls": mode}
    if ca_file:
        path = Path(ca_file).expanduser()
        if not path.is_file():
            raise BadInput(f"the CA file {path} does not exist")
        result["ca_file"] = str(path.resolve())
    result["trusted_authserv_ids"] = list(trust)
    return result


CA_NAME = "ca.pem"  # the CA certificate beside bus.toml


def _copy_ca(root: Path, source: Path) -> str:
    """Copy a CA certificate beside bus.toml: the registry then works from any checkout."""
    tls_context(str(source))  # refuse a file that is not a CA certificate, before copying it
    target = root / CA_NAME
    root.mkdir(parents=True, exist_ok=True)
    if not target.exists() or source.resolve() != target.resolve():
        shutil.copyfile(source, target)
    return CA_NAME


def _read_bus(root: Path) -> dict[str, Any]:
    path = root / "bus.toml"
    if not path.is_file():
        load(root)  # raises the "no registry at ..." error
    with path.open("rb") as fh:
        return tomllib.load(fh)


class Changed(Frozen):
    """What ``change_setting`` did: ``stored``, the value written; ``loosens``, what the change
    loosens ("" nothing); ``approved_by``, the approver who agreed ("" nobody was asked);
    ``guarded``, whether anyone approves on this bus (else a guard stops mistakes, not the agent)."""

    key: str
    stored: Any = field(compare=False)
    loosens: str = ""
    approved_by: str = ""
    guarded: bool = False


def set_setting(
    root: Path,
    key: str,
    values: list[str],
    *,
    tls: str | None = None,
    platform: str | None = None,
    teller: Callable[[Registry], AgentMail] | None = None,
    home: Path | None = None,
) -> Any:
    """Change one ``bus.toml`` setting in place (``change_setting``); returns what was stored."""
    return change_setting(root, key, values, tls=tls, platform=platform, teller=teller, home=home).stored


def change_setting(
    root: Path,
    key: str,
    values: list[str],
    *,
    tls: str | None = None,
    platform: str | None = None,
    teller: Callable[[Registry], AgentMail] | None = None,
    home: Path | None = None,
) -> Changed:
    """Change one ``bus.toml`` setting in place, validated like a load, for every caller (the
    CLI's ``bus set``, a program, an agent through the API). With approvers listed, a change its
    row says loosens a guard (``Setting.loosens``) goes ahead only once one of them approved
    exactly it by mail (``AgentMail.ask_approvers``: Refused, exit 4, until then); a change of
    ``hold`` is also told to them before it is written (``AgentMail.tell_hold_change``). Nothing
    is written before that, nor when the value is refused. ``teller``: the client that writes to
    them (the CLI's: this checkout's platform); by default the first platform with an approver,
    in ``home``.

    The settings and how each is read are config/settings.py's rows; the ones a row leaves to
    this module are the tables and ``ca_file``, which copies the PEM into the registry
    (``ca.pem``) and stores that relative path, so the registry can be committed and checked
    out anywhere. ``platform``: the setting of that platform's entry instead (``auth`` only;
    ``""`` goes back to the bus's)."""
    if platform is not None:
        if key != "auth":
            raise BadInput(f"only auth is set per platform (--platform), not {key!r}")
        return Changed(key, _set_platform_auth(root, platform, one(key, values)))
    reg = load(root)
    data = _read_bus(root)
    row = setting(key)
    if row is None:
        raise BadInput(unknown_setting(key))
    pem = _ca_pem(one(key, values)) if row.name == "ca_file" else b""  # read once: asked, then copied
    stored = row.read(data, key, values) if row.read is not None else _SPECIAL[row.name](root, data, key, values, tls)
    try:
        after = parse_bus(data)  # refuse a configuration we could not load back, before anyone is asked
    except ConfigError as exc:
        raise BadInput(str(exc)) from None
    loosens = row.loosens(getattr(reg.bus, row.field), getattr(after, row.field))
    guarded = bool(approval.every_approver(reg))
    approved_by = ""
    if guarded and (loosens or (row.name == "hold" and after.hold != reg.bus.hold)):
        with ExitStack() as stack:
            client = teller(reg) if teller is not None else stack.enter_context(_first_approved(reg, home))
            if loosens:
                shown = " ".join(json.dumps(v) if not v or " " in v else v for v in values)
                how = f" --tls {tls}" if tls is not None else ""
                if pem:  # a path names no certificate: the agent may write another one there once asked
                    how += f" (the certificate of SHA-256 {hashlib.sha256(pem).hexdigest()})"
                approved_by = client.ask_approvers(f"agentmail bus set {key} {shown}{how}", loosens, whole_bus=True)
            if row.name == "hold":
                client.tell_hold_change(list(reg.bus.hold), list(after.hold))
    if pem:  # the certificate itself, the bytes the approvers were shown, once the change may be made
        write_atomic(root / CA_NAME, pem, mode=0o644)
    _write_toml(root / "bus.toml", data)
    return Changed(key, stored, loosens, approved_by, guarded)


INIT_EFFECT = "The registry is written anew: its hold rule, people and approvers are dropped."


def _key_effect(name: str) -> str:
    return f"The key pinned for {name} changes: letters are judged against the new one."


def person_effect(entry: Platform, address: str, follows: bool, writes: bool, approves: bool, remove: bool) -> str:
    """What a change of a person loosens ("" nothing): who approves, and an address newly given
    a copy of every letter of the platform's threads (a follower) or a say in them (a writer)."""
    was = next((p for p in entry.people if p.address == address), None)
    if (was is not None and was.approves) != (approves and not remove):
        return "Who approves held letters changes."
    if remove:
        return ""
    gains = [what for what, now, before in (
        (f"receives a copy of every letter of {entry.name}'s threads", follows, was is not None and was.follows),
        (f"may write into {entry.name}'s threads from a mail client", writes, was is not None and was.writes),
    ) if now and not before]  # fmt: skip
    return f"{address} {' and '.join(gains)}." if gains else ""


def _ask(
    reg: Registry,
    change: str,
    effect: str,
    teller: Callable[[Registry], AgentMail] | None,
    home: Path | None,
    *,
    platform: str | None = None,
    whole_bus: bool = False,
) -> str:
    """With approvers listed, ``change`` goes ahead only once one of them approved exactly it by
    mail: returns who ("" nobody approves on this bus); Refused (exit 4) until then. ``teller``:
    the caller's client that writes to them; by default the first platform with an approver."""
    if not approval.every_approver(reg):
        return ""
    with ExitStack() as stack:
        client = teller(reg) if teller is not None else stack.enter_context(_first_approved(reg, home))
        return client.ask_approvers(change, effect, platform, whole_bus=whole_bus)


def _first_approved(reg: Registry, home: Path | None) -> AgentMail:
    """The client that writes to the approvers when no caller named one: the first platform with one."""
    sender = next(name for name in sorted(reg.platforms) if approval.approvers(reg, name))
    return AgentMail(reg, Identity(sender), home or agentmail_home())


def unknown_setting(key: str) -> str:
    """What ``bus set`` says of a key no row names: every one, and the likeliest one meant."""
    listing = ", ".join(NAMES)
    close = difflib.get_close_matches(key, NAMES, n=1)
    if close:
        return f"unknown setting {key!r}; did you mean {close[0]}? (one of: {listing})"
    return f"unknown setting {key!r}; one of: {listing}"


def _endpoint_setting(root: Path, data: dict[str, Any], key: str, values: list[str], tls: str | None) -> Any:
    """``smtp``/``imap HOST:PORT`` (``--tls MODE``, else the port's)."""
    host, port = _host_port(one(key, values), key)
    mode = tls_mode(tls) if tls else default_tls(port)
    if mode == "none" and not is_loopback(host):
        raise BadInput(f"tls none is refused for {host}: plaintext is allowed only to a loopback address")
    table = dict(data.get(key) or {})
    table.update({"host": host, "port": port, "tls": mode})
    data[key] = table
    return table


def _tls_setting(root: Path, data: dict[str, Any], key: str, values: list[str], tls: str | None) -> Any:
    table_name = key.split(".")[0]
    if not isinstance(data.get(table_name), dict):
        raise BadInput(f"bus.toml has no [{table_name}] yet: 'agentmail bus set {table_name} HOST:PORT' first")
    mode = tls_mode(one(key, values))
    host = str(data[table_name].get("host", ""))
    if mode == "none" and not is_loopback(host):  # as for an endpoint given with --tls none
        raise BadInput(f"tls none is refused for {host}: plaintext is allowed only to a loopback address")
    data[table_name]["tls"] = mode
    return mode


def _poll_setting(root: Path, data: dict[str, Any], key: str, values: list[str], tls: str | None) -> Any:
    if not isinstance(data.get("imap"), dict):
        raise BadInput("bus.toml has no [imap] yet: 'agentmail bus set imap HOST:PORT' first")
    try:
        data["imap"]["poll_interval"] = float(one(key, values))
    except ValueError:
        raise BadInput("poll_interval is a number of seconds") from None
    return data["imap"]["poll_interval"]


def _ca_setting(root: Path, data: dict[str, Any], key: str, values: list[str], tls: str | None) -> Any:
    """Read and checked by ``_ca_pem``, written by ``change_setting`` once the change may be made."""
    data["ca_file"] = CA_NAME
    return data["ca_file"]


CA_BYTES = 1 << 20  # a CA bundle is kilobytes; the file is read whole, once


def _ca_pem(value: str) -> bytes:
    """The bytes of the CA certificate ``bus set ca_file`` names, read once (links followed to
    the file they name, nothing but a regular file opened): the approvers are shown these bytes'
    SHA-256, and these bytes, not the path's later contents, become ``ca.pem``."""
    source = Path(value).expanduser()
    if not source.is_file():
        raise BadInput(f"{source} does not exist")
    try:
        pem, _ = read_plain(source.resolve(), CA_BYTES)
    except OSError as exc:
        raise BadInput(f"{source} cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    if pem is None:
        raise BadInput(f"{source} is more than {CA_BYTES} bytes: no CA certificate")
    try:  # refuse a file that is not a CA certificate
        ssl.create_default_context().load_verify_locations(cadata=pem.decode("ascii"))
    except (UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"cannot load the CA file {source}: {exc}") from None
    return pem


def _group_setting(root: Path, data: dict[str, Any], key: str, values: list[str], tls: str | None) -> Any:
    return _set_group(root, data, key.partition(".")[2], values)


# The rows whose ``read`` is this module's (``Setting.read`` None): the tables' keys and a file.
_SPECIAL: dict[str, Callable[[Path, dict[str, Any], str, list[str], str | None], Any]] = {
    "smtp": _endpoint_setting,
    "imap": _endpoint_setting,
    "smtp.tls": _tls_setting,
    "imap.tls": _tls_setting,
    "poll_interval": _poll_setting,
    "ca_file": _ca_setting,
    "groups.NAME": _group_setting,
}


def change_hold(
    root: Path, values: list[str], *, teller: Callable[[Registry], AgentMail] | None = None, home: Path | None = None
) -> list[str]:
    """``bus set hold``: ``change_setting``'s rule (told first; a rule taken off asked first)."""
    stored: list[str] = set_setting(root, "hold", values, teller=teller, home=home)
    return stored


def _set_platform_auth(root: Path, name: str, value: str) -> str:
    """``bus set auth MECHANISM --platform NAME``: that platform's login mechanism, written into
    its entry (``""``: the bus's again). Returns what the platform now uses."""
    registry = load(root)
    old = registry.named(name)
    updated = old.replace(auth=read_auth(value) if value else "")
    _write_toml(root / "platforms" / f"{name}.toml", platform_entry(updated))
    return updated.auth or registry.bus.auth


def _set_group(root: Path, data: dict[str, Any], name: str, values: list[str]) -> list[str]:
    """``bus set groups.NAME PLATFORM...``: the group's members (each a registered platform,
    once); ``""`` alone removes the group. Returns the members stored ([] when removed)."""
    check_name("group", name)
    given = ",".join(values)
    members = list(dict.fromkeys(split(given))) if given.replace(",", "").strip() else []
    groups = dict(data.get("groups") or {})
    if not members:
        groups.pop(name, None)
    else:
        registry = load(root)
        for member in members:
            if member.startswith("@"):
                raise BadInput(f"group {name}: {member} is a group; a group lists platforms")
            registry.get(member)  # ConfigError with "did you mean" for an unknown platform
        groups[name] = members
    if groups:
        data["groups"] = groups
    else:
        data.pop("groups", None)
    return members
