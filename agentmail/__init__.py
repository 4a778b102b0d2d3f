"""agentmail: defect reports between coding agents, over real email.

    from agentmail import AgentMail
    am = AgentMail.from_env("tokengate")
    for letter in am.inbox():
        ...

Everything a user needs to build a client or a bus is exported here (``__all__``, pinned by
tests/system/test_exports.py); the modules behind it are implementation.
"""

import importlib as _importlib  # loaded by the interpreter before any of ours: costs nothing

# Nothing of agentmail is imported here, not even its errors: the entry point (``__main__``) is
# reached through this package, and a Ctrl-C while it loads must find its handler.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .admin.bus import init as init_bus
    from .client.facade import AgentMail, SyncReport
    from .config.identity import Identity
    from .config.registry import Platform, Registry
    from .config.registry import load as load_registry
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
    from .stages.compose import Draft
    from .transport import Transport, open_transport
    from .transport.local import LocalTransport
    from .transport.smtpimap import SmtpImapTransport
del TYPE_CHECKING

# The client pulls in the email package and the transports their libraries: each of these is
# imported only when asked for, so the CLI starts fast. name -> (module, attribute)
_LAZY = {
    **{
        name: (".errors", name)
        for name in (
            "AgentmailError",
            "BadInput",
            "ConfigError",
            "NotFound",
            "PermanentFailure",
            "Refused",
            "SecretError",
            "Timeout",
            "TransportError",
        )
    },
    "Letter": (".model", "Letter"),  # the model compiles its patterns: not for --help
    "AgentMail": (".client", "AgentMail"),
    "SyncReport": (".client", "SyncReport"),
    "Identity": (".config.identity", "Identity"),
    "Registry": (".config.registry", "Registry"),
    "Platform": (".config.registry", "Platform"),
    "load_registry": (".config.registry", "load"),
    "init_bus": (".admin.bus", "init"),
    "Transport": (".transport", "Transport"),
    "open_transport": (".transport", "open_transport"),
    "LocalTransport": (".transport.local", "LocalTransport"),
    "SmtpImapTransport": (".transport.smtpimap", "SmtpImapTransport"),
    "Draft": (".stages.compose", "Draft"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'agentmail' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(_importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
