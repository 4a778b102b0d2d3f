"""Is the agentmail home one ``git add -A`` from a push? (DESIGN §4, §10)

A home inside a git work tree whose ``secrets/`` is tracked, or not ignored, leaves the private
keys where an ordinary commit takes them. ``init``, ``add``, ``keygen`` and ``bind`` refuse such
a home; ``doctor`` reports it. git is asked only when a ``.git`` is found above the home, with
the checkout's file-system monitor off (its configuration is not ours to run).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..errors import ConfigError

_GIT = ["git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false"]


def work_tree_of(path: Path) -> Path | None:
    """The top of the git work tree holding ``path`` (or its nearest existing folder): the
    first folder upwards with a ``.git`` (a folder, or a worktree's file). None outside any."""
    here = Path(os.path.realpath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    for folder in (here, *here.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _git(top: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run([*_GIT, "-C", str(top), *args], capture_output=True, input=stdin, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git, or one that hangs: nothing tells us the keys are safe


def exposure(home: Path) -> str | None:
    """Why the keys of ``home`` could be committed, in one sentence; None when they cannot (no
    work tree holds the home, or the one that does ignores its ``secrets/`` and tracks none of it)."""
    top = work_tree_of(home)
    if top is None:
        return None
    secrets = Path(os.path.realpath(home)) / "secrets"
    try:
        where = secrets.relative_to(top).as_posix()
    except ValueError:  # the home's own folder is the link into a tree: judge by what git sees
        where = "secrets"
    tracked = _git(top, "ls-files", "-z", "--", where)
    if tracked is not None and tracked.returncode == 0 and tracked.stdout.strip(b"\0"):
        return (
            f"the agentmail home {home} lies in the git work tree {top}, which tracks files of its {where}/: "
            f"the private keys may be committed already; run 'git rm -r --cached {where}' there, ignore it, "
            f"and rotate the keys ('agentmail keygen')"
        )
    # The folder holds logins (<platform>.env) beside the keys, and will hold what comes next:
    # ignored means a name of no known kind is ignored there, and every file it holds now.
    probes = [f"{where}/agentmail.key", f"{where}/agentmail.env", f"{where}/agentmail"]
    try:
        probes += sorted(f"{where}/{entry.name}" for entry in os.scandir(secrets) if not entry.is_dir())
    except OSError:
        pass  # no secrets/ yet: the probes speak for what init will write
    ignored = _git(top, "check-ignore", "--no-index", "--stdin", "-z", stdin=b"\0".join(map(os.fsencode, probes)))
    if (
        ignored is not None
        and ignored.returncode == 0
        and set(ignored.stdout.split(b"\0")) >= {os.fsencode(probe) for probe in probes}
    ):
        return None
    return (
        f"the agentmail home {home} lies in the git work tree {top} and its {where}/ is not ignored there: "
        f"the private keys are one 'git add -A' from a commit; move the home out (AGENTMAIL_HOME) or add "
        f"'{where}/' to {top / '.gitignore'}"
    )


def refuse_exposed(home: Path, what: str) -> None:
    """ConfigError (exit 6) naming why, when ``home``'s keys could be committed."""
    why = exposure(home)
    if why is not None:
        raise ConfigError(f"refusing to {what}: {why}")
