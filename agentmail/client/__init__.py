"""The agent's mailbox: ``AgentMail``, a facade over the receiving, sending and thread stages."""

from __future__ import annotations

from .facade import AgentMail, SyncReport, raise_for_state

__all__ = ["AgentMail", "SyncReport", "raise_for_state"]
