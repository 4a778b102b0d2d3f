"""Hermetic mail servers for agentmail's transport tests.

A real SMTP submission server (aiosmtpd) and a real IMAP4rev1 server (``imap.py``, a
compact in-process implementation) on 127.0.0.1, sharing one in-memory
:class:`MailStore`, with TLS from a CA generated per instance::

    with MailServers("bus.test", {"alpha@bus.test": "pw1", "beta@bus.test": "pw2"},
                     smtp_tls="starttls", imap_tls="implicit") as ms:
        ctx = ssl.create_default_context(cafile=ms.ca_file)
        ...  # submit to ms.smtp_port, pull from ms.imap_port
        ms.store.fail_next_data(1, 451)      # and the other hooks on the store
        ms.stop_smtp(); ms.start_smtp()      # an outage, same port after
"""

from .certs import ServerPki, create_pki
from .servers import MailServers
from .smtp import TlsMode
from .store import AcceptedMessage, FolderState, MailStore, StoredMessage

__all__ = [
    "AcceptedMessage",
    "FolderState",
    "MailServers",
    "MailStore",
    "ServerPki",
    "StoredMessage",
    "TlsMode",
    "create_pki",
]
