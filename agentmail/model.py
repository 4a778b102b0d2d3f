"""The values agentmail passes around: letters, their types, and the rules for names and ids.

Pure: no I/O, no third-party imports. Everything a user may type that ends up in a header is
checked here, because Python 3.11's email package will fold a CR/LF straight into a header.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from . import ages, bounds
from ._value import Frozen, field
from .errors import BadInput
from .protocol import HUMAN as HUMAN
from .protocol import SENDABLE
from .protocol import TERMINAL_TYPES as TERMINAL_TYPES
from .protocol import TYPES as TYPES
from .text import describe, forbidden_in_header


class Hash(Protocol):
    """What agentmail asks of a SHA-256 object (hashlib's, and the interpreter's own)."""

    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...
    def hexdigest(self) -> str: ...


def _own_sha256() -> Callable[[bytes], Hash]:
    """The interpreter's own SHA-256 (``_sha2`` from Python 3.12, ``_sha256`` before): importing
    hashlib first maps OpenSSL's libcrypto (~2 ms), which nothing else a send or a read does needs."""
    for name in ("_sha2", "_sha256"):
        try:
            built: Callable[[bytes], Hash] = importlib.import_module(name).sha256
        except (ImportError, AttributeError):
            continue
        return built
    import hashlib  # an interpreter built without its own

    return hashlib.sha256


_sha256: Callable[[bytes], Hash] | None = None


def sha256(data: bytes = b"", /) -> Hash:
    """A SHA-256 of ``data``, as ``hashlib.sha256(data)``: the hash of every letter, key and id
    agentmail writes. Its module is loaded with the first hash (``inbox --no-sync`` takes none)."""
    global _sha256
    if _sha256 is None:
        _sha256 = _own_sha256()
    return _sha256(data)


SEVERITIES = ("low", "medium", "high", "critical")
# What a verify-result says happened. Absent: not stated (an older sender, or none
# given); ``status`` then reads "verified", as it always did, and the text says the rest.
OUTCOMES = ("confirmed", "still-broken")

# Why a letter is quarantined: its ``reason`` in ``--json`` (DESIGN §5, §8). A contract: codes
# are added, never renamed. ``misaddressed``: its signed recipients do not name this platform;
# ``not-a-party``: it writes into a thread of platforms it is none of.
QUARANTINE_REASONS = (
    "malformed",
    "too-large",
    "unregistered-sender",
    "verdict-fail",
    "unauthenticated",
    "automated",
    "loop",
    "thread-mismatch",
    "attachment-refused",
    "misaddressed",
    "not-a-party",
    "awaiting-parent",  # an answer whose letter is not filed here yet: it waits for it
)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
THREAD_RE = re.compile(r"^thr-[0-9a-z]{6,26}$")

MAX_SUBJECT = bounds.SUBJECT
MAX_REF = bounds.REF


def check_name(kind: str, value: str) -> str:
    """A platform or agent name: lowercase, digits and dashes, 1-32 characters."""
    if not NAME_RE.fullmatch(value or ""):
        raise BadInput(f"{kind} name {value!r} must match ^[a-z0-9][a-z0-9-]{{0,31}}$")
    return value


def check_header_text(kind: str, value: str, limit: int) -> str:
    """Text that becomes part of a header: no forbidden character (text.py), bounded length.

    Tabs are allowed (they are whitespace in a header); CR, LF, NUL, bidi controls and the rest
    are refused rather than folded, so a subject can never smuggle in a Bcc or hide its text.
    """
    bad = forbidden_in_header(value)
    if bad is not None:
        raise BadInput(f"{kind} contains a control character ({describe(bad)}: CR, LF, NUL, bidi...); refused")
    if len(value) > limit:
        raise BadInput(f"{kind} is {len(value)} characters; the limit is {limit}")
    if not value.strip():
        raise BadInput(f"{kind} is empty")
    return value


def check_type(value: str) -> str:
    if value not in TYPES:
        raise BadInput(f"unknown type {value!r}; one of: {', '.join(TYPES)}")
    return value


def check_filter_type(value: str | None) -> str | None:
    """A type a filter may name (``wait --type``, ``search --type``): a letter's type or ``human``.
    A misspelt one is refused at once, never waited out."""
    if value is not None and value not in (*TYPES, HUMAN):
        close = value.lower().replace("_", "-")
        hint = f"; did you mean {close!r}?" if close in (*TYPES, HUMAN) else ""
        raise BadInput(f"unknown type {value!r}{hint} (one of: {', '.join((*TYPES, HUMAN))})")
    return value


_NOTE_ADVICE = "a note to a sibling agent: use note() in Python, 'agentmail note' on the command line"


def check_sendable(value: str) -> str:
    """A type a letter to another platform may have: the ones ``send -t`` lists (not ``note``)."""
    if value == "note":
        raise BadInput(f"type 'note' is {_NOTE_ADVICE}")
    if value not in SENDABLE:
        raise BadInput(f"unknown type {value!r}; one of: {', '.join(SENDABLE)} ({_NOTE_ADVICE})")
    return value


def check_severity(value: str | None) -> str | None:
    if value is not None and value not in SEVERITIES:
        raise BadInput(f"unknown severity {value!r}; one of: {', '.join(SEVERITIES)}")
    return value


def check_outcome(value: str | None, letter_type: str) -> str | None:
    """An outcome is one of OUTCOMES, and only a verify-result carries one."""
    if value is None:
        return None
    if value not in OUTCOMES:
        raise BadInput(f"unknown outcome {value!r}; one of: {', '.join(OUTCOMES)}")
    if letter_type != "verify-result":
        raise BadInput(f"an outcome is for a verify-result, not a {letter_type}")
    return value


def check_thread(value: str) -> str:
    if not THREAD_RE.fullmatch(value or ""):
        raise BadInput(f"thread id {value!r} must match thr-<6-26 lowercase letters/digits>")
    return value


def thread_id(value: str) -> str:
    """A thread id as a user typed it: any case and surrounding space accepted, as letter ids
    are (``THR-9F2A41`` is ``thr-9f2a41``); checked like ``check_thread`` once lowered."""
    lowered = str(value).strip().lower()
    if not THREAD_RE.fullmatch(lowered):
        raise BadInput(f"thread id {value!r} must match thr-<6-26 letters/digits> (any case)")
    return lowered


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"  # the one alphabet of ids (ULIDs, threads)
_last_ulid = (0, 0)
_ulid_lock = threading.Lock()


def new_ulid() -> str:
    """A ULID (48-bit milliseconds + 80 random bits, Crockford base32, lowercase): ids sort by
    creation. Within one millisecond the random part counts up, so they still sort in order
    (monotonic ULIDs). Ten lines instead of a dependency to import at every start."""
    global _last_ulid
    now = time.time_ns() // 1_000_000 if ages.clock is None else ages.now_ms()  # tests move the clock
    with _ulid_lock:
        # os.urandom is what secrets uses; importing secrets would load hashlib and OpenSSL
        rand = _last_ulid[1] + 1 if now <= _last_ulid[0] else int.from_bytes(os.urandom(10))
        now = max(now, _last_ulid[0])  # a clock step back never makes a smaller id
        _last_ulid = (now, rand)
    value = (now << 80) | (rand & ((1 << 80) - 1))
    return _base32(value, 26)


def _base32(value: int, chars: int) -> str:
    """The last ``chars`` * 5 bits of ``value``, in Crockford base32 (lowercase), most significant first."""
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(5 * chars - 5, -1, -5))


def ulid_floor(ms: int) -> str:
    """The smallest ULID made at ``ms`` (clamped to a ULID's 48 bits of ms): every id made at
    ``ms`` or later sorts at or after it; its first ten characters are the time alone."""
    return _base32(min(max(ms, 0), (1 << 48) - 1) << 80, 26)


def ulid_ms(ulid: str) -> int:
    """The creation time of a ULID made by ``new_ulid``, in ms since the epoch (-1: not one)."""
    try:
        return int("".join(f"{_CROCKFORD.index(c):05b}" for c in ulid[:10]), 2)
    except ValueError:
        return -1


def opener_key(message_id: str) -> str:
    """What a thread's first letter is counted by, on every machine of its platform (the
    new-thread quota, DESIGN §6): 16 hex digits of the SHA-256 of its Message-ID. The post
    office's marker is named ``<ms>-<key>`` and the spool's ``openers`` rows hold it, so both
    counts merge by name without reading a letter."""
    return sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def new_thread_id() -> str:
    """``thr-`` + 10 lowercase base32 characters (50 bits of randomness): a thread id as versions
    before bound threads minted it (their letters still carry such ids; a test writes them)."""
    value = int.from_bytes(os.urandom(7)) >> 6  # 56 random bits, 50 kept: each character uniform
    return "thr-" + _base32(value, 10)


BOUND_CHARS = 20  # the length of a bound thread id after ``thr-`` (100 bits); no other id has it


def bound_thread_id(address: str, message_id: str) -> str:
    """The id of the thread a letter opens, bound to it: ``thr-`` + 20 Crockford base32
    characters of the SHA-256 over its From address (lowercased) and its Message-ID. Only the
    opener's signed From and Message-ID make it, so no other letter can claim to be a thread's
    opener (stages/route.py: a letter into a bound thread new here that is not its opener waits
    for it)."""
    bound = f"{address.strip().lower()}\n{message_id.strip()}".encode("utf-8", "surrogatepass")
    return "thr-" + _base32(int.from_bytes(sha256(bound).digest()), BOUND_CHARS)


def is_bound(thread: str) -> bool:
    """A thread id minted by ``bound_thread_id`` (by its length: older ids are shorter, random)."""
    return len(thread) == 4 + BOUND_CHARS and bool(THREAD_RE.fullmatch(thread))


def bound_to(letter: Letter) -> bool:
    """Whether ``letter``'s thread id is bound to it: it is that thread's opener (False for an
    unbound thread)."""
    return is_bound(letter.thread) and letter.thread == bound_thread_id(letter.sender_address, letter.message_id)


def strip_re(subject: str) -> str:
    """The subject with any number of leading ``Re:`` (any case) removed."""
    return re.sub(r"^(?:\s*re\s*:\s*)+", "", subject, flags=re.IGNORECASE)


def reply_subject(subject: str) -> str:
    """Exactly one ``Re:``, however many the original carried."""
    return "Re: " + strip_re(subject)


class Letter(Frozen):
    """One letter as agentmail understands it, parsed from or rendered to RFC-822."""

    message_id: str
    sender: str  # platform name of the From address ("" when unregistered)
    sender_address: str
    to: str  # platform name of the recipient
    to_address: str
    type: str
    thread: str
    subject: str
    body: str  # front matter stripped
    date: str  # RFC 2822 date as on the wire
    severity: str | None = None
    ref: str | None = None
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()
    to_agent: str | None = None
    sender_name: str | None = None  # display name: shown, never trusted
    id: str = ""  # local spool id, assigned when stored
    state: str = ""
    reason: str | None = None  # quarantine reason code
    detail: str | None = None  # quarantine sentence
    depth: int = 0  # its place in the thread's In-Reply-To chain (set when filed; none in quarantine)
    cc: tuple[str, ...] = ()  # the people copied (the followers of both platforms, DESIGN §3)
    list_id: str | None = None  # the bus's List-Id, for a person's one filter rule
    # A fan-out letter's every recipient platform address, in To order (DESIGN §6); empty for a
    # letter to one platform (``to_address`` says who), so such letters read as they always did.
    recipients: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # facts learnt later (annotations)

    @property
    def outcome(self) -> str | None:
        """A verify-result's ``outcome`` (OUTCOMES), None when not stated. Kept in ``extra`` so
        every other letter's record and ``--json`` shape stay as they were."""
        value = self.extra.get("outcome")
        return value if value in OUTCOMES else None

    def to_json(self) -> dict[str, Any]:
        """The documented ``--json`` shape (DESIGN §8)."""
        # Field by field, not dataclasses.asdict: its deep copy of every tuple and string is paid
        # for every letter of a sync. Only ``extra`` can hold something mutable.
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        data["extra"] = {}
        if self.extra:  # facts learnt later: most letters have none, and a read then loads no copy
            import copy

            data["extra"] = copy.deepcopy(self.extra)
        data["from"] = data.pop("sender")
        data["references"] = list(self.references)
        data["cc"] = list(self.cc)
        if self.recipients:
            data["recipients"] = list(self.recipients)
        else:
            data.pop("recipients")
        extra = data.pop("extra")
        if self.state == "quarantine":
            data.pop("depth")
        else:
            data.pop("reason")
            data.pop("detail")
        data.update(extra)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Letter:
        """The Letter a ``to_json`` record (a spool meta record) describes; unknown keys go to ``extra``."""
        known = {k: v for k, v in data.items() if k in _LETTER_FIELDS}
        known["references"] = tuple(known.get("references") or ())
        known["cc"] = tuple(known.get("cc") or ())
        known["recipients"] = tuple(known.get("recipients") or ())
        known["depth"] = int(known.get("depth") or 0)
        extra = {k: v for k, v in data.items() if k not in _LETTER_FIELDS and k != "from"}
        for name in ("message_id", "sender_address", "to", "to_address", "type", "thread", "subject", "body", "date"):
            known.setdefault(name, "")
        return cls(sender=data.get("from") or "", extra=extra, **known)


_FIELD_NAMES = Letter._fields
_LETTER_FIELDS = set(_FIELD_NAMES) - {"sender", "extra"}


class ThreadStatus(Frozen):
    """Where one thread stands (a row of ``status``). ``to_json`` is the documented ``--json`` row."""

    thread: str
    subject: str
    state: str  # the lifecycle word: reported, acknowledged, fix announced, verified, closed...
    last_type: str
    whose_move: str  # "me", the other platform, or "nobody"
    letters: int
    with_: str  # the other platform ("with" in JSON)
    last_id: str
    undeliverable: bool
    delivery: str  # sent | queued | failed | received
    delivery_detail: str = ""
    # A fan-out thread (opened to several platforms): one row per counterpart, each with its own
    # ``with``/``whose_move``/``state``/``last_type``/``last_id``; empty for a two-party thread.
    recipients: tuple[dict[str, Any], ...] = ()
    delivery_id: str = ""  # the letter ``delivery`` is about (held, queued or failed), "" for sent/received
    # When the thread's first and last letters were filed here (their ids' time, ms; -1: unknown):
    # its age, and the time since its last move.
    opened_ms: int = -1
    moved_ms: int = -1
    outcome: str = ""  # the last letter's outcome when it is a verify-result that states one, else ""

    def idle(self, now_ms: int) -> float:
        """Seconds since the thread's last move."""
        return max(0, now_ms - self.moved_ms) / 1000

    def to_json(self) -> dict[str, Any]:
        row = {
            "delivery": self.delivery,
            "delivery_detail": self.delivery_detail,
            "delivery_id": self.delivery_id,
            "thread": self.thread,
            "subject": self.subject,
            "state": self.state,
            "last_type": self.last_type,
            "whose_move": self.whose_move,
            "letters": self.letters,
            "with": self.with_,
            "last_id": self.last_id,
            "undeliverable": self.undeliverable,
            "outcome": self.outcome,
        }
        if self.opened_ms >= 0:  # ISO 8601 UTC
            row["opened_at"] = ages.iso(self.opened_ms)
            row["last_move_at"] = ages.iso(self.moved_ms)
        if self.recipients:
            row["recipients"] = [dict(r) for r in self.recipients]
        return row
