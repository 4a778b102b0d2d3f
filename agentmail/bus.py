"""Creating and changing a bus: ``init``, ``add``, ``keygen`` (DESIGN §4, §8).

Writes registry data files and key pairs. The private half goes to
``$AGENTMAIL_HOME/secrets/<platform>.key`` (0600, folder 0700); the public half is pinned in
``platforms/<platform>.toml`` and printed as the DNS TXT record a partner may publish.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import tomli_w

from . import signing
from .credentials import write_private_key
from .errors import BadInput, ConfigError
from .home import write_atomic
from .model import check_name
from .registry import DOMAIN_RE, TLS_MODES, Platform, Registry, is_loopback, load, parse_bus


def _selector() -> str:
    """A fresh selector per key, so a rotated key never collides with a pinned old one."""
    return "am" + time.strftime("%Y%m%d", time.gmtime()) + format(time.time_ns() // 1_000_000 % 46656, "x")


def _write_toml(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, tomli_w.dumps(data).encode(), mode=0o644)


def platform_entry(platform: Platform) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": platform.name, "address": platform.address}
    if platform.display_name:
        entry["display_name"] = platform.display_name
    entry["remotes"] = list(platform.remotes)
    entry["paths"] = list(platform.paths)
    dkim: dict[str, Any] = {"domain": platform.dkim_domain, "selector": platform.selector, "algorithm": platform.algorithm}
    if platform.key_lookup == "dns":
        dkim["lookup"] = "dns"
    else:
        dkim["public_key"] = platform.public_key
    entry["dkim"] = dkim
    return entry


def entry_toml(platform: Platform) -> str:
    return tomli_w.dumps(platform_entry(platform))


def _new_platform(home: Path, name: str, domain: str, repo: str | None) -> Platform:
    check_name("platform", name)
    private, public = signing.generate_keypair()
    write_private_key(home, name, private)
    remotes, paths = [], []
    if repo:
        if Path(repo).expanduser().exists():
            paths.append(str(Path(repo).expanduser().resolve()))
        else:
            remotes.append(repo)
    return Platform(
        name=name, address=f"{name}@{domain}", display_name=f"{name} agent", remotes=tuple(remotes),
        paths=tuple(paths), dkim_domain=domain, selector=_selector(), public_key=public,
    )  # fmt: skip


def init(home: Path, root: Path, platforms: list[str], *, domain: str = "bus.localhost", transport: str = "local",
         endpoints: dict[str, Any] | None = None, force: bool = False) -> Registry:  # fmt: skip
    """A new bus at ``root`` with ``platforms``, each with a fresh key pair."""
    if not platforms:
        raise BadInput("name at least one platform")
    if not DOMAIN_RE.fullmatch(domain):
        raise BadInput(f"{domain!r} is not a valid domain")
    for name in platforms:
        check_name("platform", name)
    if (root / "bus.toml").exists() and not force:
        raise ConfigError(f"a bus already exists at {root}; use 'agentmail add' (or --force to replace it)")
    bus: dict[str, Any] = {"name": domain, "domain": domain, "transport": transport, "policy": "pinned",
                           "trusted_authserv_ids": []}  # fmt: skip
    bus.update(endpoints or {})
    parse_bus(bus)  # refuse a configuration we could not load back
    _write_toml(root / "bus.toml", bus)
    for name in platforms:
        _write_toml(root / "platforms" / f"{name}.toml", platform_entry(_new_platform(home, name, domain, None)))
    return load(root)


def add(home: Path, registry: Registry, name: str, *, repo: str | None = None, domain: str | None = None) -> Platform:
    if name in registry.platforms:
        raise ConfigError(f"platform {name} is already on this bus; use 'agentmail keygen --as {name}' to rotate its key")
    platform = _new_platform(home, name, domain or registry.bus.domain, repo)
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(platform))
    return platform


def keygen(home: Path, registry: Registry, name: str) -> Platform:
    """Rotate ``name``'s key: new selector, new pair, registry entry re-pinned."""
    old = registry.get(name)
    private, public = signing.generate_keypair()
    updated = Platform(**{**old.__dict__, "selector": _selector(), "public_key": public, "algorithm": "ed25519",
                          "key_lookup": "pinned"})  # fmt: skip
    # The private key first, written and fsynced: a crash in between leaves a pinned key whose
    # private half exists (run keygen again), never a pin whose private half is lost.
    write_private_key(home, name, private)
    _write_toml(registry.root / "platforms" / f"{name}.toml", platform_entry(updated))
    return updated


def tls_mode(value: str) -> str:
    if value not in TLS_MODES:
        raise BadInput(f"--tls must be one of {', '.join(TLS_MODES)}")
    return value


def _host_port(value: str | None, what: str) -> tuple[str, int]:
    if not value or ":" not in value:
        raise BadInput(f"--{what} must be HOST:PORT")
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--{what} must be HOST:PORT, not {value!r}")
    return host, int(port)


def endpoints(smtp: str | None, imap: str | None, tls: tuple[str, ...], ca_file: str | None,
              trust: tuple[str, ...]) -> dict[str, Any]:  # fmt: skip
    """The ``bus.toml`` tables for an smtp+imap bus; no secrets ever go here."""
    if len(tls) > 2:
        raise BadInput("--tls is given once (both endpoints) or twice (SMTP, then IMAP)")
    modes = [tls_mode(t) for t in tls] or ["implicit"]
    smtp_tls, imap_tls = modes[0], modes[-1]
    result: dict[str, Any] = {}
    for what, value, mode in (("smtp", smtp, smtp_tls), ("imap", imap, imap_tls)):
        host, port = _host_port(value, what)
        if mode == "none" and not is_loopback(host):
            raise BadInput(f"--tls none is refused for {host}: plaintext is allowed only to a loopback address")
        result[what] = {"host": host, "port": port, "tls": mode}
    if ca_file:
        path = Path(ca_file).expanduser()
        if not path.is_file():
            raise BadInput(f"--ca-file {path} does not exist")
        result["ca_file"] = str(path.resolve())
    result["trusted_authserv_ids"] = list(trust)
    return result
