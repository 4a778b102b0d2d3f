"""The ``agentmail`` command: parse arguments, call the client, print text or JSON (DESIGN §8).

No logic lives here. Every failure is one line on stderr and a documented exit code:
0 ok · 1 not found · 2 bad input · 3 timeout · 4 refused by a guard · 5 transport · 6 config.
Letters are untrusted: control characters are stripped from everything printed as text.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import AgentmailError, BadInput
from ..text import for_terminal
from .args import Exit, Group, Version, argument, at_least, duration, echo, option, seconds

if TYPE_CHECKING:
    from pathlib import Path  # at run time imported where used: --help loads no pathlib (issue 11)

    from ..client.facade import AgentMail
    from ..model import Letter

F = TypeVar("F", bound=Callable[..., Any])
clean = for_terminal  # untrusted text made safe for a terminal (text.py: the one policy)
_TYPES_HELP = "report|question|fix-notice|verify-result|ack|close"
_ID_HELP = "A letter: its id (any case), its Message-ID, or a unique prefix of either."
_OUTCOME_HELP = "With -t verify-result: confirmed|still-broken (still-broken: the fixer's move again)."


class Ctx:
    def __init__(self, platform: str | None, agent: str | None, registry: str | None, as_json: bool) -> None:
        self.platform, self.agent, self.registry, self.json = platform, agent, registry, as_json
        self._client: AgentMail | None = None

    @property
    def home(self) -> Path:
        from ..home import agentmail_home

        return agentmail_home()

    def registry_root(self) -> Path:
        from ..config.registry import registry_dir

        return registry_dir(self.registry, self.home)

    def client(self) -> AgentMail:
        if self._client is None:
            from ..client.facade import AgentMail

            self._client = AgentMail.from_env(self.platform, agent=self.agent, registry=self.registry_root())
        return self._client

    def close(self) -> None:
        """Say goodbye to the servers (SMTP QUIT, IMAP LOGOUT) rather than drop the connections."""
        if self._client is not None:
            if self._client.flushed:
                echo(f"agentmail: sent {self._client.flushed} letter(s) that were waiting in the outbox", err=True)
            self._client.close()
            self._client = None


def json_option(func: F) -> F:
    """``--json``, ``--as`` and ``--agent`` are accepted before or after the command name."""
    func = option("--agent", "agent_after", metavar="NAME", hidden=True, into_ctx="agent")(func)
    func = option("--as", "as_after", metavar="PLATFORM", hidden=True, into_ctx="platform")(func)
    return option("--json", "as_json", is_flag=True, into_ctx="json", help="Machine-readable output.")(func)


def emit(ctx: Ctx, data: Any, text: Callable[[], None]) -> None:
    if ctx.json:
        import json  # only for --json: --help and text output never load it

        echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        text()


NOT_TEXT = "the body must be UTF-8 text; convert it (iconv) or send the file with --attach"


def read_body(value: str) -> str:
    """``-b TEXT``, ``-b @FILE`` or ``-b -`` (standard input), which must be UTF-8 text: read
    as bytes and decoded strictly (whatever the locale), newlines as text mode reads them."""
    from pathlib import Path

    where = "-b"
    data: bytes | str = value
    if value == "-":
        where = "standard input"
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read() if stream is not None else sys.stdin.read()
    elif value.startswith("@") and len(value) > 1:
        path = Path(value[1:]).expanduser()
        where = str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BadInput(f"cannot read body file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data.encode("utf-8").decode("utf-8")
    except UnicodeError:  # undecodable bytes, or an argument's bytes the locale could not decode (surrogates)
        raise BadInput(f"{where}: {NOT_TEXT}") from None
    if "\x00" in text:  # a NUL: a binary file that happens to decode
        raise BadInput(f"{where}: {NOT_TEXT}")
    return text.replace("\r\n", "\n").replace("\r", "\n") if isinstance(data, bytes) else text


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


_EPILOG = """\b
First steps (ONBOARDING.md has the whole path):
  1. agentmail init --transport smtp+imap --domain D --smtp HOST:587 --imap HOST:993 A B
     (once per bus: the registry and each platform's key; it never overwrites a key)
  2. credentials, owner-only from the start (read -rs PW first):
     (umask 077; printf 'AGENTMAIL_USERNAME=A@D\\nAGENTMAIL_PASSWORD=%s\\n' "$PW" \\
        > "${AGENTMAIL_HOME:-$HOME/.agentmail}/secrets/A.env")
  3. agentmail --as A doctor --round-trip
  Then in each checkout: agentmail bind A (writes the .agentmail marker).
  Change a setting later: agentmail bus set KEY VALUE (never a re-init).

\b
Environment:
  AGENTMAIL_HOME      spools and secrets/ (default ~/.agentmail)
  AGENTMAIL_REGISTRY  the registry directory (default $AGENTMAIL_HOME/registry)
  AGENTMAIL_PLATFORM  act as this platform (like --as); AGENTMAIL_AGENT like --agent
  AGENTMAIL_USERNAME, AGENTMAIL_PASSWORD  the mailbox login (else secrets/PLATFORM.env)
  AGENTMAIL_PASSWORD_CMD      instead: a command printing the password or OAuth2 token (no shell)
  AGENTMAIL_PASSWORD_KEYRING  instead: a system keyring service (pip install 'agentmail[keyring]')
  AGENTMAIL_DKIM_KEY  the base64 private key (else secrets/PLATFORM.key)

\b
Exit codes:
  0 ok  1 not found  2 bad input  3 timeout  4 refused by a guard
  5 transport failure (the letter is queued; it goes out with the next command)
  6 configuration (registry, identity, keys, credentials, TLS; nothing is queued)
"""


@option("--as", "platform", metavar="PLATFORM",
        help="Act as this platform (else AGENTMAIL_PLATFORM, marker, git remote, path).")  # fmt: skip
@option("--agent", metavar="NAME", help="One of several agents sharing this checkout (else AGENTMAIL_AGENT).")
@option(
    "--registry", metavar="DIR", help="The registry in force (else AGENTMAIL_REGISTRY, else $AGENTMAIL_HOME/registry)."
)
@option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@option("--version", action=Version, help="Show the version and exit.")
def _main_group(ctx: Ctx, platform: str | None, agent: str | None, registry: str | None, as_json: bool) -> None:
    """agentmail: defect reports between coding agents, over real email."""
    ctx.platform, ctx.agent, ctx.registry, ctx.json = platform, agent, registry, as_json


main_group = Group("agentmail", _main_group, epilog=_EPILOG)


@main_group.command()
@json_option
def whoami(ctx: Ctx) -> None:
    """This checkout's platform[@agent]; exit 1 if none."""
    me = ctx.client().me
    emit(
        ctx,
        {"platform": me.platform, "agent": me.agent, "address": ctx.client().platform.address},
        lambda: echo(me.mailbox),
    )


@main_group.command()
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
            "people": [_person_json(person) for person in p.people],
        }
        for p in reg.platforms.values()
    ]

    def text() -> None:
        echo(f"bus {reg.bus.name} ({reg.bus.transport}, policy {reg.bus.policy}) at {reg.root}")
        for r in rows:
            echo(f"  {r['name']:<16} {r['address']:<32} s={r['selector']}")
            for person in r["people"]:
                echo(f"    person {person['address']:<32} {_person_roles(person)}")

    emit(
        ctx,
        {
            "bus": reg.bus.name,
            "domain": reg.bus.domain,
            "transport": reg.bus.transport,
            "platforms": rows,
            "problems": reg.problems,
        },
        text,
    )
    for problem in reg.problems:
        echo(f"agentmail: warning: {problem}", err=True)


@main_group.command()
@argument("names", metavar="NAME", nargs=-1, required=True, help="The platforms of the bus (a key pair each).")
@option("--domain", default="bus.localhost", show_default=True, help="Mail domain of the bus.")
@option(
    "--transport",
    choices=["local", "smtp+imap"],
    default="local",
    show_default=True,
    help="local: the embedded post office on this machine; smtp+imap: a mail server.",
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
@json_option
def init(
    ctx: Ctx,
    names: tuple[str, ...],
    domain: str,
    transport: str,
    smtp: str | None,
    imap: str | None,
    tls: tuple[str, ...],
    ca_file: str | None,
    trust_authserv: tuple[str, ...],
    policy: str,
    sent_folder: str | None,
    force: bool,
) -> None:
    """Create a NEW bus: its registry and each platform's DKIM key pair.

    Refused (exit 6) when the registry or a platform's key already exists: to use an existing
    bus set AGENTMAIL_REGISTRY / --registry; to add a platform use 'add'; to rotate a key
    'keygen'; to change a setting 'bus set'. The TLS mode follows the port when --tls is not
    given (465/993 implicit, 587/143 STARTTLS)."""
    from ..admin import bus

    endpoints: dict[str, Any] = {"policy": policy}
    if transport == "smtp+imap":
        endpoints.update(bus.endpoints(smtp, imap, tls, ca_file, trust_authserv))
        if sent_folder:
            endpoints["sent_folder"] = sent_folder
    elif smtp or imap or sent_folder:
        raise BadInput("--smtp, --imap and --sent-folder are for --transport smtp+imap")
    kept = [p.stem for p in bus.existing_state(ctx.home, ctx.registry_root(), list(names)) if p.suffix == ".key"]
    reg = bus.init(
        ctx.home, ctx.registry_root(), list(names), domain=domain, transport=transport, endpoints=endpoints, force=force
    )
    entries = [reg.platforms[n] for n in names if n in reg.platforms]

    def text() -> None:
        echo(
            f"created bus {reg.bus.name} at {reg.root} with {', '.join(sorted(reg.platforms))}; "
            f"keys in {ctx.home / 'secrets'}" + (f" (kept the existing keys of {', '.join(kept)})" if kept else "")
        )
        echo("# DNS TXT records, for partners who look keys up (one per platform):")
        for platform in entries:
            echo(_txt_line(platform))

    emit(
        ctx,
        {
            "registry": str(reg.root),
            "platforms": sorted(reg.platforms),
            "kept_keys": kept,
            "records": [_entry_json(p) for p in entries],
        },
        text,
    )


def _txt_line(platform: Any) -> str:
    return f'{platform.selector}._domainkey.{platform.dkim_domain}. IN TXT "{platform.txt_record()}"'


def _entry_text(ctx: Ctx, platform: Any) -> None:
    from ..admin import bus

    echo(f"# {ctx.registry_root() / 'platforms' / (platform.name + '.toml')}")
    echo(bus.entry_toml(platform))
    echo(f"# DNS TXT record, for partners who look keys up:\n{_txt_line(platform)}")


def _entry_json(platform: Any) -> dict[str, Any]:
    from ..admin import bus

    return {
        **bus.platform_entry(platform),
        "dns_name": f"{platform.selector}._domainkey.{platform.dkim_domain}",
        "txt_record": platform.txt_record(),
    }


def _person_json(person: Any) -> dict[str, Any]:
    return {"address": person.address, "follows": person.follows, "writes": person.writes, "approves": person.approves}


def _person_roles(person: dict[str, Any]) -> str:
    roles = [role for role in ("follows", "writes", "approves") if person[role]]
    return ", ".join(roles) or "listed (neither follows nor writes)"


@main_group.command()
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
    platform = bus.set_person(
        load(ctx.registry_root()),
        platform_name,
        address,
        follows=follows,
        writes=writes,
        remove=remove,
        approves=approves,
    )
    path = ctx.registry_root() / "platforms" / f"{platform.name}.toml"
    people = [_person_json(p) for p in platform.people]
    shown = address.strip().lower()

    def text() -> None:
        current = next((p for p in people if p["address"] == shown), None)
        echo(
            f"{path}: "
            + (f"{shown} removed" if current is None else f"{shown} {_person_roles(current)}")
            + "; commit it so every clone knows"
        )

    emit(ctx, {"platform": platform.name, "registry_file": str(path), "people": people}, text)


@main_group.command()
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
    emit(ctx, _entry_json(platform), lambda: _entry_text(ctx, platform))


@main_group.command()
@option("--rotate", metavar="WINDOW", type=duration, help="Keep the old key valid beside the new one for WINDOW (7d).")
@option("--retire", is_flag=True, help="Drop the old key a --rotate kept (no new key).")
@json_option
def keygen(ctx: Ctx, rotate: float | None = None, retire: bool = False) -> None:
    """Rotate this platform's key; prints the new registry entry and DNS TXT record. With
    --rotate WINDOW letters signed with the old key are accepted until WINDOW ends (both
    selectors valid; ONBOARDING "Rotating keys"); --retire drops the old key afterwards."""
    from ..admin import bus

    if rotate is not None and retire:
        raise BadInput("--rotate makes a new key, --retire drops the old one: one at a time")
    client = ctx.client()
    if retire:
        platform = bus.retire(client.registry, client.me.platform)
    else:
        platform = bus.keygen(ctx.home, client.registry, client.me.platform, overlap=rotate)
    emit(ctx, _entry_json(platform), lambda: _entry_text(ctx, platform))


@main_group.command()
@argument("platform_name", metavar="PLATFORM", help="The platform this checkout is (a name from 'platforms').")
@option("--dir", "root", metavar="DIR", help="The checkout (default: the git checkout holding the current directory).")
@json_option
def bind(ctx: Ctx, platform_name: str, root: str | None) -> None:
    """Attach this checkout to PLATFORM: writes the .agentmail marker (commit it)."""
    from pathlib import Path

    from ..config.identity import write_marker
    from ..config.registry import load

    load(ctx.registry_root()).named(platform_name)  # an unknown name says "did you mean" (exit 2)
    path, previous = write_marker(Path(root) if root else None, platform_name)
    note = f" (was {previous})" if previous and previous != platform_name else ""
    emit(
        ctx,
        {"marker": str(path), "platform": platform_name, "previous": previous},
        lambda: echo(f'{path}: platform = "{platform_name}"{note}; commit it so every clone knows'),
    )


@main_group.group("bus")
def bus_group(_ctx: Ctx) -> None:
    """Change the bus's settings in bus.toml (no re-init; keys untouched)."""


@bus_group.command("set")
@argument("key", help="The setting (listed above).")
@argument("values", metavar="VALUE", nargs=-1, required=True, help="Its value, or several for a list.")
@option("--tls", metavar="MODE", help="With smtp/imap: implicit|starttls|none (default: follows the port).")
@option("--platform", metavar="NAME", help='With auth: set it for this platform only ("" goes back to the bus\'s).')
@json_option
def bus_set(ctx: Ctx, key: str, values: tuple[str, ...], tls: str | None, platform: str | None) -> None:
    """Set KEY in bus.toml: ca_file PEM (copied into the registry), smtp HOST:PORT, imap HOST:PORT,
    smtp.tls / imap.tls MODE, trusted_authserv_ids ID..., sent_folder NAME ("" for none),
    policy pinned|aligned, poll_interval SECONDS, max_size BYTES, hold DOMAIN|ADDRESS... ("" for none),
    new_threads_per_hour N (0: no cap), groups.NAME PLATFORM... (for 'send @NAME'; "" removes it), domain, name;
    attachments: attach_max_bytes BYTES (each), attach_max_total BYTES (per letter), attach_max_count N,
    attach_types TYPE... (the allow-list); auth password|xoauth2|oauthbearer (how platforms log in to their
    mailboxes; with --platform NAME for one platform, written into its entry)."""
    import json

    from ..admin import bus

    if key == "hold":
        _announce_hold_change(ctx, list(values))
    stored = bus.set_setting(ctx.registry_root(), key, list(values), tls=tls, platform=platform)
    where = ctx.registry_root() / ("bus.toml" if platform is None else f"platforms/{platform}.toml")
    data: dict[str, Any] = {"key": key, "value": stored}
    if platform is not None:
        data["platform"] = platform
    emit(ctx, data, lambda: echo(f"{where}: {key} = {json.dumps(stored)}"))


def _announce_hold_change(ctx: Ctx, values: list[str]) -> None:
    """A change of ``hold`` is told to every approver first (issue 26): one that cannot be told
    is not made (exit 6), so a hold is never lifted silently."""
    from ..config.registry import load

    reg = load(ctx.registry_root())
    after = [v.strip().lower() for v in values if v.strip()]
    if after == list(reg.bus.hold):
        return
    from ..people import approval

    if not approval.every_approver(reg):
        return
    from ..errors import AgentmailError, ConfigError

    try:
        client = ctx.client()  # this checkout's platform tells them
    except AgentmailError:  # the operator, outside any checkout: the first platform with an approver
        from ..client.facade import AgentMail
        from ..config.identity import Identity

        sender = next(name for name in sorted(reg.platforms) if approval.approvers(reg, name))
        client = AgentMail(reg, Identity(sender), ctx.home)
    failed = client.announce_hold_change(list(reg.bus.hold), after)
    if failed:
        raise ConfigError(f"the hold rule is unchanged: the approvers could not be told ({failed})")


def _letters(ctx: Ctx, letters: list[Letter], empty: str) -> None:
    def text() -> None:
        if not letters:
            echo(empty)
        for letter in letters:
            echo(line(letter))

    emit(ctx, [letter.to_json() for letter in letters], text)


@main_group.command()
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@option("--consume", is_flag=True, help="Mark what is shown as read (at-most-once).")
@option("--limit", type=at_least(1), help="Show at most N letters.")
@option("--from-start", is_flag=True, help="Fetch the mailbox's whole history (a new agent starts at now).")
@json_option
def inbox(ctx: Ctx, no_sync: bool, consume: bool, limit: int | None, from_start: bool) -> None:
    """Sync, then the unread authenticated letters (they stay until 'done' or a reply)."""
    from ..text import DATA_NOT_ORDERS

    letters = ctx.client().inbox(sync=not no_sync, consume=consume, limit=limit, from_start=from_start)
    if letters and not ctx.json:  # where an agent reads its mail, it is told what a letter is
        echo(f"{len(letters)} unread letter{'s' if len(letters) != 1 else ''}. {DATA_NOT_ORDERS}")
    _letters(ctx, letters, "no unread letters")


@main_group.command()
@argument("letter_id", metavar="ID", help=_ID_HELP)
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
    text = full(letter).replace("\n\n", clean(f"\nauth:     {how}") + "\n\n", 1)
    emit(ctx, {**letter.to_json(), "authentication": how}, lambda: echo(text))


@main_group.command()
@argument("letter_id", metavar="ID", help=_ID_HELP)
@option("--dir", "directory", default=".", show_default=True, metavar="DIR", help="Where to write them.")
@option("--force", is_flag=True, help="Replace files of the same name.")
@json_option
def save(ctx: Ctx, letter_id: str, directory: str, force: bool) -> None:
    """Write letter ID's attachments into DIR (0600; never outside DIR; nothing is opened or run)."""
    paths = ctx.client().save(letter_id, directory, force=force)
    emit(ctx, {"saved": [str(p) for p in paths]}, lambda: echo("\n".join(clean(str(p)) for p in paths)))


@main_group.command(name="apply")
@argument("letter_id", metavar="ID", help=_ID_HELP)
@option("--check", is_flag=True, help="Try them in a scratch worktree and list the commits; change nothing.")
@option("--series", is_flag=True, help="Let one attachment carry several commits (each is listed before it lands).")
@json_option
def apply_cmd(ctx: Ctx, letter_id: str, check: bool, series: bool) -> None:
    """'git am' letter ID's patches in the current checkout (a clean tree only; no hook runs):
    every commit is listed (author, subject, paths); --check lists them and changes nothing."""
    from pathlib import Path

    done = ctx.client().apply(letter_id, Path.cwd(), check=check, series=series)
    emit(ctx, {"applied": done.landed, "detail": done.detail, "commits": [c.to_json() for c in done.commits]},
         lambda: echo(clean(str(done))))  # fmt: skip


@main_group.command()
@argument("letter_ids", metavar="ID", nargs=-1, required=True, help=_ID_HELP)
@json_option
def done(ctx: Ctx, letter_ids: tuple[str, ...]) -> None:
    """Mark letters consumed (read); a failed letter of mine is dismissed (status stops showing it)."""
    client = ctx.client()
    moved = client.done(*letter_ids)
    read = [i for i in moved if i not in client.dismissed]
    gone = [i for i in moved if i in client.dismissed]

    def text() -> None:
        echo(f"marked {len(read)} read" + (f", dismissed {len(gone)} failed letter(s)" if gone else ""))

    emit(ctx, {"done": read, **({"dismissed": gone} if gone else {})}, text)


def _report_sent(ctx: Ctx, letter: Letter, warnings: list[str]) -> None:
    from ..client.facade import raise_for_state

    advice = [w.removeprefix("opener: ") for w in warnings if w.startswith("opener: ")]
    if advice:  # advice, never an error: one line, saying what became of the letter all the same
        went = {"held": "held anyway", "outbox": "queued anyway", "failed": "not a refusal"}.get(
            letter.state, "sent anyway"
        )
        echo(clean(f"agentmail: advice for an opener ({went}): " + "; ".join(advice)), err=True)
    for warning in (w for w in warnings if not w.startswith("opener: ")):
        echo(clean(f"agentmail: note: {warning}"), err=True)
    if letter.extra.get("refused"):
        echo(clean(f"agentmail: some recipients were refused: {letter.extra['refused']}"), err=True)
    if letter.extra.get("sent_copy_failed"):
        echo(clean(f"agentmail: sent, but {letter.extra['sent_copy_failed']}"), err=True)
    if letter.state == "outbox":  # THREAD ID STATE on stdout; why, once, on stderr (exit 5)
        from ..errors import TransportError

        why = letter.extra.get("queued_reason") or "the server is unreachable"
        emit(ctx, letter.to_json(), lambda: echo(f"{letter.thread} {letter.id} queued"))
        raise TransportError(
            f"queued (not sent): {why}; it goes out with the next command or 'agentmail flush'; do not send it again"
        )
    elif letter.state == "held":
        why = letter.extra.get("held_reason") or "held"
        emit(ctx, letter.to_json(), lambda: echo(clean(
            f"{letter.thread} {letter.id} held (not sent): {why}; it waits for a person's approval "
            f"({_approvers_told(letter)}); 'agentmail sent' shows what they decided")))  # fmt: skip
    else:
        emit(ctx, letter.to_json(), lambda: echo(f"{letter.thread} {letter.id} {letter.state}"))
    raise_for_state(letter)


def attach_options(func: F) -> F:
    """``--attach FILE`` (repeatable) and ``--patch REV-RANGE`` for every command that writes a letter."""
    func = option(
        "--patch", "patch", metavar="REV-RANGE", help="Attach 'git format-patch REV-RANGE' (one part per commit)."
    )(func)
    return option(
        "--attach", "attach", metavar="FILE", multiple=True, help="Attach a file (repeatable): evidence, a log..."
    )(func)


def _attachments(ctx: Ctx, files: tuple[str, ...], patch: str | None) -> tuple[Any, ...]:
    """The files and patches to attach, read now (limits are the bus's: exit 2 with the reason)."""
    from pathlib import Path

    if not files and not patch:
        return ()
    from ..stages import evidence

    client = ctx.client()
    limit = client.registry.bus.attach_max_bytes
    items = [evidence.from_file(name, limit, home=client.home) for name in files]
    if patch:
        items.extend(evidence.from_patches(patch, Path.cwd()))
    return tuple(items)


@main_group.command()
@argument("to", metavar="TO", help="A platform, several (beta,gamma) or a group (@NAME).")
@option("-s", "--subject", help="Subject of the new thread (required unless --thread).")
@option("-b", "--body", required=True, metavar="TEXT|@FILE|-", help="The text, @FILE, or - for standard input.")
@option("-t", "--type", "kind", default="report", show_default=True, metavar="TYPE", help=_TYPES_HELP + ".")
@option("-S", "--severity", metavar="SEVERITY", help="low|medium|high|critical.")
@option("-r", "--ref", metavar="REF", help="What it is about on your side: an issue, commit or URL.")
@option("--thread", metavar="THREAD", help="Continue this thread instead of opening one (e.g. a fix-notice).")
@option("--force", is_flag=True, help="Send even if the body looks like a credential.")
@option("--hold", is_flag=True, help="Keep it (signed) in held/ until a person approves it.")
@option("--outcome", metavar="OUTCOME", help=_OUTCOME_HELP)
@attach_options
@json_option
def send(ctx: Ctx, to: str, subject: str | None, body: str, kind: str, severity: str | None, ref: str | None,
         thread: str | None, force: bool, hold: bool, attach: tuple[str, ...], patch: str | None,
         outcome: str | None = None) -> None:  # fmt: skip
    """Open a thread with platform TO (a name from 'agentmail platforms'); prints THREAD ID STATE.

    TO may be several (beta,gamma) or a group of the bus (@NAME, 'bus set groups.NAME ...'):
    one letter to all of them, one thread; each answers in it.

    Opener advice (one line, on stderr) never stops the letter. With --thread the letter
    continues that thread and -s is not needed."""
    client = ctx.client()
    if not thread and not subject:
        raise BadInput("-s/--subject is required to open a thread (with --thread it is not)")
    letter = client.send(to, subject or "", read_body(body), type=kind, severity=severity, ref=ref, force=force,
                         thread=thread, hold=hold, attachments=_attachments(ctx, attach, patch),
                         outcome=outcome)  # fmt: skip
    _report_sent(ctx, letter, client.last_warnings)


@main_group.command()
@argument("letter_id", metavar="ID", help=_ID_HELP)
@option("-b", "--body", required=True, metavar="TEXT|@FILE|-", help="The text, @FILE, or - for standard input.")
@option(
    "-t",
    "--type",
    "kind",
    metavar="TYPE",
    help=_TYPES_HELP + ". Default: ack to a report, verify-result to a fix-notice, else question.",
)
@option("--force", is_flag=True, help="Send even if the body looks like a credential.")
@option("--hold", is_flag=True, help="Keep it (signed) in held/ until a person approves it.")
@option("--outcome", metavar="OUTCOME", help=_OUTCOME_HELP)
@attach_options
@json_option
def reply(ctx: Ctx, letter_id: str, body: str, kind: str | None, force: bool, hold: bool, attach: tuple[str, ...],
          patch: str | None, outcome: str | None = None) -> None:  # fmt: skip
    """Answer letter ID (the first column of 'inbox'); exit 4 with the reason when a guard refuses."""
    client = ctx.client()
    letter = client.reply(letter_id, read_body(body), type=kind, force=force, raise_refused=True, hold=hold,
                          attachments=_attachments(ctx, attach, patch), outcome=outcome)  # fmt: skip
    assert letter is not None  # raise_refused: a refusal raised
    _report_sent(ctx, letter, client.last_warnings)


@main_group.command()
@argument("thread_id", metavar="THREAD", help="A thread id (thr-..., any case).")
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def thread(ctx: Ctx, thread_id: str, no_sync: bool) -> None:
    """The whole thread, both ways, as a person would read it."""
    letters = ctx.client().thread(thread_id, sync=not no_sync)

    def text() -> None:
        for letter in letters:
            arrow = "→" if letter.state in ("sent", "outbox", "held", "failed") else "←"
            undeliverable = "  UNDELIVERABLE" if letter.extra.get("undeliverable") else ""
            if letter.state == "outbox":
                undeliverable += f"  QUEUED (not sent): {letter.extra.get('queued_reason') or ''}"
            elif letter.state == "failed":
                undeliverable += f"  FAILED: {letter.extra.get('failed_reason') or ''}"
            elif letter.state == "held":
                undeliverable += f"  HELD (waiting for a person): {letter.extra.get('held_reason') or ''}"
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

    emit(ctx, [letter.to_json() for letter in letters], text)


@main_group.command()
@json_option
def held(ctx: Ctx) -> None:
    """Letters waiting for a person's approval (never sent until 'approve')."""
    letters = ctx.client().held()

    def text() -> None:
        if not letters:
            echo("nothing held")
        for letter in letters:
            echo(line(letter) + clean(f"  (held: {letter.extra.get('held_reason') or ''})"))

    emit(ctx, [letter.to_json() for letter in letters], text)


def _approvers_told(letter: Letter) -> str:
    if letter.extra.get("announced"):
        return "the approvers were told by mail"
    if letter.extra.get("announce_failed"):
        return f"the approvers could not be told: {letter.extra['announce_failed']}"
    return "the platform lists no approver: the operator decides"


@main_group.command()
@argument("letter_id", metavar="ID", required=False, help=_ID_HELP)
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
        written = approval.new_key(load(ctx.registry_root()), new_key, ctx.home, key_file)
        emit(ctx, {"key_file": str(written)}, lambda: echo(f"{written}: a new approval key, pinned in the registry; "
                                                            "keep it where the agent cannot read it"))  # fmt: skip
        return
    if letter_id is None:
        raise BadInput("give the held letter's ID (or --new-key FILE)")
    client = ctx.client()
    _report_sent(ctx, client.approve(letter_id, key_file=key_file), [])


@main_group.command()
@argument("letter_id", metavar="ID", help=_ID_HELP)
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


@main_group.command()
@json_option
def sent(ctx: Ctx) -> None:
    """What I sent (held, queued, failed and delivered)."""
    letters = ctx.client().sent()

    def text() -> None:
        if not letters:
            echo("nothing sent")
        for letter in letters:
            mark = " UNDELIVERABLE" if letter.extra.get("undeliverable") else ""
            state = {"outbox": "queued, not sent yet", "failed": "FAILED", "held": "HELD, waiting for a person"
                     }.get(letter.state, letter.state)  # fmt: skip
            why = f": {letter.extra['rejected']}" if letter.state == "failed" and letter.extra.get("rejected") else ""
            echo(
                line(letter, "→ " + addressees(letter)) + clean(f"  ({state}{' (rejected)' if why else ''}{why}{mark})")
            )

    emit(ctx, [letter.to_json() for letter in letters], text)


@main_group.command()
@argument(
    "words", metavar="[recheck [ID...]]", nargs=-1, help="recheck: judge quarantined letters (IDs; none: all) again."
)
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def quarantine(ctx: Ctx, words: tuple[str, ...], no_sync: bool) -> None:
    """What was rejected, and why; 'quarantine recheck [ID...]' judges those letters again against
    today's registry and files the ones that pass now (after a key or a platform was added)."""
    if words:
        _recheck(ctx, words, no_sync)
        return
    letters = ctx.client().quarantined(sync=not no_sync)

    def text() -> None:
        if not letters:
            echo("quarantine is empty")
        for letter in letters:
            echo(clean(f"{letter.id}  {letter.reason:<20} {letter.sender_address or '?':<28} {letter.subject}"))
            echo(clean(f"    {letter.detail}"))

    emit(ctx, [letter.to_json() for letter in letters], text)


def _recheck(ctx: Ctx, words: tuple[str, ...], no_sync: bool) -> None:
    if words[0] != "recheck":
        raise BadInput(
            f"quarantine takes no {words[0]!r}: 'agentmail quarantine' lists, 'quarantine recheck [ID...]' rechecks"
        )
    results = ctx.client().recheck_quarantine(*words[1:], sync=not no_sync)

    def text() -> None:
        if not results:
            echo("quarantine is empty")
        for item in results:
            if item["outcome"] == "filed":
                echo(f"{item['id']}  filed: it passes today's registry (now in the inbox)")
            elif item["outcome"] == "duplicate":
                echo(f"{item['id']}  dropped: a copy of letter {item['filed_as']}, filed already")
            else:
                echo(clean(f"{item['id']}  still quarantined: {item['reason']}: {item['detail']}"))

    emit(ctx, results, text)


@main_group.command()
@argument("query", default="", help='Plain words, all required ("a phrase", prefix*); none: filters alone.')
@option("--from", "sender", metavar="P", help="Only letters from platform P (or from address P).")
@option("--type", "kind", metavar="T", help="Only letters of type T (report, ack, ..., human).")
@option("--thread", "thread_id", metavar="THR", help="Only letters of thread THR.")
@option("--since", metavar="DATE", help="Filed here since DATE: 2026-11-30, 2026-11-30T08:00 (UTC), 7d, 12h.")
@option("--state", metavar="S", help="Only letters in state S (unread, read, sent, outbox, held, failed).")
@option("--limit", type=at_least(1, 1000), default=20, show_default=True, help="Show at most N letters.")
@option("--quarantine", "include_quarantine", is_flag=True, help="Search quarantined letters too.")
@option("--fts", "syntax", is_flag=True, help="QUERY is SQLite FTS5 syntax (AND, OR, NOT, NEAR, col:).")
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def search(ctx: Ctx, query: str, sender: str | None, kind: str | None, thread_id: str | None, since: str | None,
           state: str | None, limit: int, include_quarantine: bool, syntax: bool, no_sync: bool) -> None:  # fmt: skip
    """Search every letter of this mailbox, sent and received, best match first.

    QUERY is plain words, all required ("quoted phrase", prefix*); filters alone list the
    matching letters newest first. Exit 2 on a bad query or filter."""
    hits = ctx.client().search(query, sync=not no_sync, sender=sender, type=kind, thread=thread_id, since=since,
                               state=state, limit=limit, quarantine=include_quarantine, syntax=syntax)  # fmt: skip

    def text() -> None:
        if not hits:
            echo("no letters match")
        for hit in hits:
            flag = f" [{hit.severity}]" if hit.severity else ""
            echo(clean(f"{hit.id}  {hit.state:<10} {hit.type or '-':<13} {hit.sender or '?':<14} "
                             f"{hit.thread or '-':<16} {hit.subject}{flag}"))  # fmt: skip
            echo(clean(f"    {hit.snippet}"))

    emit(ctx, [hit.to_json() for hit in hits], text)


@main_group.command()
@option("--to", "to_agent", metavar="AGENT", help="The sibling agent it is for (else whoever reads next).")
@option("-s", "--subject", required=True, help="What the note is about.")
@option("-b", "--body", required=True, metavar="TEXT|@FILE|-", help="The text, @FILE, or - for standard input.")
@option("--force", is_flag=True, help="Send even if the body looks like a credential.")
@attach_options
@json_option
def note(ctx: Ctx, to_agent: str | None, subject: str, body: str, force: bool, attach: tuple[str, ...],
         patch: str | None) -> None:  # fmt: skip
    """A handover to a sibling agent sharing this platform."""
    client = ctx.client()
    letter = client.note(subject, read_body(body), to_agent=to_agent, force=force,
                         attachments=_attachments(ctx, attach, patch))  # fmt: skip
    _report_sent(ctx, letter, client.last_warnings)


@main_group.command()
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@json_option
def notes(ctx: Ctx, no_sync: bool) -> None:
    """Notes for me (not consumed)."""
    _letters(ctx, ctx.client().notes(sync=not no_sync), "no notes")


@main_group.command()
@option("--no-sync", is_flag=True, help="Do not pull from the transport first.")
@option("--closed", is_flag=True, help="Include closed threads (reads the whole history).")
@option("--stale", metavar="DURATION", help="Only threads with no move for longer than DURATION: 30m, 12h, 3d, 2w.")
@json_option
def status(ctx: Ctx, no_sync: bool, closed: bool, stale: str | None) -> None:
    """Open threads, where each stands, whose move it is, their age and time since the last move."""
    from ..ages import age, duration, now_ms

    idle = None if stale is None else duration(stale, "--stale")  # bad input before any sync
    client = ctx.client()
    rows = client.status(sync=not no_sync, closed=closed, stale=idle)
    now = now_ms()

    def text() -> None:
        if not rows and stale is not None:
            echo(f"no thread without a move for over {stale}")
        elif not rows:
            shut = 0 if closed else client.closed_threads()
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

    emit(ctx, [r.to_json() for r in rows], text)


@main_group.command()
@option("--since", metavar="DURATION", help="Quarantined and bounced letters of the last DURATION (3d, 12h, 2w), "
        "not since the last digest sent.")  # fmt: skip
@option("--send", is_flag=True, help="Mail it to this platform's followers (and remember it as the last digest).")
@json_option
def digest(ctx: Ctx, since: str | None, send: bool) -> None:
    """One summary for people: open threads by age and whose move (stale first), letters held
    for approval, what was quarantined or bounced since the last digest. Printed, or mailed."""
    from ..errors import PermanentFailure, TransportError
    from ..people import digest as digest_mod

    client = ctx.client()
    made = digest_mod.gather(client, since)
    if not send:
        emit(ctx, {**made.to_json(), "text": digest_mod.render(made)}, lambda: echo(digest_mod.render(made).rstrip()))
        return
    sent = digest_mod.send(client, made)
    if sent["status"] == "queued":
        raise TransportError(f"the digest was not sent: {sent['detail']}; run 'agentmail digest --send' again")
    if sent["status"] == "failed":
        raise PermanentFailure(f"the digest was refused: {sent['detail']}")
    said = f"digest sent to {', '.join(sent['to'])} ({sent['message_id']})"
    emit(ctx, {**made.to_json(), **sent}, lambda: echo(said))


@main_group.command()
@option(
    "--timeout", type=seconds, default=300.0, show_default=True, metavar="S", help="Give up after S seconds (exit 3)."
)
@option("--type", "kind", metavar="TYPE", help="Only a letter of this type (report, ack, fix-notice, ..., human).")
@option("--thread", "thread_id", metavar="THREAD", help="Only a letter of this thread.")
@json_option
def wait(ctx: Ctx, timeout: float, kind: str | None, thread_id: str | None) -> None:
    """Block until a matching unread letter is here; exit 3 on timeout."""
    letter, mechanism = ctx.client().wait(timeout, type=kind, thread=thread_id)
    emit(ctx, {**letter.to_json(), "woke_by": mechanism}, lambda: echo(line(letter) + f"  (woke by {mechanism})"))


@main_group.command()
@json_option
def sync(ctx: Ctx) -> None:
    """Pull now."""
    client = ctx.client()
    report = client.sync()
    if client.escalation_problem:  # issue 26: the followers were not told what needs them
        echo(f"agentmail: {client.escalation_problem}", err=True)
    data = report.to_json()
    emit(ctx, data, lambda: echo(", ".join(f"{v} {k}" for k, v in data.items())))


@main_group.command()
@json_option
def flush(ctx: Ctx) -> None:
    """Retry the outbox."""
    from ..errors import TransportError

    client = ctx.client()
    results = client.flush()
    client.flushed = 0  # said below, not again on the way out
    data = [{"id": r.key, "status": r.status, "detail": r.detail} for r in results]

    def text() -> None:
        for r in data:
            echo(f"{r['id']} {r['status']} {clean(r['detail'])}")
        sent_count = sum(r["status"] == "sent" for r in data)
        echo(f"sent {sent_count} of {len(data)} queued letter(s)" if data else "outbox is empty")

    emit(ctx, data, text)
    if any(r.status != "sent" for r in results):
        raise TransportError(f"{sum(r.status != 'sent' for r in results)} letter(s) not sent")


@main_group.command()
@json_option
def rebuild(ctx: Ctx) -> None:
    """Make a lost or damaged spool.db again from the letter files (what was there is kept aside)."""
    data = ctx.client().rebuild()

    def text() -> None:
        states = ", ".join(f"{data[s]} {s}" for s in ("sent", "read", "unread", "quarantine") if data[s])
        aside = f"; kept aside: {', '.join(data['kept_aside'])}" if data["kept_aside"] else ""
        left = f"; {data['left']} file(s) left as they were (no letter of this mailbox)" if data["left"] else ""
        echo(f"rebuilt from the letter files: {states or 'no letters'}{left}{aside}")
        echo("the next sync reads the post office from the start; what is filed already is not filed twice")

    emit(ctx, data, text)


@main_group.command()
@option("--round-trip", is_flag=True, help="Also send a letter to this platform's own thread address and read it back.")
@option(
    "--timeout", type=seconds, default=60.0, show_default=True, metavar="S", help="How long the round trip may take."
)
@json_option
def doctor(ctx: Ctx, round_trip: bool, timeout: float) -> None:
    """Check configuration, credentials, permissions, keys, connectivity; exit 6 if any check fails."""
    from ..admin.doctor import run_checks

    checks = run_checks(ctx.home, ctx.registry_root(), ctx.platform, ctx.agent, round_trip=round_trip, timeout=timeout)

    def text() -> None:
        for check in checks:
            echo(clean(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}"))

    emit(ctx, [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in checks], text)
    if not all(c.ok for c in checks):
        from ..errors import ConfigError

        raise ConfigError(f"{sum(not c.ok for c in checks)} check(s) failed")


@main_group.command()
@option("--home", "demo_home", metavar="DIR", help="Where to build the demo bus (default: a new temp dir).")
@json_option
def demo(ctx: Ctx, demo_home: str | None) -> None:
    """The whole lifecycle between two platforms on the embedded default (--json: its summary)."""
    from pathlib import Path

    from ..admin.demo import run_demo

    summary = run_demo(Path(demo_home) if demo_home else None, (lambda _: None) if ctx.json else echo)
    emit(ctx, summary, lambda: None)


# --- integrations: MCP, host hooks, watch (each module imported only when its command runs) ---


@main_group.command()
@json_option
def mcp(ctx: Ctx) -> None:
    """The same operations as MCP tools over stdio (needs the extra agentmail[mcp])."""
    from .mcp_server import serve

    serve(ctx.client)


@main_group.group()
def hook(_ctx: Ctx) -> None:
    """Session hooks for coding-agent hosts: HOST EVENT, or install HOST."""


def _hook_command(host: str, label: str) -> None:
    @hook.command(host, help=f"{label}: EVENT is session-start or stop; silent when there is nothing to say.")
    @argument("event", help="session-start or stop.")
    @json_option
    def command(ctx: Ctx, event: str) -> int:
        from ..client.facade import AgentMail
        from . import hooks

        # A generic host may never close stdin; the others send one JSON object and close it.
        payload = "" if host == "generic" or sys.stdin.isatty() else sys.stdin.read()
        outcome = hooks.run(
            host,
            event,
            payload,
            lambda cwd: AgentMail.from_env(ctx.platform, agent=ctx.agent, registry=ctx.registry_root(), cwd=cwd),
        )
        if outcome.stdout:
            echo(outcome.stdout)
        if outcome.stderr:
            echo(outcome.stderr, err=True)
        return outcome.exit_code


for _host, _label in (
    ("claude", "Claude Code"),
    ("gemini", "Gemini CLI"),
    ("generic", "Any host that runs a shell command"),
):
    _hook_command(_host, _label)


@hook.command("install")
@argument("host", help="claude or gemini.")
@option("--dir", "root", metavar="DIR", help="The checkout (default: the git checkout holding the current directory).")
@json_option
def hook_install(ctx: Ctx, host: str, root: str | None) -> None:
    """Merge agentmail's hooks into HOST's settings in this checkout (idempotent)."""
    from pathlib import Path

    from . import hooks

    prefix = (
        "agentmail" + (f" --as {ctx.platform}" if ctx.platform else "") + (f" --agent {ctx.agent}" if ctx.agent else "")
    )
    path, added = hooks.install(host, Path(root) if root else hooks.checkout_root(Path.cwd()), prefix)
    emit(
        ctx,
        {"settings": str(path), "added": added},
        lambda: echo(f"{path}: added {', '.join(added)}" if added else f"{path}: already installed"),
    )


@main_group.command()
@option("--exec", "command", required=True, metavar="CMD", help="Shell command run once per new letter.")
@option("--jobs", type=at_least(1), default=4, show_default=True, help="Commands running at once.")
@option("--budget", type=at_least(1), default=6, show_default=True, help="Runs per thread per hour, at most.")
@option("--once", is_flag=True, help="Handle the letters unread now, then exit.")
@option("--timeout", type=seconds, metavar="S", help="Stop after S seconds.")
@json_option
def watch(ctx: Ctx, command: str, jobs: int, budget: int, once: bool, timeout: float | None) -> None:
    """Run CMD once per new authenticated letter, with AGENTMAIL_LETTER_ID, _THREAD, _TYPE... set."""
    import signal

    from .watch import Watcher

    def terminate(*_: object) -> None:
        raise KeyboardInterrupt  # like Ctrl-C: interrupt the wait, finish running commands, start no new ones

    watcher = Watcher(ctx.client(), command, jobs=jobs, budget=budget)
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        runs = watcher.run(timeout=timeout, once=once)
    finally:
        signal.signal(signal.SIGTERM, previous)  # main() run in-process (tests, embedders) keeps its own handler
    emit(ctx, {"runs": runs}, lambda: echo(f"agentmail watch: {runs} run(s)", err=True))


def _quiet_logging() -> None:
    """Give the root logger a NullHandler (else logging's last resort prints e.g. asyncio's TLS
    errors): now if logging is loaded, else the moment a library loads it. --help and a read
    never load logging (issue 11: ~2 ms with traceback and string)."""
    if "logging" in sys.modules:
        _add_null_handler(sys.modules["logging"])
    elif not any(isinstance(finder, _NullHandlerOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NullHandlerOnImport())


def _add_null_handler(logging: ModuleType) -> None:
    root = logging.getLogger()
    if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())


class _NullHandlerOnImport:
    """An import hook for one module: finds ``logging`` as usual, runs it, then quiets it."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "logging":
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None  # the other finders' turn
        sys.meta_path.remove(self)  # found: the import system stops iterating meta_path here
        loader = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            _add_null_handler(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def main(argv: list[str] | None = None) -> int:
    """Entry point: no traceback ever reaches a user, nor a library's warning or log line."""
    import warnings

    if not sys.warnoptions:
        warnings.simplefilter("ignore")
    _quiet_logging()
    ctx = Ctx(None, None, None, False)
    try:
        try:
            code = main_group.run(sys.argv[1:] if argv is None else argv, "agentmail", ctx)
        finally:
            ctx.close()
    except Exit as exc:
        return exc.code
    except AgentmailError as exc:
        echo(f"agentmail: {clean(exc)}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        echo("agentmail: interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        where = f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # StorageError's disk-full, met outside SQLite: exit 7
            echo(
                f"agentmail: the disk is full ({where}): nothing filed is lost; free some space, then "
                "'agentmail status' shows any letter still queued (do not send it again)",
                err=True,
            )
            return 7
        echo(f"agentmail: {where}", err=True)
        return 1
    except Exception as exc:  # the promise: one line, never a traceback
        echo(f"agentmail: internal error: {exc.__class__.__name__}: {clean(exc)}", err=True)
        return 1
    return code if isinstance(code, int) else 0  # a command may end quietly with a code (hooks)


def run() -> None:
    sys.exit(main())
