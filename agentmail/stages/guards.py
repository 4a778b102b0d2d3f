"""Outbound guards and opener advice (DESIGN §6). Pure: they read facts, they decide nothing else.

``refusal`` is the one guard every letter that leaves passes — send, note, reply, a follow-up
in a thread (``send --thread``), and through those the MCP tools, the hooks and whatever a
``watch`` command runs. A guard that refuses returns the reason as one sentence; the client
turns it into ``Refused`` (or, for the documented ``reply()``, ``None`` with ``why_refused``),
the CLI into exit 4, the MCP server into a tool error.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import TYPE_CHECKING

from .. import protocol
from .._value import Frozen
from ..model import Letter
from ..protocol import AFTER_ACK, TERMINAL_TYPES
from ..text import DATA_NOT_ORDERS as DATA_NOT_ORDERS
from ..text import for_terminal

if TYPE_CHECKING:
    from ..letter.attach import Attachment

MAX_DEPTH = 20
# AFTER_ACK (protocol.py): what a reporter may send after the other side's ack of its own letter
# (DESIGN §6): more evidence or a withdrawal. It continues the acknowledged letter (In-Reply-To),
# never answers the ack, and its References count the ack toward the cap.

# Patterns as text: re compiles (and caches) each on first use, so a process that never sends
# pays nothing for them, and one that only replies never compiles the opener advice.
# Each with the literals every match contains: groups, each of alternatives one of which is
# in every match, and whether they are looked for case-insensitively. A body that lacks one
# group is not searched: a search walks the whole body, and most bodies hold none of these
# (the scan was a visible part of a send's CPU). A group of names beside one of punctuation:
# prose holds ":" and "pass" and "tokens", seldom "password" and ":" both.
# Case-insensitive literals are looked for in an ASCII body only, lowercased (Unicode case
# folding matches more: "ſ" is an "s" to re, not to str.lower). A pattern edited means its
# literals checked: tests/stages/test_guards.py refuses a sample of each and holds the verdicts equal
# to searching every pattern, but a property finds a literal that was forgotten only by chance.
_Needles = tuple[tuple[tuple[str, ...], bool], ...]
_ASSIGNED: _Needles = (((":", "="), False),)
_NAMED = (("passw", "secret", "token", "api_key"), True)  # PASSWORD|PASSWD|SECRET|TOKEN|API_KEY, any case
_CREDENTIALS: tuple[tuple[str, str, _Needles], ...] = (
    ((r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), "a private key", ((("PRIVATE KEY",), False),)),
    ((r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key id", ((("AKIA",), False),)),
    ((r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"), "a GitHub token", ((("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),)),
    ((r"\bgithub_pat_[A-Za-z0-9_]{40,}"), "a GitHub token", ((("github_pat_",), False),)),
    ((r"\bglpat-[A-Za-z0-9_-]{20,}"), "a GitLab token", ((("glpat-",), False),)),
    ((r"\bnpm_[A-Za-z0-9]{36}\b"), "an npm token", ((("npm_",), False),)),
    ((r"\bAIza[0-9A-Za-z_-]{35}"), "a Google API key", ((("AIza",), False),)),
    ((r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}"), "a Stripe key", ((("k_live_", "k_test_"), False),)),
    ((r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), "a Slack token", ((("xox",), False),)),
    ((r"\bsk-(?:live|test|proj|ant)?[-_]?[A-Za-z0-9]{20,}"), "an API secret key", ((("sk-",), False),)),
    # Anthropic's and OpenAI's newer keys hold dashes and underscores after their prefix.
    ((r"\bsk-(?:ant|proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"), "an API secret key", ((("sk-",), False),)),
    (
        (r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
        "a JSON Web Token",
        ((("eyJ",), False), ((".",), False)),
    ),
    (
        (
            r"(?im)^\s*(?:export\s+)?[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY)[A-Z0-9_]*\s*[:=]\s*['\"]?[^\s'\"<>]{6,}"
        ),
        "a password or token assignment",
        (_NAMED, *_ASSIGNED),
    ),
    # The same assignment anywhere in a line ("foo NAME_TOKEN=value", "export DB_PASSWORD=..."
    # after a command): mid-line only with "=", since "TOKEN: expired" is prose there.
    (
        (r"(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY)[A-Z0-9_]*\s*=\s*['\"]?[^\s'\"<>]{6,}"),
        "a password or token assignment",
        ((("PASSW", "SECRET", "TOKEN", "API_KEY"), False), (("=",), False)),
    ),
    # A secret in a URL's query or a lowercase assignment: ?api_key=..., &access_token=..., db_password=...
    (
        (
            r"(?i)(?:api[_-]?key|access[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret"
            r"|secret[_-]?key|password|passwd|(?<=[?&])(?:token|key|secret))=[^\s&#'\"<>]{6,}"
        ),
        "a secret in an assignment or a URL",
        ((("key", "token", "secret", "passw"), True), (("=",), False)),
    ),
    (
        (r"(?i)\b(?:password|passwd|pwd)\s*[:=]\s*['\"]?[^\s'\"<>]{6,}"),
        "a password assignment",
        ((("passw", "pwd"), True), *_ASSIGNED),
    ),
    # A quoted name, as JSON and many configs write it: {"password": "..."}, "client_secret": "...".
    (
        (
            r"(?i)['\"][A-Za-z0-9_-]*(?:password|passwd|secret|token|api[_-]?key)[A-Za-z0-9_-]*['\"]"
            r"\s*[:=]\s*['\"][^\s'\"<>]{6,}"
        ),
        "a password or token assignment",
        ((("'", '"'), False), (("passw", "secret", "token", "key"), True), *_ASSIGNED),
    ),
    # A password in a URL's user part (scheme://user:password@host) and an Authorization header.
    (
        (r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:[^\s/@]{6,}@"),
        "a password in a URL",
        ((("://",), False), (("@",), False)),
    ),
    (
        (r"(?i)\bauthorization\s*:\s*(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{16,}"),
        "an Authorization header",
        ((("authorization",), True), ((":",), False)),
    ),
)
# Names secret files go by (leading dots stripped: attach.safe_name strips them too, so ".env"
# is "env" by then): key stores and private keys, dotenv files (agentmail's own secrets/<p>.env
# among them), SSH keys (id_rsa, id_ed25519_sk: no extension; id_rsa.pub is public), and the
# login files of common tools.
_SECRET_NAME = (
    r"(?i)^(?:.+\.(?:key|pem|p12|pfx|jks|keystore|ppk|kdbx|env)|env(?:\..*)?|id_[a-z0-9_]+"
    r"|netrc|_netrc|pgpass|htpasswd|npmrc|pypirc|git-credentials|credentials(?:\.json)?)$"
)
_PATH_ONLY = r"^@?(?:~|\.{1,2})?/?(?:[\w.@-]+/)*[\w.@-]+\.[A-Za-z0-9]{1,8}$|^(?:~|\.{0,2})/\S+$"


class Outbound(Frozen):
    """What the guards know about one letter about to leave.

    ``parent``: the letter it answers (None for a thread's first letter); for a
    follow-up, the thread's last letter. ``answered_by``: who of this platform already
    answered the parent ("<mailbox> <id>"). ``depth``: the new letter's depth."""

    type: str
    body: str
    me: str  # this platform
    parent: Letter | None = None
    follow_up: bool = False
    answered_by: str | None = None
    depth: int = 0
    force: bool = False  # the body checks only: never a way past the loop guards
    # The new-thread quota (only for a letter that opens a thread; notes are not counted):
    # how many this platform opened in the last hour, the cap, and when the oldest frees up.
    opened_last_hour: int = 0
    quota: int | None = None
    quota_frees: str = ""
    attachments: tuple[Attachment, ...] = ()  # scanned like the body, names too (``force`` skips both)
    acks_mine: bool = False  # a follow-up whose ``parent`` is the other side's ack of this platform's letter
    subject: str = ""  # as it leaves (a reply's "Re: ..."): scanned for credentials like the body
    ref: str = ""  # the block's ``ref`` (a new thread's): scanned like the subject


def refusal(out: Outbound) -> str | None:
    """Why this letter may not leave, or None when it may: the one guard for every path."""
    parent = out.parent
    if parent is not None:
        if out.depth >= MAX_DEPTH and parent.state != "quarantine":  # first: whatever else, a human
            return f"thread {parent.thread} is {out.depth} letters deep (cap {MAX_DEPTH}); it needs a human"
        reason = _follow_up_refusal(out, parent) if out.follow_up else _reply_refusal(out, parent)
        if reason:
            return reason
        if out.type == "note":
            return "a note is not an answer; use note()"
    elif protocol.letter_type(out.type).opens and out.quota is not None and out.opened_last_hour >= out.quota:
        return (f"new-thread quota reached: {out.me} opened {out.opened_last_hour} threads in the last hour "
                f"(new_threads_per_hour = {out.quota}); the next frees up at {out.quota_frees or 'within the hour'}; "
                "replies and follow-ups in existing threads are not counted (raise it: bus set new_threads_per_hour N)")  # fmt: skip
    if out.force:
        return None
    return (
        body_refusal(out.body)
        or subject_refusal(out.subject)
        or subject_refusal(out.ref, "ref")
        or attachment_refusal(out.attachments)
    )


def _reply_refusal(out: Outbound, parent: Letter) -> str | None:
    if parent.state == "quarantine":
        return f"letter {parent.id} is quarantined ({parent.reason}); it cannot be answered"
    if parent.state in ("sent", "outbox", "failed", "held"):
        return f"letter {parent.id} is one you sent; answer the letters you received"
    if parent.state == "sibling":
        return (f"letter {parent.id} is one this platform sent (from another of its mailboxes); "
                "answer the letters you received")  # fmt: skip
    if not protocol.letter_type(parent.type).answerable:
        article = "an" if parent.type == "ack" else "a"
        return f"letter {parent.id} is {article} {parent.type}, which is never answered"
    return _answered(parent, out.answered_by)


def _follow_up_refusal(out: Outbound, parent: Letter) -> str | None:
    """A follow-up continues after this platform's own last letter, nothing else."""
    thread = parent.thread
    if protocol.letter_type(parent.type).move == protocol.NOBODY:  # nobody moves after a close
        return f"thread {thread} is closed"
    if parent.sender != out.me:
        parent_type = parent.type or "letter"
        if parent_type == "ack" and out.acks_mine:
            if out.type in AFTER_ACK:
                return _answered(parent, out.answered_by)
            return (
                f"thread {thread} ends with {parent.sender}'s ack ({parent.id}) of your letter; after it you may "
                "add evidence (-t report) or withdraw (-t close), nothing else, until they move"
            )
        if parent_type in TERMINAL_TYPES:
            return (
                f"thread {thread} ends with {parent.sender}'s {parent_type} ({parent.id}), which is never "
                "answered; a follow-up continues only after your own last letter"
            )
        return (
            f"thread {thread} ends with {parent.sender}'s {parent_type} ({parent.id}); answer it with "
            "reply, a follow-up continues only after your own last letter"
        )
    return _answered(parent, out.answered_by)


def _answered(parent: Letter, answered_by: str | None) -> str | None:
    if not answered_by:
        return None
    mailbox, _, reply_id = answered_by.rpartition(" ")
    who = f"{mailbox}, letter {reply_id}" if mailbox else f"letter {reply_id}"
    return f"letter {parent.id} was already answered (by {who}); one reply per letter per platform"


def hold_reason(address: str, rules: tuple[str, ...], asked: bool) -> str | None:
    """Why a letter to ``address`` waits for a person's approval (``held/``), or None: the
    sender asked (``send --hold``), or a bus ``hold`` rule names the address or its domain."""
    if asked:
        return "held on request (--hold)"
    address = address.lower()
    domain = address.rpartition("@")[2]
    for rule in rules:
        if rule in (address, domain) or ("@" in rule and rule == _untagged(address)):
            return f"held by the bus rule hold = {rule!r}"
    return None


def letter_hold_reason(letter: Letter, rules: tuple[str, ...], asked: bool) -> str | None:
    """``hold_reason`` judged on every envelope recipient of ``letter`` (DESIGN §6): each platform
    it is to (a fan-out names several), and everyone it copies (the followers of every platform
    involved, the person a reply answers); never the sender's own address (a note's)."""
    if asked:
        return hold_reason(letter.to_address, rules, asked)
    own = letter.sender_address.lower()
    to = [a for a in letter.recipients or (letter.to_address,) if _untagged(a.lower()) != own]
    copied = [a for a in letter.cc if _untagged(a.lower()) != own]
    for address, role in [*((a, "") for a in to), *((a, f" ({a} is copied)") for a in copied)]:
        why = hold_reason(address, rules, asked)
        if why is not None:
            return why + role
    return None


def _untagged(address: str) -> str:
    local, _, domain = address.partition("@")
    return f"{local.split('+')[0]}@{domain}"


def _may_match(body: str, folded: str | None, needles: tuple[str, ...], fold: bool) -> bool:
    """False only when no match can exist: ``body`` holds none of the ``needles`` (lowercase
    ones for a case-insensitive pattern, looked for in ``folded``: the body lowercased, or None
    when it is not ASCII and so searched whatever it holds)."""
    if not fold:
        return any(needle in body for needle in needles)
    return folded is None or any(needle in folded for needle in needles)


def plain(text: str) -> str:
    """``text`` as a reader's eye takes it, for the credential scan: compatibility forms folded
    (a fullwidth "\uff1d" is "=") and invisible format characters (a zero-width space inside a
    name) dropped, so neither hides a secret a person or a program still reads as one."""
    if text.isascii():
        return text
    return for_terminal(unicodedata.normalize("NFKC", text))  # text.FORBIDDEN: every format character


def credential_in(text: str) -> str | None:
    """What kind of credential ``text`` looks like it holds ("a private key"...), or None."""
    text = plain(text)
    folded = text.lower() if text.isascii() else None
    # ``_may_match`` over every group, written out as loops: the generators it took were most of
    # the scan's CPU on a body without a credential (tests/stages/test_guards.py holds the two equal).
    for pattern, what, groups in _CREDENTIALS:
        for needles, fold in groups:
            haystack = folded if fold else text
            if haystack is None:  # case-insensitive, not ASCII: searched whatever it holds
                continue
            for needle in needles:
                if needle in haystack:
                    break
            else:
                break  # a group none of whose literals is there: no match
        else:
            if re.search(pattern, text):
                return what
    return None


def any_credential(texts: tuple[str, ...]) -> str | None:
    return next((what for what in map(credential_in, texts) if what), None)


def _texts_of(data: bytes) -> tuple[str, ...]:
    """An attachment's bytes as text: UTF-8, and when it holds zero bytes (UTF-16 or UTF-32, a
    Windows editor's "Unicode") also with them dropped, which leaves its ASCII as it reads."""
    text = data.decode("utf-8", "replace")
    if b"\x00" not in data:
        return (text,)
    return text, data.replace(b"\x00", b"").decode("utf-8", "replace")


def body_refusal(body: str) -> str | None:
    """Refuse bodies that leak a credential or that are only a path the reader cannot open."""
    what = credential_in(body)
    if what:
        return f"the body looks like it contains {what}; remove it (or pass --force if it is not a secret)"
    stripped = body.strip()
    if not stripped:
        return "the body is empty"
    if "\n" not in stripped and " " not in stripped and re.match(_PATH_ONLY, stripped):
        return f"the body is only a path ({stripped[:80]}); the reader cannot open your files — send the content (-b @FILE)"
    return None


def subject_refusal(subject: str, field: str = "subject") -> str | None:
    """Refuse a subject (or the ``ref``) that leaks a credential: a header every relay, client
    and digest shows."""
    what = credential_in(subject)
    if what:
        return f"the {field} looks like it contains {what}; remove it (or pass --force if it is not a secret)"
    return None


def attachment_refusal(attachments: tuple[Attachment, ...]) -> str | None:
    """Refuse an attachment (a file or a patch) whose name is a secret file's, or whose bytes
    hold what the body's credential scan refuses: the same rule for every byte that leaves."""
    for item in attachments:
        if re.match(_SECRET_NAME, item.name.lstrip(".")):
            return (f"attachment {item.name} is named like a secret file (a key, a .env, a login file); "
                    "attach something else (or pass --force if it is not a secret)")  # fmt: skip
        what = any_credential(_texts_of(item.data)) or credential_in(item.description) or credential_in(item.name)
        if what:
            return (f"attachment {item.name} looks like it contains {what}; remove it "
                    "(or pass --force if it is not a secret)")  # fmt: skip
    return None


# Each piece of advice: the pattern whose absence gives it, and the lowercase texts every match
# of it holds (None: no such list, as for a hex commit id), so an ASCII body holding none of
# them is advised without the search (``_may_match``).
_ADVICE: tuple[tuple[str, str, tuple[str, ...] | None], ...] = (
    (
        (r"(?i)\b(i am|i'm|we are|this is|from the|maintainer|platform|agent for)\b"),
        "say who you are and what you integrate with",
        ("i am", "i'm", "we are", "this is", "from the", "maintainer", "platform", "agent for"),
    ),
    (
        (r"(?im)^\s*(?:\$ |>>> |curl |python|pytest|agentmail |git |make |npm |go |cargo )|```|reproduc|steps to"),
        "include a reproduction the reader can run without your setup",
        (
            "$ ",
            ">>> ",
            "curl ",
            "python",
            "pytest",
            "agentmail ",
            "git ",
            "make ",
            "npm ",
            "go ",
            "cargo ",
            "```",
            "reproduc",
            "steps to",
        ),  # fmt: skip
    ),
    (
        (r"(?im)```|^ {4}\S|\b(output|error|traceback|got|returned|status)\b"),
        "paste the verbatim output",
        ("```", "    ", "output", "error", "traceback", "got", "returned", "status"),
    ),
    (
        (r"(?i)\b(expected|should|according to|per the|documented|spec|contract|previously)\b"),
        "say what you expected and on what authority",
        ("expected", "should", "according to", "per the", "documented", "spec", "contract", "previously"),
    ),
    (
        (r"(?i)\b(v?\d+\.\d+(\.\d+)?|version|commit|[0-9a-f]{7,40}|20\d\d-\d\d-\d\d|utc|today|since)\b"),
        "anchor it in a version, commit or time",
        None,
    ),
    (
        (r"(?i)\b(affect|impact|blast|users?|every|all|only|breaks?|blocks?)\b"),
        "state the blast radius",
        ("affect", "impact", "blast", "user", "every", "all", "only", "break", "block"),
    ),
    (
        (r"(?i)\b(please|could you|can you|want|need|asking|request|would like)\b"),
        "say what you want from the reader",
        ("please", "could you", "can you", "want", "need", "asking", "request", "would like"),
    ),
)
_INVISIBLE_PHRASES = (
    "the issue from earlier",
    "as discussed",
    "as mentioned",
    "see above",
    "see my ",
    "you know the one",
    "the same bug as before",
    "my logs",
    "my terminal",
)  # what _INVISIBLE matches, lowercased: a body without any of them is not searched
_INVISIBLE = r"(?i)\b(the issue from earlier|as discussed|as mentioned|see above|see my (?:last|previous)|you know the one|the same bug as before|my logs|my terminal)\b"


def opener_warnings(letter_type: str, body: str) -> list[str]:
    """Advice for the first letter of a thread, each a line of text (``Sent.advice``); never
    blocks. ``ack``/``close`` are exempt."""
    if letter_type in TERMINAL_TYPES:
        return []
    folded = body.lower() if body.isascii() else None
    warnings = [
        advice
        for pattern, advice, needles in _ADVICE
        if not (needles is None or _may_match(body, folded, needles, True)) or not _found(pattern, body, folded)
    ]
    invisible = _found(_INVISIBLE, body, folded) if _may_match(body, folded, _INVISIBLE_PHRASES, True) else None
    if invisible:
        warnings.append(f"'{body[invisible.start() : invisible.end()]}' leans on something the reader cannot see")
    return warnings


# re's ``\s`` on ASCII text, written out for an ASCII-only pattern (``(?a)\s`` lacks \x1c-\x1f).
_ASCII_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f "


def _found(pattern: str, body: str, folded: str | None) -> re.Match[str] | None:
    """``re.search(pattern, body)``'s span. An ASCII body is searched lowercased (``folded``) with
    ``_folded_form(pattern)``: the same span, for re's IGNORECASE is ASCII case on ASCII text and
    its ``\\w``, ``\\b``, ``\\d``, ``\\s`` there are the ASCII-only ones (``\\s`` spelt out), and
    the search runs twice as fast (the advice was a third of the guards' CPU on a send)."""
    if folded is None:
        return re.search(pattern, body)
    return re.search(_folded_form(pattern), folded)


@functools.cache  # of the eight patterns' text
def _folded_form(pattern: str) -> str:
    """``pattern`` (an advice's: flags ``(?i)`` or ``(?im)`` first) for a lowercased ASCII text:
    case-sensitive, ASCII-only."""
    flags, _, rest = pattern[2:].partition(")")
    rest = rest.replace("\\s", f"[{_ASCII_SPACE}]").replace("\\S", f"[^{_ASCII_SPACE}]")
    return f"(?{flags.replace('i', '')}a){rest}"
