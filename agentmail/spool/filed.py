"""The letters one sync filed, as a list that holds their ids, not the letters (issue 11).

A sync of 100,000 letters must stay small in memory, so ``SyncReport.accepted`` and
``quarantined`` keep each letter's spool id (~70 bytes) and read the letter from the spool
when a caller asks for it. To a caller it is a read-only list of ``Letter``: ``len``,
iteration, indexing and slicing, ``==`` with a list, truthiness. A letter read later shows
where it is *now* (a letter consumed since the sync reads as ``read``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from ..model import Letter
    from .store import Spool


class Filed(Sequence["Letter"]):
    """Letters by id, read from ``spool`` on access. Letters given without a spool (or without
    an id) are kept as they are, so ``SyncReport(accepted=[letter])`` still works."""

    __slots__ = ("_items", "_spool")

    def __init__(self, letters: Iterable[Letter] = (), spool: Spool | None = None) -> None:
        self._spool = spool
        self._items: list[str | Letter] = []
        for letter in letters:
            self.append(letter)

    def append(self, letter: Letter) -> None:
        self._items.append(letter.id if self._spool is not None and letter.id else letter)

    @property
    def ids(self) -> list[str]:
        """The spool ids, in filing order, without reading a letter."""
        return self.ids_since(0)

    def ids_since(self, start: int) -> list[str]:
        """The ids of the letters filed from position ``start`` on (e.g. one sync batch's)."""
        return [item if isinstance(item, str) else item.id for item in self._items[start:]]

    def _load(self, item: str | Letter) -> Letter:
        if isinstance(item, str):
            assert self._spool is not None
            return self._spool.letter(item)
        return item

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Letter: ...

    @overload
    def __getitem__(self, index: slice) -> list[Letter]: ...

    def __getitem__(self, index: int | slice) -> Letter | list[Letter]:
        if isinstance(index, slice):
            return [self._load(item) for item in self._items[index]]
        return self._load(self._items[index])

    def __iter__(self) -> Iterator[Letter]:
        for item in self._items:  # one letter alive at a time, whatever the length
            yield self._load(item)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Filed) and self._spool is other._spool:
            return self.ids == other.ids
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list is

    def __repr__(self) -> str:
        return f"Filed({self.ids!r})"
