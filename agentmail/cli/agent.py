"""The agent's commands: read the mailbox, write letters, follow threads (DESIGN §8).

Each translates its arguments into one call of the client and hands the result to ``render``;
no rule lives here. ``commands`` is taken in by the command line's root (``app``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, TransportError
from . import brief as briefs
from . import guide, render
from .args import Commands, argument, at_least, echo, option, seconds
from .context import (
    ID_HELP,
    OUTCOME_HELP,
    REPLY_DEFAULT_HELP,
    TYPES_HELP,
    Ctx,
    attach_options,
    attachments,
    json_option,
    read_body,
)
from .render import clean, emit

if TYPE_CHECKING:
    from ..client.facade import AgentMail
    from ..client.sender import Sent

commands = Commands()


def _outcome(ctx: Ctx, client: AgentMail, sent: Sent) -> None:
    """The letter's outcome, with its advice and warnings."""
    ctx.flushed += sent.flushed
    advice = sent.advice if ctx.json or (sent.advice and client.opener_advice_due()) else ()
    render.sent_outcome(ctx, sent, advice, sent.warnings, client.me.mailbox)


@commands.command()
@json_option
def whoami(ctx: Ctx) -> None:
    """This checkout's platform[@agent]; exit 1 if none."""
    me = ctx.client().me
    emit(
        ctx,
        {"platform": me.platform, "agent": me.agent, "address": ctx.client().platform.address},
        lambda: echo(me.mailbox),
    )


@commands.command(name="guide")
def guide_cmd(ctx: Ctx) -> None:
    """How letters go: the lifecycle, what an opener says, siblings, the exit codes (for agents)."""
    echo(guide.GUIDE.rstrip())


@commands.command()
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@option("--consume", is_flag=True, help="Mark what is shown as read (at-most-once).")
@option("--limit", type=at_least(1), help="Show at most N letters.")
@option("--from-start", is_flag=True, help="Fetch the mailbox's whole history (a new agent starts at now).")
@json_option
def inbox(ctx: Ctx, no_sync: bool, consume: bool, limit: int | None, from_start: bool) -> None:
    """Sync, then the unread authenticated letters (they stay until 'done' or a reply)."""
    client = ctx.client()
    if from_start:
        client.from_start()
    ctx.sync(client, from_start or not no_sync)
    letters = client.inbox(sync=False, consume=consume, limit=limit)
    if letters and not ctx.json:  # where an agent reads its mail, it is told what a letter is
        render.unread_header(len(letters))
    render.letters(ctx, letters, "no unread letters")


@commands.command()
@argument("letter_id", metavar="ID", help=ID_HELP)
@option("--raw", is_flag=True, help="The RFC-822 bytes as stored.")
@json_option
def show(ctx: Ctx, letter_id: str, raw: bool) -> None:
    """One letter, in full."""
    if raw:
        data = ctx.client().raw(letter_id).decode("utf-8", "replace")
        sys.stdout.write(clean(data) if sys.stdout.isatty() else data)  # a terminal gets no escapes
        return
    letter = ctx.client().show(letter_id)
    how = ctx.client().authentication(letter)
    text = render.shown(letter, how)
    emit(ctx, {**letter.to_json(), "authentication": how}, lambda: echo(text))


@commands.command()
@argument("letter_id", metavar="ID", help=ID_HELP)
@option("--dir", "directory", default=".", show_default=True, metavar="DIR", help="Where to write them.")
@option("--force", is_flag=True, help="Replace files of the same name.")
@json_option
def save(ctx: Ctx, letter_id: str, directory: str, force: bool) -> None:
    """Write letter ID's attachments into DIR (0600; never outside DIR; nothing is opened or run)."""
    paths = ctx.client().save(letter_id, directory, force=force)
    emit(ctx, {"saved": [str(p) for p in paths]}, lambda: echo("\n".join(clean(str(p)) for p in paths)))


@commands.command(name="apply")
@argument("letter_id", metavar="ID", help=ID_HELP)
@option("--check", is_flag=True, help="Try them in a scratch worktree and list the commits; change nothing.")
@option("--series", is_flag=True, help="Let one attachment carry several commits (each is listed before it lands).")
@json_option
def apply_cmd(ctx: Ctx, letter_id: str, check: bool, series: bool) -> None:
    """'git am' letter ID's patches in the current checkout (a clean tree only; no hook runs):
    every commit is listed (author, subject, paths); --check lists them and changes nothing."""
    done = ctx.client().apply(letter_id, Path.cwd(), check=check, series=series)
    emit(ctx, {"applied": done.landed, "detail": done.detail, "commits": [c.to_json() for c in done.commits]},
         lambda: echo(clean(str(done))))  # fmt: skip


@commands.command()
@argument("letter_ids", metavar="ID", nargs=-1, required=True, help=ID_HELP)
@json_option
def done(ctx: Ctx, letter_ids: tuple[str, ...]) -> None:
    """Mark letters consumed (read); a failed letter of mine is dismissed (status stops showing
    it), and so is a quarantined letter ('quarantine' stops listing it; its file is kept)."""
    client = ctx.client()
    moved = client.done(*letter_ids)
    states = {i: client.spool.read.locate(i) for i in moved}  # a letter done moves to read; one dismissed stays
    read = [i for i in moved if states[i] == "read"]
    gone = [i for i in moved if states[i] != "read"]
    held = [i for i in gone if states[i] == "quarantine"]

    def text() -> None:
        failed = len(gone) - len(held)
        echo(f"marked {len(read)} read" + (f", dismissed {failed} failed letter(s)" if failed else "")
             + (f", dismissed {len(held)} quarantined letter(s)" if held else ""))  # fmt: skip

    emit(ctx, {"done": read, **({"dismissed": gone} if gone else {})}, text)


@commands.command()
@argument("to", metavar="TO", help="A platform, several (beta,gamma) or a group (@NAME).")
@option("-s", "--subject", help="Subject of the new thread (required unless --thread).")
@option("-b", "--body", required=True, metavar="TEXT|@FILE|-", help="The text, @FILE, or - for standard input.")
@option("-t", "--type", "letter_type", default="report", show_default=True, metavar="TYPE", help=TYPES_HELP + ".")
@option("-S", "--severity", metavar="SEVERITY", help="low|medium|high|critical.")
@option("-r", "--ref", metavar="REF", help="What it is about on your side: an issue, commit or URL.")
@option("--thread", metavar="THREAD", help="Continue this thread instead of opening one (e.g. a fix-notice).")
@option("--force", is_flag=True, help="Send even if the body looks like a credential.")
@option("--hold", is_flag=True, help="Keep it (signed) in held/ until a person approves it.")
@option("--outcome", metavar="OUTCOME", help=OUTCOME_HELP)
@attach_options
@json_option
def send(ctx: Ctx, to: str, subject: str | None, body: str, letter_type: str, severity: str | None, ref: str | None,
         thread: str | None, force: bool, hold: bool, attach: tuple[str, ...], patch: str | None,
         outcome: str | None = None) -> None:  # fmt: skip
    """Open a thread with platform TO (a name from 'agentmail platforms'); prints THREAD ID STATE.

    TO may be several (beta,gamma) or a group of the bus (@NAME, 'bus set groups.NAME ...'):
    one letter to all of them, one thread; each answers in it.

    Opener advice (one line, on stderr) never stops the letter. With --thread the letter
    continues that thread and -s is not needed."""
    client = ctx.sender()
    if not thread and not subject:
        raise BadInput("-s/--subject is required to open a thread (with --thread it is not)")
    sent = client.send(to, subject or "", read_body(body), type=letter_type, severity=severity, ref=ref, force=force,
                       thread=thread, hold=hold, attachments=attachments(ctx, attach, patch),
                       outcome=outcome)  # fmt: skip
    _outcome(ctx, client, sent)


@commands.command()
@argument("letter_id", metavar="ID", help=ID_HELP)
@option("-b", "--body", required=True, metavar="TEXT|@FILE|-", help="The text, @FILE, or - for standard input.")
@option(
    "-t",
    "--type",
    "letter_type",
    metavar="TYPE",
    help=f"{TYPES_HELP}. Default: {REPLY_DEFAULT_HELP}.",
)
@option("--force", is_flag=True, help="Send even if the body looks like a credential.")
@option("--hold", is_flag=True, help="Keep it (signed) in held/ until a person approves it.")
@option("--outcome", metavar="OUTCOME", help=OUTCOME_HELP)
@attach_options
@json_option
def reply(ctx: Ctx, letter_id: str, body: str, letter_type: str | None, force: bool, hold: bool, attach: tuple[str, ...],
          patch: str | None, outcome: str | None = None) -> None:  # fmt: skip
    """Answer letter ID (the first column of 'inbox'); exit 4 with the reason when a guard refuses."""
    client = ctx.sender()
    sent = client.reply(letter_id, read_body(body), type=letter_type, force=force, raise_refused=True, hold=hold,
                        attachments=attachments(ctx, attach, patch), outcome=outcome)  # fmt: skip
    assert sent is not None  # raise_refused: a refusal raised
    _outcome(ctx, client, sent)


@commands.command()
@argument("thread_id", metavar="THREAD", help="A thread id (thr-..., any case).")
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@option(
    "--brief", is_flag=True, help="The gist within --tokens: the opener, the last letters whole, a line each between."
)
@option(
    "--tokens",
    type=at_least(50, briefs.MAX_TOKENS),
    default=briefs.BUDGET,
    show_default=True,
    help="The budget of --brief.",
)
@json_option
def thread(ctx: Ctx, thread_id: str, no_sync: bool, brief: bool = False, tokens: int = briefs.BUDGET) -> None:
    """The whole thread, both ways, as a person would read it (--brief: as a woken agent can afford)."""
    letters = ctx.reader().thread(thread_id, sync=not no_sync)
    if brief:
        text = briefs.of_thread(letters, tokens)
        emit(ctx, {"thread": thread_id, "letters": len(letters), "brief": text}, lambda: echo(text))
        return
    emit(ctx, [letter.to_json() for letter in letters], lambda: render.thread(letters))


@commands.command()
@json_option
def sent(ctx: Ctx) -> None:
    """What I sent (held, queued, failed and delivered)."""
    letters = ctx.client().sent()
    emit(ctx, [letter.to_json() for letter in letters], lambda: render.sent(letters))


@commands.command()
@argument("query", default="", help='Plain words, all required ("a phrase", prefix*); none: filters alone.')
@option("--from", "sender", metavar="P", help="Only letters from platform P (or from address P).")
@option("--type", "letter_type", metavar="T", help="Only letters of type T (report, ack, ..., human).")
@option("--thread", "thread_id", metavar="THR", help="Only letters of thread THR.")
@option("--since", metavar="DATE", help="Filed here since DATE: 2026-11-30, 2026-11-30T08:00 (UTC), 7d, 12h.")
@option("--state", metavar="S", help="Only letters in state S (unread, read, sent, outbox, held, failed).")
@option("--limit", type=at_least(1, 1000), default=20, show_default=True, help="Show at most N letters.")
@option("--quarantine", "include_quarantine", is_flag=True, help="Search quarantined letters too.")
@option("--fts", "syntax", is_flag=True, help="QUERY is SQLite FTS5 syntax (AND, OR, NOT, NEAR, col:).")
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def search(ctx: Ctx, query: str, sender: str | None, letter_type: str | None, thread_id: str | None, since: str | None,
           state: str | None, limit: int, include_quarantine: bool, syntax: bool, no_sync: bool) -> None:  # fmt: skip
    """Search every letter of this mailbox, sent and received, best match first.

    QUERY is plain words, all required ("quoted phrase", prefix*); filters alone list the
    matching letters newest first. Exit 2 on a bad query or filter."""
    hits = ctx.reader().search(query, sync=not no_sync, sender=sender, type=letter_type, thread=thread_id, since=since,
                               state=state, limit=limit, quarantine=include_quarantine, syntax=syntax)  # fmt: skip
    emit(ctx, [hit.to_json() for hit in hits], lambda: render.hits(hits))


@commands.command()
@option("--to", "to_agent", metavar="AGENT", help="The sibling agent it is for (else whoever reads next).")
@option("-s", "--subject", required=True, help="What the note is about.")
@option("-b", "--body", required=True, metavar="TEXT|@FILE|-", help="The text, @FILE, or - for standard input.")
@option("--force", is_flag=True, help="Send even if the body looks like a credential.")
@option("--new-agent", is_flag=True, help="--to names an agent that has not read yet (else it must be known).")
@attach_options
@json_option
def note(ctx: Ctx, to_agent: str | None, subject: str, body: str, force: bool, new_agent: bool,
         attach: tuple[str, ...], patch: str | None) -> None:  # fmt: skip
    """A handover to a sibling agent sharing this platform."""
    client = ctx.sender()
    sent = client.note(subject, read_body(body), to_agent=to_agent, force=force,
                       attachments=attachments(ctx, attach, patch), new_agent=new_agent)  # fmt: skip
    _outcome(ctx, client, sent)


@commands.command()
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def notes(ctx: Ctx, no_sync: bool) -> None:
    """Notes for me (not consumed)."""
    client = ctx.client()
    ctx.sync(client, not no_sync)
    render.letters(ctx, client.notes(sync=False), "no notes")


@commands.command()
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@option("--closed", is_flag=True, help="Include closed threads (reads the whole history).")
@option("--stale", metavar="DURATION", help="Only threads with no move for longer than DURATION: 30m, 12h, 3d, 2w.")
@json_option
def status(ctx: Ctx, no_sync: bool, closed: bool, stale: str | None) -> None:
    """Open threads, where each stands, whose move it is, their age and time since the last move."""
    from ..ages import duration, now_ms

    idle = None if stale is None else duration(stale, "--stale")  # bad input before any sync
    stale = None if stale is None else stale.strip()  # shown as read: not the blanks a caller put around it
    client = ctx.reader()
    ctx.sync(client, not no_sync)
    rows = client.status(sync=False, closed=closed, stale=idle)
    now = now_ms()
    count_closed = (lambda: 0) if closed else client.closed_threads
    emit(ctx, [r.to_json() for r in rows], lambda: render.status(rows, now, stale, count_closed))


@commands.command()
@option(
    "--timeout", type=seconds, default=300.0, show_default=True, metavar="S", help="Give up after S seconds (exit 3)."
)
@option(
    "--type", "letter_type", metavar="TYPE", help="Only a letter of this type (report, ack, fix-notice, ..., human)."
)
@option("--thread", "thread_id", metavar="THREAD", help="Only a letter of this thread.")
@json_option
def wait(ctx: Ctx, timeout: float, letter_type: str | None, thread_id: str | None) -> None:
    """Block until a matching unread letter is here; exit 3 on timeout."""
    letter, mechanism = ctx.client().wait(timeout, type=letter_type, thread=thread_id)
    emit(
        ctx, {**letter.to_json(), "woke_by": mechanism}, lambda: echo(render.line(letter) + f"  (woke by {mechanism})")
    )


@commands.command()
@json_option
def sync(ctx: Ctx) -> None:
    """Pull now."""
    client = ctx.client()
    report = client.sync()
    ctx.flushed += report.flushed
    if report.escalation_problem:  # the followers were not told what needs them
        echo(f"agentmail: {report.escalation_problem}", err=True)
    data = report.to_json()
    emit(ctx, data, lambda: render.synced(data))


@commands.command()
@json_option
def flush(ctx: Ctx) -> None:
    """Retry the outbox."""
    client = ctx.client()
    results = client.flush()
    data = [{"id": r.key, "status": r.status, "detail": r.detail} for r in results]
    emit(ctx, data, lambda: render.flushed(data))
    if any(r.status != "sent" for r in results):
        raise TransportError(f"{sum(r.status != 'sent' for r in results)} letter(s) not sent")
