"""The per-home reply claim: one reply of a platform to a letter among every agent of one home
(machine), held in the platform's own spool.db (DESIGN §6). The claim that holds across the
homes of a platform is made on the server: ``server_claims``.

A claim is a row of the platform's ``claims`` table, keyed by ``layout.reply_key`` (the answered
letter's Message-ID and verified sender), naming the reply that holds it ("<mailbox> <id>"). It is
a cache: rebuilt from the mailboxes' outgoing letters when missing, and a claim whose reply was
never filed (a crash) names no letter and is taken over.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from .._fs import locked
from . import db as dbmod
from .layout import ANSWERING, _key, reply_key

if TYPE_CHECKING:
    from .views import SpoolReader


class Mailboxes(Protocol):
    """What the claims use of a mailbox's spool and of its platform's other mailboxes
    (``store.Spool``, which makes its ``HomeClaims``: named here, so the two modules import one way)."""

    @property
    def root(self) -> Path: ...
    @property
    def platform_root(self) -> Path: ...
    @property
    def mailbox(self) -> str: ...
    @property
    def db(self) -> dbmod.Db: ...
    @property
    def read(self) -> SpoolReader: ...
    def ensure(self) -> Self: ...
    def siblings(self) -> list[Self]: ...
    def mailbox_at(self, root: Path) -> Self: ...


_HOLDING = threading.local()  # the claims locks this thread holds (see HomeClaims._claims_locked)
# The claims cache keyed by ``reply_key`` (sender and Message-ID): one built by Message-ID alone is built again.
CLAIMS_BUILT = "built-by-sender"


class HomeClaims:
    """The per-home reply claims of ``spool``'s platform (``Spool.home_claims``)."""

    def __init__(self, spool: Mailboxes) -> None:
        self._spool = spool
        self._platform: Mailboxes | None = None

    def _platform_spool(self) -> Mailboxes:
        spool = self._spool
        if spool.platform_root == spool.root:
            return spool
        if self._platform is None:
            self._platform = spool.mailbox_at(spool.platform_root)
        return self._platform

    def _claims(self) -> sqlite3.Connection:
        """The platform's claims (its spool.db), rebuilt from its mailboxes' letters if unbuilt."""
        platform = self._platform_spool().ensure()
        conn = platform.db.conn()
        if platform.db.fact("claims") != CLAIMS_BUILT:
            spools = (platform, *platform.siblings())
            me = self._spool.platform_root.name
            with platform.db.write(durable=False) as tx:
                for spool in spools:
                    for state in ANSWERING:
                        for letter_id in spool.read.ids(state):
                            data = spool.read._parsed(letter_id, state)
                            parent = data.get("in_reply_to")
                            if parent:
                                answered = reply_key(parent, _answered_sender(spools, me, data))
                                tx.execute(
                                    "INSERT OR IGNORE INTO claims(key, holder) VALUES(?, ?)",
                                    (_key(answered), f"{spool.mailbox} {letter_id}"),
                                )
                tx.execute("INSERT OR REPLACE INTO facts(name, value) VALUES('claims', ?)", (CLAIMS_BUILT,))
        return conn

    def replied_by(self, answered: str) -> str | None:
        """Which mailbox of this platform answered ``answered`` (``layout.reply_key``), as "<mailbox> <reply id>"."""
        row = self._claims().execute("SELECT holder FROM claims WHERE key=?", (_key(answered),)).fetchone()
        holder = None if row is None else str(row[0])
        return holder if holder and self._reply_exists(holder) else None

    def _reply_exists(self, holder: str) -> bool:
        """Does the reply a claim names exist (in any outgoing state of its mailbox)?"""
        mailbox, _, reply_id = holder.rpartition(" ")
        mailbox = mailbox or self._spool.platform_root.name
        base = self._spool.platform_root.name
        if not (mailbox == base or mailbox.startswith(base + "@")) or "/" in mailbox:
            return False
        if mailbox == self._spool.mailbox:
            spool = self._spool
        else:
            root = self._spool.platform_root.parent / mailbox
            if not (root / dbmod.FILE).exists() and not root.is_dir():
                return False
            spool = self._spool.mailbox_at(root)
        return spool.read.locate(reply_id) in ANSWERING

    @contextmanager
    def _claims_locked(self) -> Iterator[None]:
        """The platform's claims.lock, taken once per thread: a follow-up to several
        counterparts claims one key inside another (client._claim_all), and a second flock on
        a new descriptor of the same file would wait for the first forever."""
        path = self._spool.platform_root / "claims.lock"
        held: set[Path] = _HOLDING.__dict__.setdefault("claims", set())
        if path in held:
            yield
            return
        with locked(path):
            held.add(path)
            try:
                yield
            finally:
                held.discard(path)

    @contextmanager
    def claim_reply(self, answered: str, reply_id: str) -> Iterator[str | None]:
        """Claim the one reply of this platform to ``answered`` (``layout.reply_key``: the letter's
        Message-ID and verified sender), across processes and agents.

        Yields None while the claim is ours: file the reply inside the block. Yields who
        answered ("<mailbox> <id>") when another reply exists. The platform's claims are
        locked while the reply is being filed, so a sibling waits and then sees the reply; a
        claim whose reply never got filed (a crash) names no letter and is taken over."""
        key = _key(answered)
        conn = self._claims()
        platform = self._platform_spool()
        with self._claims_locked():
            row = conn.execute("SELECT holder FROM claims WHERE key=?", (key,)).fetchone()
            holder = None if row is None else str(row[0])
            if holder and self._reply_exists(holder):
                yield holder
                return
            with platform.db.write() as tx:  # on disk before the reply is filed
                tx.execute(
                    "INSERT INTO claims(key, holder) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET holder=excluded.holder",
                    (key, f"{self._spool.mailbox} {reply_id}"),
                )
            yield None


def _answered_sender(spools: tuple[Mailboxes, ...], me: str, reply: dict[str, Any]) -> str:
    """Whose letter a filed reply answers: this platform's own, when it holds that letter in the
    reply's thread (a follow-up); else the platform the reply went to."""
    parent, thread = str(reply.get("in_reply_to") or ""), reply.get("thread")
    for spool in spools:
        found = spool.read.known(me, parent)
        if found is not None and spool.read.letter(found).thread == thread:
            return me
    return str(reply.get("to") or "")
