"""Secrets: DKIM private keys and mailbox logins, owner-only files under ``$AGENTMAIL_HOME/secrets``.

Checked the way the stdlib's netrc checks: the opened file itself (fstat), no symlink, owned by
us, no group or other permission bits. Nothing here ever prints or logs a secret's value.

A mailbox secret (a password or an OAuth2 access token) is given as it is
(``AGENTMAIL_PASSWORD``), as a command that prints it (``AGENTMAIL_PASSWORD_CMD``: isync's
``PassCmd``, msmtp's ``passwordeval``), or as a service of the system keyring
(``AGENTMAIL_PASSWORD_KEYRING``, with the optional ``keyring`` library). The command and the
keyring are asked again for every connection, so a token that expired is replaced by the
command's next one (DESIGN §2).
"""

from __future__ import annotations

import functools
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .._fs import write_atomic
from .._value import Frozen, set_field
from ..errors import ConfigError, SecretError

if TYPE_CHECKING:
    import subprocess

# subprocess, selectors and shlex are imported where a command is run: a send that signs with
# the key file never loads them (tests/system/test_lean_paths.py).

# The ways to give a mailbox secret, in the environment or in secrets/<platform>.env (one of them).
SECRET_KEYS = ("AGENTMAIL_PASSWORD", "AGENTMAIL_PASSWORD_CMD", "AGENTMAIL_PASSWORD_KEYRING")
COMMAND_TIMEOUT = 30.0  # a token helper may refresh its token over the network first
COMMAND_MAX_OUTPUT = 64 * 1024  # a secret is a line; more is a wrong command (``yes``, a log)
# What can be wrong with what a command printed (or a keyring held): never the bytes themselves.
OUTPUT_PROBLEMS = {
    "empty": "gave an empty secret",
    "not-utf8": "gave something that is not UTF-8 text",
    "control": "gave a control character (more than one line, or binary): a secret is one line of text",
    "too-long": f"gave more than {COMMAND_MAX_OUTPUT // 1024} KiB: a secret is one line of text",
}


class Login(Frozen):
    """A mailbox login: the username and where its secret comes from.

    ``password`` is the secret when it was given as it is; ``command`` (argv) or ``keyring``
    (a service name) when it is asked for at each connection (:meth:`secret`)."""

    username: str
    password: str
    source: str = ""  # where the secret came from, for messages: "the environment (AGENTMAIL_PASSWORD)", a file...
    command: tuple[str, ...] = ()
    keyring: str = ""

    def __post_init__(self) -> None:
        set_field(self, "command", tuple(self.command))

    def __repr__(self) -> str:  # never let a password reach a log through repr()
        how = f", command={Path(self.command[0]).name!r}" if self.command else ""
        how += f", keyring={self.keyring!r}" if self.keyring else ""
        return f"Login(username={self.username!r}, password='***'{how})"

    @property
    def origin(self) -> str:
        """``login 'x' (password from Y)``: what an error about a refused login names."""
        return self.named("password")

    def named(self, what: str) -> str:
        """``login 'x' (TOKEN from Y)``, for ``what`` the kind of secret (password, XOAUTH2 token)."""
        return f"login {self.username!r} ({what} from {self.source or 'the caller'})"

    def secret(self) -> str:
        """The secret for one connection: the password given, or the command's / keyring's answer
        now. Raises a one-line ConfigError that never contains the secret or the command's output."""
        if self.command:
            return run_secret_command(self.command, self.source)
        if self.keyring:
            return keyring_secret(self.keyring, self.username, self.source)
        return self.password


def secrets_dir(home: Path, create: bool = False) -> Path:
    folder = home / "secrets"
    if create:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
    return folder


def read_owner_only(path: Path) -> str:
    """The text of a secret file, refused (naming the file) unless it is 0600-like and ours."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ConfigError(f"secret file {path} does not exist") from None
    except OSError as exc:
        raise SecretError(f"cannot open secret file {path} ({exc.strerror}; symlinks are refused)") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(f"secret file {path} is not a regular file")
        if info.st_uid != os.getuid():
            raise SecretError(f"secret file {path} is not owned by you; refusing it")
        if info.st_mode & 0o077:
            raise SecretError(
                f"secret file {path} is readable by others (mode {info.st_mode & 0o777:o}); run: chmod 600 {path}"
            )
        with os.fdopen(fd, "r", encoding="utf-8") as fh:
            fd = -1
            return fh.read()
    finally:
        if fd >= 0:
            os.close(fd)


def key_path(home: Path, platform: str) -> Path:
    return secrets_dir(home) / f"{platform}.key"


def write_private_key(home: Path, platform: str, private_b64: str) -> Path:
    secrets_dir(home, create=True)
    path = key_path(home, platform)
    write_atomic(path, (private_b64 + "\n").encode(), mode=0o600)
    os.chmod(path, 0o600)
    return path


# DKIM keys read by this process, by path: (the file's identity when read, the key). A process
# sending many letters reads the file once, not once a letter.
_KEYS: dict[str, tuple[tuple[int, ...], str]] = {}
_SETTLED_NS = 2_000_000_000


@functools.lru_cache(maxsize=64)
def _key_file(home: Path, platform: str) -> tuple[Path, str]:
    path = key_path(home, platform)
    return path, str(path)


def read_private_key(home: Path, platform: str) -> str:
    """AGENTMAIL_DKIM_KEY when set (one platform per process), else the key file."""
    return read_private_key_with_source(home, platform)[0]


def read_private_key_with_source(home: Path, platform: str) -> tuple[str, str]:
    """(key, where it came from): the environment variable's name or the file's path."""
    from_env = os.environ.get("AGENTMAIL_DKIM_KEY")
    if from_env:
        return from_env.strip(), "AGENTMAIL_DKIM_KEY"
    path, name = _key_file(home, platform)
    try:
        seen: os.stat_result | None = os.lstat(name)
    except OSError:
        seen = None
    # The file as it stands: a key rotated (renamed into place, rewritten, re-permissioned) is
    # another identity, and read again with every owner-only check.
    identity = (
        ()
        if seen is None
        else (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns, seen.st_mode)
    )
    cached = _KEYS.get(name)
    if identity and cached is not None and cached[0] == identity:
        return cached[1], name
    if not path.exists():
        raise ConfigError(
            f"no DKIM key for {platform}: {path} is missing (restore it from where the bus was made, or "
            f"run 'agentmail keygen --as {platform}' and commit the new registry entry)"
        )
    key = read_owner_only(path).strip()
    # Kept for the next letter of this process, unless the file changed within the last two
    # seconds: file times tick coarsely, so a rewrite in the same tick as this read could look
    # unchanged (git's "racy" index entries, the same answer).
    if seen is not None and stat.S_ISREG(seen.st_mode) and time.time_ns() - seen.st_ctime_ns > _SETTLED_NS:
        _KEYS[name] = (identity, key)
    return key, name


def env_file(home: Path, platform: str) -> Path:
    return secrets_dir(home) / f"{platform}.env"


def _parse_env(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = value
    return values


def mailbox_login(home: Path, platform: str, default_username: str) -> Login:
    """The environment's AGENTMAIL_USERNAME and secret (AGENTMAIL_PASSWORD, _CMD or _KEYRING),
    else ``secrets/<platform>.env``'s; the login defaults to the address. One secret per place:
    two are refused, never one silently preferred."""
    username = os.environ.get("AGENTMAIL_USERNAME")
    given = {key: os.environ[key] for key in SECRET_KEYS if os.environ.get(key) is not None}
    place = "the environment"
    if not given:
        path = env_file(home, platform)
        if not path.exists():
            raise ConfigError(
                f"no mailbox password for {platform}: set AGENTMAIL_PASSWORD (or AGENTMAIL_PASSWORD_CMD, "
                f"AGENTMAIL_PASSWORD_KEYRING), or write {path} (mode 600) with the lines "
                f"AGENTMAIL_USERNAME={default_username} and AGENTMAIL_PASSWORD=... (ONBOARDING.md step 4)"
            )
        values = _parse_env(read_owner_only(path))
        given = {key: values[key] for key in SECRET_KEYS if values.get(key)}
        username = username or values.get("AGENTMAIL_USERNAME")
        place = str(path)
        if not given:
            raise ConfigError(f"{path} has no AGENTMAIL_PASSWORD line (nor AGENTMAIL_PASSWORD_CMD, _KEYRING)")
    if len(given) > 1:
        raise ConfigError(f"{place} sets {' and '.join(given)}: give the mailbox secret one way only")
    ((key, value),) = given.items()
    login = username or default_username
    if key == "AGENTMAIL_PASSWORD":
        source = "the environment (AGENTMAIL_PASSWORD)" if place == "the environment" else place
        return Login(login, value, source)
    if key == "AGENTMAIL_PASSWORD_CMD":
        argv = command_line(value, f"AGENTMAIL_PASSWORD_CMD in {place}")
        where = f"the command of AGENTMAIL_PASSWORD_CMD in {place} (program {Path(argv[0]).name!r})"
        return Login(login, "", where, command=argv)
    service = value.strip()
    if not service:
        raise ConfigError(f"AGENTMAIL_PASSWORD_KEYRING in {place} is empty: give the keyring service's name")
    return Login(
        login, "", f"the system keyring (service {service!r}, AGENTMAIL_PASSWORD_KEYRING in {place})", keyring=service
    )


def command_line(value: str, where: str) -> tuple[str, ...]:
    """A command line split as a POSIX shell would split words, and run without a shell: no
    pipes, expansions or redirections (a command that needs them says ``sh -c '...'``)."""
    import shlex

    try:
        argv = shlex.split(value)
    except ValueError:
        raise ConfigError(f"{where} is not a command line (a quote is not closed)") from None
    if not argv:
        raise ConfigError(f"{where} is empty: give the command that prints the secret")
    return (os.path.expanduser(argv[0]), *argv[1:])


def secret_from_output(data: bytes, what: str) -> str:
    """The secret a command printed: its one line, the trailing newline (LF or CRLF) taken off.
    Anything else is a ConfigError saying what is wrong in words, never with the bytes."""
    if len(data) > COMMAND_MAX_OUTPUT:
        raise ConfigError(f"{what} {OUTPUT_PROBLEMS['too-long']}")
    if data.endswith(b"\n"):
        data = data[:-1]
        if data.endswith(b"\r"):
            data = data[:-1]
    if not data:
        raise ConfigError(f"{what} {OUTPUT_PROBLEMS['empty']}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {OUTPUT_PROBLEMS['not-utf8']}") from None
    # C0, DEL and C1 controls (U+0085 too): a second line, or bytes that would break a login's framing.
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in text):
        raise ConfigError(f"{what} {OUTPUT_PROBLEMS['control']}")
    return text


def run_secret_command(argv: tuple[str, ...], where: str, timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a secret's command: no shell, no standard input, its error output discarded (a helper
    may print a token or a refresh URL there), at most ``timeout`` seconds, its output checked
    by :func:`secret_from_output`."""
    import subprocess

    what = where
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ConfigError(f"{what} cannot be run: there is no such program") from None
    except PermissionError:
        raise ConfigError(f"{what} cannot be run: it is not executable") from None
    except OSError as exc:
        raise ConfigError(f"{what} cannot be run ({exc.strerror or exc.__class__.__name__})") from None
    assert proc.stdout is not None
    try:
        output = _read_bounded(proc, time.monotonic() + timeout)
    finally:
        if proc.poll() is None:
            proc.kill()  # late, or printing without end: the command we started, by its process
        proc.stdout.close()
        proc.wait()
    if output is None:
        raise ConfigError(f"{what} did not finish within {timeout:g}s")
    if len(output) > COMMAND_MAX_OUTPUT:  # stopped for it: its exit status says nothing
        raise ConfigError(f"{what} {OUTPUT_PROBLEMS['too-long']}")
    if proc.returncode < 0:
        raise ConfigError(f"{what} was killed by signal {-proc.returncode}")
    if proc.returncode != 0:
        raise ConfigError(
            f"{what} exited with status {proc.returncode} (its error output is not shown: run it yourself to see why)"
        )
    return secret_from_output(output, what)


def _read_bounded(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
    """The command's whole output once it has exited, or None when the deadline comes first; one
    byte more than the limit is enough to refuse it (never read without end)."""
    import selectors
    import subprocess

    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while size <= COMMAND_MAX_OUTPUT:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not selector.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > COMMAND_MAX_OUTPUT:
        return b"".join(chunks)  # refused as too long by the caller, after the command is stopped
    try:
        proc.wait(max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        return None  # it closed its output but goes on
    return b"".join(chunks)


def keyring_secret(service: str, username: str, where: str) -> str:
    """The secret the system keyring keeps for ``username`` under ``service`` (the optional
    ``keyring`` library, imported only here)."""
    import logging  # for keyring's logger only: a command that reads no keyring loads no logging

    what = where
    try:
        import keyring
        import keyring.errors
    except ImportError:
        raise ConfigError(
            f"{what} is configured, but the keyring library is not installed: pip install 'agentmail[keyring]'"
        ) from None

    log = logging.getLogger("keyring")  # its backend warnings: the ConfigError below says what failed
    if not any(isinstance(handler, logging.NullHandler) for handler in log.handlers):
        log.addHandler(logging.NullHandler())
    try:
        value = keyring.get_password(service, username)
    except keyring.errors.NoKeyringError:
        raise ConfigError(
            f"{what} cannot be read: this machine has no keyring backend (a desktop keyring, or a "
            f"backend package such as keyrings.alt)"
        ) from None
    except Exception as exc:  # a backend's own error: named, its words left out (they are the backend's)
        raise ConfigError(f"{what} cannot be read ({exc.__class__.__name__})") from None
    if value is None:
        raise ConfigError(
            f"{what} has no secret for login {username!r}: store it with 'keyring set {service} {username}'"
        )
    return secret_from_output(value.encode("utf-8", "surrogatepass"), what)


def write_login(home: Path, platform: str, login: Login) -> Path:
    secrets_dir(home, create=True)
    path = env_file(home, platform)
    text = f"AGENTMAIL_USERNAME={login.username}\nAGENTMAIL_PASSWORD={login.password}\n"
    write_atomic(path, text.encode(), mode=0o600)
    os.chmod(path, 0o600)
    return path
