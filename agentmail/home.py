"""Where agentmail keeps its files: ``$AGENTMAIL_HOME`` (default ``~/.agentmail``)."""

from __future__ import annotations

import os
from pathlib import Path


def agentmail_home() -> Path:
    return Path(os.environ.get("AGENTMAIL_HOME") or "~/.agentmail").expanduser()
