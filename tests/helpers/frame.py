"""Reading back what ``agentmail.frame.body`` framed: only tests need the inverse."""

from __future__ import annotations

from agentmail.frame import MARK


def unframed(shown: str, indent: str = "") -> str:
    """What ``body`` framed, read back (ValueError on a line outside the frame)."""
    out = []
    for line in shown.split("\n") if shown else []:
        if line == indent + MARK.rstrip():
            out.append("")
        elif line.startswith(indent + MARK):
            out.append(line[len(indent + MARK) :])
        else:
            raise ValueError(f"a line outside the frame: {line!r}")
    return "\n".join(out)
