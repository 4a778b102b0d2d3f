"""The registry whose guards hold over a home's keys (DESIGN §6, "What a hold guarantees").

    $AGENTMAIL_HOME/bound-registry   the resolved path of the registry, one line

The hold rule, the approvers and the pinned approval key live in the registry, and the registry
in force is anyone's to choose (``--registry``, AGENTMAIL_REGISTRY). A registry the agent wrote
itself (``init --force`` into a new folder keeps this home's keys; a patch can write one) would
sign with the same keys under none of those guards. So the first registry that lists an approver
or pins a key binds the home; another registry cannot stand in for it while it exists. An
operator who moves the bus removes the file by hand: no agentmail command writes it back."""

from __future__ import annotations

from pathlib import Path

from .._fs import write_atomic
from ..errors import ConfigError
from .registry import Registry

BOUND_FILE = "bound-registry"
PIN_FILE = "approval-key.sha256"  # in the registry folder: the hex SHA-256 of the operator's key


def guarded(registry: Registry) -> bool:
    """Does anything in ``registry`` guard against the agent: an approver, or a pinned key?"""
    if any(p.approves for entry in registry.platforms.values() for p in entry.people):
        return True
    return (registry.root / PIN_FILE).is_file()


def refuse_another(home: Path, root: Path) -> None:
    """ConfigError (exit 6) when ``home`` is bound to a registry other than ``root`` that still exists."""
    path = home / BOUND_FILE
    try:
        bound = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return
    here = str(root.resolve())
    if bound and bound != here and (Path(bound) / "bus.toml").is_file():
        raise ConfigError(
            f"the keys in {home} are guarded by the registry at {bound} (its approvers and approval key); "
            f"the registry {here} cannot stand in for it (an operator who moved the bus removes {path} by hand)"
        )


def check(home: Path, registry: Registry) -> None:
    """``refuse_another``; then ``home`` is bound to ``registry`` when that one guards against
    the agent (a registry that guards nothing binds nothing: its holds guard against mistakes)."""
    refuse_another(home, registry.root)
    path = home / BOUND_FILE
    if guarded(registry) and home.is_dir() and not _names(path, registry.root):
        write_atomic(path, (str(registry.root.resolve()) + "\n").encode())


def _names(path: Path, root: Path) -> bool:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() == str(root.resolve())
    except OSError:
        return False
