"""The letters one sync filed, as a list that holds their ids, not the letters.

A sync of 100,000 letters must stay small in memory, so ``SyncReport.accepted`` and
``quarantined`` keep each letter's spool id (26 bytes, packed) and read the letter from the spool
when a caller asks for it. To a caller it is a read-only list of ``Letter``: ``len``,
iteration, indexing and slicing, ``==`` with a list, truthiness. A letter read later shows
where it is *now* (a letter consumed since the sync reads as ``read``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from ..model import Letter
    from .views import SpoolReader


_WIDTH = 26  # a spool id: a ULID, 26 ASCII characters (model.new_ulid)


class Filed(Sequence["Letter"]):
    """Letters by id, read from ``spool`` on access. Letters given without a spool (or without
    an id) are kept as they are, so ``SyncReport(accepted=[letter])`` still works.

    Spool ids are packed side by side in one bytearray, 26 bytes each (a str is ~75 bytes and
    a list slot 8 more): a million letters' ids take a third of the memory. The first item
    that is no such id turns it into a plain list, in the same order."""

    __slots__ = ("_items", "_packed", "_spool")

    def __init__(self, letters: Iterable[Letter] = (), spool: SpoolReader | None = None) -> None:
        self._spool = spool
        self._packed = bytearray()
        self._items: list[str | Letter] | None = None  # None: every item so far is packed
        for letter in letters:
            self.append(letter)

    def append(self, letter: Letter) -> None:
        if self._spool is not None and letter.id:
            key = letter.id
            if self._items is None and len(key) == _WIDTH and key.isascii():
                self._packed += key.encode()
                return
            self._listed().append(key)
        else:
            self._listed().append(letter)

    def _listed(self) -> list[str | Letter]:
        if self._items is None:
            packed, self._packed = self._packed, bytearray()
            self._items = [packed[i : i + _WIDTH].decode() for i in range(0, len(packed), _WIDTH)]
        return self._items

    def _item(self, index: int) -> str | Letter:
        if self._items is not None:
            return self._items[index]
        at = range(len(self))[index] * _WIDTH  # IndexError as a list gives it
        return self._packed[at : at + _WIDTH].decode()

    @property
    def ids(self) -> list[str]:
        """The spool ids, in filing order, without reading a letter."""
        return self.ids_since(0)

    def ids_since(self, start: int) -> list[str]:
        """The ids of the letters filed from position ``start`` on (e.g. one sync batch's)."""
        return [item if isinstance(item, str) else item.id for item in map(self._item, range(len(self))[start:])]

    def _load(self, item: str | Letter) -> Letter:
        if isinstance(item, str):
            assert self._spool is not None
            return self._spool.letter(item)
        return item

    def __len__(self) -> int:
        return len(self._packed) // _WIDTH if self._items is None else len(self._items)

    @overload
    def __getitem__(self, index: int) -> Letter: ...

    @overload
    def __getitem__(self, index: slice) -> list[Letter]: ...

    def __getitem__(self, index: int | slice) -> Letter | list[Letter]:
        if isinstance(index, slice):
            return [self._load(self._item(i)) for i in range(len(self))[index]]
        return self._load(self._item(index))

    def __iter__(self) -> Iterator[Letter]:
        for index in range(len(self)):  # one letter alive at a time, whatever the length
            yield self._load(self._item(index))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Filed) and self._spool is other._spool:
            return self.ids == other.ids
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list is

    def __repr__(self) -> str:
        return f"Filed({self.ids!r})"
