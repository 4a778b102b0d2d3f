"""What the commands print: ``--json`` or text, every line of text made safe for a terminal.

Letters are untrusted: control characters are stripped from everything printed as text
(``clean``, text.py's one policy). A command gathers its result and hands it here; nothing here
asks the client for more, except a sent letter's outcome, which also ends the command with its
exit code (``sent_outcome``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import TransportError
from ..text import DATA_NOT_ORDERS, for_terminal
from .args import echo

if TYPE_CHECKING:
    from pathlib import Path

    from ..model import Letter
    from .context import Ctx

clean = for_terminal  # untrusted text made safe for a terminal (text.py: the one policy)


def emit(ctx: Ctx, data: Any, text: Callable[[], None]) -> None:
    if ctx.json:
        echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        text()


# --- letters --------------------------------------------------------------------------------------


def attribution(letter: Letter) -> str:
    """Who wrote it: the platform, or "PERSON for PLATFORM" for a person's letter (issue 12)."""
    person = letter.extra.get("person")
    return f"{person} for {letter.sender}" if person else letter.sender or letter.sender_address or "?"


def addressees(letter: Letter) -> str:
    """Whom a letter went to: every platform of a fan-out (``to_platforms``), else ``to``."""
    return ",".join(letter.extra.get("to_platforms") or ()) or letter.to or "?"


def line(letter: Letter, who: str | None = None) -> str:
    """One letter in a list; ``who`` replaces the sender column (``sent``: the recipients)."""
    sender = attribution(letter) if who is None else who
    flag = f" [{letter.severity}]" if letter.severity else ""
    return clean(
        f"{letter.id}  {letter.type or '-':<13} {sender:<14} {letter.thread or '-':<16} {letter.subject}{flag}"
    )


def full(letter: Letter) -> str:
    head = [
        f"id:       {letter.id} ({letter.state})",
        f"from:     {attribution(letter)}"
        if letter.extra.get("person")
        else f"from:     {letter.sender or '?'} <{letter.sender_address}>",
        f"to:       {letter.to or '?'} <{letter.to_address}>"
        + (f" (and {', '.join(letter.recipients[1:])})" if letter.recipients else ""),
        f"subject:  {letter.subject}",
        f"type:     {letter.type}"
        + (f"   severity: {letter.severity}" if letter.severity else "")
        + (f"   ref: {letter.ref}" if letter.ref else ""),
        f"thread:   {letter.thread}",
        f"date:     {letter.date}",
    ]
    if letter.to_agent:
        head.append(f"to-agent: {letter.to_agent}")
    if letter.reason:
        head.append(f"reason:   {letter.reason}: {letter.detail}")
    for key in ("undeliverable_reason", "failed_reason", "queued_reason", "refused", "sent_copy_failed"):
        if letter.extra.get(key):
            head.append(f"{key.split('_')[0]}: {letter.extra[key]}")
    for item in letter.extra.get("attachments") or []:  # listed, never opened ('agentmail save ID')
        desc = f" — {item['description']}" if item.get("description") else ""
        head.append(
            f"attached: {item['name']} ({item['type']}, {item['size']} bytes, sha256 {item['sha256'][:16]}){desc}"
        )
    return clean("\n".join(head)) + "\n\n" + clean(letter.body).replace("\r", "")


def shown(letter: Letter, how: str) -> str:
    """``show``: the letter in full, with how it was authenticated under its head."""
    return full(letter).replace("\n\n", clean(f"\nauth:     {how}") + "\n\n", 1)


def letters(ctx: Ctx, found: Sequence[Letter], empty: str) -> None:
    def text() -> None:
        if not found:
            echo(empty)
        for letter in found:
            echo(line(letter))

    emit(ctx, [letter.to_json() for letter in found], text)


def unread_header(count: int) -> None:
    """Where an agent reads its mail, it is told what a letter is."""
    echo(f"{count} unread letter{'s' if count != 1 else ''}. {DATA_NOT_ORDERS}")


def thread(found: Sequence[Letter]) -> None:
    for letter in found:
        arrow = "→" if letter.state in ("sent", "outbox", "held", "failed", "sibling") else "←"
        undeliverable = "  UNDELIVERABLE" if letter.extra.get("undeliverable") else ""
        if letter.state == "outbox":
            undeliverable += f"  QUEUED (not sent): {letter.extra.get('queued_reason') or ''}"
        elif letter.state == "failed":
            undeliverable += f"  FAILED: {letter.extra.get('failed_reason') or ''}"
        elif letter.state == "held":
            undeliverable += f"  HELD (waiting for a person): {letter.extra.get('held_reason') or ''}"
        elif letter.state == "sibling":
            undeliverable += "  (sent by another mailbox of this platform)"
        echo(
            clean(
                f"── {arrow} {letter.type} from {attribution(letter)} to {addressees(letter)} · {letter.date} · {letter.id}{undeliverable}"
            )
        )
        echo(clean(f"   {letter.subject}"))
        echo("")
        for body_line in clean(letter.body).splitlines():
            echo(f"   {body_line}")
        echo("")


MISTAKES_ONLY = (
    "nobody approves this platform's held letters: a hold guards against mistakes, not against the agent "
    "(list an approver: 'agentmail person PLATFORM ADDRESS --approves')"
)


def held(found: Sequence[Letter], approvers: bool = True) -> None:
    """The held letters, each with why it waits, the digest an approval is bound to, and the
    approvers' answers when they disagree; then, with nobody approving, what a hold is worth."""
    if not found:
        echo("nothing held")
    for letter in found:
        echo(line(letter) + clean(f"  (held: {letter.extra.get('held_reason') or ''})"))
        if letter.extra.get("held_digest"):
            echo(clean(f"    digest {letter.extra['held_digest']}"))
        for answer in (letter.extra.get("answers") or "").splitlines():
            echo(clean(f"    answered: {answer}"))
        if letter.extra.get("answers_disagree"):
            echo(clean(f"    NOT SENT: {letter.extra['answers_disagree']}"))
    if not approvers:
        echo(MISTAKES_ONLY)


def sent(found: Sequence[Letter]) -> None:
    if not found:
        echo("nothing sent")
    for letter in found:
        mark = " UNDELIVERABLE" if letter.extra.get("undeliverable") else ""
        state = {"outbox": "queued, not sent yet", "failed": "FAILED", "held": "HELD, waiting for a person",
                 "sibling": "sent by another mailbox of this platform"}.get(letter.state, letter.state)  # fmt: skip
        why = f": {letter.extra['rejected']}" if letter.state == "failed" and letter.extra.get("rejected") else ""
        echo(line(letter, "→ " + addressees(letter)) + clean(f"  ({state}{' (rejected)' if why else ''}{why}{mark})"))


def quarantine(found: Sequence[Letter]) -> None:
    if not found:
        echo("quarantine is empty")
    for letter in found:
        echo(clean(f"{letter.id}  {letter.reason:<20} {letter.sender_address or '?':<28} {letter.subject}"))
        echo(clean(f"    {letter.detail}"))


def rechecked(results: Sequence[dict[str, Any]]) -> None:
    if not results:
        echo("quarantine is empty")
    for item in results:
        if item["outcome"] == "filed":
            echo(f"{item['id']}  filed: it passes today's registry (now in the inbox)")
        elif item["outcome"] == "duplicate":
            echo(f"{item['id']}  dropped: a copy of letter {item['filed_as']}, filed already")
        else:
            echo(clean(f"{item['id']}  still quarantined: {item['reason']}: {item['detail']}"))


def hits(found: Sequence[Any]) -> None:
    if not found:
        echo("no letters match")
    for hit in found:
        flag = f" [{hit.severity}]" if hit.severity else ""
        echo(clean(f"{hit.id}  {hit.state:<10} {hit.type or '-':<13} {hit.sender or '?':<14} "
                         f"{hit.thread or '-':<16} {hit.subject}{flag}"))  # fmt: skip
        echo(clean(f"    {hit.snippet}"))


def status(rows: Sequence[Any], now: int, stale: str | None, closed: Callable[[], int]) -> None:
    """The open threads; none: how many are closed (``closed``, counted only then)."""
    from ..ages import age

    if not rows and stale is not None:
        echo(f"no thread without a move for over {stale}")
    elif not rows:
        shut = closed()
        echo(f"no open threads ({shut} closed: 'agentmail status --closed' lists them)" if shut else "no threads")
    for r in rows:
        flag = "  UNDELIVERABLE" if r.undeliverable else ""
        if r.delivery == "queued":
            flag += f"  QUEUED (not sent): {r.delivery_detail}"
        elif r.delivery == "failed":
            flag += f"  FAILED: {r.delivery_detail} ('agentmail done {r.delivery_id}' dismisses it)"
        elif r.delivery == "held":
            flag += f"  WAITING FOR A PERSON (held): {r.delivery_detail}"
        if r.outcome:
            flag += f"  outcome: {r.outcome}"
        when = f"age {age((now - r.opened_ms) / 1000):<4} moved {age(r.idle(now)) + ' ago':<8}"  # issue 26
        if r.opened_ms < 0:  # an id that is no ULID (never made here): no time to tell
            when = f"{'':<21}"
        shown = f"{r.thread:<16} {r.state:<14} move: {r.whose_move:<12} with {r.with_:<12} {when} {r.subject}"
        echo(clean(shown + flag))
        for part in r.recipients:  # a fan-out thread: where it stands with each counterpart
            echo(clean(f"{'':<16} {part['state']:<14} move: {part['whose_move']:<12} with {part['with']}"))


# --- a letter sent, queued or held -------------------------------------------------------------


def approvers_told(letter: Letter) -> str:
    if letter.extra.get("announced"):
        return "the approvers were told by mail"
    if letter.extra.get("announce_failed"):
        return f"the approvers could not be told: {letter.extra['announce_failed']}"
    return "the platform lists no approver: the operator decides; a hold guards against mistakes, not against the agent"


def sent_outcome(ctx: Ctx, letter: Letter, advice: Sequence[str] = (), warnings: Sequence[str] = ()) -> None:
    """What became of a letter ``send``/``reply``/``note``/``approve`` made: THREAD ID STATE on
    stdout, an opener's advice and the warnings (``Sent``'s) on stderr, then its exit code
    (5 queued, 4 refused, ...) raised."""
    from ..client.facade import raise_for_state

    if advice:  # advice, never an error: one line, saying what became of the letter all the same
        went = {"held": "held anyway", "outbox": "queued anyway", "failed": "not a refusal"}.get(
            letter.state, "sent anyway"
        )
        echo(clean(f"agentmail: advice for an opener ({went}): " + "; ".join(advice)), err=True)
    for warning in warnings:
        echo(clean(f"agentmail: note: {warning}"), err=True)
    if letter.extra.get("refused"):
        echo(clean(f"agentmail: some recipients were refused: {letter.extra['refused']}"), err=True)
    if letter.extra.get("sent_copy_failed"):
        echo(clean(f"agentmail: sent, but {letter.extra['sent_copy_failed']}"), err=True)
    if letter.state == "outbox":  # THREAD ID STATE on stdout; why, once, on stderr (exit 5)
        why = letter.extra.get("queued_reason") or "the server is unreachable"
        emit(ctx, letter.to_json(), lambda: echo(f"{letter.thread} {letter.id} queued"))
        raise TransportError(
            f"queued (not sent): {why}; it goes out with the next command or 'agentmail flush'; do not send it again"
        )
    elif letter.state == "held":
        why = letter.extra.get("held_reason") or "held"
        emit(ctx, letter.to_json(), lambda: echo(clean(
            f"{letter.thread} {letter.id} held (not sent): {why}; it waits for a person's approval "
            f"({approvers_told(letter)}); 'agentmail sent' shows what they decided")))  # fmt: skip
    else:
        emit(ctx, letter.to_json(), lambda: echo(f"{letter.thread} {letter.id} {letter.state}"))
    raise_for_state(letter)


# --- the outbox, the spool, the checks ---------------------------------------------------------


def flushed(data: Sequence[dict[str, Any]]) -> None:
    for r in data:
        echo(f"{r['id']} {r['status']} {clean(r['detail'])}")
    sent_count = sum(r["status"] == "sent" for r in data)
    echo(f"sent {sent_count} of {len(data)} queued letter(s)" if data else "outbox is empty")


def rebuilt(data: dict[str, Any]) -> None:
    states = ", ".join(f"{data[s]} {s}" for s in ("sent", "read", "unread", "quarantine") if data[s])
    aside = f"; kept aside: {', '.join(data['kept_aside'])}" if data["kept_aside"] else ""
    left = f"; {data['left']} file(s) left as they were (no letter of this mailbox)" if data["left"] else ""
    echo(f"rebuilt from the letter files: {states or 'no letters'}{left}{aside}")
    echo("the next sync reads the post office from the start; what is filed already is not filed twice")


def checks(found: Sequence[Any]) -> None:
    for check in found:
        echo(clean(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}"))


# --- the registry: platforms, their entries, their people --------------------------------------


def person_json(person: Any) -> dict[str, Any]:
    return {"address": person.address, "follows": person.follows, "writes": person.writes, "approves": person.approves}


def person_roles(person: dict[str, Any]) -> str:
    roles = [role for role in ("follows", "writes", "approves") if person[role]]
    return ", ".join(roles) or "listed (neither follows nor writes)"


def platforms(reg: Any, rows: Sequence[dict[str, Any]]) -> None:
    echo(f"bus {reg.bus.name} ({reg.bus.transport}, policy {reg.bus.policy}) at {reg.root}")
    for r in rows:
        echo(f"  {r['name']:<16} {r['address']:<32} s={r['selector']}")
        for person in r["people"]:
            echo(f"    person {person['address']:<32} {person_roles(person)}")


def person(path: Path, people: Sequence[dict[str, Any]], address: str) -> None:
    current = next((p for p in people if p["address"] == address), None)
    echo(
        f"{path}: "
        + (f"{address} removed" if current is None else f"{address} {person_roles(current)}")
        + "; commit it so every clone knows"
    )


def txt_line(platform: Any) -> str:
    return f'{platform.selector}._domainkey.{platform.dkim_domain}. IN TXT "{platform.txt_record()}"'


def created(reg: Any, home: Path, kept: Sequence[str], entries: Sequence[Any]) -> None:
    """``init``: the bus made, and each platform's DNS TXT record."""
    echo(
        f"created bus {reg.bus.name} at {reg.root} with {', '.join(sorted(reg.platforms))}; "
        f"keys in {home / 'secrets'}" + (f" (kept the existing keys of {', '.join(kept)})" if kept else "")
    )
    echo("# DNS TXT records, for partners who look keys up (one per platform):")
    for platform in entries:
        echo(txt_line(platform))


def entry(registry: Path, platform: Any) -> None:
    """A platform's registry entry as written, and its DNS TXT record."""
    from ..admin import bus

    echo(f"# {registry / 'platforms' / (platform.name + '.toml')}")
    echo(bus.entry_toml(platform))
    echo(f"# DNS TXT record, for partners who look keys up:\n{txt_line(platform)}")


def entry_json(platform: Any) -> dict[str, Any]:
    from ..admin import bus

    return {
        **bus.platform_entry(platform),
        "dns_name": f"{platform.selector}._domainkey.{platform.dkim_domain}",
        "txt_record": platform.txt_record(),
    }
