"""Time as people read it: how old a thread is, how long since it moved, and the durations a
person types (``status --stale 3d``, ``bus set stale_after 2w``, ``digest --since 12h``).

The clock is injectable: ``clock`` (None: the system's) is what letter ids (``model.new_ulid``),
ages, staleness and escalation read, so tests move time forward without sleeping.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from .errors import BadInput

clock: Callable[[], float] | None = None  # seconds since the epoch; tests set it, nothing else does

UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"([0-9]{1,6})([mhdw])")
EXAMPLES = "30m, 12h, 3d or 2w"


def now_ms() -> int:
    """The time now, in ms since the epoch."""
    return time.time_ns() // 1_000_000 if clock is None else int(clock() * 1000)


def duration(value: str, what: str = "duration") -> int:
    """Seconds in ``value``: a whole number of minutes, hours, days or weeks (``3d``, blanks
    around it ignored); BadInput with one line saying what is wrong. ``what`` names the option or
    setting in that line. The one grammar of a duration a person types (options, settings, MCP)."""
    found = _DURATION.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None:
        shown = value[:40] if isinstance(value, str) else type(value).__name__
        raise BadInput(f"{what} {shown!r} is not a duration: give {EXAMPLES}")
    if int(found.group(1)) == 0:  # a duration, but no window at all
        raise BadInput(f"{what} {value.strip()!r} must be more than 0: give {EXAMPLES}")  # not the blanks around it
    return int(found.group(1)) * UNITS[found.group(2)]


def age(seconds: float) -> str:
    """A short human age: ``45m``, ``5h``, ``3d``, ``6w`` (rounded down; under a minute is ``0m``)."""
    seconds = max(0, int(seconds))
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    if seconds < 14 * 86400:
        return f"{seconds // 86400}d"
    return f"{seconds // 604800}w"


def iso(ms: int) -> str:
    """``ms`` since the epoch as ISO 8601 UTC to the second: ``2026-12-02T13:22:12Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def readable(ms: int) -> str:
    """``ms`` as a person reads a time in a letter: ``2026-12-02 13:22 UTC``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
