"""What the commands print: ``--json`` or text, every line of text made safe for a terminal.

Letters are untrusted: control characters are stripped from everything printed as text
(``clean``, text.py's one policy), and what a letter says is shown inside ``frame``'s frame (a
body behind ``| ``, a subject quoted, every other value one line), so no line of it reads as
one of ours. A command gathers its result and hands it here; nothing here
asks the client for more, except a sent letter's outcome, which also ends the command with its
exit code (``sent_outcome``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import TransportError
from ..frame import MARK, body, inline, quoted
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


# The thread column fits a bound thread id (``thr-`` + model.BOUND_CHARS), the longest a new
# thread gets (older ids are shorter). A number, not model's: ``--help`` loads no model (its clock).
THREAD_COLUMN = 24


def attribution(letter: Letter) -> str:
    """Who wrote it: the platform, or "PERSON for PLATFORM" for a person's letter; one line."""
    person = letter.extra.get("person")
    return inline(f"{person} for {letter.sender}" if person else letter.sender or letter.sender_address or "?")


def addressees(letter: Letter) -> str:
    """Whom a letter went to: every platform of a fan-out (``to_platforms``), else ``to``; one line."""
    return inline(",".join(letter.extra.get("to_platforms") or ()) or letter.to or "?")


def line(letter: Letter, who: str | None = None) -> str:
    """One letter in a list; ``who`` replaces the sender column (``sent``: the recipients)."""
    sender = attribution(letter) if who is None else inline(who)
    flag = f" [{inline(letter.severity)}]" if letter.severity else ""
    return clean(
        f"{letter.id}  {inline(letter.type) or '-':<13} {sender:<14} {inline(letter.thread) or '-':<{THREAD_COLUMN}} "
        f"{quoted(letter.subject)}{flag}"
    )


def _sender(letter: Letter) -> str:
    """``show``'s from line: the platform and its address; a quarantined letter's From as it came,
    display name and all (it may claim a platform, but nothing vouches for it)."""
    if letter.extra.get("person"):
        return attribution(letter)
    if not letter.sender:
        return f"{inline(letter.sender_address or '?')} (unverified)"
    return f"{inline(letter.sender)} <{inline(letter.sender_address)}>"


def attached(item: dict[str, Any]) -> str:
    """One attachment, listed, never opened ('agentmail save ID')."""
    desc = f" — {inline(item['description'])}" if item.get("description") else ""
    return (
        f"{inline(item['name'])} ({inline(item['type'])}, {inline(item['size'])} bytes, "
        f"sha256 {inline(item['sha256'])[:16]}){desc}"
    )


def full(letter: Letter, how: str | None = None) -> str:
    """A letter in full (``show``): agentmail's header lines, ``auth:`` (``how``) if given, a blank
    line, then the body, every line of it behind ``| `` (frame.py)."""
    head = [
        f"id:       {letter.id} ({letter.state})",
        f"from:     {_sender(letter)}",
        f"to:       {inline(letter.to or '?')} <{inline(letter.to_address)}>"
        + (f" (and {inline(', '.join(letter.recipients[1:]))})" if letter.recipients else ""),
        f"subject:  {quoted(letter.subject)}",
        f"type:     {inline(letter.type or '-')}"
        + (f"   outcome: {inline(letter.outcome)}" if letter.outcome else "")
        + (f"   severity: {inline(letter.severity)}" if letter.severity else "")
        + (f"   ref: {inline(letter.ref)}" if letter.ref else ""),
        f"thread:   {inline(letter.thread or '-')}",
        f"date:     {inline(letter.date)}",
    ]
    if letter.to_agent:
        head.append(f"to-agent: {inline(letter.to_agent)}")
    if letter.reason:
        head.append(f"reason:   {inline(letter.reason)}: {inline(letter.detail)}")
    for key in ("undeliverable_reason", "failed_reason", "queued_reason", "refused", "sent_copy_failed"):
        if letter.extra.get(key):
            head.append(f"{key.split('_')[0]}: {inline(letter.extra[key])}")
    for item in letter.extra.get("attachments") or []:
        head.append(f"attached: {attached(item)}")
    if how is not None:
        head.append(f"auth:     {inline(how)}")
    text = letter.body
    if letter.state == "quarantine" and not text.strip():  # its text is never parsed for reading
        text = f"(a quarantined letter's text is not shown: 'agentmail show --raw {letter.id}' prints its bytes)"
    return clean("\n".join(head)) + "\n\n" + body(text)


def shown(letter: Letter, how: str) -> str:
    """``show``: the letter in full, with how it was authenticated under its head."""
    return full(letter, how)


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
            undeliverable += f"  QUEUED (not sent): {inline(letter.extra.get('queued_reason'))}"
        elif letter.state == "failed":
            undeliverable += f"  FAILED: {inline(letter.extra.get('failed_reason'))}"
        elif letter.state == "held":
            undeliverable += f"  HELD (waiting for a person): {inline(letter.extra.get('held_reason'))}"
        elif letter.state == "sibling":
            undeliverable += "  (sent by another mailbox of this platform)"
        echo(
            clean(
                f"── {arrow} {inline(letter.type)} from {attribution(letter)} to {addressees(letter)} · "
                f"{inline(letter.date)} · {letter.id}{undeliverable}"
            )
        )
        echo(f"   {quoted(letter.subject)}")
        if letter.outcome:
            echo(f"   outcome: {inline(letter.outcome)}")
        for item in letter.extra.get("attachments") or []:
            echo(clean(f"   attached: {attached(item)}"))
        text = body(letter.body, "   ")
        if text:
            echo(text)
        echo("")


MISTAKES_ONLY = (
    "nobody approves this platform's held letters: a hold guards against mistakes, not against the agent "
    "(list an approver: 'agentmail person PLATFORM ADDRESS --approves')"
)
UNASKED = (
    "nobody approves on this bus: this change loosens a guard and nobody was asked; the guards guard against "
    "mistakes, not against the agent (list an approver: 'agentmail person PLATFORM ADDRESS --approves')"
)


def held(found: Sequence[Letter], approvers: bool = True) -> None:
    """The held letters, each with why it waits, the digest an approval is bound to, and the
    approvers' answers when they disagree; then, with nobody approving, what a hold is worth."""
    if not found:
        echo("nothing held")
    for letter in found:
        echo(line(letter) + clean(f"  (held: {inline(letter.extra.get('held_reason'))})"))
        if letter.extra.get("held_digest"):
            echo(clean(f"    digest {inline(letter.extra['held_digest'])}"))
        for answer in (letter.extra.get("answers") or "").splitlines():
            echo(clean(f"    answered: {inline(answer)}"))
        if letter.extra.get("answers_disagree"):
            echo(clean(f"    NOT SENT: {inline(letter.extra['answers_disagree'])}"))
    if not approvers:
        echo(MISTAKES_ONLY)


def sent(found: Sequence[Letter]) -> None:
    if not found:
        echo("nothing sent")
    for letter in found:
        mark = " UNDELIVERABLE" if letter.extra.get("undeliverable") else ""
        state = {"outbox": "queued, not sent yet", "failed": "FAILED", "held": "HELD, waiting for a person",
                 "sibling": "sent by another mailbox of this platform"}.get(letter.state, letter.state)  # fmt: skip
        why = (
            f": {inline(letter.extra['rejected'])}" if letter.state == "failed" and letter.extra.get("rejected") else ""
        )
        echo(line(letter, "→ " + addressees(letter)) + clean(f"  ({state}{' (rejected)' if why else ''}{why}{mark})"))


def quarantine(found: Sequence[Letter]) -> None:
    if not found:
        echo("quarantine is empty")
    for letter in found:
        echo(clean(f"{letter.id}  {inline(letter.reason):<20} {inline(letter.sender_address or '?'):<28} "
                   f"{quoted(letter.subject)}"))  # fmt: skip
        echo(f"    {inline(letter.detail)}")


def rechecked(results: Sequence[dict[str, Any]]) -> None:
    if not results:
        echo("quarantine is empty")
    for item in results:
        if item["outcome"] == "filed":
            echo(f"{item['id']}  filed: it passes today's registry (now in the inbox)")
        elif item["outcome"] == "duplicate":
            echo(f"{item['id']}  dropped: a copy of letter {item['filed_as']}, filed already")
        else:
            echo(f"{item['id']}  still quarantined: {inline(item['reason'])}: {inline(item['detail'])}")


def hits(found: Sequence[Any]) -> None:
    if not found:
        echo("no letters match")
    for hit in found:
        flag = f" [{inline(hit.severity)}]" if hit.severity else ""
        echo(clean(f"{hit.id}  {inline(hit.state):<10} {inline(hit.type) or '-':<13} {inline(hit.sender or '?'):<14} "
                   f"{inline(hit.thread) or '-':<{THREAD_COLUMN}} {quoted(hit.subject)}{flag}"))  # fmt: skip
        echo(f"    {MARK}{inline(hit.snippet)}".rstrip())  # one line of the letter's text, framed


def status(rows: Sequence[Any], now: int, stale: str | None, closed: Callable[[], int]) -> None:
    """The open threads; none: how many are closed (``closed``, counted only then)."""
    from ..ages import age

    if not rows and stale is not None:
        echo(f"no thread without a move for over {stale}")
    elif not rows:
        shut = closed()
        echo(f"no open threads ({shut} closed: 'agentmail status --closed' lists them)" if shut else "no threads")
    # A fan-out row names its counterparts one a line below it: its own cells say how many, so
    # a column is never pushed out by a list of names; the columns widen to the longest name.
    cells = [_parties(r) for r in rows]
    names = [x for whose, with_ in cells for x in (whose, with_)]
    names += [str(part[key]) for r in rows for part in r.recipients for key in ("whose_move", "with")]
    width = min(max([12, *map(len, names)]), 32)  # a platform name is at most 32 characters
    for r, (whose, with_) in zip(rows, cells, strict=True):
        flag = "  UNDELIVERABLE" if r.undeliverable else ""
        if r.delivery == "queued":
            flag += f"  QUEUED (not sent): {inline(r.delivery_detail)}"
        elif r.delivery == "failed":
            flag += f"  FAILED: {inline(r.delivery_detail)} ('agentmail done {r.delivery_id}' dismisses it)"
        elif r.delivery == "held":
            flag += f"  WAITING FOR A PERSON (held): {inline(r.delivery_detail)}"
        if r.outcome:
            flag += f"  outcome: {inline(r.outcome)}"
        when = f"age {age((now - r.opened_ms) / 1000):<4} moved {age(r.idle(now)) + ' ago':<8}"
        if r.opened_ms < 0:  # an id that is no ULID (never made here): no time to tell
            when = f"{'':<21}"
        shown = (
            f"{r.thread:<{THREAD_COLUMN}} {r.state:<14} move: {inline(whose):<{width}} "
            f"with {inline(with_):<{width}} {when} "
        )
        echo(clean(shown + quoted(r.subject) + flag))
        for part in r.recipients:  # a fan-out thread: where it stands with each counterpart
            echo(
                clean(
                    f"{'':<{THREAD_COLUMN}} {part['state']:<14} move: {inline(part['whose_move']):<{width}} "
                    f"with {inline(part['with'])}"
                )
            )


def _parties(row: Any) -> tuple[str, str]:
    """A status row's whose-move and with cells: a fan-out's counted (each is on a line below)."""
    if not row.recipients:
        return row.whose_move, row.with_
    due = [p for p in row.recipients if p["whose_move"] not in ("me", "nobody")]
    whose = row.whose_move if "," not in row.whose_move else f"{len(due)} below"
    return whose, f"{len(row.recipients)} platforms"


# --- a letter sent, queued or held -------------------------------------------------------------


def sentences(first: str, then: str) -> str:
    """Two clauses as one line: after a question (the reason asks one) a new sentence, not "?;"."""
    first = first.rstrip().rstrip(";,")
    return f"{first} {then[:1].upper()}{then[1:]}" if first.endswith(("?", "!", ".")) else f"{first}; {then}"


def approvers_told(letter: Letter) -> str:
    if letter.extra.get("announced"):
        return "the approvers were told by mail"
    if letter.extra.get("announce_failed"):
        return f"the approvers could not be told: {letter.extra['announce_failed']}"
    return "the platform lists no approver: the operator decides; a hold guards against mistakes, not against the agent"


def sent_outcome(ctx: Ctx, letter: Letter, advice: Sequence[str] = (), warnings: Sequence[str] = (),
                 acting: str | None = None) -> None:  # fmt: skip
    """What became of a letter ``send``/``reply``/``note``/``approve`` made: THREAD ID STATE on
    stdout, an opener's advice (with --json: its ``advice`` field) and the warnings (``Sent``'s)
    on stderr, then its exit code (5 queued, 4 refused, ...) raised. ``acting``: the mailbox
    (platform[@agent]) that wrote it, in --json as ``as``."""
    from ..client.facade import raise_for_state

    if advice and not ctx.json:  # advice, never an error: one line, saying what became of the letter
        went = {"held": "held anyway", "outbox": "queued anyway", "failed": "not a refusal"}.get(
            letter.state, "sent anyway"
        )
        echo(inline(f"agentmail: advice for an opener ({went}; said once a day): " + "; ".join(advice)), err=True)
    data = {**letter.to_json(), **({"advice": list(advice)} if advice else {}), **({"as": acting} if acting else {})}
    for warning in warnings:
        echo(inline(f"agentmail: note: {warning}"), err=True)
    if letter.extra.get("refused"):
        echo(inline(f"agentmail: some recipients were refused: {letter.extra['refused']}"), err=True)
    if letter.extra.get("sent_copy_failed"):
        echo(inline(f"agentmail: sent, but {letter.extra['sent_copy_failed']}"), err=True)
    if letter.state == "outbox":  # THREAD ID STATE on stdout; why, once, on stderr (exit 5)
        why = letter.extra.get("queued_reason") or "the server is unreachable"
        emit(ctx, data, lambda: echo(f"{letter.thread} {letter.id} queued"))
        after = "it goes out with the next command or 'agentmail flush'; do not send it again"
        raise TransportError(f"queued (not sent): {sentences(why, after)}")
    elif letter.state == "held":
        why = letter.extra.get("held_reason") or "held"
        emit(ctx, data, lambda: echo(inline(
            f"{letter.thread} {letter.id} held (not sent): {why}; it waits for a person's approval "
            f"({approvers_told(letter)}); 'agentmail sent' shows what they decided")))  # fmt: skip
    else:
        emit(ctx, data, lambda: echo(f"{letter.thread} {letter.id} {letter.state}"))
    raise_for_state(letter)


# --- the outbox, the spool, the checks ---------------------------------------------------------


def synced(data: dict[str, Any]) -> None:
    """``sync``: each count in words; internal errors (an agentmail bug) only when there were some."""
    echo(", ".join(f"{v} {k.replace('_', ' ')}" for k, v in data.items() if v or k != "internal_errors"))


def flushed(data: Sequence[dict[str, Any]]) -> None:
    for r in data:
        echo(f"{r['id']} {r['status']} {inline(r['detail'])}")
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
        echo(f"{'ok  ' if check.ok else 'FAIL'} {inline(check.name)}: {inline(check.detail)}")


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
        old = r.get("previous")
        if old:
            state = "still valid" if old["valid"] else "ended"
            echo(f"    previous key s={old['selector']} until {old['until']} ({state})")
        for person in r["people"]:
            echo(f"    person {person['address']:<32} {person_roles(person)}")


def previous_json(platform: Any) -> dict[str, Any] | None:
    """A platform's previous key (``[dkim.previous]``), shown wherever its keys are."""
    old = platform.retiring
    if old is None:
        return None
    return {"selector": old.selector, "until": old.until, "valid": old.valid_at(time.time())}


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
    """``init``: the bus made, each platform's DNS TXT record when partners may look keys up (a
    mail server's bus; a local bus's keys never leave the machine), and the next step."""
    echo(
        f"created bus {reg.bus.name} at {reg.root} with {', '.join(sorted(reg.platforms))}; "
        f"keys in {home / 'secrets'}" + (f" (kept the existing keys of {', '.join(kept)})" if kept else "")
    )
    first = entries[0].name if entries else "PLATFORM"
    if reg.bus.transport == "local":
        echo(f"next: in each platform's checkout 'agentmail bind {first}' (writes the .agentmail marker), "
             f"or give '--as {first}' to every command; then 'agentmail send TO -s SUBJECT -b TEXT'")  # fmt: skip
        return
    echo("# DNS TXT records, for partners who look keys up (one per platform):")
    for platform in entries:
        echo(txt_line(platform))
    echo(f"next: each platform's login in {home / 'secrets'}/PLATFORM.env (0600), then "
         f"'agentmail --as {first} doctor --round-trip' ('agentmail --help' shows how)")  # fmt: skip


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
