"""The operator's commands: make and change the bus, decide held letters, look after the spool
and the configuration (DESIGN §8).

Each translates its arguments into calls of ``admin``, ``people`` or the client and hands the
result to ``render``; no rule lives here. ``commands`` is taken in by the command line's root
(``app``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import AgentmailError, BadInput, ConfigError, PermanentFailure, TransportError
from . import guide, render
from .args import Command, Commands, argument, duration, echo, option, seconds
from .context import ID_HELP, Ctx, json_option
from .render import clean, emit

NO_GUIDE_HELP = "Add no pointer to 'agentmail guide' to the checkout's AGENTS.md / CLAUDE.md."

commands = Commands()


@commands.command()
@json_option
def platforms(ctx: Ctx) -> None:
    """The registry: every platform, its address and pinned key."""
    from ..config.registry import load

    reg = load(ctx.registry_root())
    rows: list[dict[str, Any]] = [
        {
            "name": p.name,
            "address": p.address,
            "display_name": p.display_name,
            "selector": p.selector,
            "key": p.key_lookup,
            "remotes": list(p.remotes),
            "paths": list(p.paths),
            "people": [render.person_json(person) for person in p.people],
            "previous": render.previous_json(p),
        }
        for p in reg.platforms.values()
    ]
    emit(
        ctx,
        {
            "bus": reg.bus.name,
            "domain": reg.bus.domain,
            "transport": reg.bus.transport,
            "platforms": rows,
            "problems": reg.problems,
        },
        lambda: render.platforms(reg, rows),
    )
    for problem in reg.problems:
        echo(f"agentmail: warning: {problem}", err=True)


@commands.command()
@argument("names", metavar="NAME", nargs=-1, required=True, help="The platforms of the bus (a key pair each).")
@option("--domain", default="bus.localhost", show_default=True, help="Mail domain of the bus.")
@option(
    "--transport",
    choices=["local", "smtp+imap"],
    help="local: the embedded post office on this machine; smtp+imap: a mail server "
    "(default: smtp+imap with --smtp/--imap, else local).",
)
@option("--smtp", metavar="HOST:PORT", help="Submission server (smtp+imap).")
@option("--imap", metavar="HOST:PORT", help="IMAP server (smtp+imap).")
@option(
    "--tls",
    "tls",
    multiple=True,
    metavar="MODE",
    help="implicit|starttls|none; once for both, or twice: SMTP then IMAP.",
)
@option("--ca-file", metavar="PEM", help="CA certificate(s) to trust for a self-signed server.")
@option("--trust-authserv", multiple=True, metavar="ID", help="authserv-id whose Authentication-Results count.")
@option(
    "--policy",
    choices=["pinned", "aligned"],
    default="pinned",
    show_default=True,
    help="aligned: also accept a trusted MTA's aligned dkim=pass (a human's letter).",
)
@option("--sent-folder", metavar="FOLDER", help="Copy sent letters to this IMAP folder (e.g. Sent).")
@option(
    "--force",
    is_flag=True,
    help="Rewrite an existing registry's files; existing keys are kept and re-pinned, never regenerated.",
)
@option("--approval-key", metavar="FILE", help="Write the operator's first approval key to FILE (outside "
        "AGENTMAIL_HOME) and pin it: the key 'approve ID --key-file FILE' needs.")  # fmt: skip
@option("--no-guide", is_flag=True, help=NO_GUIDE_HELP)
@json_option
def init(
    ctx: Ctx,
    names: tuple[str, ...],
    domain: str,
    transport: str | None,
    smtp: str | None,
    imap: str | None,
    tls: tuple[str, ...],
    ca_file: str | None,
    trust_authserv: tuple[str, ...],
    policy: str,
    sent_folder: str | None,
    force: bool,
    approval_key: str | None = None,
    no_guide: bool = False,
) -> None:
    """Create a NEW bus: its registry and each platform's DKIM key pair. In a git checkout, its
    AGENTS.md and CLAUDE.md (those that exist) get a pointer to 'agentmail guide'.

    Refused (exit 6) when the registry or a platform's key already exists: to use an existing
    bus set AGENTMAIL_REGISTRY / --registry; to add a platform use 'add'; to rotate a key
    'keygen'; to change a setting 'bus set'. The TLS mode follows the port when --tls is not
    given (465/993 implicit, 587/143 STARTTLS)."""
    from ..admin import bus

    endpoints: dict[str, Any] = {"policy": policy}
    if transport is None:
        transport = "smtp+imap" if smtp or imap else "local"
    if transport == "smtp+imap":
        missing = [f"--{what} HOST:PORT" for what, value in (("smtp", smtp), ("imap", imap)) if not value]
        if missing:
            raise BadInput(
                f"--transport smtp+imap needs {' and '.join(missing)} (the submission and IMAP servers, "
                f"e.g. --smtp mail.example.org:587 --imap mail.example.org:993)"
            )
        endpoints.update(bus.endpoints(smtp, imap, tls, ca_file, trust_authserv))
        if not tls:
            for what in ("smtp", "imap"):
                note = bus.tls_chosen(what, endpoints[what]["host"], endpoints[what]["port"])
                if note:
                    echo(f"agentmail: note: {note}", err=True)
        if sent_folder:
            endpoints["sent_folder"] = sent_folder
    elif smtp or imap or sent_folder:
        raise BadInput("--smtp, --imap and --sent-folder are for --transport smtp+imap")
    kept = [p.stem for p in bus.existing_state(ctx.home, ctx.registry_root(), list(names)) if p.suffix == ".key"]
    if approval_key is not None:
        from ..people import approval

        approval.may_pin_first(ctx.registry_root(), approval_key, ctx.home)
    # over an existing registry the library asks its approvers first (it drops the hold rule and the people)
    reg = bus.init(ctx.home, ctx.registry_root(), list(names), domain=domain, transport=transport,
                   endpoints=endpoints, force=force, teller=lambda _reg: _announcer(ctx))  # fmt: skip
    if approval_key is not None:
        approval.first_key(reg, approval_key, ctx.home)
    entries = [reg.platforms[n] for n in names if n in reg.platforms]
    from ..config.identity import checkout_root, in_git_checkout

    here = Path.cwd()
    pointed = [] if no_guide or not in_git_checkout(here) else guide.add_pointer(checkout_root(here), create=False)

    def text() -> None:
        render.created(reg, ctx.home, kept, entries)
        _pointed(pointed)

    emit(
        ctx,
        {
            "registry": str(reg.root),
            "platforms": sorted(reg.platforms),
            "kept_keys": kept,
            "records": [render.entry_json(p) for p in entries],
            "guide": [str(p) for p in pointed],
        },
        text,
    )


@commands.command()
@argument("platform_name", metavar="PLATFORM", help="The platform the person belongs to.")
@argument("address", help="Their email address alone (carol@example.org).")
@option("--follows", is_flag=True, help="Copy (Cc) this person on every letter of the platform's threads.")
@option("--writes", is_flag=True, help="This person may write into the platform's threads from a mail client.")
@option("--approves", is_flag=True, help="This person releases or rejects the platform's held letters by mail.")
@option("--remove", is_flag=True, help="Take this person off the platform's entry.")
@json_option
def person(ctx: Ctx, platform_name: str, address: str, follows: bool, writes: bool, approves: bool,
           remove: bool) -> None:  # fmt: skip
    """List a person of PLATFORM (set their flags; run again to change them), or --remove them.

    The flags given are the person's flags from now on: 'person P ADDR' alone keeps them listed
    with neither. Following is an smtp+imap feature: on the local transport the Cc is written
    into each letter but nobody without a mailbox receives it."""
    from ..admin import bus
    from ..config.registry import load

    if remove and (follows or writes or approves):
        raise BadInput("--remove takes no --follows, --writes or --approves")
    # the library asks the approvers when the change loosens a guard (who approves, follows, writes)
    platform = bus.set_person(
        load(ctx.registry_root()),
        platform_name,
        address,
        follows=follows,
        writes=writes,
        remove=remove,
        approves=approves,
        teller=lambda _reg: _announcer(ctx),
        home=ctx.home,
    )
    path = ctx.registry_root() / "platforms" / f"{platform.name}.toml"
    people = [render.person_json(p) for p in platform.people]
    shown = address.strip().lower()
    emit(
        ctx,
        {"platform": platform.name, "registry_file": str(path), "people": people},
        lambda: render.person(path, people, shown),
    )


@commands.command()
@argument("name", help="The new platform's name (lowercase letters, digits, dashes).")
@option("--repo", metavar="PATH|REMOTE", help="The platform's checkout path or git remote (for whoami).")
@option("--domain", help="Its mail domain, if not the bus's (a partner organisation).")
@json_option
def add(ctx: Ctx, name: str, repo: str | None, domain: str | None) -> None:
    """Add a platform to the bus; prints its registry entry and DNS TXT record.

    On a platform that exists, --repo adds that checkout path or git remote to its entry
    (nothing else changes; keys are never touched)."""
    from ..admin import bus
    from ..config.registry import load

    platform = bus.add(ctx.home, load(ctx.registry_root()), name, repo=repo, domain=domain)
    emit(ctx, render.entry_json(platform), lambda: render.entry(ctx.registry_root(), platform))


@commands.command()
@option(
    "--rotate",
    metavar="WINDOW",
    type=duration,
    help="Keep the old key valid beside the new one for WINDOW (7d; at most 90d).",
)
@option("--retire", is_flag=True, help="Drop the old key a --rotate kept (no new key), once its window ended.")
@option("--force", is_flag=True, help="With --retire: drop the old key before its window ends.")
@json_option
def keygen(ctx: Ctx, rotate: float | None = None, retire: bool = False, force: bool = False) -> None:
    """Rotate this platform's key; prints the new registry entry and DNS TXT record. With
    --rotate WINDOW letters signed with the old key are accepted until WINDOW ends (both
    selectors valid; ONBOARDING "Rotating keys"); --retire drops the old key afterwards
    (refused, exit 2, before the window ends: --force)."""
    from ..admin import bus

    if rotate is not None and retire:
        raise BadInput("--rotate makes a new key, --retire drops the old one: one at a time")
    if force and not retire:
        raise BadInput("--force goes with --retire (drop the old key before its window ends)")
    client = ctx.client()  # it asks the approvers, in the library, before the key changes
    if retire:
        platform = bus.retire(client.registry, client.me.platform, force=force, teller=lambda _reg: client,
                              home=ctx.home)  # fmt: skip
    else:
        platform = bus.keygen(ctx.home, client.registry, client.me.platform, overlap=rotate,
                              teller=lambda _reg: client)  # fmt: skip
    emit(ctx, render.entry_json(platform), lambda: render.entry(ctx.registry_root(), platform))


@commands.command()
@argument("platform_name", metavar="PLATFORM", help="The platform this checkout is (a name from 'platforms').")
@option("--dir", "root", metavar="DIR", help="The checkout (default: the git checkout holding the current directory).")
@option("--no-guide", is_flag=True, help=NO_GUIDE_HELP)
@json_option
def bind(ctx: Ctx, platform_name: str, root: str | None, no_guide: bool = False) -> None:
    """Attach this checkout to PLATFORM: writes the .agentmail marker (commit it). Outside a git
    checkout it marks the directory (--dir, else the current one) and what is below it. Refused
    (exit 6) while the agentmail home's secrets/ lies in a git work tree that tracks it or does not
    ignore it. The checkout's AGENTS.md and CLAUDE.md get a pointer to 'agentmail guide' (AGENTS.md
    is made when neither exists)."""
    from ..admin import bus
    from ..config.identity import in_git_checkout, write_marker
    from ..config.registry import load

    load(ctx.registry_root()).named(platform_name)  # an unknown name says "did you mean" (exit 2)
    bus.refuse_exposed(ctx.home, "bind")
    path, previous = write_marker(Path(root) if root else None, platform_name)
    note = f" (was {previous})" if previous and previous != platform_name else ""
    git = in_git_checkout(path.parent)
    then = (
        "commit it so every clone knows"
        if git
        else "not a git checkout: it names this directory and those below it (nothing to commit)"
    )
    pointed = [] if no_guide else guide.add_pointer(path.parent)

    def text() -> None:
        echo(f'{path}: platform = "{platform_name}"{note}; {then}')
        _pointed(pointed)

    emit(
        ctx,
        {"marker": str(path), "platform": platform_name, "previous": previous, "git_checkout": git,
         "guide": [str(p) for p in pointed]},
        text,
    )  # fmt: skip


def _pointed(paths: list[Path]) -> None:
    for path in paths:
        echo(f"{path}: added a pointer to 'agentmail guide' for the agents that read it (--no-guide: not)")


@commands.group("bus")
def bus_group(_ctx: Ctx) -> None:
    """Change the bus's settings in bus.toml (no re-init; keys untouched)."""


class _SettingsHelp(Command):
    """``bus set``: its help is the settings table's (config/settings.py), loaded only when shown."""

    @property
    def help(self) -> str:
        from ..config.settings import help_text

        return help_text()


@argument("key", help="The setting (listed above).")
@argument("values", metavar="VALUE", nargs=-1, required=True, help="Its value, or several for a list.")
@option("--tls", metavar="MODE", help="With smtp/imap: implicit|starttls|none (default: follows the port).")
@option("--platform", metavar="NAME", help='With auth: set it for this platform only ("" goes back to the bus\'s).')
@json_option
def bus_set(ctx: Ctx, key: str, values: tuple[str, ...], tls: str | None, platform: str | None) -> None:
    from ..admin import bus

    # the library asks the approvers when the change loosens a guard, and tells them of a hold's
    changed = bus.change_setting(ctx.registry_root(), key, list(values), tls=tls, platform=platform,
                                 teller=lambda _reg: _announcer(ctx), home=ctx.home)  # fmt: skip
    stored = changed.stored
    if key in ("smtp", "imap") and not tls and isinstance(stored, dict):
        note = bus.tls_chosen(key, stored["host"], stored["port"])
        if note:
            echo(f"agentmail: note: {note}", err=True)
    where = ctx.registry_root() / ("bus.toml" if platform is None else f"platforms/{platform}.toml")
    data: dict[str, Any] = {"key": key, "value": stored}
    if platform is not None:
        data["platform"] = platform
    emit(ctx, data, lambda: echo(f"{where}: {key} = {json.dumps(stored)}"))
    if changed.guarded:
        return
    if key == "hold" and stored:
        echo(f"agentmail: note: {render.MISTAKES_ONLY}", err=True)
    elif changed.loosens:
        echo(f"agentmail: note: {render.UNASKED}", err=True)


bus_group.commands["set"] = _SettingsHelp("set", bus_set, None)


def _anyone_approves(ctx: Ctx) -> bool:
    from ..config.registry import load
    from ..people import approval

    return bool(approval.every_approver(load(ctx.registry_root())))


def _announcer(ctx: Ctx) -> Any:
    """The client that writes to the approvers: this checkout's platform, or (the operator
    outside any checkout) the first platform with an approver."""
    from ..config.registry import load
    from ..people import approval

    try:
        return ctx.client()
    except AgentmailError:
        from ..client.facade import AgentMail
        from ..config.identity import Identity

        reg = load(ctx.registry_root())
        sender = next(name for name in sorted(reg.platforms) if approval.approvers(reg, name))
        return AgentMail(reg, Identity(sender), ctx.home)


def _ask_approvers(ctx: Ctx, change: str, effect: str, platform: str | None = None, *, whole_bus: bool = False) -> None:
    """With approvers listed, a change that loosens a guard against the agent goes ahead only
    once one of them approved exactly it by mail (``AgentMail.ask_approvers``: exit 4 until then);
    the approvers of ``platform``, the one whose guard it is, decide (``whole_bus``: one of each
    platform's)."""
    if _anyone_approves(ctx):
        _announcer(ctx).ask_approvers(change, effect, platform, whole_bus=whole_bus)


@commands.command()
@json_option
def held(ctx: Ctx) -> None:
    """Letters waiting for a person's approval (never sent until 'approve')."""
    from ..people import approval

    client = ctx.client()
    letters = client.held()
    guarded = bool(approval.approvers(client.registry, client.me.platform))  # else: against mistakes only
    emit(ctx, [letter.to_json() for letter in letters], lambda: render.held(letters, guarded))


@commands.command()
@argument("letter_id", metavar="ID", required=False, help=ID_HELP)
@option("--key-file", metavar="FILE", help="The operator's approval key (pinned in the registry; never the agent's).")
@option("--new-key", metavar="FILE", help="Write a new approval key to FILE (outside AGENTMAIL_HOME) and pin it; "
        "replacing a pinned key needs the old one in --key-file.")  # fmt: skip
@json_option
def approve(ctx: Ctx, letter_id: str | None, key_file: str | None, new_key: str | None) -> None:
    """The operator's decision: send held letter ID now (as 'send' does); prints THREAD ID STATE.
    Needs --key-file, the approval key the agent does not hold (exit 4 without it); approvers
    answer the announcement by mail instead."""
    if new_key is not None:
        from ..config.registry import load
        from ..people import approval

        if letter_id is not None:
            raise BadInput("--new-key takes no ID")
        reg = load(ctx.registry_root())
        approval.may_replace(reg, new_key, ctx.home, key_file)  # first: without the old key nobody is asked
        _ask_approvers(ctx, "agentmail approve --new-key (replace the approval key)",
                       "The operator's approval key is replaced: whoever holds the new one releases held letters.")  # fmt: skip
        written = approval.new_key(reg, new_key, ctx.home, key_file)
        emit(ctx, {"key_file": str(written)}, lambda: echo(f"{written}: a new approval key, pinned in the registry; "
                                                            "keep it where the agent cannot read it"))  # fmt: skip
        return
    if letter_id is None:
        raise BadInput("give the held letter's ID (or --new-key FILE)")
    client = ctx.client()
    render.sent_outcome(ctx, client.approve(letter_id, key_file=key_file), [])


@commands.command()
@argument("letter_id", metavar="ID", help=ID_HELP)
@option("-r", "--reason", required=True, help="Why; the agent reads it in 'sent'.")
@json_option
def reject(ctx: Ctx, letter_id: str, reason: str) -> None:
    """A person's decision: held letter ID never leaves (it moves to failed/ with REASON)."""
    letter = ctx.client().reject(letter_id, reason)
    emit(
        ctx,
        letter.to_json(),
        lambda: echo(clean(f"{letter.thread} {letter.id} rejected: {letter.extra.get('rejected')}")),
    )


@commands.command()
@argument(
    "words",
    metavar="[recheck [ID...] | drop ID...]",
    nargs=-1,
    help="recheck: judge quarantined letters (IDs; none: all) again; drop: stop listing them (files kept).",
)
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def quarantine(ctx: Ctx, words: tuple[str, ...], no_sync: bool) -> None:
    """What was rejected, and why; 'quarantine recheck [ID...]' judges those letters again against
    today's registry and files the ones that pass now (after a key or a platform was added);
    'quarantine drop ID...' dismisses them (as 'done ID' does): no longer listed, the files kept."""
    if words:
        _quarantine_word(ctx, words, no_sync)
        return
    letters = ctx.client().quarantined(sync=not no_sync)
    emit(ctx, [letter.to_json() for letter in letters], lambda: render.quarantine(letters))


def _quarantine_word(ctx: Ctx, words: tuple[str, ...], no_sync: bool) -> None:
    if words[0] == "drop":
        dropped = ctx.client().dismiss_quarantined(*words[1:])
        emit(ctx, {"dismissed": dropped}, lambda: echo(f"dismissed {len(dropped)} quarantined letter(s)"))
        return
    if words[0] != "recheck":
        raise BadInput(
            f"quarantine takes no {words[0]!r}: 'agentmail quarantine' lists, 'quarantine recheck [ID...]' "
            "rechecks, 'quarantine drop ID...' dismisses"
        )
    results = ctx.client().recheck_quarantine(*words[1:], sync=not no_sync)
    emit(ctx, results, lambda: render.rechecked(results))


@commands.command()
@option("--since", metavar="DURATION", help="Quarantined and bounced letters of the last DURATION (3d, 12h, 2w), "
        "not since the last digest sent.")  # fmt: skip
@option("--send", is_flag=True, help="Mail it to this platform's followers (and remember it as the last digest).")
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def digest(ctx: Ctx, since: str | None, send: bool, no_sync: bool) -> None:
    """One summary for people: open threads by age and whose move (stale first), letters held
    for approval, what was quarantined or bounced since the last digest. Printed, or mailed."""
    from ..people import digest as digest_mod

    client = ctx.client() if send else ctx.reader()  # a digest mailed is never one of a stale spool
    made = client.digest(since, sync=not no_sync)
    if not send:
        emit(ctx, {**made.to_json(), "text": digest_mod.render(made)}, lambda: echo(digest_mod.render(made).rstrip()))
        return
    sent = client.send_digest(made)
    if sent["status"] == "queued":
        raise TransportError(f"the digest was not sent: {sent['detail']}; run 'agentmail digest --send' again")
    if sent["status"] == "failed":
        raise PermanentFailure(f"the digest was refused: {sent['detail']}")
    said = f"digest sent to {', '.join(sent['to'])} ({sent['message_id']})"
    emit(ctx, {**made.to_json(), **sent}, lambda: echo(said))


@commands.command()
@json_option
def rebuild(ctx: Ctx) -> None:
    """Make a lost or damaged spool.db again from the letter files (what was there is kept aside)."""
    data = ctx.client().rebuild()
    emit(ctx, data, lambda: render.rebuilt(data))


@commands.command()
@option("--round-trip", is_flag=True, help="Also send a letter to this platform's own thread address and read it back.")
@option(
    "--timeout", type=seconds, default=60.0, show_default=True, metavar="S", help="How long the round trip may take."
)
@json_option
def doctor(ctx: Ctx, round_trip: bool, timeout: float) -> None:
    """Check configuration, credentials, permissions, keys, connectivity; exit 6 if any check fails."""
    from ..admin.doctor import run_checks

    checks = run_checks(ctx.home, ctx.registry_root(), ctx.platform, ctx.agent, round_trip=round_trip, timeout=timeout)
    emit(ctx, [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in checks], lambda: render.checks(checks))
    if not all(c.ok for c in checks):
        raise ConfigError(f"{sum(not c.ok for c in checks)} check(s) failed")


@commands.command()
@option("--home", "demo_home", metavar="DIR", help="Where to build the demo bus (default: a new temp dir).")
@json_option
def demo(ctx: Ctx, demo_home: str | None) -> None:
    """The whole lifecycle between two platforms on the embedded default (--json: its summary)."""
    from ..admin.demo import run_demo

    summary = run_demo(Path(demo_home) if demo_home else None, (lambda _: None) if ctx.json else echo)
    emit(ctx, summary, lambda: None)
