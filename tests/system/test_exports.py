"""The public surface is small and explicit; this pins it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import agentmail
from agentmail import transport

from ..conftest import OPENER

# What a user needs to build a client or a bus (compose: the module, see the last test).
EXPORTED = [
    "AgentMail",
    "AgentmailError",
    "BadInput",
    "ConfigError",
    "Draft",
    "Identity",
    "Letter",
    "LocalTransport",
    "NotFound",
    "PermanentFailure",
    "Platform",
    "Refused",
    "Registry",
    "SecretError",
    "SmtpImapTransport",
    "SyncReport",
    "Timeout",
    "Transport",
    "TransportError",
    "init_bus",
    "load_registry",
    "open_transport",
]


def test_public_names_are_sorted_and_exactly_these() -> None:
    assert agentmail.__all__ == sorted(agentmail.__all__)
    assert agentmail.__all__ == EXPORTED


def test_every_public_name_of_the_package_is_exported(tmp_path: Path) -> None:
    """As httpx pins its surface: once every export is resolved, the package holds no public
    name that is not in ``__all__`` (submodules aside), so nothing leaks by accident."""
    for name in agentmail.__all__:
        assert getattr(agentmail, name) is not None
    public = {n for n, v in vars(agentmail).items() if not n.startswith("_") and not isinstance(v, ModuleType)}
    assert sorted(public) == agentmail.__all__
    assert set(agentmail.__all__) <= set(dir(agentmail))
    space: dict[str, object] = {}
    exec("from agentmail import *", space)
    assert sorted(n for n in space if n != "__builtins__") == agentmail.__all__


def test_the_transport_package_exports_what_a_transport_author_needs() -> None:
    public = {n for n, v in vars(transport).items() if not n.startswith("_") and not isinstance(v, ModuleType)}
    assert public - {"Path", "Registry", "annotations"} == set(transport.__all__)
    assert {"Checkpoint", "Transport", "Incoming", "Outgoing", "SubmitResult"} <= set(transport.__all__)


def test_a_client_and_a_bus_are_built_from_the_package_alone(home: Path, tmp_path: Path) -> None:
    registry = agentmail.init_bus(home, tmp_path / "registry", ["alpha", "beta"])
    assert isinstance(registry, agentmail.Registry) and isinstance(registry.get("alpha"), agentmail.Platform)
    assert sorted(agentmail.load_registry(tmp_path / "registry").platforms) == ["alpha", "beta"]
    with agentmail.AgentMail(registry, agentmail.Identity("alpha"), home) as alpha:
        assert isinstance(alpha.transport, agentmail.LocalTransport) and isinstance(
            alpha.transport, agentmail.Transport
        )
        sent = alpha.send("beta", "Built from the package", OPENER)
    assert isinstance(sent, agentmail.Letter) and sent.state == "sent"


def test_errors_map_to_the_documented_exit_codes_and_builtins() -> None:
    assert issubclass(agentmail.NotFound, LookupError) and agentmail.NotFound.exit_code == 1
    assert issubclass(agentmail.BadInput, ValueError) and agentmail.BadInput.exit_code == 2
    assert issubclass(agentmail.Timeout, TimeoutError) and agentmail.Timeout.exit_code == 3
    assert agentmail.Refused.exit_code == 4
    assert issubclass(agentmail.TransportError, ConnectionError) and agentmail.TransportError.exit_code == 5
    assert agentmail.ConfigError.exit_code == 6


def test_compose_is_the_module_so_importing_it_never_changes_what_the_name_means() -> None:
    from agentmail.stages import compose

    assert isinstance(compose, ModuleType) and agentmail.stages.compose is compose
    assert callable(compose.compose) and agentmail.Draft is compose.Draft
