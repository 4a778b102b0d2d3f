"""TOML files read the way tomllib reads them, without importing tomllib when nothing changed.

Every command reads the registry (``bus.toml``, ``platforms/*.toml``): importing tomllib and
parsing them cost ~1.5 ms a process (issue 11, start-up). What tomllib made of a file is kept
in ``$AGENTMAIL_HOME/cache/toml.json`` beside the file's whole text, and used only when the file,
read again in full every time, has exactly that text: the file is the truth, the cache is never
trusted over it (a changed, replaced or touched-back file is parsed again). A missing, torn or
foreign cache is a miss; writing it is best effort (a read-only home only loses the shortcut).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from ..home import agentmail_home

CACHE = Path("cache") / "toml.json"  # under $AGENTMAIL_HOME
# What the data came from: a different Python may parse differently (a new TOML version).
_FORMAT = f"agentmail-toml-1 py{sys.version_info[0]}.{sys.version_info[1]}"

_loaded: dict[Path, dict[str, Any]] = {}  # per home, the cache as read (once per process)


class BadToml(ValueError):
    """Not UTF-8 TOML; the message is the decoder's or tomllib's own."""


def read_toml(path: Path) -> dict[str, Any]:
    """``tomllib.load`` of ``path``, a fresh dict each call: OSError as reading raises it, BadToml
    where tomllib would raise TOMLDecodeError or UnicodeDecodeError (with the same message)."""
    try:
        text = path.read_bytes().decode()  # what tomllib.load does first
    except UnicodeDecodeError as exc:
        raise BadToml(str(exc)) from exc
    key = str(path.absolute())
    home = agentmail_home()
    entries = _entries(home)
    entry = entries.get(key)
    if isinstance(entry, list) and len(entry) == 2 and entry[0] == text and isinstance(entry[1], str):
        try:
            data = json.loads(entry[1])
        except ValueError:
            data = None  # garbled: parse the file
        if isinstance(data, dict):
            return data
    import tomllib  # ~1.3 ms: only for a file the cache does not hold as it is now

    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadToml(str(exc)) from exc
    try:
        encoded = json.dumps(parsed)
    except (TypeError, ValueError):
        return parsed  # a TOML date or time: no JSON for it, so never cached
    if json.loads(encoded) == parsed:  # exactly what tomllib gave (JSON keeps str, int, float, bool, list, dict)
        entries[key] = [text, encoded]
        for gone in [name for name in entries if not os.path.exists(name)]:
            del entries[gone]  # a file no longer there (a removed platform): its entry goes too
        _store(home, entries)
    return parsed


def _entries(home: Path) -> dict[str, Any]:
    if home not in _loaded:
        entries: dict[str, Any] = {}
        try:
            found = json.loads(_read_own(home / CACHE))
            if isinstance(found, dict) and found.get("format") == _FORMAT and isinstance(found.get("files"), dict):
                entries = found["files"]
        except (OSError, ValueError):
            pass  # none yet, torn or foreign: start empty
        _loaded[home] = entries
    return _loaded[home]


def _read_own(path: Path) -> bytes:
    """The cache's bytes, only from a plain file of ours that nobody else may write: the parse
    it holds stands in for the registry's, so a file another user could plant is a miss."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(f"{path} is not a private file of this user")
        return fh.read()


def _store(home: Path, entries: dict[str, Any]) -> None:
    """Replace the cache whole (a rename: a reader sees the old or the new one, never half)."""
    path = home / CACHE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"format": _FORMAT, "files": entries}, fh)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
