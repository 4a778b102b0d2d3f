"""What a person outside the bus is given (DESIGN §10): a thread's proof bundle and its offline
check (``export``, ``verify``), a static archive of a mailbox or a bus (``archive``) and the same
pages served live (``serve``). Each translates its arguments into one call of ``archive`` and
prints what it did; the archive modules are imported only by the command that runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, ConfigError, Refused
from ..text import for_terminal
from .args import Commands, argument, echo, option
from .context import Ctx, json_option
from .render import clean, emit

if TYPE_CHECKING:
    from ..client.facade import AgentMail

commands = Commands()


@commands.command()
@argument("thread_id", metavar="THREAD", help="The thread to export (its id, any case).")
@option("-o", "--output", "output", required=True, metavar="FILE", help="Where to write the bundle (JSON).")
@json_option
def export(ctx: Ctx, thread_id: str, output: str) -> None:
    """Write THREAD's proof bundle to FILE: its raw signed letters and the registry entries in force
    when each was signed (from the registry's git history when it is a checkout); 'verify FILE'
    checks it offline, anywhere."""
    from .._fs import write_atomic
    from ..archive.history import History
    from ..archive.proof import build

    client = ctx.reader()
    letters = client.thread(thread_id)
    pairs = [(letter, client.raw(letter.id)) for letter in letters]
    data = build(pairs, History(client.registry.root), letters[0].thread, client.me.platform)
    path = Path(output).expanduser()
    try:
        write_atomic(path, data, mode=0o644)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    emit(ctx, {"thread": letters[0].thread, "file": str(path), "bytes": len(data)},
         lambda: echo(f"wrote {clean(str(path))}: the proof bundle of {letters[0].thread}"))  # fmt: skip


@commands.command()
@argument("bundle", metavar="FILE", help="A proof bundle written by 'export'.")
@json_option
def verify(ctx: Ctx, bundle: str) -> None:
    """Check every letter of a proof bundle offline against the key its sender's registry entry
    pinned when it was signed, and that key against your own registry (and its git history) when
    there is one here; one line per letter. Exit 0 only if every letter verifies, 4 if one does
    not, 2 if FILE is no bundle."""
    from ..archive.proof import MAX_BUNDLE, Anchor
    from ..archive.proof import verify as check
    from ..config.registry import load

    path = Path(bundle).expanduser()
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BUNDLE + 1)
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
    try:  # the keys are checked against the verifier's registry, never only the bundle's own
        anchor: Anchor | None = Anchor(load(ctx.registry_root()))
    except ConfigError:
        anchor = None
        echo("agentmail: warning: no registry here: each key is the bundle's own claim, checked against nothing",
             err=True)  # fmt: skip
    proof = check(data, anchor)
    rows = [
        {"ok": c.ok, "message_id": c.message_id, "date": c.date, "from": c.sender, "detail": c.detail, "entry": c.entry,
         "key_checked": bool(c.checked)}
        for c in proof.letters
    ]  # fmt: skip

    def text() -> None:
        for c in proof.letters:
            mark = "verified" if c.ok else "FAILED  "
            where = c.entry + (
                "" if not c.ok else "; in your registry" if c.checked else "; the bundle's own, unchecked"
            )
            line = f"{mark} {c.message_id or '?'}  {c.date or '?'}  {c.sender or '?'}  {c.detail}  [key: {where}]"
            echo(for_terminal(line).replace("\n", " "))

    failed = sum(1 for c in proof.letters if not c.ok)
    registry = str(anchor.registry.root) if anchor is not None else None
    emit(ctx, {"thread": proof.thread, "verified": len(rows) - failed, "failed": failed, "registry": registry,
               "letters": rows}, text)  # fmt: skip
    if failed:
        raise Refused(f"{failed} of {len(rows)} letters of {proof.thread} do not verify")


@commands.command()
@argument("directory", metavar="DIR", help="Where the site goes (new, empty, or an archive written before).")
@option("--bus", "whole_bus", is_flag=True, help="Every mailbox of the bus on this machine, not only mine.")
@option("--quarantine", is_flag=True, help="Show quarantined letters too, marked quarantined with their reason.")
@json_option
def archive(ctx: Ctx, directory: str, whole_bus: bool, quarantine: bool) -> None:
    """Write a static site of the mailbox (or, with --bus, of every mailbox here) into DIR: an index
    of the threads, a page per thread, permalinks by Message-ID (m/<id>/), thread.mbox and Atom
    feeds. Only threads that changed since the last run are written again. Open DIR/index.html."""
    from ..archive import site
    from ..archive.gather import bus_mailboxes

    client = ctx.reader()
    client.sync()
    clients = [client]
    if whole_bus:
        others = [c for c in bus_mailboxes(client.registry, client.home) if c.me.mailbox != client.me.mailbox]
        clients += others
    try:
        for other in clients[1:]:
            other.offline_ok = True
            _sync_quietly(other)
        done = site.write(clients, Path(directory).expanduser(), bus=client.registry.bus.name, quarantine=quarantine)
    finally:
        for other in clients[1:]:
            other.close()
    path = Path(directory).expanduser() / "index.html"
    emit(ctx, {"directory": str(Path(directory).expanduser()), "threads": done.threads, "rewritten": done.rewritten,
               "letters": done.letters, "removed": done.removed},
         lambda: echo(f"{clean(str(path))}: {done.threads} thread(s), {done.rewritten} written now "
                      f"({done.letters} letters), {done.removed} removed"))  # fmt: skip


def _sync_quietly(client: AgentMail) -> None:
    """Another mailbox's new letters, when this machine can fetch them; what it holds, else."""
    try:
        client.sync()
    except ConfigError as exc:  # another platform's login is not on this machine
        echo(
            f"agentmail: warning: {client.me.mailbox} not synced ({for_terminal(exc)}); shown as last synced", err=True
        )


@commands.command()
@option("--listen", "listen", default="127.0.0.1:8025", show_default=True, metavar="HOST:PORT",
        help="Where to listen (port 0: any free port). Anywhere but loopback needs --token.")  # fmt: skip
@option("--token", metavar="TOKEN", help="Required of every visitor (?token=TOKEN once; 16 characters at least).")
@option("--token-file", metavar="FILE", help="Read the token from FILE's first line (kept out of 'ps').")
@option("--bus", "whole_bus", is_flag=True, help="Every mailbox of the bus on this machine, not only mine.")
@option("--quarantine", is_flag=True, help="Show quarantined letters too, marked quarantined with their reason.")
def serve(ctx: Ctx, listen: str, token: str | None, token_file: str | None, whole_bus: bool, quarantine: bool) -> None:
    """Serve the archive's pages live, read-only, with search (needs pip install 'agentmail[web]'):
    the index, a page per thread, /m/<Message-ID> permalinks, thread.mbox and Atom. Pages refresh
    themselves as letters arrive. Ctrl-C stops it."""
    from ..archive.gather import bus_mailboxes
    from ..config.registry import is_loopback

    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit() or int(port_text) > 65535:
        raise BadInput(f"--listen {listen!r} must be HOST:PORT (e.g. 127.0.0.1:8025)")
    try:
        from ..archive import serve as web
    except ImportError as exc:
        raise ConfigError(f"serve needs the web extra: pip install 'agentmail[web]' ({exc.name} is missing)") from None
    secret = web.read_token(token, token_file)
    if not is_loopback(host) and secret is None:
        raise ConfigError(f"listening on {host} (not loopback) needs --token or --token-file: anyone there could read")
    client = ctx.reader()
    client.sync()
    clients = [client]
    if whole_bus:
        clients += [c for c in bus_mailboxes(client.registry, client.home) if c.me.mailbox != client.me.mailbox]
    sock = web.listen(host, int(port_text))
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{sock.getsockname()[1]}/" + (f"?token={secret}" if secret else "")
    where = "loopback only" if is_loopback(host) else f"{host}, anyone there with the token"
    echo(f"agentmail: serving {client.registry.bus.name} read-only at {address} ({where}); Ctrl-C stops", err=True)
    try:
        web.run(web.app(web.Live(clients, client.registry.bus.name, quarantine), secret), sock)
    finally:
        for other in clients[1:]:
            other.close()
