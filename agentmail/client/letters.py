"""One filed letter handed out: as verified, its attachments saved or applied, and search (DESIGN §5, §9)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import (
    BadInput,
)
from ..model import (
    Letter,
    thread_id,
)
from .mailbox import Stage

if TYPE_CHECKING:
    from ..letter.attach import Attachment
    from ..spool.search import Hit, Query
    from ..stages.evidence import Applied

    # at run time imported where used: a read (inbox --no-sync) opens no transport
    from .mailbox import Mailbox


class Letters(Stage):
    """One filed letter handed out: its text, its bytes, its attachments (only as verified), saved or applied; and search."""

    def __init__(self, box: Mailbox, sync: Callable[[], object]) -> None:
        super().__init__(box)
        self.sync = sync

    def attachments(self, letter_id: str | Letter) -> tuple[Attachment, ...]:
        """Does ``AgentMail.attachments``."""
        from ..letter import wire

        letter = self.box.show(self.box.id_of(letter_id))
        if letter.state == "quarantine":
            raise BadInput(f"letter {letter.id} is quarantined ({letter.reason}); its attachments are not handed out")
        raw = self.box.raw(letter.id)
        self._still_as_filed(letter, raw)
        try:
            return wire.body_and_attachments(wire.parse_message(raw, len(raw) + 1))[1]
        except wire.Malformed as exc:
            raise BadInput(f"letter {letter.id}: {exc.detail}") from None

    def _still_as_filed(self, letter: Letter, raw: bytes) -> None:
        """What save/apply hand out is what was verified: the bytes whose hash was noted at
        filing, or (a letter filed before agentmail noted one) bytes whose signature still
        verifies against the sender's pin. BadInput, one line, otherwise."""
        same = self.spool.read.unchanged(letter.id, raw)
        platform = self.registry.platforms.get(letter.sender)
        if same is None and platform is not None and not letter.extra.get("person"):
            from ..trust.authenticity import pinned_key
            from ..trust.signing import verify

            same = verify(raw, pinned_key(platform)).ok
        if same is False:
            raise BadInput(f"letter {letter.id}: its file changed after it was filed (not the bytes that were "
                           "verified); its attachments are not handed out ('show --raw' shows what is there now)")  # fmt: skip
        if same is None:
            raise BadInput(f"letter {letter.id}: filed without a record of its bytes and not signed by a pinned key, "
                           "so it cannot be re-verified; its attachments are not handed out")  # fmt: skip

    def save(self, letter_id: str | Letter, directory: str | Path = ".", *, force: bool = False) -> list[Path]:
        """Does ``AgentMail.save``."""
        from ..stages import evidence

        return evidence.save(self.attachments(letter_id), directory, force=force)

    def apply(self, letter_id: str | Letter, cwd: str | Path = ".", *, check: bool = False,
              series: bool = False) -> Applied:  # fmt: skip
        """``AgentMail.apply``: ``git am`` in a scratch worktree first, no hook run (stages/evidence.py)."""
        from ..stages import evidence

        guarded = evidence.guarded_places(self.home, self.registry.root)
        return evidence.apply(self.attachments(letter_id), cwd, check_only=check, series=series, guarded=guarded)

    def authentication(self, letter: Letter) -> str:
        """Does ``AgentMail.authentication``."""
        from ..trust.provenance import describe

        raw = self.box.raw(letter.id)
        how = describe(raw, self.registry, letter.state, letter.sender, letter.type)
        if self.spool.read.unchanged(letter.id, raw) is False:
            how += "; BUT its file changed after it was filed: what it shows now was never verified"
        return how

    def search(self, query: str | Query = "", *, sync: bool = True, **filters: Any) -> list[Hit]:
        """Does ``AgentMail.search``."""
        from ..spool.search import Query, check_query

        wanted = query if isinstance(query, Query) else Query(text=query, **filters)
        if wanted.thread is not None:
            wanted = wanted.replace(thread=thread_id(wanted.thread))
        check_query(wanted)  # a bad filter is refused before the sync
        if sync:
            self.sync()
        return self.box.search_index.search(wanted)
