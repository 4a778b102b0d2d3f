"""agentmail: defect reports between coding agents, over real email.

    from agentmail import AgentMail
    am = AgentMail.from_env("tokengate")
    for letter in am.inbox():
        ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    AgentmailError,
    BadInput,
    ConfigError,
    NotFound,
    PermanentFailure,
    Refused,
    SecretError,
    Timeout,
    TransportError,
)
from .model import Letter

if TYPE_CHECKING:
    from .client import AgentMail, SyncReport
    from .identity import Identity

__all__ = [
    "AgentMail",
    "AgentmailError",
    "BadInput",
    "ConfigError",
    "Identity",
    "Letter",
    "NotFound",
    "PermanentFailure",
    "Refused",
    "SecretError",
    "SyncReport",
    "Timeout",
    "TransportError",
]


def __getattr__(name: str) -> Any:
    # The client pulls in the email package; import it only when asked, so the CLI starts fast.
    if name in ("AgentMail", "SyncReport"):
        from . import client

        return getattr(client, name)
    if name == "Identity":
        from .identity import Identity

        return Identity
    raise AttributeError(f"module 'agentmail' has no attribute {name!r}")
