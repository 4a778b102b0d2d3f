"""Letters written for people, not agents: the digest and the "needs a person"
announcement. A person reads them in any mail client, so they are plain text in short lines
(at most 78 characters), with no agentmail front matter and no X-Agentmail-Type: an agent
never files one (they go only to people), and a person's client threads them by In-Reply-To.

    message_id, raw = compose_for_people(registry, home, "alpha", ("carol@people.test",),
                                         "alpha: digest", "Open threads: 2 ...")

Like ``compose``, no I/O but reading the platform's private key; the letter is signed with it
(DKIM, as every letter of the platform), ``Auto-Submitted: auto-generated`` (RFC 3834: no
vacation responder answers it).
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.headerregistry import Address
from email.message import EmailMessage
from pathlib import Path

from .. import frame
from ..config.registry import Registry
from ..errors import BadInput, ConfigError
from ..letter import wire
from ..text import describe, forbidden_in_text, one_line, visible
from ..trust import signing

LINE = 78  # RFC 5322's "SHOULD" for a line, and what every client shows without wrapping


def wrap(text: str, width: int = LINE) -> str:
    """Every line of ``text`` at most ``width`` characters: a long line is wrapped at its spaces,
    continuing at its own indent (a word longer than a line is cut)."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))][: width // 2]
        out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent + "  ",
                             break_long_words=True, break_on_hyphens=False)  # fmt: skip
    return "\n".join(out)


def quoted(text: str, limit: int = 400) -> str:
    """Text from another party, shown to a person as what it is: every line quoted with ``> ``,
    invisible characters written out (``<U+202E>``), at most ``limit`` characters."""
    shown = visible(text).strip()
    if len(shown) > limit:
        shown = shown[:limit].rstrip() + " [...]"
    lines = wrap(shown, LINE - 2).splitlines() or [""]
    return "\n".join(("> " + line).rstrip() for line in lines)


def subject_of(text: str, limit: int = 60) -> str:
    """A subject from a letter, as one safe line within ``limit`` characters, in quotes its own
    quotes cannot end (frame.py)."""
    line = one_line(text).strip()
    if len(frame.quoted(line)) <= limit + 2:
        return frame.quoted(line)
    cut = line[: limit - 3]
    while len(frame.quoted(cut.rstrip() + "...")) > limit + 2:  # its escapes count: it still fits
        cut = cut[:-1]
    return frame.quoted(cut.rstrip() + "...")


def compose_for_people(
    registry: Registry,
    home: Path,
    sender: str,
    to: tuple[str, ...],
    subject: str,
    body: str,
    *,
    reply_to: str | None = None,
    in_reply_to: str | None = None,
    references: tuple[str, ...] = (),
    as_written: bool = False,
) -> tuple[str, bytes]:
    """The Message-ID and signed bytes of a letter from platform ``sender`` to the people ``to``.
    ``as_written``: the body's lines are kept as they are, not wrapped (a letter a person judges
    word for word: an approval), and go quoted-printable when one is longer than ``LINE``."""
    me = registry.get(sender)
    if not to:
        raise ConfigError(f"{sender} has no followers to write to ('agentmail person {sender} ADDRESS --follows')")
    text = (body.strip() if as_written else wrap(body.strip())) + "\n"
    bad = forbidden_in_text(text)
    if bad is not None:  # quoted text went through visible(): this is agentmail's own text failing
        raise BadInput(f"the letter for people contains {describe(bad)}; refused")
    message_id = wire.new_message_id(me.name, me.domain)
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address(me.display_name or "", addr_spec=me.address)
    msg["To"] = ", ".join(to)
    if reply_to:
        msg["Reply-To"] = reply_to
    msg["Subject"] = one_line(subject)
    msg["Date"] = wire.format_date(datetime.now(UTC))
    msg["Message-ID"] = message_id
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = " ".join(references)
    msg["Auto-Submitted"] = "auto-generated"
    msg["List-Id"] = wire.list_id(registry.bus.domain)
    short = all(len(line) <= LINE for line in text.splitlines())
    cte = "7bit" if text.isascii() and short else "quoted-printable"
    msg.set_content(text, charset="utf-8", cte=cte)
    unsigned = msg.as_bytes()
    return message_id, signing.sign_as(registry, home, me, unsigned)


def visible_part(raw: bytes) -> str:
    """The text a mail client shows of such a letter (tests and ``digest`` read it back)."""
    msg = message_from_bytes(raw, policy=policy.default)
    part = msg.get_body(preferencelist=("plain",))
    return "" if part is None else str(part.get_content()).replace("\r\n", "\n")
