"""The in-memory mail store shared by the test SMTP and IMAP servers, with test hooks.

Accounts are addresses (``beta@bus.test``); each owns folders (``INBOX`` always) of
messages kept as the exact bytes delivered. Every method is thread-safe: the servers
run on a background event loop while the test thread inspects and injects.

Counters in :attr:`MailStore.counts` (a ``collections.Counter``):

- ``smtp.connect``, ``smtp.auth`` (successful), ``smtp.auth_failed``,
  ``smtp.accepted`` (DATA answered 250), ``smtp.refused`` (recipients refused)
- ``imap.connect``, ``imap.auth`` (successful LOGIN or AUTHENTICATE),
  ``imap.auth_failed``, and ``imap.<COMMAND>`` for every IMAP command received, with
  ``UID`` kept (``imap.UID FETCH``, ``imap.SELECT``, ``imap.IDLE``)
"""

from __future__ import annotations

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
        self.keywords: bool = True
        """False: like a server that keeps no keywords (PERMANENTFLAGS without \\*; STORE drops them)."""
        self._lock = threading.RLock()
        self._passwords: dict[str, str] = {}
        self._accounts: dict[str, dict[str, _Folder]] = {}
        self._extra_folders = tuple(folders)
        self._accepted: list[AcceptedMessage] = []
        self._fault: _Fault | None = None
        self._append_refusals = 0
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
            ok = account in self._passwords and self._passwords[account] == password
        return account if ok else None

    # -- delivery and injection -----------------------------------------------------

    def deliver(self, rcpt: str, data: bytes) -> int:
        """Deliver to the INBOX of ``rcpt``'s account with a ``Delivered-To`` on top.

        Like Postfix/Dovecot, the header carries the envelope recipient as given,
        plus tag included. Returns the new UID; ``KeyError`` for unknown recipients.
        """
        account = self.account_for(rcpt)
        if account is None:
            raise KeyError(rcpt)
        return self.inject(account, b"Delivered-To: " + rcpt.encode() + b"\r\n" + data)

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
            box.messages[uid] = StoredMessage(uid, bytes(data), frozenset(flags), when)
            result = box.uidvalidity, uid
        self._notify(account, folder)
        return result

    def set_flags(
        self, account: str, folder: str, uids: Iterable[int], op: str, flags: Iterable[str]
    ) -> list[StoredMessage]:
        """``op`` is ``"="``, ``"+"`` or ``"-"``; returns the updated messages."""
        wanted = frozenset(flags)
        changed: list[StoredMessage] = []
        with self._lock:
            messages = self._folder(account, folder).messages
            for uid in uids:
                if uid not in messages:
                    continue
                old = messages[uid].flags
                new = wanted if op == "=" else old | wanted if op == "+" else old - wanted
                messages[uid] = replace(messages[uid], flags=new)
                changed.append(messages[uid])
        if changed:
            self._notify(account, folder)
        return changed

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
