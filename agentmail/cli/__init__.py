"""The command line: agent and operator commands, their output, and the host integrations."""

from __future__ import annotations

from .app import main

__all__ = ["main"]
