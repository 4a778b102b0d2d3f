"""Inbound authenticity (DESIGN §5): decide what an arrived message is before any agent sees it.

``judge`` returns a Verdict: accept, quarantine (with a reason code and a sentence), or bounce
(a delivery-status notification, to be attached to the sent letter it reports on). The checks
that need local state — duplicates, ancestry, bounce routing, a sibling's note — come next, in
``route`` (with facts the client reads from the spool).
"""

from __future__ import annotations

import re
from email.message import Message
from typing import NamedTuple

from .. import bounds
from .._value import Frozen
from ..ages import now_ms
from ..config.registry import PERSON_RE, Platform, Registry
from ..letter import attach, mime, wire
from ..model import Letter
from ..text import one_line
from . import auth_results, human, signing

MAX_HOPS = bounds.HOPS
_AUTOMATED_SENDERS = re.compile(r"^(mailer-daemon|postmaster|no-?reply|bounces?)@", re.IGNORECASE)


class Verdict(Frozen):
    route: str  # accept | quarantine | bounce
    letter: Letter | None = None
    reason: str | None = None
    detail: str | None = None
    bounced_message_id: str | None = None  # for route == "bounce"
    failed_recipients: tuple[str, ...] = ()  # for route == "bounce": who failed, as the bus's server vouches
    unvouched: str | None = None  # for route == "bounce": why nothing vouches for it (None: the bus's server does)
    summary: dict[str, str] | None = None  # from/subject/message_id for a quarantine listing
    # For route == "accept": every address (untagged, lowercase) the vouching signature names as
    # a recipient, To and Cc: the only mailboxes that may accept the letter (route, "misaddressed").
    addressed: tuple[str, ...] = ()


def _quarantine(reason: str, detail: str, msg: Message | None = None) -> Verdict:
    summary: dict[str, str] = {}
    if msg is not None:
        for key, header in (("from", "From"), ("subject", "Subject"), ("message_id", "Message-ID"), ("date", "Date")):
            try:
                value = str(msg.get(header, ""))
            except Exception:
                value = ""
            summary[key] = one_line(value)[:200]
    return Verdict("quarantine", reason=reason, detail=detail, summary=summary)


def _bounced_message_id(msg: Message) -> str | None:
    """The Message-ID of our letter that a delivery-status notification reports on."""
    for part in msg.walk():
        ctype = part.get_content_type()
        if ctype in ("message/rfc822", "text/rfc822-headers", "message/rfc822-headers"):
            payload = part.get_payload()
            text = ""
            if isinstance(payload, list) and payload and isinstance(payload[0], Message):
                text = str(payload[0].get("Message-ID", ""))
            elif isinstance(payload, str):  # the compat32 parser decodes every payload to str
                found = re.search(r"^Message-ID:\s*(<[^>\s]+>)", payload, re.IGNORECASE | re.MULTILINE)
                text = found.group(1) if found else ""
            text = text.strip()
            if wire.MESSAGE_ID_RE.fullmatch(text):
                return text
    return None


def _failed_recipients(msg: Message) -> tuple[str, ...]:
    """The addresses a delivery-status part reports as failed (``Action: failed``), lowercased:
    ``Final-Recipient`` and ``Original-Recipient`` of each per-recipient block (RFC 3464)."""
    found: list[str] = []
    for part in msg.walk():
        payload = part.get_payload()
        if part.get_content_type() != "message/delivery-status" or not isinstance(payload, list):
            continue
        for block in payload[1:]:  # the first block is the per-message one
            if not isinstance(block, Message) or str(block.get("Action", "")).strip().lower() != "failed":
                continue
            for field in ("Final-Recipient", "Original-Recipient"):
                kind, _, address = str(block.get(field, "")).partition(";")
                address = address.strip().strip("<>").strip().lower()
                if kind.strip().lower() == "rfc822" and PERSON_RE.fullmatch(address) and address not in found:
                    found.append(address)
    return tuple(found)


def _within(domain: str, owner: str) -> bool:
    return domain == owner or domain.endswith("." + owner)


_MAIL_SYSTEM = re.compile(r"^(mailer-daemon|postmaster)@", re.IGNORECASE)


def _mail_system_of(msg: Message) -> str:
    """The domain whose mail system the report says it is from (From: MAILER-DAEMON@ or
    postmaster@ there), else "": a provider's every user signs with its domain, but none of them
    writes as its mail system."""
    try:
        sender = wire.sender_of(msg)[0].lower()
    except wire.Malformed:
        return ""
    return sender.rpartition("@")[2] if _MAIL_SYSTEM.search(sender) else ""


def _speaks_for(address: str, system: str, bus_domain: str) -> tuple[str, ...]:
    """The domains whose pass vouches for ``address`` failing: the bus's (for any recipient) and
    the recipient's own, each only when the report is from that domain's mail system."""
    domain = address.rpartition("@")[2]
    return tuple(owner for owner in (bus_domain, domain) if system and _within(system, owner))


def _platform_signed(raw: bytes, registry: Registry) -> str | None:
    """The platform (and selector) whose key a DKIM-Signature of ``raw`` names: a platform of the
    bus signs with the bus's domain, so a pass for that domain on its letter is the platform's
    word, never the mail system's."""
    for domain, selector in signing.signers(raw):
        for platform in registry.platforms.values():
            mine = (platform.selector, platform.retiring.selector if platform.retiring else platform.selector)
            if domain == platform.dkim_domain and selector in mine:
                return f"{platform.name} (s={selector})"
    return None


def _vouched_recipients(
    msg: Message, registry: Registry, failed: tuple[str, ...], raw: bytes
) -> tuple[tuple[str, ...], str | None]:
    """Which of the ``failed`` recipients the bus's mail system vouches for, and why none is
    (None: some are). The local post office writes no reports (a recipient it has not is refused
    when the letter is sent); on smtp+imap a trusted Authentication-Results must pass DKIM or
    DMARC for the bus's domain, or for the failed recipient's own (its mail system speaking for
    its mailbox: a domain vouches for no other's), with no trusted fail. Anyone can write a
    report; only these say that a letter did not arrive."""
    bus = registry.bus
    if bus.transport == "local":
        return (
            (),
            "the local post office writes no delivery reports (it refuses an unknown recipient when a letter is sent)",
        )
    if not failed:
        return (), "it names no failed recipient (Final-Recipient with Action: failed)"
    platform = _platform_signed(raw, registry)
    if platform:
        return (
            (),
            f"it is signed by the platform {platform}, not by the bus's mail system: a platform never reports another's delivery",
        )
    trusted = auth_results.read(wire.header_values(msg, "Authentication-Results"), bus.trusted_authserv_ids)
    passed = (*trusted.dkim_pass_domains, *trusted.dmarc_pass_domains)
    system = _mail_system_of(msg)
    vouched = tuple(
        address
        for address in failed
        if any(_within(domain, owner) for domain in passed for owner in _speaks_for(address, system, bus.domain))
    )
    if trusted.fails or not vouched:
        return (), (
            "the bus's mail server does not vouch for it (no trusted Authentication-Results passing DKIM or "
            f"DMARC for {bus.domain} or the failed recipient's domain)"
        )
    return vouched, None


def _automated(msg: Message, registry: Registry, raw: bytes) -> Verdict | None:
    ctype = msg.get_content_type()
    try:  # the one strict reading of From (a From that does not parse is judged malformed later)
        from_mail_system = bool(_AUTOMATED_SENDERS.search(wire.sender_of(msg)[0]))
    except wire.Malformed:
        from_mail_system = False
    if ctype == "multipart/report" or (from_mail_system and msg.is_multipart()):
        report = str(msg.get_param("report-type", "") or "").lower()
        if ctype != "multipart/report" or report in ("delivery-status", ""):
            original = _bounced_message_id(msg)
            if original:
                vouched, doubt = _vouched_recipients(msg, registry, _failed_recipients(msg), raw)
                return Verdict("bounce", bounced_message_id=original, detail=_dsn_reason(msg),
                               failed_recipients=vouched, unvouched=doubt)  # fmt: skip
        return _quarantine("automated", f"a {ctype} report ({report or 'no type'}), not a letter", msg)
    if from_mail_system:
        return _quarantine("automated", "sent by a mail system, not an agent", msg)
    auto = str(msg.get("Auto-Submitted", "no")).strip().lower().split(";")[0].strip()
    if auto not in ("no", "auto-generated"):
        return _quarantine("automated", f"an automatic response (Auto-Submitted: {auto})", msg)
    precedence = str(msg.get("Precedence", "")).strip().lower()
    if precedence in ("auto_reply", "bulk", "junk", "list"):
        return _quarantine("automated", f"an automatic or bulk message (Precedence: {precedence})", msg)
    return None


def _dsn_reason(msg: Message) -> str:
    for part in msg.walk():
        if part.get_content_type() == "message/delivery-status":
            # the parser always splits message/delivery-status into its blocks (RFC 3464)
            text = "\n".join(str(block) for block in part.get_payload())
            found = re.search(r"^Diagnostic-Code:\s*(.+)$", text, re.IGNORECASE | re.MULTILINE)
            status = re.search(r"^Status:\s*(\S+)", text, re.IGNORECASE | re.MULTILINE)
            bits = [b.group(1).strip() for b in (status, found) if b]
            if bits:
                return one_line(" ".join(bits))[:300]
    return "the mail system reported the letter undeliverable"


# Headers that decide where an agent's letter goes (the thread tag and the platform it is for, the
# letter it answers): under ``aligned`` each present must be covered by the vouching signatures.
_DECIDING = ("To", "In-Reply-To", "References")


def _unvouched_deciding(raw: bytes, msg: Message, domain: str) -> str | None:
    covered = signing.covered_by(raw, domain)
    missing = [h for h in _DECIDING if msg.get(h) is not None and h.lower() not in covered]
    return f"{domain}'s signature does not cover {', '.join(missing)}" if missing else None


def pinned_key(platform: Platform) -> signing.PinnedKey:
    return signing.PinnedKey(
        domain=platform.dkim_domain or platform.domain,
        selector=platform.selector,
        algorithm=platform.algorithm,
        public_key=platform.public_key if platform.key_lookup == "pinned" else "",
    )


def _by_retiring_key(
    raw: bytes, platform: Platform, current: signing.DkimResult, at: float | None = None
) -> tuple[signing.DkimResult, str]:
    """A letter the current key does not verify, tried against the key before the rotation:
    (its result, "" while the window lasts at ``at``, the time it arrived, now if None; else why
    it is refused). An old key's signature after the window is refused with a reason that says
    so, never as "no valid signature"."""
    old = platform.retiring
    assert old is not None
    key = signing.PinnedKey(platform.dkim_domain or platform.domain, old.selector, old.algorithm, old.public_key)
    result = signing.verify(raw, key)
    if not result.ok:
        return current, ""
    if not old.valid_at(now_ms() / 1000 if at is None else at):
        return current, (
            f"signed with {platform.name}'s previous key (s={old.selector}), whose overlap ended at {old.until}; "
            f"the registry pins s={platform.selector} now: ask {platform.name} to send it again"
        )
    return result, ""


def _person(raw: bytes, msg: Message, registry: Registry, address: str) -> Verdict:
    """A letter from no platform: a person's, if a platform lists them as one who writes
    (human.py), and the bus's mail server vouches for it; quarantined otherwise."""
    listing = human.listed(registry, address)
    if not listing:
        return _quarantine("unregistered-sender", f"{address} is not a registered platform of this bus", msg)
    try:
        if not any(writes for _, writes in listing):
            names = ", ".join(platform.name for platform, _ in listing)
            raise wire.Malformed(
                "unregistered-sender", f"{address} is a person of {names} who does not write (writes = false)"
            )
        signer, covered = human.vouched(raw, msg, registry, address)
        # Which platform they write for follows the addressee: read only from a To the server vouched for.
        writer = human.writes_for(registry, address, wire.to_address_of(msg) if "to" in covered else "")
        assert writer is not None  # one listing writes
        letter = human.to_letter(raw, msg, registry, writer, covered, signer)
        to = wire.recipients_of(msg) if "to" in covered else ()
        return Verdict("accept", letter=letter, addressed=addressed(to, letter.cc))
    except wire.Malformed as exc:
        return _quarantine(exc.reason, exc.detail, msg)


class _Listed(NamedTuple):
    name: str
    type: str
    size: int


def _attachments_over_limits(letter: Letter, registry: Registry) -> str | None:
    """Why the attachments a letter carries break the bus's limits (the sender's own, attach.py),
    or None: a hostile or misconfigured sender is held to them on receipt too."""
    listed = letter.extra.get("attachments")
    if not isinstance(listed, list) or not listed:
        return None

    items = [_Listed(str(a["name"]), str(a["type"]), int(a["size"])) for a in listed]
    problem = attach.limit_problem(items, attach.limits_of(registry.bus))
    return f"the letter's attachments break this bus's limits: {problem}" if problem else None


# The stage a letter was in when something raised: the module of the deepest agentmail frame.
_STAGES = {
    "agentmail.letter.wire": "parsing",
    "agentmail.trust.signing": "DKIM verification",
    "agentmail.trust.dkim_lean": "DKIM verification",
    "agentmail.trust.auth_results": "Authentication-Results",
    "agentmail.letter.matter": "front matter",
    "agentmail.trust.authenticity": "judging",
}


def class_name(exc: BaseException) -> str:
    module = exc.__class__.__module__
    return exc.__class__.__qualname__ if module == "builtins" else f"{module}.{exc.__class__.__qualname__}"


def failed_stage(exc: BaseException) -> str:
    stage = "filing"  # client and spool: deciding where the letter goes and writing it there
    tb = exc.__traceback__  # walked by hand: the traceback module (with linecache, tokenize) is for printing
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.startswith("agentmail."):
            stage = _STAGES.get(module, "filing")
        tb = tb.tb_next
    return stage


def failure_detail(exc: BaseException) -> str:
    """What a quarantine says of a letter agentmail failed on: the stage and the exception's class."""
    return (
        f"agentmail failed on this letter in {failed_stage(exc)} ({class_name(exc)}); it is kept here for a bug report"
    )


def judge(raw: bytes, registry: Registry, *, at: float | None = None) -> Verdict:
    """Everything DESIGN §5 asks that needs no local history, in order. Never raises: a letter
    that makes any reader fail (a codec, a parser, a bug) is quarantined ``malformed``, naming it.
    ``at``: when the letter arrived (seconds; None: now), for a key whose window has ended since
    (``agentmail rebuild`` judges a letter with the keys valid when it was filed)."""
    try:
        return judge_unguarded(raw, registry, at=at)
    except Exception as exc:  # a hostile letter must not stop a sync, nor reach an agent unjudged
        quick = wire.quick_identity(raw)
        summary = {"from": quick[0], "message_id": quick[1]} if quick else None
        return Verdict("quarantine", reason="malformed", detail=failure_detail(exc), summary=summary)


def judge_unguarded(raw: bytes, registry: Registry, *, at: float | None = None) -> Verdict:
    """``judge`` without its catch-all, for the sync: its one per-letter boundary
    (``AgentMail._file_isolated``) quarantines what this raises, counts it as an internal error
    and names the stage, so an operator sees agentmail's own failures apart from bad letters."""
    bus = registry.bus
    try:
        msg = wire.read_bounded(raw, bus.max_size)
    except wire.Malformed as exc:
        return _quarantine(exc.reason, exc.detail, exc.parsed)

    automated = _automated(msg, registry, raw)
    if automated:
        return automated
    hops = len(msg.get_all("Received") or [])
    if hops > MAX_HOPS:
        return _quarantine("loop", f"the letter passed {hops} relays (more than {MAX_HOPS})", msg)

    # A MIME header twice (or written so parsers disagree) could make the shown text differ from
    # what was signed whichever copy a signature covers: refused before any signature is weighed.
    counts = mime.header_counts(raw)  # read once: the MIME check and the signature's coverage
    mime_problem = mime.header_problem(raw, msg, counts)
    if mime_problem:
        return _quarantine("unauthenticated", mime_problem, msg)

    try:
        sender_address, _name = wire.sender_of(msg)
    except wire.Malformed as exc:
        return _quarantine(exc.reason, exc.detail, msg)
    platform = registry.by_address(sender_address)
    if platform is None:
        return _person(raw, msg, registry, sender_address)

    key = pinned_key(platform)
    trusted = auth_results.read(
        wire.header_values(msg, "Authentication-Results"), bus.trusted_authserv_ids, (key.domain, key.selector.lower())
    )
    if trusted.fails:
        return _quarantine("verdict-fail", f"the bus's mail server reported {', '.join(trusted.fails)}", msg)

    dkim = signing.verify(raw, key, counts)
    if not dkim.ok and platform.retiring is not None:  # a rotation's overlap (keygen --rotate)
        dkim, expired = _by_retiring_key(raw, platform, dkim, at)
        if expired:
            return _quarantine("unauthenticated", expired, msg)
    if not dkim.ok:
        domain = sender_address.rpartition("@")[2]
        aligned = bus.policy == "aligned" and domain in trusted.dkim_pass_domains
        if not aligned:
            whose = "pinned key" if platform.key_lookup == "pinned" else "key published in DNS"
            return _quarantine(
                "unauthenticated", f"no valid signature by {platform.name}'s {whose}: {dkim.detail}", msg
            )
        unvouched = signing.aligned_coverage_problem(raw, domain)
        if unvouched:
            detail = f"the mail server's aligned dkim=pass does not vouch for the MIME headers: {unvouched}"
            return _quarantine("unauthenticated", detail, msg)
        unplaced = _unvouched_deciding(raw, msg, domain)
        if unplaced:
            detail = f"the mail server's aligned dkim=pass does not vouch for where the letter goes: {unplaced}"
            return _quarantine("unauthenticated", detail, msg)

    try:
        letter = wire.to_letter(msg)
    except wire.Malformed as exc:
        return _quarantine(exc.reason, exc.detail, msg)
    over = _attachments_over_limits(letter, registry)
    if over:
        return _quarantine("attachment-refused", over, msg)
    to_platform = registry.by_address(letter.to_address)
    letter = letter.replace(sender=platform.name, to=to_platform.name if to_platform else "")
    if not dkim.ok:  # let in by the MTA's aligned pass: what its signature leaves out is not trusted
        covered = signing.covered_by(raw, sender_address.rpartition("@")[2])
        letter = letter.replace(
            cc=letter.cc if "cc" in covered else (),
            list_id=letter.list_id if "list-id" in covered else None,
        )
    return Verdict("accept", letter=letter, addressed=addressed(wire.recipients_of(msg), letter.cc))


def addressed(to: tuple[str, ...], cc: tuple[str, ...]) -> tuple[str, ...]:
    """The recipients a letter's signed To and Cc name, untagged and lowercase, each once. Only
    headers the vouching signature covers are passed in (an uncovered Cc is dropped before)."""
    return tuple(dict.fromkeys(wire.base_address(a.lower()) for a in (*to, *cc)))


def as_filed(raw: bytes, registry: Registry) -> Letter | None:
    """A letter from a platform as it was filed, read again with no signature checked: only for
    a letter the spool's own record says passed when it arrived (``agentmail rebuild``), whose
    key the registry may have dropped since (``keygen --retire``). None: no such letter."""
    try:
        msg = wire.parse_message(raw, registry.bus.max_size)
        sender_address, _name = wire.sender_of(msg)
        platform = registry.by_address(sender_address)
        if platform is None:
            return None
        letter = wire.to_letter(msg)
    except Exception:  # noqa: BLE001  (hostile bytes: whatever a reader raises, no letter)
        return None
    to_platform = registry.by_address(letter.to_address)
    return letter.replace(sender=platform.name, to=to_platform.name if to_platform else "")
