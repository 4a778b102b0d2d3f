"""The live bus under test: its registry, its secrets, and where a forgery can be injected.

Two ways to name the bus the live checks run against (live_tests/README.md):

* **The loopback stack** (the default). ``sudo bash live_tests/mailstack/up`` writes
  ``run/stack.json``; :func:`prepare` then builds ``run/livebus/``: ``registry/`` (a copy of
  the repo's top-level ``registry/``, the stack's CA beside it as ``ca.pem``, the endpoints
  and authserv-id of the running stack, and every platform re-keyed with
  :func:`agentmail.admin.bus.keygen`, i.e. ``agentmail keygen``) and ``home/secrets/`` (each
  platform's private key and mailbox login, 0600). The tracked tree is never written.
  It is rebuilt only when its inputs change (the registry files, the stack's users and
  passwords, its CA), so the keys stay put across ``up``/``down``.

* **Any bus** (a production one), without the stack::

      LIVE_BUS_REGISTRY=/path/to/registry     # bus.toml + platforms/*.toml
      LIVE_BUS_HOME=/path/to/home             # secrets/<platform>.key and secrets/<platform>.env
      LIVE_BUS_PLATFORMS="alpha beta gamma"   # sender, receiver (same domain), partner (optional)
      LIVE_BUS_MX=mx.example.org:25           # the receiver domain's MX, for the forgery (optional)

  A check whose configuration is missing is skipped, and a skip is a failure under
  ``--no-skips`` (what CI runs).

Run ``python live_tests/livebus.py env`` for the shell exports that put ``agentmail`` itself
on the prepared loopback bus, or ``python live_tests/livebus.py prepare`` to (re)build it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import smtplib
import socket
import ssl
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

REPO = Path(__file__).resolve().parent.parent
TRACKED_REGISTRY = REPO / "registry"
DEFAULT_PLATFORMS = ("alpha", "beta", "gamma")
HOW_TO_START = (
    "start the loopback mail stack first: sudo bash live_tests/mailstack/up "
    "(or point the live checks at another bus with LIVE_BUS_REGISTRY and LIVE_BUS_HOME; see live_tests/README.md)"
)


class NotConfigured(Exception):
    """No bus to test: neither LIVE_BUS_REGISTRY nor a running stack's stack.json."""


def stack_dir() -> Path:
    return Path(os.environ.get("MAILSTACK_DIR") or REPO / "live_tests" / "mailstack" / "run")


def read_stack(folder: Path | None = None) -> dict[str, Any] | None:
    path = (folder or stack_dir()) / "stack.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


@dataclass
class BusConfig:
    """Everything the live checks need to know about the bus under test."""

    registry: Path
    home: Path  # holds secrets/<platform>.key and secrets/<platform>.env
    sender: str
    receiver: str
    partner: str | None
    mx: tuple[str, int] | None  # the MX for the receiver's domain: where a forgery is injected
    stack: dict[str, Any] | None = None  # run/stack.json when this is the loopback stack
    origin: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_stack(self) -> bool:
        return self.stack is not None


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise NotConfigured(f"LIVE_BUS_MX must be HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def load_config() -> BusConfig:
    """The bus named by LIVE_BUS_* variables, else the running loopback stack (prepared)."""
    names = (os.environ.get("LIVE_BUS_PLATFORMS") or " ".join(DEFAULT_PLATFORMS)).split()
    if len(names) < 2:
        raise NotConfigured("LIVE_BUS_PLATFORMS names at least a sender and a receiver")
    sender, receiver, partner = names[0], names[1], (names[2] if len(names) > 2 else None)
    mx_env = os.environ.get("LIVE_BUS_MX")
    if os.environ.get("LIVE_BUS_REGISTRY"):
        registry = Path(os.environ["LIVE_BUS_REGISTRY"]).expanduser().resolve()
        home = Path(os.environ.get("LIVE_BUS_HOME") or os.environ.get("AGENTMAIL_HOME") or "~/.agentmail")
        if not (registry / "bus.toml").is_file():
            raise NotConfigured(f"LIVE_BUS_REGISTRY={registry} has no bus.toml")
        return BusConfig(
            registry,
            home.expanduser().resolve(),
            sender,
            receiver,
            partner,
            _host_port(mx_env) if mx_env else None,
            None,
            f"LIVE_BUS_REGISTRY={registry}",
        )
    stack = read_stack()
    if stack is None:
        raise NotConfigured(
            f"no bus to test: LIVE_BUS_REGISTRY is unset and {stack_dir() / 'stack.json'} "
            f"does not exist; {HOW_TO_START}"
        )
    registry, home = prepare(stack)
    mx = _host_port(mx_env) if mx_env else (stack["MAILSTACK_SMTP_HOST"], int(stack["MAILSTACK_MX_PORT"]))
    return BusConfig(registry, home, sender, receiver, partner, mx, stack, f"the loopback stack at {stack_dir()}")


# --- preparing the loopback bus ---------------------------------------------------------------


@contextmanager
def locked(folder: Path, exclusive: bool) -> Iterator[None]:
    """One preparer at a time; readers (a test session copying the bus) wait for it."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "livebus.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _digest(stack: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for path in sorted([TRACKED_REGISTRY / "bus.toml", *TRACKED_REGISTRY.glob("platforms/*.toml")]):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(json.dumps(stack, sort_keys=True).encode())
    h.update(Path(stack["MAILSTACK_CA"]).read_bytes())
    return h.hexdigest()


def prepared_paths(folder: Path | None = None) -> tuple[Path, Path]:
    base = (folder or stack_dir()) / "livebus"
    return base / "registry", base / "home"


def prepare(stack: dict[str, Any], *, force: bool = False) -> tuple[Path, Path]:
    """``run/livebus/{registry,home}`` for the running stack; rebuilt only when its inputs changed."""
    from agentmail.admin import bus
    from agentmail.config import registry as registry_mod
    from agentmail.config.credentials import Login, write_login

    folder = Path(stack.get("MAILSTACK_DIR") or stack_dir())
    registry_dir, home = prepared_paths(folder)
    digest = _digest(stack)
    stamp = folder / "livebus" / ".inputs"
    with locked(folder, exclusive=True):
        if not force and stamp.is_file() and stamp.read_text() == digest and (registry_dir / "bus.toml").is_file():
            return registry_dir, home
        fresh = folder / "livebus.new"
        shutil.rmtree(fresh, ignore_errors=True)
        new_registry, new_home = fresh / "registry", fresh / "home"
        shutil.copytree(TRACKED_REGISTRY, new_registry, ignore=shutil.ignore_patterns("ca.pem", "*.key", "*.env"))
        shutil.copyfile(stack["MAILSTACK_CA"], new_registry / "ca.pem")
        bus_file = new_registry / "bus.toml"
        data = tomllib.loads(bus_file.read_text())
        data["smtp"] = {
            **data.get("smtp", {}),
            "host": stack["MAILSTACK_SMTP_HOST"],
            "port": int(stack["MAILSTACK_SUBMISSION_PORT"]),
            "tls": "starttls",
        }
        data["imap"] = {
            **data.get("imap", {}),
            "host": stack["MAILSTACK_IMAP_HOST"],
            "port": int(stack["MAILSTACK_IMAP_PORT"]),
            "tls": "implicit",
        }
        data["trusted_authserv_ids"] = [stack["MAILSTACK_AUTHSERV_ID"]]
        # Every check of the session sends from the same few mailboxes, and the new-thread quota
        # counts what a platform opened on the server in the last hour (issue 25): the checks
        # would hit a platform's cap of 20 between them. The quota has its hermetic tests.
        data["new_threads_per_hour"] = 0
        data["ca_file"] = "ca.pem"
        bus_file.write_text(
            "# Working copy of registry/bus.toml for the running loopback stack (live_tests/livebus.py).\n"
            + tomli_w.dumps(data)
        )
        reg = registry_mod.load(new_registry)
        if reg.problems:
            raise NotConfigured("the tracked registry has problems: " + "; ".join(reg.problems))
        passwords = {u["address"]: u["password"] for u in stack["users"]}
        for name, platform in sorted(reg.platforms.items()):
            if platform.address not in passwords:
                raise NotConfigured(
                    f"platform {name} ({platform.address}) has no mailbox on the stack; "
                    f"start it with MAILSTACK_USERS='{platform.address}' bash live_tests/mailstack/up"
                )
            bus.keygen(new_home, reg, name)  # what `agentmail keygen --as NAME` does: new pair, re-pinned
            write_login(new_home, name, Login(platform.address, passwords[platform.address]))
        os.chmod(new_home, 0o700)
        (fresh / ".inputs").write_text(digest)
        old = folder / "livebus.old"
        shutil.rmtree(old, ignore_errors=True)
        if (folder / "livebus").exists():
            os.rename(folder / "livebus", old)
        os.rename(fresh, folder / "livebus")
        shutil.rmtree(old, ignore_errors=True)
    return registry_dir, home


def snapshot(cfg: BusConfig, into: Path) -> tuple[Path, Path]:
    """A private copy of the bus's registry and secrets for one test session, so a concurrent
    re-prepare can never change keys under a running session. Spools start empty."""
    registry_copy, home = into / "registry", into / "home"
    context = locked(cfg.registry.parent.parent, exclusive=False) if cfg.is_stack else _nothing()
    with context:
        shutil.copytree(cfg.registry, registry_copy)
        secrets = home / "secrets"
        secrets.mkdir(parents=True, mode=0o700)
        os.chmod(home, 0o700)
        source = cfg.home / "secrets"
        for path in sorted(source.glob("*")) if source.is_dir() else []:
            if path.suffix in (".key", ".env") and path.is_file():
                target = secrets / path.name
                shutil.copyfile(path, target)
                os.chmod(target, 0o600)
    return registry_copy, home


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --- talking to the bus without agentmail ---------------------------------------------------


def reachable(host: str, port: int, timeout: float = 3.0) -> str | None:
    """None if something answers at host:port, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{host}:{port} does not answer ({exc.__class__.__name__}: {exc})"


def inject(mx: tuple[str, int], mail_from: str, rcpt: str, raw: bytes) -> tuple[int, str]:
    """Deliver ``raw`` at the MX as the outside world would: no AUTH, STARTTLS if offered.

    Returns (code, text) of the end of DATA, or of the first refusal (never raises on 5xx).
    The forger does not verify the certificate: it wants delivery, not privacy."""
    with smtplib.SMTP(mx[0], mx[1], timeout=30, local_hostname="forger.example") as smtp:
        smtp.ehlo()
        if smtp.has_extn("starttls"):
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            smtp.starttls(context=context)
            smtp.ehlo()
        try:
            smtp.sendmail(mail_from, [rcpt], raw)
        except smtplib.SMTPRecipientsRefused as exc:
            code, text = next(iter(exc.recipients.values()))
            return code, text.decode(errors="replace")
        except smtplib.SMTPResponseException as exc:
            return exc.smtp_code, exc.smtp_error.decode(errors="replace")
    return 250, "accepted"


def _main(argv: list[str]) -> int:
    command = argv[0] if argv else "env"
    stack = read_stack()
    if stack is None:
        print(f"livebus: no {stack_dir() / 'stack.json'}; {HOW_TO_START}", file=sys.stderr)
        return 1
    registry_dir, home = prepare(stack, force=command == "rekey")
    if command in ("prepare", "rekey"):
        print(f"registry {registry_dir}\nhome     {home}")
    else:
        print(f"export AGENTMAIL_REGISTRY={registry_dir}\nexport AGENTMAIL_HOME={home}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(_main(sys.argv[1:]))
