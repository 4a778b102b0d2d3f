"""The operator's approval key for tests (issue 26): written outside AGENTMAIL_HOME, pinned in
the registry, as ``agentmail init --approval-key FILE`` does."""

from __future__ import annotations

from pathlib import Path

from agentmail.config import registry as registry_mod
from agentmail.people import approval


def operator_key(home: Path) -> str:
    path = home.parent / "operator" / "approval.key"
    if not path.exists():
        path.parent.mkdir(mode=0o700, exist_ok=True)
        approval.first_key(registry_mod.load(home / "registry"), str(path), home)
    return str(path)
