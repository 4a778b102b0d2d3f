"""Who a new letter goes to: ``send``'s TO (``beta``, ``beta,gamma``, ``@group``) as platform
names (DESIGN §6 fan-out).

    recipients.resolve(registry, "@consumers-of-runflow,beta", sender="alpha")  # -> ("tokengate", "highway", "beta")

Pure: the registry is data. A name or group that does not exist, an empty list or the sender
itself is BadInput with one sentence; duplicates collapse, order is kept.
"""

from __future__ import annotations

from ..errors import BadInput
from ..model import NAME_RE
from .registry import Registry

MAX_RECIPIENTS = 32  # one letter, one envelope: a bus's consumers, not a mailing list


def split(text: str) -> tuple[str, ...]:
    """The comma-separated items of TO, stripped, empty ones dropped (``beta, gamma,`` is two).
    Each item is a platform name (the registry says whether it exists) or ``@group``; a group
    that is not a name is BadInput naming it."""
    items = tuple(item.strip() for item in str(text).split(",") if item.strip())
    if not items:
        raise BadInput("no recipient: name a platform, several (beta,gamma) or a group (@name)")
    for item in items:
        if item.startswith("@") and not NAME_RE.fullmatch(item[1:]):
            raise BadInput(f"group {item!r} is not a group name ({NAME_RE.pattern})")
    return items


def resolve(registry: Registry, to: str | tuple[str, ...] | list[str], sender: str | None = None) -> tuple[str, ...]:
    """TO as the registry's platform names, groups expanded, each once, in order. ``sender``
    (the writing platform) is dropped from a group and refused when named: a letter to itself
    would be dropped as a duplicate by its own sync and wait for an answer for ever."""
    items = split(to) if isinstance(to, str) else split(",".join(to))
    names: list[str] = []
    for item in items:
        if item.startswith("@"):
            members = registry.bus.group(item[1:])
            if members is None:
                known = ", ".join("@" + g for g, _ in registry.bus.groups) or "none"
                raise BadInput(f"no group {item} in {registry.root / 'bus.toml'} (known: {known})")
            names.extend(m for m in members if m != sender)  # a platform of a group writing to it
        elif item == sender:
            raise BadInput(f"{item} is the sending platform itself; a letter goes to other platforms "
                           "(a handover to a sibling agent is 'agentmail note')")  # fmt: skip
        else:
            names.append(item)
    chosen = tuple(dict.fromkeys(names))
    if not chosen:
        raise BadInput(f"{to!r} names nobody but the sender")
    if len(chosen) > MAX_RECIPIENTS:
        raise BadInput(f"{len(chosen)} recipients; one letter goes to at most {MAX_RECIPIENTS}")
    for name in chosen:
        registry.named(name)  # BadInput with "did you mean" for an unknown platform
    return chosen
