"""Composing: what a sender chose, rendered, signed, and the Letter it is (a letter's path:
guards → compose, which renders with wire and signs with signing → spool outbox → transport).

    letter, raw = compose(registry, home, "alpha", Draft(to="beta", type="question",
                          thread=NEW_THREAD, subject="Quota", body="Why 500s?"))

No I/O apart from reading the sender's private key. The guards run before this (the client
decides whether a letter may leave); the spool files what this returns.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .. import bounds
from .._value import Frozen
from ..config.registry import Platform, Registry
from ..errors import BadInput
from ..model import Letter, bound_thread_id, new_ulid
from ..text import describe, forbidden_in_text

if TYPE_CHECKING:
    from ..letter.attach import Attachment


# A Draft's thread for a letter that opens one: compose mints its id, bound to the letter's
# From and Message-ID (model.bound_thread_id), once the Message-ID is chosen.
NEW_THREAD = ""


class Draft(Frozen):
    """What the sender chooses; everything else (Message-ID, date, id, signature) is generated."""

    to: str  # the recipient platform's name (this platform itself for a note)
    type: str
    thread: str  # NEW_THREAD: a new thread, bound to this letter
    subject: str
    body: str
    severity: str | None = None
    ref: str | None = None
    in_reply_to: str | None = None
    references: tuple[str, ...] = ()
    to_agent: str | None = None
    attachments: tuple[Attachment, ...] = ()  # the letter becomes multipart/mixed (attach.mixed)
    cc: tuple[str, ...] = ()  # people copied besides the followers (the person a reply answers)
    also_to: tuple[str, ...] = ()  # a fan-out: more recipient platforms, after ``to`` (DESIGN §6)
    outcome: str | None = None  # a verify-result's: confirmed | still-broken (model.OUTCOMES)


def compose(registry: Registry, home: Path, sender: str, draft: Draft) -> tuple[Letter, bytes]:
    """The signed RFC-822 bytes of ``draft`` from platform ``sender``, and the Letter they carry
    (the Letter is what is rendered: nothing is parsed back). BadInput for unsafe header text,
    ConfigError for a key that cannot sign or does not match the registry's pin."""
    from ..letter import wire  # loaded when a letter is written, not by every command
    from ..trust import signing

    bad = forbidden_in_text(draft.body)
    if bad is not None:  # the one character policy (text.py): a reader would be shown it as <U+...>
        raise BadInput(f"the body contains an invisible or control character ({describe(bad)}); refused")
    try:  # the reader's bounds (bounds.py), so no letter leaves that every reader would quarantine
        bounds.check_subject(draft.subject)
        bounds.check_references(len(draft.references))
        bounds.check_quoted(draft.body)
    except bounds.Exceeded as exc:
        raise BadInput(f"refused: {exc}") from None
    me = registry.get(sender)
    recipient = registry.get(draft.to)
    others = tuple(registry.get(name) for name in draft.also_to if name != draft.to)
    message_id = wire.new_message_id(me.name, me.domain)
    letter = Letter(
        message_id=message_id,
        sender=me.name,
        sender_address=me.address,
        sender_name=me.display_name or None,
        to=recipient.name,
        to_address=recipient.address,
        type=draft.type,
        thread=draft.thread or bound_thread_id(me.address, message_id),
        subject=draft.subject,
        body=draft.body.strip(),
        date=wire.format_date(datetime.now(UTC)),
        severity=draft.severity,
        ref=draft.ref,
        in_reply_to=draft.in_reply_to,
        references=draft.references,
        to_agent=draft.to_agent,
        id=new_ulid(),
        cc=tuple(dict.fromkeys((*followers(me, recipient, *others), *draft.cc))),
        list_id=wire.list_id(registry.bus.domain),
        recipients=tuple(dict.fromkeys(p.address for p in (recipient, *others))) if others else (),
        extra={"outcome": draft.outcome} if draft.outcome is not None else {},
    )
    try:
        unsigned = wire.render(letter)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    if draft.attachments:
        letter, unsigned = _with_attachments(registry, letter, unsigned, draft.attachments)
    try:  # a body may write lines a reader counts as multipart declarations (bounds.MULTIPARTS)
        bounds.check_multiparts(unsigned)
        bounds.check_address_header("Cc", ", ".join(letter.cc))
        bounds.check_address_header("To", ", ".join(letter.recipients))
    except bounds.Exceeded as exc:
        raise BadInput(f"refused: {exc}") from None
    raw = signing.sign_as(registry, home, me, unsigned)  # the key checked against the pin first
    limit = send_limit(registry.bus.max_size)
    if len(raw) > limit:  # every reader would quarantine it too-large: refused here instead
        what = "the letter with its attachments" if draft.attachments else "the letter"
        raise BadInput(
            f"{what} is {len(raw)} bytes; this bus takes at most {registry.bus.max_size} (bus set max_size), "
            f"{limit} as sent, leaving room for the headers mail servers add"
        )
    return letter, raw


# What mail servers add on the way (Received, Authentication-Results, their own DKIM-Signature,
# Return-Path, Delivered-To): a letter the sender lets through must still fit the reader's max_size.
TRANSIT_HEADROOM = 8192


def send_limit(max_size: int) -> int:
    """The largest signed letter a sender lets leave for a bus taking ``max_size`` bytes."""
    return max_size - min(TRANSIT_HEADROOM, max_size // 4)


def _with_attachments(
    registry: Registry, letter: Letter, unsigned: bytes, attachments: tuple[Attachment, ...]
) -> tuple[Letter, bytes]:
    """The rendered letter as multipart/mixed, within the bus's limits; BadInput saying why not."""
    from ..letter import attach, mime

    bus = registry.bus
    try:
        items = tuple(attach.check(item) for item in attachments)
        problem = attach.limit_problem(items, attach.limits_of(bus))
        if problem:
            raise BadInput(f"attachment refused: {problem}")
        unsigned = attach.mixed(unsigned, items)
    except mime.Refused as exc:
        raise BadInput(f"attachment refused: {exc}") from None
    extra = {**letter.extra, "attachments": [item.meta() for item in items]}
    return letter.replace(extra=extra), unsigned


def followers(*platforms: Platform) -> tuple[str, ...]:
    """Who is copied on a letter between these platforms: the followers of each, once, in registry
    order; never a platform's own address (its agents get the letter as To already)."""
    own = {p.address for p in platforms}
    return tuple(dict.fromkeys(a for p in platforms for a in p.followers if a not in own))
