"""The one character policy: which characters untrusted text may not carry (DESIGN §5.1).

Forbidden anywhere agentmail writes a header or prints to a terminal:
- C0 controls (NUL, ESC, CR, LF...) and DEL; C1 controls (U+0080-U+009F, NEL among them);
- bidi embeddings, overrides, isolates and marks (they reorder what a reader sees);
- zero-width characters (they hide text or make two strings look alike);
- the Unicode line and paragraph separators U+2028/U+2029 (a line break in disguise).

TAB is whitespace in a header and in text; LF is how a body breaks lines. Everything else is
judged by the one set below, so outbound refusal, inbound judgement and the terminal agree.
"""

from __future__ import annotations

import re

# One definition; the three uses below differ only in TAB and LF.
FORBIDDEN = (
    "\x00-\x08\x0a-\x1f\x7f-\x9f"  # C0 controls but TAB, DEL, C1 controls
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u200b-\u200d\u2060-\u2064\ufeff"  # zero-width space/joiners, word joiner, invisible operators, BOM
    "\u2028\u2029"  # line and paragraph separators
)
_IN_HEADER = re.compile(f"[{FORBIDDEN}]")
_IN_HEADER_OR_TAB = re.compile(f"[\t{FORBIDDEN}]")
_ON_TERMINAL = re.compile(f"(?![\n])[{FORBIDDEN}]")


def forbidden_in_header(value: str) -> str | None:
    """The first character ``value`` may not carry as a header value (TAB may), or None."""
    found = _IN_HEADER.search(value)
    return found.group() if found else None


def one_line(value: str) -> str:
    """Header text from outside, made one safe line: each forbidden character and TAB becomes a space."""
    return _IN_HEADER_OR_TAB.sub(" ", value)


def for_terminal(text: object) -> str:
    """Untrusted text made safe to print (CLI, hooks, MCP): forbidden characters dropped, so no
    escape sequence, no bidi trick, no hidden line; TAB and LF are kept."""
    return _ON_TERMINAL.sub("", str(text if text is not None else ""))


def describe(char: str) -> str:
    """A forbidden character named so a person can find it: ``U+202E``."""
    return f"U+{ord(char):04X}"
