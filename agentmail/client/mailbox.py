"""A mailbox and the base of its stages: what every stage of ``AgentMail`` works on (DESIGN §1)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import bound
from ..config.identity import Identity
from ..config.registry import Registry
from ..errors import (
    AgentmailError,
    BadInput,
    NotFound,
)
from ..model import (
    Letter,
)
from ..spool import MIN_PREFIX, Spool
from ..spool.db import FILE as DB_FILE
from ..stages.compose import Draft, compose

if TYPE_CHECKING:
    from ..config.registry import Platform
    from ..spool.search import SearchIndex

    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from ..transport import Transport


class Mailbox:
    """One platform[@agent]'s mailbox: the registry, who I am, the spool, the transport (opened
    when first used) and the search index. Every stage works on one; nothing here decides."""

    def __init__(self, registry: Registry, me: Identity, home: Path, transport: Transport | None = None) -> None:
        bound.check(home, registry)  # never a registry of the agent's own over keys another guards
        self.registry = registry
        self.me = me
        self.home = home
        self.platform = registry.get(me.platform)
        self.spool = Spool(
            home / "spool" / me.mailbox, platform_root=home / "spool" / me.platform, name_of=self.platform_name
        )
        self._transport = transport
        self._search: SearchIndex | None = None

    def platform_name(self, address: str) -> str | None:
        platform = self.registry.by_address(address)
        return platform.name if platform else None

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            from ..transport import open_transport

            self._transport = open_transport(self.registry, self.me.platform, self.home)
        return self._transport

    def close(self) -> None:
        if self._search is not None:
            self._search.close()
            self._search = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        # Closed here rather than by the collector whenever the client goes (SQLite checkpoints
        # the WAL into spool.db as its last connection closes): a CLI process skips that
        # collection at exit (``__main__``), so the file is closed where it is known to be done with.
        self.spool.db.close()

    def names(self, addresses: Iterable[str]) -> list[str]:
        return [self.platform_name(a) or a.partition("@")[0] for a in addresses]

    def counterparts(self, letter: Letter) -> list[str]:
        """Whom ``letter`` is between this platform and: its recipients if it is mine, else its sender."""
        if letter.sender == self.me.platform:
            return self.names(letter.recipients) if letter.recipients else [letter.to]
        return [letter.sender]

    def parties(self, letters: Iterable[Letter]) -> list[str]:
        """The platforms this one talks with in a thread, in order (several: a fan-out it opened)."""
        found = [p for x in letters for p in self.counterparts(x) if p and p != self.me.platform]
        return list(dict.fromkeys(found))

    def id_of(self, ref: str | Letter) -> str:
        """THE place a letter a user names becomes its id here: the id (any case), the letter's
        Message-ID — the one name both sides share — or a unique prefix of either (``SpoolReader.named``).
        An id that names nothing is returned for the caller to say "no letter"."""
        if isinstance(ref, Letter):
            return ref.id
        text = str(ref).strip()
        found = self.spool.read.named(text, tuple(self.registry.platforms))
        if len(found) == 1:
            return found[0]
        if found:
            shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
            raise BadInput(f"{text!r} names several letters ({shown}); give more of it")
        lowered = text.lower()
        if lowered.isascii() and lowered.isalnum():
            if len(lowered) < MIN_PREFIX:  # too short to be looked up as a prefix: say so
                raise NotFound(f"no letter {lowered}: a prefix of an id names a letter from {MIN_PREFIX} characters on")
            raise self.not_here(f"no letter {lowered}", text)
        if ("@" in text or text.startswith("<")) and text.isprintable():
            raise self.not_here(f"no letter with Message-ID {text}", text)
        raise BadInput(f"{text!r} is not a letter id or Message-ID")

    def not_here(self, said: str, ref: str) -> NotFound:
        """A letter this mailbox does not hold, said with the mailbox asked (and what chose it: a
        clone's committed marker names the platform it was cloned from), and the other mailbox on
        this machine that holds it, with the options that reach it."""
        chosen = f", chosen by {self.me.how}" if self.me.how else ""
        text = f"{said} in the mailbox {self.me.mailbox}{chosen}"
        holder = self._holder(ref)
        if holder is not None:
            platform, _, agent = holder.partition("@")
            options = f"--as {platform}" + (f" --agent {agent}" if agent else "")
            text += f"; it is in the mailbox {holder} on this machine: add {options}"
        return NotFound(text)

    def _holder(self, ref: str) -> str | None:
        """The other mailbox of this machine whose spool holds the letter ``ref`` names (read only)."""
        folder = self.home / "spool"
        for root in sorted(p.parent for p in folder.glob(f"*/{DB_FILE}") if p.parent != self.spool.root):
            other = Spool(root, platform_root=folder / root.name.partition("@")[0], name_of=self.platform_name)
            try:
                if other.read.named(ref, tuple(self.registry.platforms), most=1):
                    return root.name
            except AgentmailError:
                continue  # a spool that cannot be read says nothing here
            finally:
                other.db.close()
        return None

    def show(self, letter_id: str) -> Letter:
        return self.addressed(self.spool.read.letter(self.id_of(letter_id)))

    def raw(self, letter_id: str) -> bytes:
        return self.spool.read.raw(self.id_of(letter_id))

    def addressed(self, letter: Letter) -> Letter:
        """A fan-out letter with ``to_platforms``: every recipient's platform name, in To order
        (``to`` names the first, as it always did; ``recipients`` are the addresses)."""
        if not letter.recipients:
            return letter
        return letter.replace(extra={**letter.extra, "to_platforms": self.names(letter.recipients)})

    def compose(self, draft: Draft) -> tuple[Letter, bytes]:
        return compose(self.registry, self.home, self.me.platform, draft)

    @property
    def search_index(self) -> SearchIndex:
        if self._search is None:
            from ..spool.search import SearchIndex

            self._search = SearchIndex(self.spool.read)
        return self._search

    def move(self, letter_id: str, source: str, target: str, *, durable: bool = True) -> bool:
        """``SpoolWriter.move`` (the search index reads the state from the spool: nothing to feed)."""
        moved = self.spool.write.move(letter_id, source, target, durable=durable)
        if moved and target == "failed":  # it never goes: its claim on the server is free again
            from ..spool import server_claims

            if server_claims.noted(self.spool, letter_id):
                server_claims.release(self.spool, self.transport, letter_id)
        return moved


class Stage:
    """A stage of one mailbox: it reaches the registry, identity, spool and transport through it."""

    def __init__(self, box: Mailbox) -> None:
        self.box = box

    @property
    def registry(self) -> Registry:
        return self.box.registry

    @property
    def me(self) -> Identity:
        return self.box.me

    @property
    def home(self) -> Path:
        return self.box.home

    @property
    def platform(self) -> Platform:
        return self.box.platform

    @property
    def spool(self) -> Spool:
        return self.box.spool

    @property
    def transport(self) -> Transport:
        return self.box.transport
