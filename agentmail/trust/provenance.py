"""How a filed letter was authenticated, in one line for ``agentmail show``.

Read from the stored bytes and the registry: which DKIM signature (d=, s=) is the sender's
pinned one, and what the trusted Authentication-Results said. Only letters that were accepted
are described as authenticated; a quarantined letter has its reason instead.
"""

from __future__ import annotations

import re
from email import message_from_bytes

from ..config.registry import Registry
from ..model import HUMAN

_TAG = re.compile(r"\b([a-z]+)=([^;\s]+)")


def _signatures(raw: bytes) -> list[tuple[str, str]]:
    """(d=, s=) of every DKIM-Signature header, top first."""
    msg = message_from_bytes(raw)
    found = []
    for value in msg.get_all("DKIM-Signature") or []:
        tags = dict(_TAG.findall(" ".join(str(value).split()).lower()))
        found.append((tags.get("d", ""), tags.get("s", "")))
    return found


def trusted_results(raw: bytes, trusted: tuple[str, ...]) -> list[str]:
    """``id: dkim=pass, dmarc=pass`` per Authentication-Results header from a trusted id."""
    wanted = {t.lower() for t in trusted}
    found = []
    for value in message_from_bytes(raw).get_all("Authentication-Results") or []:
        text = " ".join(str(value).split())
        authserv = text.split(";", 1)[0].strip().lower()
        if authserv in wanted:
            results = re.findall(r"\b(spf|dkim|dmarc)=([a-z]+)", text.lower())
            found.append(f"{authserv}: " + ", ".join(f"{m}={r}" for m, r in results))
    return found


_AUTHSERV = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]{0,251}[A-Za-z0-9])?")


def authserv_ids(raw: bytes) -> list[str]:
    """The authserv-id of every Authentication-Results header, top first, each once (lowercase);
    one that is not a host name's characters is shown as ``?``, never as it is."""
    found: list[str] = []
    for value in message_from_bytes(raw).get_all("Authentication-Results") or []:
        head = " ".join(str(value).split()).split(";", 1)[0].strip()
        name = head.split(" ", 1)[0].lower()  # RFC 8601: an optional version may follow the id
        shown = name if _AUTHSERV.fullmatch(name) else "?"
        if shown not in found:
            found.append(shown)
    return found


def describe(raw: bytes, registry: Registry, state: str, sender: str, letter_type: str) -> str:
    if state in ("sent", "outbox", "held", "failed"):
        me = registry.platforms.get(sender)
        return f"signed here with the key of {sender} (d={me.dkim_domain}, s={me.selector})" if me else "signed here"
    if state == "quarantine":
        return "not authenticated (quarantined; see reason)"
    results = trusted_results(raw, registry.bus.trusted_authserv_ids)
    verdicts = "; trusted A-R " + " | ".join(results) if results else "; no trusted Authentication-Results"
    if letter_type == HUMAN:
        return "a person's letter, vouched for by the bus's mail server (aligned dkim=pass or dmarc=pass)" + verdicts
    platform = registry.platforms.get(sender)
    if platform is None:
        return "accepted when received; its sender is no longer in the registry" + verdicts
    pinned = (platform.dkim_domain.lower(), platform.selector.lower())
    how = "the key pinned in the registry" if platform.key_lookup == "pinned" else "the key published in DNS"
    if pinned in _signatures(raw):
        return f"DKIM signature d={pinned[0]} s={pinned[1]} verified against {how} for {sender}" + verdicts
    return f"accepted when received; {sender}'s key has changed since (now s={platform.selector})" + verdicts
