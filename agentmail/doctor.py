"""``agentmail doctor``: one line per check, each ok or exactly what to fix. Never a secret."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import AgentmailError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def run_checks(home: Path, registry_root: Path, platform: str | None, agent: str | None) -> list[Check]:
    from . import identity, registry, signing
    from .credentials import read_private_key

    checks: list[Check] = []
    try:
        reg = registry.load(registry_root)
    except AgentmailError as exc:
        return [Check("registry", False, str(exc))]
    problems = "; ".join(reg.problems)
    checks.append(Check("registry", not reg.problems,
                        f"{len(reg.platforms)} platform(s) at {reg.root}" + (f"; fix: {problems}" if problems else "")))  # fmt: skip
    try:
        me = identity.resolve(reg, platform, agent, Path.cwd())
    except AgentmailError as exc:
        checks.append(Check("identity", False, f"{exc} (pass --as PLATFORM or add a .agentmail marker)"))
        return checks
    checks.append(Check("identity", True, me.mailbox))
    entry = reg.platforms[me.platform]
    try:
        private = read_private_key(home, me.platform)
        matches = entry.key_lookup == "dns" or signing.public_key_of(private) == entry.public_key
        checks.append(Check("dkim key", matches, "private key present, owner-only, matches the pinned key" if matches else
                            f"the private key does not match the key pinned for {me.platform} (s={entry.selector}); "
                            f"run 'agentmail keygen --as {me.platform}' or restore the right key"))  # fmt: skip
    except AgentmailError as exc:
        checks.append(Check("dkim key", False, str(exc)))
    except Exception as exc:
        checks.append(Check("dkim key", False, f"the key file is not a valid ed25519 key ({exc.__class__.__name__})"))
    if reg.bus.transport == "local":
        office = home / "postoffice"
        checks.append(Check("post office", True, f"local transport at {office}"))
        return checks
    from .transport import open_transport

    try:
        with open_transport(reg, me.platform, home) as transport:
            checks.extend(Check(n, ok, d) for n, ok, d in transport.doctor())  # type: ignore[attr-defined]
    except AgentmailError as exc:
        checks.append(Check("transport", False, str(exc)))
    return checks
