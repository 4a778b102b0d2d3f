"""Outbound guards and opener advice (DESIGN §6). Pure: they read facts, they decide nothing else.

A guard that refuses returns the reason as one sentence; the client turns it into ``None``
from ``reply()`` (with ``why_refused``) and the CLI into exit 4.
"""

from __future__ import annotations

import re
from typing import Any

from .model import TERMINAL_TYPES

MAX_DEPTH = 20

_CREDENTIALS = (
    (re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"), "a GitHub token"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(r"\bsk-(?:live|test|proj|ant)?[-_]?[A-Za-z0-9]{20,}"), "an API secret key"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), "a JSON Web Token"),
    (re.compile(r"(?im)^\s*(?:export\s+)?[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY)[A-Z0-9_]*\s*[:=]\s*['\"]?[^\s'\"<>]{6,}"),
     "a password or token assignment"),
    (re.compile(r"(?i)\b(?:password|passwd|pwd)\s*[:=]\s*['\"]?[^\s'\"<>]{6,}"), "a password assignment"),
)  # fmt: skip
_PATH_ONLY = re.compile(r"^@?(?:~|\.{1,2})?/?(?:[\w.@-]+/)*[\w.@-]+\.[A-Za-z0-9]{1,8}$|^(?:~|\.{0,2})/\S+$")


def reply_refusal(parent: dict[str, Any], replied_by: str | None, depth: int) -> str | None:
    """Why a reply to ``parent`` is refused, or None when it may go."""
    if parent.get("state") == "quarantine":
        return f"letter {parent['id']} is quarantined ({parent.get('reason')}); it cannot be answered"
    if parent.get("state") in ("sent", "outbox", "failed"):
        return f"letter {parent['id']} is one you sent; answer the letters you received"
    if parent.get("type") in TERMINAL_TYPES:
        article = "an" if parent["type"] == "ack" else "a"
        return f"letter {parent['id']} is {article} {parent['type']}, which is never answered"
    if replied_by:
        return f"letter {parent['id']} was already answered (by {replied_by}); one reply per letter"
    if depth >= MAX_DEPTH:
        return f"thread {parent.get('thread')} is {depth} letters deep (cap {MAX_DEPTH}); it needs a human"
    return None


def body_refusal(body: str) -> str | None:
    """Refuse bodies that leak a credential or that are only a path the reader cannot open."""
    for pattern, what in _CREDENTIALS:
        if pattern.search(body):
            return f"the body looks like it contains {what}; remove it (or pass --force if it is not a secret)"
    stripped = body.strip()
    if not stripped:
        return "the body is empty"
    if "\n" not in stripped and " " not in stripped and _PATH_ONLY.match(stripped):
        return f"the body is only a path ({stripped[:80]}); the reader cannot open your files — send the content (-b @FILE)"
    return None


_ADVICE = (
    (re.compile(r"(?i)\b(i am|i'm|we are|this is|from the|maintainer|platform|agent for)\b"),
     "say who you are and what you integrate with"),
    (re.compile(r"(?im)^\s*(?:\$ |>>> |curl |python|pytest|agentmail |git |make |npm |go |cargo )|```|reproduc|steps to"),
     "include a reproduction the reader can run without your setup"),
    (re.compile(r"(?im)```|^ {4}\S|\b(output|error|traceback|got|returned|status)\b"),
     "paste the verbatim output"),
    (re.compile(r"(?i)\b(expected|should|according to|per the|documented|spec|contract|previously)\b"),
     "say what you expected and on what authority"),
    (re.compile(r"(?i)\b(v?\d+\.\d+(\.\d+)?|version|commit|[0-9a-f]{7,40}|20\d\d-\d\d-\d\d|utc|today|since)\b"),
     "anchor it in a version, commit or time"),
    (re.compile(r"(?i)\b(affect|impact|blast|users?|every|all|only|breaks?|blocks?)\b"),
     "state the blast radius"),
    (re.compile(r"(?i)\b(please|could you|can you|want|need|asking|request|would like)\b"),
     "say what you want from the reader"),
)  # fmt: skip
_INVISIBLE = re.compile(r"(?i)\b(the issue from earlier|as discussed|as mentioned|see above|see my (?:last|previous)|you know the one|the same bug as before|my logs|my terminal)\b")


def opener_warnings(kind: str, body: str) -> list[str]:
    """Advice for the first letter of a thread; never blocks. ``ack``/``close`` are exempt."""
    if kind in TERMINAL_TYPES:
        return []
    warnings = [f"opener: {advice}" for pattern, advice in _ADVICE if not pattern.search(body)]
    invisible = _INVISIBLE.search(body)
    if invisible:
        warnings.append(f"opener: '{invisible.group(0)}' leans on something the reader cannot see")
    return warnings
