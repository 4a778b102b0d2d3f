"""Secrets: DKIM private keys and mailbox logins, owner-only files under ``$AGENTMAIL_HOME/secrets``.

Checked the way the stdlib's netrc checks: the opened file itself (fstat), no symlink, owned by
us, no group or other permission bits. Nothing here ever prints or logs a secret's value.
"""

from __future__ import annotations

import functools
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ._fs import write_atomic
from .errors import ConfigError, SecretError


@dataclass(frozen=True)
class Login:
    username: str
    password: str
    source: str = ""  # where the password came from, for error messages: "AGENTMAIL_PASSWORD" or a file

    def __repr__(self) -> str:  # never let a password reach a log through repr()
        return f"Login(username={self.username!r}, password='***')"

    @property
    def origin(self) -> str:
        """``login 'x' (password from Y)``: what an error about a refused login names."""
        return f"login {self.username!r} (password from {self.source or 'the caller'})"


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
# sending many letters reads the file once, not once a letter (issue 11).
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
    """AGENTMAIL_USERNAME/AGENTMAIL_PASSWORD, else ``secrets/<platform>.env``; login defaults to the address."""
    password = os.environ.get("AGENTMAIL_PASSWORD")
    username = os.environ.get("AGENTMAIL_USERNAME")
    source = "the environment (AGENTMAIL_PASSWORD)"
    if password is None:
        path = env_file(home, platform)
        if not path.exists():
            raise ConfigError(
                f"no mailbox password for {platform}: set AGENTMAIL_PASSWORD, or write {path} (mode 600) with the lines "
                f"AGENTMAIL_USERNAME={default_username} and AGENTMAIL_PASSWORD=... (ONBOARDING.md step 4)"
            )
        values = _parse_env(read_owner_only(path))
        password = values.get("AGENTMAIL_PASSWORD")
        username = username or values.get("AGENTMAIL_USERNAME")
        if not password:
            raise ConfigError(f"{path} has no AGENTMAIL_PASSWORD line")
        source = str(path)
    return Login(username or default_username, password, source)


def write_login(home: Path, platform: str, login: Login) -> Path:
    secrets_dir(home, create=True)
    path = env_file(home, platform)
    text = f"AGENTMAIL_USERNAME={login.username}\nAGENTMAIL_PASSWORD={login.password}\n"
    write_atomic(path, text.encode(), mode=0o600)
    os.chmod(path, 0o600)
    return path
