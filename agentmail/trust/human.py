"""A person's letter (DESIGN §5): a person a platform lists with ``writes = true``
writes into its threads from any mail client.

A person has no pinned key: the letter is authenticated by the bus's trusted mail server
(a trusted Authentication-Results ``dkim=pass`` aligned with the From domain, or
``dmarc=pass`` for it), whatever the bus's ``policy`` for agents. It is always of type
``human``, attributed to the platform the person writes for, and shown as the person's new
text (``readable``). Headers the vouching signature does not cover (Cc, Reply-To, List-Id) are
not trusted: an unsigned Cc is left out, Reply-To and List-Id are never read (an agent answers
the platform's registered address).
"""

from __future__ import annotations

from email.message import Message

from ..config.registry import Platform, Registry
from ..letter import mime, partly_signed, readable, wire
from ..model import HUMAN, Letter
from ..text import visible
from . import auth_results, signing

# The headers that place a person's letter: the addressee and thread tag, the letter it answers.
PLACEMENT = ("in-reply-to", "references", "to")


def listed(registry: Registry, address: str) -> list[tuple[Platform, bool]]:
    """The platforms that list ``address`` as a person, with whether it ``writes`` for each (an
    approver writes too: their answer to an announcement is a letter like any person's)."""
    return [
        (platform, person.writes or person.approves)
        for platform in sorted(registry.platforms.values(), key=lambda p: p.name)
        for person in platform.people
        if person.address == address
    ]


def writes_for(registry: Registry, address: str, to_address: str) -> Platform | None:
    """The platform ``address`` writes for: one that is not the addressee if there is one
    (a person writes *to* another platform's agent for their own), else the first by name."""
    platforms = [p for p, writes in listed(registry, address) if writes]
    others = [p for p in platforms if p.address != to_address]
    chosen = others or platforms
    return chosen[0] if chosen else None


def _aligned(domain: str, signer: str) -> bool:
    """Relaxed alignment (RFC 7489 §3.1.1, without a public-suffix list): the same domain, or
    the From domain a subdomain of the signing one (never the other way round)."""
    return domain == signer or domain.endswith("." + signer)


def vouched(raw: bytes, msg: Message, registry: Registry, address: str) -> tuple[str | None, tuple[str, ...]]:
    """Whether the bus's trusted mail server vouches for a letter from ``address``: (the aligned
    signing domain that did, or "" for a dmarc=pass alone; the headers it vouches for: those its
    signature covers, or for a dmarc=pass alone the placement ones, PLACEMENT).
    Raises wire.Malformed ``verdict-fail`` / ``unauthenticated`` with a sentence otherwise."""
    bus = registry.bus
    domain = address.rpartition("@")[2]
    if not bus.trusted_authserv_ids:
        raise wire.Malformed(
            "unauthenticated",
            f"a person's letter ({address}) needs the bus's mail server to vouch for it, and this bus "
            "names no trusted_authserv_ids",
        )
    trusted = auth_results.read(wire.header_values(msg, "Authentication-Results"), bus.trusted_authserv_ids)
    if trusted.fails:
        raise wire.Malformed("verdict-fail", f"the bus's mail server reported {', '.join(trusted.fails)}")
    signer = next((d for d in trusted.dkim_pass_domains if _aligned(domain, d)), None)
    dmarc = any(d == domain for d in trusted.dmarc_pass_domains)
    if signer is None and not dmarc:
        ids = ", ".join(bus.trusted_authserv_ids)
        raise wire.Malformed(
            "unauthenticated",
            f"a person's letter from {address} carries no dkim=pass aligned with {domain} nor dmarc=pass "
            f"from the bus's mail server ({ids})",
        )
    limited = signing.length_limited(raw, domain)
    if limited is not None:
        raise wire.Malformed(
            "unauthenticated",
            f"{limited}'s signature limits the body length (l=), so what follows it is unsigned (a relay may have "
            "added it); refused for people as for agents",
        )
    if signer is None:
        # dmarc=pass with no aligned signature: SPF-aligned, the letter came straight from the
        # domain's own server, so where it goes (To, In-Reply-To, References) is as that server
        # sent it. Who else reads (Cc) is never taken without a signature.
        return "", PLACEMENT
    # The MIME headers it leaves out are weighed when the text is read (to_letter, partly_signed).
    return signer, signing.covered_by(raw, signer)


def to_letter(
    raw: bytes,
    msg: Message,
    registry: Registry,
    platform: Platform,
    covered: tuple[str, ...],
    signer: str | None = None,
) -> Letter:
    """The Letter a person's vouched-for letter is, attributed to ``platform`` (the one the
    person writes for); ``covered``: the headers the vouching signature covers (``vouched``).
    Only those decide anything: the To (the thread tag, the addressee), In-Reply-To and
    References (the letter it answers), Cc (who else reads); one that is not covered is not
    read (DESIGN §5); ``signer``: the aligned signing domain (``vouched``), whose signature may
    leave MIME headers out (then partly_signed decides whether the text can depend on them).
    Raises wire.Malformed (a DESIGN §8 reason) when it cannot be one."""
    sender_address, sender_name = wire.sender_of(msg)
    message_id = wire.message_id_of(msg)
    subject = wire.subject_of(msg)
    to_address = wire.to_address_of(msg) if "to" in covered else ""
    disposition_signed = "content-disposition" in covered
    unsigned = partly_signed.unsigned_of(covered) if signer else ()
    try:
        if unsigned:
            text = partly_signed.person_text(raw, msg, unsigned, disposition_signed=disposition_signed)
        else:
            text = readable.person_text(msg, cut=True, disposition_signed=disposition_signed)
    except (partly_signed.Ambiguous, partly_signed.Disagrees) as exc:
        raise wire.Malformed(
            "unauthenticated",
            f"the mail server's aligned dkim=pass does not vouch for the MIME headers: {signer}'s signature does not "
            f"cover {partly_signed.names(unsigned)}, and {exc}",
        ) from None
    except mime.Refused as exc:
        raise wire.Malformed("malformed", str(exc)) from None
    tag = wire.recipient_thread(msg, to_trusted="to" in covered)
    in_reply_to, references = wire.answered_ids(msg)
    to_platform = registry.by_address(to_address)
    return Letter(
        message_id=message_id,
        sender=platform.name,
        sender_address=sender_address,
        sender_name=sender_name or None,
        to=to_platform.name if to_platform else "",
        to_address=to_address,
        type=HUMAN,
        # No tag: a thread of its own, unless routing finds the letter it answers (route.route).
        thread=tag or wire.derived_thread(message_id),
        subject=subject,
        body=visible(text),  # nothing invisible reaches an agent (text.py): <U+E0069>
        date=" ".join(str(msg.get("Date", "")).split()),
        in_reply_to=in_reply_to if "in-reply-to" in covered else None,
        references=references if "references" in covered else (),
        cc=wire.cc_of(msg) if "cc" in covered else (),  # an unsigned Cc could name anyone
        extra={"person": sender_address},
    )
