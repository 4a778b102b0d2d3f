"""Value classes written by hand: what ``@dataclass`` gave agentmail's values, minus its cost.

``@dataclass`` compiles every generated method with ``exec`` when its module is imported:
~0.3-0.9 ms a class, ~20 of them on the path of every command (issue 11, start-up). A value
class here lists its fields in ``__slots__`` (constructor order) and writes its own
``__init__``; this base adds what the dataclass generated from the fields, compiled once with
this module: equality, hash, repr, ``replace``, pickling and copying. Nothing is generated.

``Frozen`` values refuse assignment after ``__init__`` (which sets fields with ``set_field``), as a
frozen dataclass did; ``Value`` is the mutable kind (unhashable, as a dataclass with ``eq``).
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn, Self

set_field = object.__setattr__  # how a frozen value's __init__ sets its fields


class FrozenError(AttributeError):
    """Assigning to (or deleting) a field of a frozen value."""


class Value:
    """Fields are ``__slots__``; ``_compare`` names those equality (and a frozen hash) look at."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _compare: ClassVar[tuple[str, ...]] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a dataclass with eq was

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(cls.__dict__.get("__slots__", ()))  # a subclass adds its fields after its parent's
        # A field annotated without its slot (say, one added by a merge) would read as a class
        # attribute and be refused by __init__: fail at import, not at the first letter.
        stray = [name for name, kind in cls.__dict__.get("__annotations__", {}).items()
                 if name not in own and "ClassVar" not in str(kind)]  # fmt: skip
        if stray:
            raise TypeError(f"{cls.__qualname__}: {', '.join(stray)} annotated but not in __slots__ and __init__")
        if "_compare" not in cls.__dict__:
            cls._compare = (*cls._compare, *own)
        cls._fields = (*cls._fields, *own)

    def _values(self, names: tuple[str, ...]) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in names])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values(self._compare) == other._values(self._compare)
        return NotImplemented

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{self.__class__.__qualname__}({fields})"

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        """Pickle and copy through ``__init__`` (a frozen value takes no attribute assignment)."""
        return self.__class__, self._values(self._fields)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (what ``dataclasses.replace`` did); an unknown name is a TypeError."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return self.__class__(**values)


class Frozen(Value):
    """An immutable value: hashable over its compared fields."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values(self._compare))

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise FrozenError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise FrozenError(f"cannot delete field {name!r}")
