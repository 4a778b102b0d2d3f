"""The one frame letters are shown in (DESIGN §10, "Shown text cannot imitate the frame").

Every surface that shows a letter as text — ``show``, ``thread``, ``inbox`` and the other lists,
``search``, the session-start and stop hooks, ``watch``'s log, the digest, MCP's error text —
puts what came from outside inside this frame, so no line of a body or a subject reads as one of
agentmail's own header lines, list entries or approval lines:

- a **body** is shown line by line, each line behind ``MARK`` (``| ``); agentmail's own lines
  never start with it, and nothing but LF breaks a line (``for_terminal`` drops CR, U+2028 and
  the other breaks), so a body cannot end its frame early;
- a **subject** is one line in double quotes, written as a JSON string (``"`` and ``\\`` escaped),
  so it cannot close its quotes and add a field after them;
- a **name**, an address, a reason or any other value from outside is one line (``inline``):
  it can lengthen the line it is on, never start another.

    >>> body("hi\\nfrom: alpha")
    '| hi\\n| from: alpha'
    >>> quoted('x" [critical]')
    '"x\\\\" [critical]"'
"""

from __future__ import annotations

import json

from .text import for_terminal, one_line

MARK = "| "  # the start of every line of a letter's text; agentmail's own lines never start so


def inline(value: object) -> str:
    """A value from outside (a name, an address, a reason) as one safe line, unquoted: it may
    lengthen the line it is on, never start another."""
    return one_line(for_terminal("" if value is None else value))


def quoted(value: object, limit: int | None = None) -> str:
    """A subject (or any text from outside shown inside a line) as one line in double quotes,
    written as a JSON string so its own quotes and backslashes cannot end it; at most ``limit``
    characters of it, then "…"."""
    text = inline(value)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def body(text: object, indent: str = "") -> str:
    """A letter's text, every line behind ``indent`` + ``MARK`` (an empty line: the mark alone);
    trailing blank lines dropped; an empty text shows nothing."""
    lines = for_terminal(text).rstrip("\n").split("\n")
    if lines == [""]:
        return ""
    bare = indent + MARK.rstrip()
    return "\n".join(indent + MARK + line if line else bare for line in lines)
