"""The in-memory mail store shared by the test SMTP and IMAP servers, with test hooks.

Accounts are addresses (``beta@bus.test``); each owns folders (``INBOX`` always) of
messages kept as the exact bytes delivered. Every method is thread-safe: the servers
run on a background event loop while the test thread inspects and injects.

Counters in :attr:`MailStore.counts` (a ``collections.Counter``):

- ``smtp.connect``, ``smtp.auth`` (successful), ``smtp.auth_failed``,
  ``smtp.accepted`` (DATA answered 250), ``smtp.refused`` (recipients refused), ``smtp.NOOP``
- ``imap.connect``, ``imap.auth`` (successful LOGIN or AUTHENTICATE),
  ``imap.auth_failed``, and
- ``smtp.auth.XOAUTH2``, ``imap.auth.OAUTHBEARER``...: logins by each token mechanism, and
 ``imap.<COMMAND>`` for every IMAP command received, with
  ``UID`` kept (``imap.UID FETCH``, ``imap.SELECT``, ``imap.IDLE``)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

Listener = Callable[[str, str], None]
"""Called as ``listener(account, folder)`` after any change to that folder."""

# Real servers derive UIDVALIDITY from the clock; a process-wide counter keeps values
# distinct even between two stores created within the same second.
_uidvalidity = itertools.count(int(time.time()))


@dataclass(frozen=True)
class StoredMessage:
    """One message in a folder: ``data`` is exactly what was delivered or appended."""

    uid: int
    data: bytes
    flags: frozenset[str]
    internaldate: dt.datetime
    modseq: int = 1
    """CONDSTORE (RFC 7162): the folder's modification sequence when this message last changed."""


@dataclass(frozen=True)
class AcceptedMessage:
    """An SMTP transaction the server accepted (answered 250 to DATA)."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes
    login: str | None


@dataclass(frozen=True)
class FolderState:
    """A consistent snapshot of a folder's counters and UIDs (ascending)."""

    name: str
    uidvalidity: int
    uidnext: int
    uids: tuple[int, ...]
    unseen: int


@dataclass
class _Folder:
    uidvalidity: int
    uidnext: int = 1
    messages: dict[int, StoredMessage] = field(default_factory=dict)
    highestmodseq: int = 1
    # One lock per mailbox: a conditional STORE compares and changes under it, so of several
    # clients racing with the same UNCHANGEDSINCE exactly one wins.
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class _Fault:
    remaining: int
    code: int
    text: str


def canonical_folder(name: str) -> str:
    """IMAP makes ``INBOX`` case-insensitive; every other name is taken as given."""
    return "INBOX" if name.upper() == "INBOX" else name


class MailStore:
    """Accounts, folders and messages, plus the hooks tests use to steer the servers."""

    def __init__(
        self,
        domain: str,
        users: Mapping[str, str],
        *,
        folders: Iterable[str] = ("Sent",),
    ) -> None:
        self.domain = domain.lower()
        self.idle_delay: float = 0.0
        """Seconds an IDLE session waits before pushing a change (latency tests)."""
        self.auth_delay: float = 0.0
        """Seconds both servers wait before answering a login (Dovecot's auth penalty)."""
        self.keywords: bool = True
        """False: like a server that keeps no keywords (PERMANENTFLAGS without \\*; STORE drops them)."""
        self.condstore: bool = True
        """False: like a server without CONDSTORE (RFC 7162): no capability, no MODSEQ, no UNCHANGEDSINCE."""
        self._lock = threading.RLock()
        self._passwords: dict[str, str] = {}
        self._accounts: dict[str, dict[str, _Folder]] = {}
        self._extra_folders = tuple(folders)
        self._accepted: list[AcceptedMessage] = []
        self._fault: _Fault | None = None
        self._append_refusals = 0
        self._drop_at_data: int = 0  # abort the connection at this DATA from now (1 = the next)
        self._refuse_logins: bool = False
        self._bounce: set[str] = set()  # accounts whose mail is accepted, then bounced
        self.authserv_id: str | None = None
        """When set, every delivery gets this MTA's Received hop and an Authentication-Results
        header under this id carrying ``results`` (as Postfix with OpenDKIM/OpenDMARC adds)."""
        self.results: str = "dkim=pass"
        self.mechanisms: tuple[str, ...] = ("PLAIN", "LOGIN", "XOAUTH2", "OAUTHBEARER")
        """The SASL mechanisms both servers offer now (EHLO's AUTH, CAPABILITY's AUTH=; IMAP's
        LOGIN command is always there)."""
        self._tokens: dict[str, Callable[[str], bool]] = {}
        self.tokens_received: list[tuple[str, str, str]] = []
        """(protocol, mechanism, token) of every token login tried, in order."""
        self._listeners: list[Listener] = []
        self._counts: Counter[str] = Counter()
        for login, password in users.items():
            self.add_user(login, password)

    # -- accounts -------------------------------------------------------------------

    def add_user(self, address: str, password: str) -> str:
        """Add an account; a bare local part gets ``@domain``. Returns the account."""
        account = address.lower() if "@" in address else f"{address.lower()}@{self.domain}"
        with self._lock:
            self._passwords[account] = password
            folders = self._accounts.setdefault(account, {})
            for name in ("INBOX", *self._extra_folders):
                folders.setdefault(canonical_folder(name), _Folder(next(_uidvalidity)))
        return account

    def account_for(self, address: str) -> str | None:
        """The account that receives mail for ``address``, honouring plus tags.

        ``Beta+thr-9f2a@Bus.Test`` -> ``beta@bus.test``; ``None`` when nobody does.
        """
        local, at, domain = address.strip().strip("<>").rpartition("@")
        if not at or not local:
            return None
        account = f"{local.split('+', 1)[0]}@{domain}".lower()
        with self._lock:
            return account if account in self._accounts else None

    def authenticate(self, login: str, password: str) -> str | None:
        """The account when ``login``/``password`` match, else ``None``."""
        account = login.lower()
        with self._lock:
            ok = not self._refuse_logins and account in self._passwords and self._passwords[account] == password
        return account if ok else None

    def set_token(self, account: str, token: str | Callable[[str], bool]) -> None:
        """The OAuth2 access token ``account`` logs in with now: the one string accepted, or a
        check (``token -> ok``), e.g. "the one the issuer minted last". Any other is refused."""
        with self._lock:
            self._tokens[account.lower()] = token if callable(token) else token.__eq__

    def authenticate_token(self, user: str, token: str, protocol: str, mechanism: str) -> str | None:
        """The account when ``token`` is its current token, else ``None``."""
        account = user.lower()
        with self._lock:
            self.tokens_received.append((protocol, mechanism, token))
            check = self._tokens.get(account)
            ok = not self._refuse_logins and check is not None and bool(check(token))
        return account if ok else None

    # -- delivery and injection -----------------------------------------------------

    def deliver(self, rcpt: str, data: bytes, mail_from: str = "") -> int:
        """Deliver to the INBOX of ``rcpt``'s account with a ``Delivered-To`` on top.

        Like Postfix/Dovecot, the header carries the envelope recipient as given,
        plus tag included. Returns the new UID; ``KeyError`` for unknown recipients.
        With ``authserv_id`` set, the MTA's ``Received`` hop and ``Authentication-Results``
        go on top too. An account marked with :meth:`bounce_mail_for` gets nothing: a
        delivery-status notification goes back to ``mail_from`` instead (UID 0).
        """
        account = self.account_for(rcpt)
        if account is None:
            raise KeyError(rcpt)
        with self._lock:
            bounce = account in self._bounce
            authserv_id, results = self.authserv_id, self.results
        if bounce:
            sender = self.account_for(mail_from)
            if sender is not None:  # the MTA's own report, stamped as it stamps what it delivers
                stamp = f"Authentication-Results: {authserv_id}; {results}\r\n".encode() if authserv_id else b""
                self.inject(sender, stamp + self.dsn(rcpt, data))
            return 0
        top = b"Delivered-To: " + rcpt.encode() + b"\r\n"
        if authserv_id:
            top += (
                f"Received: from agent.localhost (localhost [127.0.0.1]) by {authserv_id} with ESMTPSA "
                f"for <{rcpt}>; Tue, 01 Dec 2026 00:00:00 +0000\r\n"
                f"Authentication-Results: {authserv_id}; {results}\r\n"
            ).encode()
        return self.inject(account, top + data)

    def dsn(self, rcpt: str, data: bytes) -> bytes:
        """A delivery-status notification (RFC 3464) for ``data``, as Postfix writes one."""
        headers = data.split(b"\r\n\r\n", 1)[0]
        return (
            (
                f"From: MAILER-DAEMON@mail.{self.domain} (Mail Delivery System)\r\n"
                f"Subject: Undelivered Mail Returned to Sender\r\n"
                f"Date: Tue, 01 Dec 2026 00:00:00 +0000\r\n"
                f"Message-ID: <dsn.{next(_uidvalidity)}@mail.{self.domain}>\r\n"
                f"Auto-Submitted: auto-replied\r\nMIME-Version: 1.0\r\n"
                f'Content-Type: multipart/report; report-type=delivery-status; boundary="dsn"\r\n\r\n'
                f"--dsn\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n\r\n"
                f"--dsn\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mail.{self.domain}\r\n\r\n"
                f"Final-Recipient: rfc822; {rcpt}\r\nAction: failed\r\nStatus: 5.2.2\r\n"
                f"Diagnostic-Code: smtp; 552 5.2.2 <{rcpt}>: Mailbox full\r\n\r\n"
                f"--dsn\r\nContent-Type: text/rfc822-headers\r\n\r\n"
            ).encode()
            + headers
            + b"\r\n\r\n--dsn--\r\n"
        )

    def bounce_mail_for(self, address: str) -> None:
        """Accept mail for ``address`` at SMTP, then bounce it (a full mailbox found later)."""
        account = self.account_for(address)
        assert account is not None, address
        with self._lock:
            self._bounce.add(account)

    def inject(
        self,
        account: str,
        data: bytes,
        folder: str = "INBOX",
        *,
        flags: Iterable[str] = (),
        internaldate: dt.datetime | None = None,
    ) -> int:
        """Put raw bytes straight into a folder (forgeries, bounces, giant messages)."""
        return self.append(account, folder, data, flags=flags, internaldate=internaldate)[1]

    def record_accepted(self, message: AcceptedMessage) -> None:
        with self._lock:
            self._accepted.append(message)

    @property
    def accepted(self) -> list[AcceptedMessage]:
        """Every message the SMTP server accepted, in order (a copy)."""
        with self._lock:
            return list(self._accepted)

    # -- SMTP fault injection -------------------------------------------------------

    def fail_next_data(self, count: int = 1, code: int = 451, text: str = "4.3.0 Injected failure") -> None:
        """Answer the next ``count`` DATA commands with ``code text`` instead of 250."""
        with self._lock:
            self._fault = _Fault(count, code, text) if count > 0 else None

    def take_data_fault(self) -> tuple[int, str] | None:
        """Consume one pending DATA fault, if any (called by the SMTP server)."""
        with self._lock:
            fault = self._fault
            if fault is None:
                return None
            left = fault.remaining - 1
            self._fault = replace(fault, remaining=left) if left > 0 else None
            return fault.code, fault.text

    # -- IMAP fault injection -------------------------------------------------------

    def refuse_appends(self, count: int = 1) -> None:
        """Answer the next ``count`` APPENDs with NO [OVERQUOTA], as a full mailbox would."""
        with self._lock:
            self._append_refusals = max(count, 0)

    def take_append_refusal(self) -> bool:
        """Consume one pending APPEND refusal, if any (called by the IMAP server)."""
        with self._lock:
            if self._append_refusals <= 0:
                return False
            self._append_refusals -= 1
            return True

    def drop_connection_at_data(self, nth: int = 1) -> None:
        """At the ``nth`` DATA from now the server drops the connection instead of answering
        (the message is not accepted), as a crashed or restarted MTA does mid-batch."""
        with self._lock:
            self._drop_at_data = nth

    def take_drop(self) -> bool:
        """Called by the SMTP server at each DATA: True when this one must drop the connection."""
        with self._lock:
            if self._drop_at_data <= 0:
                return False
            self._drop_at_data -= 1
            return self._drop_at_data == 0

    def refuse_logins(self, refuse: bool = True) -> None:
        """Every login fails (535) until ``refuse_logins(False)``: a password changed on the server."""
        with self._lock:
            self._refuse_logins = refuse

    # -- inspection and server-side changes -----------------------------------------

    def folders(self, account: str) -> list[str]:
        with self._lock:
            return list(self._accounts[account.lower()])

    def messages(self, account: str, folder: str = "INBOX") -> list[StoredMessage]:
        """The folder's messages in UID order, flags included."""
        with self._lock:
            return list(self._folder(account, folder).messages.values())

    def set_uidvalidity(self, account: str, folder: str = "INBOX", value: int | None = None) -> int:
        """Rebuild a folder as a restored server would: new UIDVALIDITY, UIDs 1..n.

        Sessions with the folder selected are disconnected. Returns the new value.
        """
        with self._lock:
            box = self._folder(account, folder)
            new = value if value is not None else next(_uidvalidity)
            if new == box.uidvalidity:
                raise ValueError("UIDVALIDITY must change")
            old = list(box.messages.values())
            box.uidvalidity = new
            box.messages = {i: replace(m, uid=i) for i, m in enumerate(old, start=1)}
            box.uidnext = len(old) + 1
        self._notify(account, folder)
        return new

    # -- counters -------------------------------------------------------------------

    @property
    def counts(self) -> Counter[str]:
        """A copy of the counters listed in the module docstring."""
        with self._lock:
            return Counter(self._counts)

    async def auth_penalty(self, gone: Callable[[], bool]) -> None:
        """Wait ``auth_delay`` before a login is answered, ended early by a connection that is
        ``gone`` (the client gave up, the server stopped): no session outlives its server."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.auth_delay
        while loop.time() < end and not gone():
            await asyncio.sleep(0.02)

    def bump(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()

    # -- change notification --------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register a change listener; returns the function that removes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _notify(self, account: str, folder: str) -> None:
        with self._lock:
            listeners = list(self._listeners)
        # Outside the lock: a listener may call back into the store.
        for listener in listeners:
            listener(account.lower(), canonical_folder(folder))

    # -- operations the IMAP server performs ----------------------------------------

    def _folder(self, account: str, folder: str) -> _Folder:
        try:
            return self._accounts[account.lower()][canonical_folder(folder)]
        except KeyError:
            raise KeyError(f"no folder {folder!r} for {account!r}") from None

    def has_folder(self, account: str, folder: str) -> bool:
        with self._lock:
            return canonical_folder(folder) in self._accounts.get(account.lower(), {})

    def create_folder(self, account: str, folder: str) -> bool:
        """Create a folder; ``False`` if it already exists."""
        with self._lock:
            folders = self._accounts[account.lower()]
            name = canonical_folder(folder)
            if name in folders:
                return False
            folders[name] = _Folder(next(_uidvalidity))
            return True

    def delete_folder(self, account: str, folder: str) -> None:
        """Delete a folder and its messages, as another client's DELETE would (never INBOX)."""
        with self._lock:
            name = canonical_folder(folder)
            if name != "INBOX":
                self._accounts[account.lower()].pop(name, None)

    def state(self, account: str, folder: str) -> FolderState:
        with self._lock:
            box = self._folder(account, folder)
            return FolderState(
                name=canonical_folder(folder),
                uidvalidity=box.uidvalidity,
                uidnext=box.uidnext,
                uids=tuple(box.messages),
                unseen=sum("\\Seen" not in m.flags for m in box.messages.values()),
            )

    def get(self, account: str, folder: str, uids: Iterable[int]) -> list[StoredMessage]:
        """The messages with these UIDs that still exist, in the order asked."""
        with self._lock:
            messages = self._folder(account, folder).messages
            return [messages[u] for u in uids if u in messages]

    def append(
        self,
        account: str,
        folder: str,
        data: bytes,
        *,
        flags: Iterable[str] = (),
        internaldate: dt.datetime | None = None,
    ) -> tuple[int, int]:
        """Add a message; returns ``(uidvalidity, uid)`` for APPENDUID."""
        when = internaldate or dt.datetime.now(dt.UTC).astimezone()
        with self._lock:
            box = self._folder(account, folder)
            uid = box.uidnext
            box.uidnext += 1
            box.highestmodseq += 1
            box.messages[uid] = StoredMessage(uid, bytes(data), frozenset(flags), when, box.highestmodseq)
            result = box.uidvalidity, uid
        self._notify(account, folder)
        return result

    def set_flags(
        self, account: str, folder: str, uids: Iterable[int], op: str, flags: Iterable[str]
    ) -> list[StoredMessage]:
        """``op`` is ``"="``, ``"+"`` or ``"-"``; returns the updated messages."""
        return self.store_unless_modified(account, folder, uids, op, flags)[0]

    def store_unless_modified(
        self, account: str, folder: str, uids: Iterable[int], op: str, flags: Iterable[str],
        unchangedsince: int | None = None,
    ) -> tuple[list[StoredMessage], list[int]]:  # fmt: skip
        """A STORE, conditional when ``unchangedsince`` is given (RFC 7162 §3.1.3): a message
        whose modseq is above it is left as it is and listed in the second item (the MODIFIED
        response code). Returns (the messages stored, the UIDs that failed). A
        change gets the folder's next modseq; a STORE that changes nothing changes no modseq."""
        wanted = frozenset(flags)
        changed: list[StoredMessage] = []
        modified: list[int] = []
        with self._lock:
            box = self._folder(account, folder)
        with box.lock:
            messages = box.messages
            for uid in uids:
                if uid not in messages:
                    continue
                if unchangedsince is not None and messages[uid].modseq > unchangedsince:
                    modified.append(uid)
                    continue
                old = messages[uid].flags
                new = wanted if op == "=" else old | wanted if op == "+" else old - wanted
                if new != old:
                    box.highestmodseq += 1
                    messages[uid] = replace(messages[uid], flags=new, modseq=box.highestmodseq)
                changed.append(messages[uid])
        if changed:
            self._notify(account, folder)
        return changed, modified

    def highest_modseq(self, account: str, folder: str) -> int:
        with self._lock:
            return self._folder(account, folder).highestmodseq

    def expunge(self, account: str, folder: str, uids: Iterable[int] | None = None) -> list[int]:
        """Remove ``\\Deleted`` messages (only among ``uids`` when given)."""
        with self._lock:
            messages = self._folder(account, folder).messages
            limit = set(uids) if uids is not None else None
            gone = [uid for uid, m in messages.items() if "\\Deleted" in m.flags and (limit is None or uid in limit)]
            for uid in gone:
                del messages[uid]
        if gone:
            self._notify(account, folder)
        return gone

    def copy(self, account: str, source: str, uids: Iterable[int], target: str) -> tuple[int, list[tuple[int, int]]]:
        """Copy messages; returns ``(target uidvalidity, [(old uid, new uid), ...])``."""
        validity, pairs = self.state(account, target).uidvalidity, []
        for m in self.get(account, source, uids):
            _, new_uid = self.append(account, target, m.data, flags=m.flags, internaldate=m.internaldate)
            pairs.append((m.uid, new_uid))
        return validity, pairs
