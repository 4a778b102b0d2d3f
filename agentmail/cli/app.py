"""The ``agentmail`` command: its root (the options before a command's name, the list of commands),
and the process around a command: every failure one line on stderr and a documented exit code,
0 ok · 1 not found · 2 bad input · 3 timeout · 4 refused by a guard · 5 transport · 6 config ·
7 storage (DESIGN §8). The commands are in ``agent``, ``operator`` and ``integrations``, what they
print in ``render``, what each is handed in ``context``, the grammar in ``args``.

The few imports inside a function (the command modules import the client, ``admin``, ``people`` and
the host integrations only in the command that needs them) are listed, with why, in DESIGN §1
("Imported where first used"); tests/system/test_imports_at_top.py holds the list to the code.
"""

from __future__ import annotations

import errno
import sys
import warnings

from ..errors import AgentmailError
from ..frame import inline
from . import agent, integrations, operator, people_view
from .args import Exit, Group, Version, echo, option
from .context import Ctx

_EPILOG = """\
First steps (ONBOARDING.md has the whole path):
  On one machine (the embedded post office, no mail server, the default):
  1. agentmail init A B     (once: the registry and each platform's key)
  2. agentmail bind A       (in A's checkout: writes the .agentmail marker; or --as A)
  3. agentmail send B -s SUBJECT -b TEXT, and as B: agentmail --as B inbox
  Over a mail server (smtp+imap):
  1. agentmail init --transport smtp+imap --domain D --smtp HOST:587 --imap HOST:993 A B
     (once per bus: the registry and each platform's key; it never overwrites a key)
  2. credentials, owner-only from the start (read -rs PW first):
     (umask 077; printf 'AGENTMAIL_USERNAME=A@D\\nAGENTMAIL_PASSWORD=%s\\n' "$PW" \\
        > "${AGENTMAIL_HOME:-$HOME/.agentmail}/secrets/A.env")
  3. agentmail --as A doctor --round-trip
  Then in each checkout: agentmail bind A (writes the .agentmail marker).
  Change a setting later: agentmail bus set KEY VALUE (never a re-init).

Environment:
  AGENTMAIL_HOME      spools and secrets/ (default ~/.agentmail)
  AGENTMAIL_REGISTRY  the registry directory (default $AGENTMAIL_HOME/registry)
  AGENTMAIL_PLATFORM  act as this platform (like --as); AGENTMAIL_AGENT like --agent
  AGENTMAIL_USERNAME, AGENTMAIL_PASSWORD  the mailbox login (else secrets/PLATFORM.env)
  AGENTMAIL_PASSWORD_CMD      instead: a command printing the password or OAuth2 token (no shell)
  AGENTMAIL_PASSWORD_KEYRING  instead: a system keyring service (pip install 'agentmail[keyring]')
  AGENTMAIL_DKIM_KEY  the base64 private key (else secrets/PLATFORM.key)

Exit codes:
  0 ok  1 not found  2 bad input  3 timeout  4 refused by a guard
  5 transport failure (the letter is queued; it goes out with the next command)
  6 configuration (registry, identity, keys, credentials, TLS; nothing is queued)
  7 storage (the spool's database missing or damaged, or the disk full; the line says
    how to recover: 'agentmail rebuild', free space)
"""


@option("--as", "platform", metavar="PLATFORM",
        help="Act as this platform (else AGENTMAIL_PLATFORM, marker, git remote, path).")  # fmt: skip
@option("--agent", metavar="NAME", help="One of several agents sharing this checkout (else AGENTMAIL_AGENT).")
@option(
    "--registry", metavar="DIR", help="The registry in force (else AGENTMAIL_REGISTRY, else $AGENTMAIL_HOME/registry)."
)
@option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@option("--version", action=Version, help="show the version and exit")
def _main_group(ctx: Ctx, platform: str | None, agent: str | None, registry: str | None, as_json: bool) -> None:
    """agentmail: defect reports between coding agents, over real email."""
    ctx.platform, ctx.agent, ctx.registry, ctx.json = platform, agent, registry, as_json


main_group = Group(
    "agentmail",
    _main_group,
    epilog=_EPILOG,
    parts=[agent.commands, operator.commands, integrations.commands, people_view.commands],
)


def main(argv: list[str] | None = None) -> int:
    """Entry point: no traceback ever reaches a user, nor a library's warning (filtered here) or log
    line (each library's logger has a NullHandler where it is imported: DESIGN §8)."""
    if not sys.warnoptions:
        warnings.simplefilter("ignore")
    ctx = Ctx(None, None, None, False)
    try:
        interrupted = False
        try:
            code = main_group.run(sys.argv[1:] if argv is None else argv, "agentmail", ctx)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            ctx.close(interrupted)
    except Exit as exc:
        return exc.code
    except AgentmailError as exc:
        echo(f"agentmail: {inline(exc)}", err=True)  # one line: no text of a letter's starts another
        return exc.exit_code
    except KeyboardInterrupt:
        echo(f"agentmail: interrupted{f': {ctx.fate}' if ctx.fate else ''}", err=True)
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
        echo(f"agentmail: {inline(where)}", err=True)
        return 1
    except Exception as exc:  # the promise: one line, never a traceback
        echo(f"agentmail: internal error: {exc.__class__.__name__}: {inline(exc)}", err=True)
        return 1
    return code if isinstance(code, int) else 0  # a command may end quietly with a code (hooks)


def run() -> None:
    sys.exit(main())
