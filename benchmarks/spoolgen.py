"""A big, realistic spool for the scale figure, built in seconds rather than hours.

The history of one platform (``beta``) with four peers: many threads of 1-5 letters, both
directions (report → ack → fix-notice → verify-result → close); old threads are closed and
only the newest ones are still open (exactly ``OPEN_THREADS``, 20, at every size: what a
working platform has open, and what ``status`` lists); the received letters read except the last 10; 5 forgeries in quarantine; its post office holding
every letter it received, with the UID checkpoint at the end, so a sync finds nothing new.

Everything is written by ``agentmail.spool.Spool.store``, in the spool's own format, in one
transaction per size (the spool's commit per letter would measure fsync, not reading). The raw
files are real signed letters of the right sender and type with the Message-ID, thread and
In-Reply-To of the letter put in (so they read true; their signatures no longer verify, which
nothing checks again once a letter is filed). fsync is switched off while building: a crash
here only means building again, and the figure measures reading, not writing. (Threads do
not help: creating files in one folder is serialised by the filesystem.)
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from agentmail.config.credentials import read_private_key
from agentmail.letter import wire
from agentmail.model import _CROCKFORD, Letter, new_thread_id, reply_subject
from agentmail.spool import Spool
from agentmail.transport.local import Mailbox
from agentmail.trust import signing

from .common import TempBus
from .letters import FOLLOW_UP, OPENER, SUBJECTS

OWNER = "beta"
PEERS = ("alpha", "gamma", "delta", "sigma")
PLATFORMS = (OWNER, *PEERS)
LIFECYCLE = ("report", "ack", "fix-notice", "verify-result", "close")
UNREAD = 10
OPEN_WINDOW = 500  # letters: only threads begun this close to the end may stay open
OPEN_THREADS = 20  # open at the end of every size: what ``status`` lists, and what it costs
QUARANTINED = 5
_MID = "<01placeholdermessageid0000.{}@bus.test>"
_PARENT = "<01placeholderparentid00000.x@bus.test>"
_THREAD = "thr-placeholdr"


@contextmanager
def no_fsync() -> Iterator[None]:
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real
        os.sync()  # written back now, not while a figure is on the clock


@dataclass(frozen=True)
class Template:
    raw: bytes
    message_id: str


class SpoolBuilder:
    def __init__(self, tb: TempBus, seed: int = 7, closed_share: float = 0.85) -> None:
        self.tb = tb
        self.registry = tb.registry
        self.spool = Spool(tb.home / "spool" / OWNER).ensure()
        self.mailbox = Mailbox(tb.home / "postoffice" / OWNER)
        self.mailbox.ensure()
        self.rng = random.Random(seed)
        self.closed_share = closed_share  # of the recent threads, how many are closed
        self.keys = {name: read_private_key(tb.home, name) for name in PLATFORMS}
        self.templates: dict[tuple[str, str, str, bool], Template] = {}
        self.letters = 0
        self.seconds = 0.0  # spent building, in total
        self.threads = 0
        self.uid = 0
        self.unread: list[str] = []
        self.received: list[str] = []  # ids of received letters, in arrival order
        self.sample_thread = ""  # a closed five-letter thread, present at every size
        self.unfinished: list[tuple[str, str, str, str, Letter, int]] = []  # open at the last size
        # Letters a minute apart on average from 2020 on: a million end in late 2021, so every
        # one is older than the last hour, as a platform's history is (the new-thread quota
        # counts only the last hour's letters; ids made now would all be in it).
        self.when = datetime(2020, 1, 6, 9, 0, tzinfo=UTC)

    def grow_to(self, total: int) -> None:
        """Add threads until the spool holds ``total`` letters; ``seconds`` adds up the time spent."""
        start = time.perf_counter()
        with no_fsync():
            self.spool.db.begin_batch()
            for letter_id in self.unread:
                self.spool.write.move(letter_id, "unread", "read")
            if not self.letters:
                self._quarantine()
            if self.letters < total:
                self._finish_open_threads()  # what was open at the last size got closed since
            while self.letters < total:
                self._thread(total - self.letters)
            self.unread = self.received[-UNREAD:]
            for letter_id in self.unread:
                self.spool.write.move(letter_id, "read", "unread")
            (self.mailbox.dir / ".uidnext").write_text(str(self.uid + 1))
            self.spool.write.set_checkpoint("local", f"{self.mailbox.uidvalidity}:{self.uid}")
            self.spool.db.commit_batch()
            # as a spool in use is: its WAL folded into the file (SQLite does so every 1,000
            # pages; one transaction per size kept it from happening here)
            self.spool.db.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.spool.db.close()
        self.seconds += time.perf_counter() - start

    def stats(self) -> dict[str, int]:
        counts = {state: len(self.spool.read.ids(state)) for state in ("unread", "read", "sent", "quarantine")}
        opened = len(self.spool.read.open_threads())
        return {
            "letters": self.letters,
            "threads": self.threads,
            "open_threads": opened,
            **counts,
            "post_office": self.uid,
        }

    # --- letters -----------------------------------------------------------------------------

    def _thread(self, room: int) -> None:
        peer = self.rng.choice(PEERS)
        opener, other = (peer, OWNER) if self.rng.random() < 0.6 else (OWNER, peer)
        kinds = self._kinds(room)
        thread, subject = new_thread_id(), self.rng.choice(SUBJECTS)
        if not self.sample_thread and len(kinds) == 5:
            self.sample_thread = thread
        parent = self._lifecycle(opener, other, thread, subject, None, kinds)
        if kinds[-1] != "close" and parent is not None:
            self.unfinished.append((opener, other, thread, subject, parent, len(kinds)))
        self.threads += 1

    def _kinds(self, room: int) -> tuple[str, ...]:
        """The next thread's letters: closed (2-5 letters, ending in a close) or left open (1-4
        of the lifecycle), so that the size ends with exactly ``OPEN_THREADS`` open, whatever
        it is: ``status`` costs per open thread, and every size must list as many."""
        need = OPEN_THREADS - len(self.unfinished)

        def fits(length: int, still_open: int) -> bool:  # what is left can still end the size exactly
            rest = room - length
            return rest >= still_open and (still_open > 0 or rest != 1)

        if need > 0 and (room <= 4 * need or (room <= OPEN_WINDOW and self.rng.random() >= self.closed_share)):
            return LIFECYCLE[: self.rng.choice([n for n in range(1, 5) if fits(n, need - 1)])]
        for length in (5, 4, 3, 2):  # closed: the whole lifecycle; shorter only to end exactly
            if fits(length, need):
                return (*LIFECYCLE[: length - 1], "close")
        raise AssertionError(f"no thread fits {room} letters with {need} open threads to come")

    def _lifecycle(
        self,
        opener: str,
        other: str,
        thread: str,
        subject: str,
        parent: Letter | None,
        kinds: tuple[str, ...],
        first: int = 0,
    ) -> Letter | None:
        for depth in range(first, len(kinds)):
            kind = kinds[depth]
            # the reporter owns the report and the verification; the fixer acks and fixes
            sender = opener if kind in ("report", "verify-result", "close") else other
            to = other if sender == opener else opener
            parent = self._store(sender, to, kind, thread, subject, parent, depth)
        return parent

    def _finish_open_threads(self) -> None:
        for opener, other, thread, subject, parent, done in self.unfinished:
            self._lifecycle(opener, other, thread, subject, parent, LIFECYCLE, done)
        self.unfinished = []

    def _store(
        self, sender: str, to: str, kind: str, thread: str, subject: str, parent: Letter | None, depth: int
    ) -> Letter:
        me, them = self.registry.get(sender), self.registry.get(to)
        self.when += timedelta(seconds=self.rng.randint(1, 120))
        message_id = wire.new_message_id(sender, me.domain)
        references = (*parent.references, parent.message_id)[-20:] if parent else ()
        letter = Letter(
            id=self._id(),
            message_id=message_id,
            sender=sender,
            sender_address=me.address,
            sender_name=me.display_name,
            to=to,
            to_address=them.address,
            type=kind,
            thread=thread,
            subject=reply_subject(subject) if parent else subject,
            body=self._body(kind, sender, to).strip(),
            date=format_datetime(self.when),
            severity="high" if kind == "report" else None,
            in_reply_to=parent.message_id if parent else None,
            references=references,
        )
        template = self._template(sender, to, kind, parent is not None)
        raw = (
            template.raw.replace(template.message_id.encode(), message_id.encode())
            .replace(_THREAD.encode(), thread.encode())
            .replace(_PARENT.encode(), (parent.message_id if parent else "").encode())
        )
        state = "sent" if sender == OWNER else "read"
        stored = self.spool.write.store(state, letter, raw, extra={"depth": depth})
        if state == "read":
            self._post(stored.id, state)
        self.letters += 1
        return stored

    def _id(self) -> str:
        """A letter id (a ULID) made when the letter was dated, not now: ids sort by creation,
        and the quota and the ages read the time from them."""
        value = (int(self.when.timestamp() * 1000) << 80) | self.rng.getrandbits(80)
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))

    def _post(self, letter_id: str, state: str) -> None:
        """The post office copy of a received letter, under the UID it was fetched with."""
        self.uid += 1
        os.link(self.spool.read.path(state, letter_id), self.mailbox.dir / "cur" / f"{self.uid:012d}:2,")
        self.received.append(letter_id)

    def _quarantine(self) -> None:
        """Forgeries claiming to be alpha: a real alpha letter whose body changed after signing."""
        me = self.registry.get(OWNER)
        for _ in range(QUARANTINED):
            template = self._template("alpha", OWNER, "report", False)
            message_id = wire.new_message_id("alpha", me.domain)
            forged = template.raw.replace(template.message_id.encode(), message_id.encode()).replace(
                b"status 500", b"status 200"
            )
            self.when += timedelta(seconds=1)
            letter = Letter(
                id=self._id(),
                message_id=message_id,
                sender="",
                sender_address='"alpha agent" <alpha@bus.test>',
                to=OWNER,
                to_address=me.address,
                type="",
                thread="",
                subject=SUBJECTS[0],
                body="",
                date=format_datetime(self.when),
                reason="unauthenticated",
                detail="no valid signature by alpha's pinned key: the signature does not verify "
                "(the body changed after signing)",
            )
            letter_id = self.spool.write.store("quarantine", letter, forged, index=False).id
            self.uid += 1
            os.link(self.spool.read.path("quarantine", letter_id), self.mailbox.dir / "cur" / f"{self.uid:012d}:2,")
            self.letters += 1

    def _body(self, kind: str, sender: str, to: str) -> str:
        if kind == "report":
            return OPENER.format(sender=sender, to=to)
        if kind == "fix-notice":
            return FOLLOW_UP.format()
        return {
            "ack": "Reproduced with your command. Fixing; expect a fix-notice within a day.",
            "verify-result": "Verified: 200 for all 40 free-plan accounts we replayed.",
            "close": "Closing: fixed and verified. Thanks.",
        }[kind]

    def _template(self, sender: str, to: str, kind: str, is_reply: bool) -> Template:
        key = (sender, to, kind, is_reply)
        if key not in self.templates:
            me, them = self.registry.get(sender), self.registry.get(to)
            outline = wire.draft_letter(
                sender_address=me.address,
                sender_name=me.display_name,
                to_address=them.address,
                type=kind,
                thread=_THREAD,
                subject=SUBJECTS[0],
                body=self._body(kind, sender, to),
                severity="high" if kind == "report" else None,
                in_reply_to=_PARENT if is_reply else None,
                references=(_PARENT,) if is_reply else (),
                message_id=_MID.format(sender),
            )
            raw = signing.sign(wire.render(outline), me.dkim_domain or me.domain, me.selector, self.keys[sender])
            self.templates[key] = Template(raw, _MID.format(sender))
        return self.templates[key]
