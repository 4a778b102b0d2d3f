"""What every command is handed: the context (the options given before or after its name, the
client made once and closed at the end), the options several commands share, and how a body is read."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import BadInput
from ..protocol import SENDABLE, default_replies
from .args import echo, option

if TYPE_CHECKING:
    from ..client.facade import AgentMail

F = TypeVar("F", bound=Callable[..., Any])
TYPES_HELP = "|".join(SENDABLE)
# The reply's default type, as ``reply -t`` says it: "ack to a report, verify-result to a fix-notice, else question".
REPLY_DEFAULT_HELP = ", ".join(f"{reply} to a {parent}" for reply, parent in default_replies()) + ", else question"
ID_HELP = "A letter: its id (any case), its Message-ID, or a unique prefix of either."
OUTCOME_HELP = "With -t verify-result: confirmed|still-broken (still-broken: the fixer's move again)."


class Ctx:
    def __init__(self, platform: str | None, agent: str | None, registry: str | None, as_json: bool) -> None:
        self.platform, self.agent, self.registry, self.json = platform, agent, registry, as_json
        self._client: AgentMail | None = None
        self.sending = False  # a command that sends (``sender``)
        self.fate: str | None = None  # what became of its letter, when Ctrl-C stopped it
        self.flushed = 0  # letters queued earlier that this command's calls said left (``Sent``, ``SyncReport``)

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

            spools = self.home / "spool"
            before = set(os.listdir(spools)) if self.agent and spools.is_dir() else set()
            self._client = AgentMail.from_env(self.platform, agent=self.agent, registry=self.registry_root())
            self._client.outbox.batch_copies = False  # one letter a process: copied as it goes
            me = self._client.me
            if me.agent and me.mailbox not in before:  # a misspelt --agent is a mailbox nobody reads
                known = sorted(n.partition("@")[2] for n in before if n.startswith(f"{me.platform}@"))
                echo(f"agentmail: note: {me.mailbox} is a new mailbox (agents of {me.platform} so far: "
                     f"{', '.join(known) or 'none'}); check the spelling of --agent", err=True)  # fmt: skip
        return self._client

    def reader(self) -> AgentMail:
        """The client of a read-only command: with the server away it shows the spool as last
        synced, and says so once on stderr (at the end)."""
        client = self.client()
        client.offline_ok = True
        return client

    def sync(self, client: AgentMail, asked: bool) -> None:
        """The sync a reading command runs first (``asked``), kept apart so what it sent from the
        outbox is said on the way out."""
        if asked:
            self.flushed += client.sync().flushed

    def sender(self) -> AgentMail:
        """The client of a command that sends: stopped by Ctrl-C, it says whether its letter left."""
        self.sending = True
        return self.client()

    def close(self, interrupted: bool = False) -> None:
        """Say goodbye to the servers (SMTP QUIT, IMAP LOGOUT) rather than drop the connections.
        ``interrupted`` (Ctrl-C): a sending command's letter's fate is kept in ``fate`` first."""
        if interrupted and self.sending:
            self.fate = self._client.send_fate() if self._client is not None else "nothing was sent"
        if self._client is not None:
            if self._client.offline:
                echo(
                    f"agentmail: warning: {self._client.offline}; shown as of the last sync (this machine's copy)",
                    err=True,
                )
            if self.flushed:
                echo(f"agentmail: sent {self.flushed} letter(s) that were waiting in the outbox", err=True)
            self._client.close()
            self._client = None


def json_option(func: F) -> F:
    """``--json``, ``--as`` and ``--agent`` are accepted before or after the command name."""
    func = option("--agent", "agent_after", metavar="NAME", hidden=True, into_ctx="agent")(func)
    func = option("--as", "as_after", metavar="PLATFORM", hidden=True, into_ctx="platform")(func)
    return option("--json", "as_json", is_flag=True, into_ctx="json", help="Machine-readable output.")(func)


def attach_options(func: F) -> F:
    """``--attach FILE`` (repeatable) and ``--patch REV-RANGE`` for every command that writes a letter."""
    func = option(
        "--patch", "patch", metavar="REV-RANGE", help="Attach 'git format-patch REV-RANGE' (one part per commit)."
    )(func)
    return option(
        "--attach", "attach", metavar="FILE", multiple=True, help="Attach a file (repeatable): evidence, a log..."
    )(func)


NOT_TEXT = "the body must be UTF-8 text; convert it (iconv) or send the file with --attach"


def read_body(value: str) -> str:
    """``-b TEXT``, ``-b @FILE`` or ``-b -`` (standard input), which must be UTF-8 text: read
    as bytes and decoded strictly (whatever the locale), newlines as text mode reads them."""
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


def attachments(ctx: Ctx, files: tuple[str, ...], patch: str | None) -> tuple[Any, ...]:
    """The files and patches to attach, read now (limits are the bus's: exit 2 with the reason)."""
    if not files and not patch:
        return ()
    from ..stages import evidence

    client = ctx.client()
    limit = client.registry.bus.attach_max_bytes
    items = [evidence.from_file(name, limit, home=client.home) for name in files]
    if patch:
        items.extend(evidence.from_patches(patch, Path.cwd()))
    return tuple(items)
