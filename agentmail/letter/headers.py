"""The header fields of an arrived letter, read strictly (DESIGN §5.1): one value of a field as
text, an RFC 2047 word decoded, and who the letter is from and for (From, Sender, Reply-To, To,
Cc: each at most once, each read once). ``Malformed`` is the refusal all reading of a letter
raises (``wire`` re-exports it), with a reason code from DESIGN §8.

The email package is loaded only for what the plain forms agentmail writes cannot answer: an
encoded word, an address header that is not one plain mailbox.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import bounds
from ..text import one_line

if TYPE_CHECKING:
    from email.message import Message

_FOLD = r"\r?\n(?=[ \t])"  # a line break inside a header value that only folds it


class Malformed(ValueError):
    """A message agentmail will not hand to an agent: ``reason`` is a DESIGN §8 code."""

    def __init__(self, reason: str, detail: str, parsed: Message | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.parsed = parsed  # the message as parsed, when it was (its quarantine names the sender)


def header_values(msg: Message, name: str) -> list[str]:
    """Every value of header ``name`` as text (8-bit junk is kept escaped, never decoded)."""
    return [str(v) for v in msg.get_all(name) or []]


def decoded(value: str, name: str) -> str:
    """An RFC 2047 header value decoded to text; Malformed for an unknown charset or bad encoding."""
    if "=?" not in value:  # no encoded word: the email package gives the value back as it is
        return value
    from email.errors import HeaderParseError
    from email.header import decode_header, make_header

    try:
        return str(make_header(decode_header(value)))
    except (LookupError, UnicodeError, ValueError, HeaderParseError) as exc:
        raise Malformed("malformed", f"the {name} header cannot be decoded ({exc.__class__.__name__})") from None


@functools.cache
def _registry() -> Any:
    """The email package's header registry, for an address header that is not plain (loaded then)."""
    from email.headerregistry import HeaderRegistry

    return HeaderRegistry()


class _Addr(NamedTuple):
    display_name: str
    addr_spec: str


# A header value of one plain address, bare or after a name of plain words: what every agentmail
# letter carries. The email package's address parser (slow, and rarely needed) reads anything else.
_PLAIN_MAILBOX = (
    r"(?:([A-Za-z0-9_-]+(?: [A-Za-z0-9_-]+)*) <([A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>"
    r"|([A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*))"
)
# The headers that say who a letter is from and for (DESIGN §5.1): each at most once, each read
# once and strictly (``address_headers``), so agentmail, DKIM/DMARC and every mail client name the
# same mailboxes. From and Sender hold exactly one mailbox.
ADDRESS_HEADERS = ("From", "Sender", "Reply-To", "To", "Cc")
_ONE_MAILBOX = ("From", "Sender")
# The one defect the email package reports that names no other mailbox: an unquoted period in a
# display name (``J. Smith <j@x>``, RFC 5322 obs-phrase), which clients still write.
_HARMLESS_DEFECTS = ("period in 'phrase'",)
_ADDRESS_CACHE = "agentmail_addresses"


def _addresses(value: str, name: str) -> tuple[_Addr, ...]:
    """The mailboxes of one address header value, read strictly: the plain forms agentmail writes
    directly, anything else by the email package's header registry, which must report no defect
    (but an unquoted period in a name). A display name or comment that names an address other
    than the mailbox's own (``alice@x <mallory@x>`` is read as alice by lenient parsers and as
    mallory by mail clients) is Malformed."""
    plain = re.fullmatch(_PLAIN_MAILBOX, value)
    if plain is not None:  # the same answer as the parser below (tests/letter/test_render_fast.py)
        return (_Addr(plain.group(1) or "", plain.group(2) or plain.group(3)),)
    if not value.isascii():  # raw 8-bit: the email package reads it as U+FFFD, a client as it likes
        raise Malformed(
            "malformed", f"the {name} header holds 8-bit bytes: an address is ASCII, a name an RFC 2047 encoded word"
        )
    try:
        bounds.check_address_header(name, value)
    except bounds.Exceeded as exc:
        raise Malformed("too-large", str(exc)) from None
    try:
        header = _registry()(name, re.sub(_FOLD, "", value))  # From, To and Cc: address headers, all of them
        found = tuple(_Addr(a.display_name, a.addr_spec) for a in header.addresses)
    except Exception as exc:
        raise Malformed("malformed", f"the {name} header does not parse") from exc
    defects = [str(d) for d in header.defects if str(d) not in _HARMLESS_DEFECTS]
    if defects:
        raise Malformed("malformed", f"the {name} header does not parse cleanly ({one_line(defects[0])[:100]})")
    if name in _ONE_MAILBOX and any(group.display_name is not None for group in header.groups):
        raise Malformed("malformed", f"the {name} header holds a group (RFC 5322: a mailbox only)")
    # The comments read once for the header, not once per address (that was quadratic in a long
    # To); each distinct one that holds an "@" at most once, so an address is weighed against few.
    comments = list(dict.fromkeys(c for c in _comments(header) if _names_another(c, "")))
    for address in found:
        own = address.addr_spec.lower()
        for text in (address.display_name, *comments):
            if _names_another(text, own):
                raise Malformed(
                    "malformed",
                    f"the {name} header's display name or comment names another address than {own!r}: "
                    f"{one_line(text)[:80]!r}",
                )
    return found


def _comments(header: Any) -> list[str]:
    """The text of every comment in a parsed address header (``(...)``): clients show some."""
    found: list[str] = []
    stack = [getattr(header, "_parse_tree", None)]
    while stack:
        token = stack.pop()
        if getattr(token, "token_type", None) == "comment":
            found.append(str(token))
        elif isinstance(token, list):
            stack.extend(token)
    return found


def _names_another(text: str, own: str) -> bool:
    """Whether a display name or comment holds an ``@`` (after NFKC, so ``＠`` counts) and is not
    just the mailbox's own address (a name such as "alice@x" beside <alice@x> is common)."""
    import unicodedata

    folded = unicodedata.normalize("NFKC", text)
    if "@" not in folded:
        return False
    return folded.strip(" \t\"'<>()").lower() != own


def address_headers(msg: Message) -> dict[str, tuple[_Addr, ...]]:
    """Every header of ADDRESS_HEADERS present, read once and strictly (cached on ``msg``): more
    than one copy of one, a parser defect, or From/Sender without exactly one mailbox is
    Malformed ``malformed``. Every other reading of these headers goes through this one."""
    cached = getattr(msg, _ADDRESS_CACHE, None)
    if isinstance(cached, dict):
        return cached
    read: dict[str, tuple[_Addr, ...]] = {}
    for name in ADDRESS_HEADERS:
        values = header_values(msg, name)
        if len(values) > 1 or (name == "From" and not values):
            allowed = "exactly one is" if name == "From" else "at most one is"
            raise Malformed("malformed", f"the letter has {len(values)} {name} headers; {allowed} allowed")
        if not values:
            continue
        found = _addresses(values[0], name)
        if name in _ONE_MAILBOX and len(found) != 1:
            raise Malformed("malformed", f"the {name} header holds {len(found)} addresses; exactly one is allowed")
        read[name] = found
    setattr(msg, _ADDRESS_CACHE, read)
    return read
