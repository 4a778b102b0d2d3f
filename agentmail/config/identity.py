"""Who am I: which platform this checkout is, and which of its agents is asking (DESIGN §4).

Order: ``--as`` / AGENTMAIL_PLATFORM, then a committed ``.agentmail`` marker file, then the git
remote matched against the registry, then path hints. Among markers, remotes and paths the
deepest match wins, and a tie fails rather than guessing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._fs import write_atomic
from .._value import Frozen, field
from ..errors import ConfigError, NotFound
from ..model import check_name
from .registry import BadToml, Registry, read_toml

MARKER = ".agentmail"


class Identity(Frozen):
    platform: str
    agent: str | None = None
    how: str = field(default="", compare=False)  # what chose the platform, said when that matters

    @property
    def mailbox(self) -> str:
        """``platform`` or ``platform@agent``: the key of this identity's own spool."""
        return f"{self.platform}@{self.agent}" if self.agent else self.platform


def normalise_remote(url: str) -> str:
    """``git@host:org/repo.git`` and ``https://host/org/repo`` compare equal."""
    url = url.strip().lower()
    url = re.sub(r"^[a-z+]+://", "", url)
    url = re.sub(r"^[^@/]+@", "", url)
    url = url.replace(":", "/", 1) if re.match(r"^[^/]+:(?!\d)", url) else url
    return url.removesuffix("/").removesuffix(".git")


def _git_remotes(checkout: Path) -> list[str]:
    git = checkout / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = git.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            git = (checkout / text.split(":", 1)[1].strip()).resolve()
            common = git / "commondir"
            if common.is_file():
                git = (git / common.read_text().strip()).resolve()
    config = git / "config"
    if not config.is_file():
        return []
    import configparser  # only when a checkout has a git config to read

    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(config)
    except configparser.Error:
        return []
    return [parser.get(s, "url") for s in parser.sections() if s.startswith("remote ") and parser.has_option(s, "url")]


def _marker(directory: Path) -> str | None:
    path = directory / MARKER
    if not path.is_file():
        return None
    try:
        data = read_toml(path)
    except (BadToml, OSError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    name = data.get("platform")
    if not isinstance(name, str):
        raise ConfigError(f'{path} needs a line: platform = "<name>"')
    return name


def resolve(registry: Registry, explicit: str | None, agent: str | None, cwd: Path) -> Identity:
    agent = agent or os.environ.get("AGENTMAIL_AGENT") or None
    if agent is not None:
        check_name("agent", agent)
    chosen = explicit or os.environ.get("AGENTMAIL_PLATFORM")
    if chosen:
        check_name("platform", chosen)
        registry.named(chosen)  # a name someone typed: a misspelt one is bad input (exit 2), as in 'send'
        return Identity(chosen, agent, "--as" if explicit else "AGENTMAIL_PLATFORM")

    cwd = cwd.resolve()
    hinted, hint_depth = _path_hints(registry, cwd)
    # Walk up from the working directory: the first directory with any evidence is the deepest.
    # A path hint at a deeper directory than this one wins over its marker or remote.
    for directory in [cwd, *cwd.parents]:
        if hinted and hint_depth > len(directory.parts):
            break
        found = _marker(directory)
        if found:
            registry.get(found)
            return Identity(found, agent, f"the marker {directory / MARKER}")
        remotes = {normalise_remote(u) for u in _git_remotes(directory)}
        if remotes:
            hits = sorted(
                p.name for p in registry.platforms.values() if remotes & {normalise_remote(r) for r in p.remotes}
            )
            if len(hits) == 1:
                return Identity(hits[0], agent, f"the git remote of {directory}")
            if len(hits) > 1:
                raise ConfigError(
                    f"the git remote of {directory} matches several platforms ({', '.join(hits)}); use --as"
                )
    if hinted:
        if len(hinted) > 1:
            raise ConfigError(f"{cwd} matches the path hints of several platforms ({', '.join(hinted)}); use --as")
        return Identity(hinted[0], agent, f"the path hints of {hinted[0]} in the registry")
    known = ", ".join(sorted(registry.platforms)) or "none yet"
    raise NotFound(
        f"cannot tell which platform {cwd} is (known platforms: {known}): run 'agentmail bind PLATFORM' "
        f'in the checkout (it writes {MARKER} with the line platform = "PLATFORM"), or pass --as PLATFORM '
        f"/ set AGENTMAIL_PLATFORM"
    )


def _path_hints(registry: Registry, cwd: Path) -> tuple[list[str], int]:
    """The platforms whose deepest path hint holds ``cwd``, and that hint's depth (its parts)."""
    best: list[tuple[int, str]] = []
    for platform in registry.platforms.values():
        for hint in platform.paths:
            root = Path(hint).expanduser().resolve()
            if cwd == root or root in cwd.parents:
                best.append((len(root.parts), platform.name))
    if not best:
        return [], 0
    depth = max(d for d, _ in best)
    return sorted({name for d, name in best if d == depth}), depth


def checkout_root(start: Path) -> Path:
    """The git checkout holding ``start`` (its top directory), else ``start`` itself."""
    return _git_checkout(start) or start.resolve()


def _git_checkout(start: Path) -> Path | None:
    start = start.resolve()
    for directory in [start, *start.parents]:
        if (directory / ".git").exists():
            return directory
    return None


def in_git_checkout(directory: Path) -> bool:
    """Is ``directory`` inside a git checkout (a marker there is committed for every clone)?"""
    return _git_checkout(directory) is not None


def write_marker(root: Path | None, platform: str) -> tuple[Path, str | None]:
    """Write ``<checkout>/.agentmail`` naming ``platform``; returns (path, the platform it named before)."""
    check_name("platform", platform)
    folder = root.resolve() if root else checkout_root(Path.cwd())
    path = folder / MARKER
    previous = None
    if path.is_file():
        try:
            previous = _marker(folder)
        except ConfigError:
            previous = None
    write_atomic(path, f'platform = "{platform}"\n'.encode(), mode=0o644)
    return path, previous
