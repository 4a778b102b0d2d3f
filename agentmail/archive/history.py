"""The registry entry of a platform in force at a moment: from the registry's git history where
the registry is a git checkout (the last commit touching the entry at or before that moment), else
the entry as it is now. What a proof bundle carries beside each letter (``proof``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .._value import Frozen

_GIT_TIMEOUT = 30


class Entry(Frozen):
    """One platform file as it stood: its TOML text and where it came from."""

    platform: str
    toml: str
    source: str  # "git" | "current"
    commit: str = ""  # the commit it was read from ("" for the current file)
    committed: int = 0  # that commit's time, seconds since the epoch (0 for the current file)


def _git(root: Path, *args: str) -> str | None:
    """A git command's output in ``root``, or None when git is missing or refuses."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=_GIT_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", errors="replace")


class History:
    """The entries of one registry directory, read once per (platform, commit)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        top = _git(root, "rev-parse", "--show-toplevel")
        self.top = Path(top.strip()) if top else None
        self._logs: dict[str, list[tuple[str, int]]] = {}
        self._texts: dict[tuple[str, str], Entry] = {}

    def _relative(self, platform: str) -> str:
        assert self.top is not None
        return str((self.root / "platforms" / f"{platform}.toml").resolve().relative_to(self.top.resolve()))

    def _log(self, platform: str) -> list[tuple[str, int]]:
        """(commit, commit time) of every commit touching the entry, newest first."""
        if platform not in self._logs:
            out = _git(self.root, "log", "--format=%H %ct", "--", self._relative(platform)) if self.top else None
            rows = []
            for line in (out or "").splitlines():
                commit, _, when = line.partition(" ")
                if commit and when.isdigit():
                    rows.append((commit, int(when)))
            self._logs[platform] = rows
        return self._logs[platform]

    def in_force(self, platform: str, when: float) -> Entry:
        """The entry of ``platform`` as committed last at or before ``when``; the current file
        when the registry is no git checkout or the entry was not committed by then."""
        for commit, committed in self._log(platform):
            if committed <= when:
                key = (platform, commit)
                if key not in self._texts:
                    text = _git(self.root, "show", f"{commit}:{self._relative(platform)}")
                    if text is None:
                        break
                    self._texts[key] = Entry(platform, text, "git", commit, committed)
                return self._texts[key]
        path = self.root / "platforms" / f"{platform}.toml"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeError):
            text = ""
        return Entry(platform, text, "current")
