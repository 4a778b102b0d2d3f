"""A thread, or a set of unread letters, within a budget of tokens (``thread --brief``, MCP
``thread`` with ``brief``, the session-start hook): what a woken agent reads before it decides
to read more. Derived from the letters alone, no model: the opener whole (what the thread is
about), the last letters whole (where it stands), every letter between as one line (type,
sender, its first words). Shown in the one frame (frame.py): a body's lines behind ``| ``.

The budget is kept by cutting: the last letters shown whole are as many as fit, newest first;
then the one-line middle, then the opener's body; what is left out says how to read it all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..frame import body, inline, quoted
from .guide import tokens

if TYPE_CHECKING:
    from ..model import Letter

BUDGET = 800  # tokens a brief takes unless told
MAX_TOKENS = 100_000  # the most a brief may be asked for, on the CLI and over MCP alike
GIST = 48  # characters of a body a one-line letter shows


def _who(letter: Letter) -> str:
    """Its type (and outcome) and its sender."""
    outcome = f" ({inline(letter.outcome)})" if letter.outcome else ""
    sender = inline(letter.extra.get("person") or letter.sender or letter.sender_address or "?")
    return f"{inline(letter.type)}{outcome} from {sender}"


def _head(letter: Letter) -> str:
    """A letter shown whole starts with its id (to answer it), who wrote it, and when."""
    return f"{letter.id} {_who(letter)}, {inline(letter.date)}"


def line(letter: Letter) -> str:
    """One letter in one line: its type, sender and the first words of its body, quoted (the
    whole thread, ids and all, is a command away)."""
    return f"- {_who(letter)}: {quoted(' '.join(str(letter.body or '').split()), GIST)}"


def _whole(letter: Letter, limit: int | None = None) -> str:
    text = str(letter.body or "")
    if limit is not None and len(text) > limit:
        text = text[:limit] + f"… [{len(text) - limit} more chars]"
    shown = body(text, "  ")
    return _head(letter) + (f"\n{shown}" if shown else "")


def of_thread(letters: Sequence[Letter], budget: int = BUDGET) -> str:
    """The thread of ``letters`` (oldest first) in at most ``budget`` tokens (``tokens``)."""
    if not letters:
        return "(no letters)"
    opener, rest = letters[0], list(letters[1:])
    top = f"thread {inline(opener.thread)} {quoted(opener.subject, 120)}: {len(letters)} letter(s)"
    more = f"(all of it: agentmail thread {inline(opener.thread)})"

    def fits(parts: list[str]) -> bool:
        return tokens("\n".join(parts)) <= budget

    for opener_limit in (None, 600, 200, 0):
        fixed = [top, _head(opener) if opener_limit == 0 else _whole(opener, opener_limit)]
        # Every letter after the opener whole, else the newest whole and the middle a line each.
        for whole in range(len(rest), -1, -1):
            middle, last = rest[: len(rest) - whole], [_whole(x) for x in rest[len(rest) - whole :]]
            parts = [*fixed, *(line(x) for x in middle), *last]
            if fits(parts):
                return "\n".join(parts)
            if whole <= 2 and middle:  # the newest one or two whole, as many middle lines as fit
                for keep in range(len(middle) - 1, -1, -1):
                    cut = [f"… {len(middle) - keep} earlier letter(s) {more}"]
                    parts = [*fixed, *cut, *(line(x) for x in middle[len(middle) - keep :]), *last]
                    if fits(parts):
                        return "\n".join(parts)
    return _cut(top, budget)  # a budget too small for more than the thread's name


def _cut(text: str, budget: int) -> str:
    """The longest start of ``text`` within ``budget`` tokens."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if tokens(text[:mid]) <= budget else (low, mid - 1)
    return text[:low]
