"""Every error agentmail raises, one tree; each maps to a documented exit code.

    AgentmailError                      exit 1
    ├── NotFound (LookupError)          exit 1  no such letter / platform / nothing to do
    ├── BadInput (ValueError)           exit 2  refused input: header injection, unknown type...
    ├── Timeout (TimeoutError)          exit 3  wait gave up
    ├── Refused                         exit 4  an outbound guard said no; .reason says why
    ├── TransportError (ConnectionError) exit 5 the server could not take it now; letter queued
    │   └── PermanentFailure            exit 5  the server refused it for good (5xx)
    ├── ConfigError                     exit 6  registry, identity, secrets, TLS, login: retrying
    │   └── SecretError (PermissionError)       cannot help, so a letter is never queued behind it
    └── StorageError (OSError)          exit 7  the spool cannot be used: its database is missing,
                                                damaged or beside stale WAL files, or the disk is
                                                full; .reason says which, the line how to recover

Library exceptions are translated at the module that wraps the library (``raise ... from``),
so callers never see an aiosmtplib or imapclient type.
"""

from __future__ import annotations


class AgentmailError(Exception):
    exit_code = 1


class NotFound(AgentmailError, LookupError):
    exit_code = 1


class BadInput(AgentmailError, ValueError):
    exit_code = 2


class Timeout(AgentmailError, TimeoutError):
    exit_code = 3


class Refused(AgentmailError):
    """An outbound guard refused; ``reason`` is the one-line explanation."""

    exit_code = 4

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransportError(AgentmailError, ConnectionError):
    exit_code = 5


class PermanentFailure(TransportError):
    exit_code = 5


class ConfigError(AgentmailError):
    exit_code = 6


class SecretError(ConfigError, PermissionError):
    exit_code = 6


class StorageError(AgentmailError, OSError):
    """The spool's storage failed (DESIGN §7, §8); nothing was filed or changed by the command.

    ``reason``: ``db-missing`` (spool.db gone while letters are filed), ``db-stale-wal`` (its
    ``-wal``/``-shm`` without it), ``db-damaged`` (not a database, or a malformed one),
    ``disk-full``, ``db-io`` (the disk failed reading or writing it), ``db-error`` (anything else
    SQLite says). An OSError, so a sync stops on it (the batch is fetched again), never
    quarantining a letter for it."""

    exit_code = 7

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
