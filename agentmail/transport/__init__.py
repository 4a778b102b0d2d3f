"""Transports: the ``local`` post office (default) and ``smtp+imap``, behind one interface."""

from __future__ import annotations

from pathlib import Path

from ..config.registry import Registry
from .base import Checkpoint, Claimed, Envelope, Incoming, OnResult, Outgoing, SubmitResult, Transport

__all__ = [
    "Checkpoint",
    "Claimed",
    "Envelope",
    "Incoming",
    "OnResult",
    "Outgoing",
    "SubmitResult",
    "Transport",
    "open_transport",
    "transport_class",
]


def transport_class(registry: Registry) -> type[Transport]:
    """The class ``open_transport`` makes for this bus, not opened: its capabilities
    (``sent_is_durable``, ``links_copies``, ``mails_people``) without reading credentials."""
    if registry.bus.transport == "local":
        from .local import LocalTransport

        return LocalTransport
    from .smtpimap import SmtpImapTransport

    return SmtpImapTransport


def open_transport(registry: Registry, platform: str, home: Path) -> Transport:
    """The bus's transport for ``platform``; the SMTP/IMAP code is imported only when used."""
    if registry.bus.transport == "local":
        from .local import LocalTransport  # here: the package's names are the interface (test_exports)

        def resolve(address: str) -> str | None:
            from ..letter.wire import base_address

            found = registry.by_address(base_address(address.lower()))
            if found is not None:
                return found.name
            # A person listed on the bus gets the letters written for people (digest, "needs a
            # person") in a Maildir named by their address, which no platform name can be.
            wanted = address.lower()
            listed = any(p.address == wanted for entry in registry.platforms.values() for p in entry.people)
            return wanted if listed else None

        return LocalTransport(home / "postoffice", platform, resolve)
    from .smtpimap import SmtpImapTransport

    transport: Transport = SmtpImapTransport.from_registry(registry, platform, home)
    return transport
