"""The public surface is small and explicit; this pins it."""

from __future__ import annotations

import agentmail


def test_public_names_are_sorted_and_exactly_these() -> None:
    assert agentmail.__all__ == sorted(agentmail.__all__)
    assert agentmail.__all__ == [
        "AgentMail", "AgentmailError", "BadInput", "ConfigError", "Identity", "Letter", "NotFound",
        "PermanentFailure", "Refused", "SecretError", "SyncReport", "Timeout", "TransportError",
    ]  # fmt: skip


def test_every_public_name_resolves() -> None:
    for name in agentmail.__all__:
        assert getattr(agentmail, name) is not None


def test_errors_map_to_the_documented_exit_codes_and_builtins() -> None:
    assert issubclass(agentmail.NotFound, LookupError) and agentmail.NotFound.exit_code == 1
    assert issubclass(agentmail.BadInput, ValueError) and agentmail.BadInput.exit_code == 2
    assert issubclass(agentmail.Timeout, TimeoutError) and agentmail.Timeout.exit_code == 3
    assert agentmail.Refused.exit_code == 4
    assert issubclass(agentmail.TransportError, ConnectionError) and agentmail.TransportError.exit_code == 5
    assert agentmail.ConfigError.exit_code == 6
