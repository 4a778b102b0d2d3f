"""Value classes: each field declared once, as an annotation (with its default, if any).

``@dataclass`` would do this, but it compiles every generated method with ``exec`` when its
module is imported, and imports ``inspect``: ~0.75 ms a class and ~7 ms once, ~20 classes on
the path of every command (start-up). Here a value class only annotates its
fields; its metaclass reads the annotations once, when the class is defined, and makes them its
``__slots__`` (in order, after a parent's), its constructor's parameters and defaults, its
equality, hash, repr, ``replace``, pickling and copying. Nothing is compiled: the constructor,
like every other method, is this module's, shared by every value class, and reads the class's
field table. ``typing.dataclass_transform`` tells type checkers it is a dataclass.

    class Endpoint(Frozen):
        host: str
        port: int = 0
        extra: dict[str, str] = field(default_factory=dict, compare=False)

``Frozen`` values refuse assignment (``FrozenError``), as a frozen dataclass did; ``Value`` is
the mutable kind (unhashable, as a dataclass with ``eq``). A ``__post_init__`` runs after the
fields are set (a frozen one sets a field with ``set_field``). ``ClassVar`` annotations are not
fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NoReturn, Self, dataclass_transform

set_field = object.__setattr__  # how a frozen value's __post_init__ sets a field
_MISSING: Any = object()


class FrozenError(AttributeError):
    """Assigning to (or deleting) a field of a frozen value."""


class Field:
    """A field's declaration beyond its annotation: what :func:`field` returns."""

    __slots__ = ("default", "default_factory", "compare")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None, compare: bool) -> None:
        self.default, self.default_factory, self.compare = default, default_factory, compare


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, compare: bool = True) -> Any:
    """A field whose default is made per value (``default_factory``) or that equality and hash
    leave out (``compare=False``: facts learnt later, say), as ``dataclasses.field``."""
    return Field(default, default_factory, compare)


class _Fields(type):
    """Turns a value class's annotations into its fields when the class is defined."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> _Fields:
        annotations = namespace.get("__annotations__", {})
        own = tuple(attr for attr, kind in annotations.items() if "ClassVar" not in str(kind))
        if own and "__slots__" in namespace:
            raise TypeError(f"{name}: a value's fields are its annotations; no __slots__")
        defaults: dict[str, Any] = {}
        factories: dict[str, Callable[[], Any]] = {}
        uncompared: set[str] = set()
        for attr in own:
            declared = namespace.pop(attr, _MISSING)  # a class attribute of that name would shadow the slot
            if isinstance(declared, Field):
                if declared.default_factory is not None:
                    factories[attr] = declared.default_factory
                elif declared.default is not _MISSING:
                    defaults[attr] = declared.default
                if not declared.compare:
                    uncompared.add(attr)
            elif declared is not _MISSING:
                defaults[attr] = declared
        namespace.setdefault("__slots__", own)
        made = super().__new__(mcs, name, bases, namespace, **kwargs)
        if not own:
            return made
        cls: Any = made  # the field table's attributes are _Base's
        fields = (*getattr(cls, "_fields", ()), *own)  # a subclass adds its fields after its parent's
        defaults = {**getattr(cls, "_defaults", {}), **defaults}
        factories = {**getattr(cls, "_factories", {}), **factories}
        optional = False
        for attr in fields:
            if attr in defaults or attr in factories:
                optional = True
            elif optional:
                raise TypeError(f"{name}: field {attr!r} has no default but follows one that has")
        cls._fields = fields
        cls._field_set = frozenset(fields)
        cls._defaults = defaults
        cls._factories = factories
        cls._compare = (*getattr(cls, "_compare", ()), *(f for f in own if f not in uncompared))
        cls._setters = (*getattr(cls, "_setters", ()), *(cls.__dict__[attr].__set__ for attr in own))
        cls._post_init = getattr(cls, "__post_init__", None)
        return made


class _Base(metaclass=_Fields):
    """What every value has: a constructor over its fields, equality, repr, ``replace``, pickling."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _field_set: ClassVar[frozenset[str]] = frozenset()
    _compare: ClassVar[tuple[str, ...]] = ()  # the fields equality (and a frozen hash) look at
    _defaults: ClassVar[dict[str, Any]] = {}
    _factories: ClassVar[dict[str, Callable[[], Any]]] = {}
    _setters: ClassVar[tuple[Callable[[Any, Any], None], ...]] = ()
    _post_init: ClassVar[Callable[[Any], None] | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = self.__class__
        names = cls._fields
        values = cls._defaults.copy()
        if args:
            if len(args) > len(names):
                raise TypeError(f"{cls.__qualname__}() takes {len(names)} arguments but {len(args)} were given")
            if kwargs and not kwargs.keys().isdisjoint(names[: len(args)]):
                raise TypeError(
                    f"{cls.__qualname__}() got an argument twice: {sorted(kwargs.keys() & names[: len(args)])}"
                )
            values.update(zip(names, args, strict=False))
        if kwargs:
            values.update(kwargs)
        for name, factory in cls._factories.items():
            if name not in values:
                values[name] = factory()
        if len(values) > len(names):
            raise TypeError(f"{cls.__qualname__}() got unknown arguments: {sorted(values.keys() - set(names))}")
        try:  # each slot's own setter: a third cheaper than object.__setattr__ (looked up each time)
            for setter, name in zip(cls._setters, names, strict=True):
                setter(self, values[name])
        except KeyError as missing:
            raise TypeError(f"{cls.__qualname__}() missing argument {missing}") from None
        if cls._post_init is not None:
            cls._post_init(self)

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
        """A copy with ``changes`` (what ``dataclasses.replace`` did); an unknown name is a TypeError.
        Every field has a value here, so no default or factory applies and nothing is missing:
        each slot is set from the change or the original, then ``__post_init__`` runs, as the
        constructor would do it, without building its keyword table."""
        cls = self.__class__
        if not changes.keys() <= cls._field_set:  # the constructor says which names are unknown
            values = {name: getattr(self, name) for name in cls._fields}
            values.update(changes)
            return cls(**values)
        copied = object.__new__(cls)
        for setter, name in zip(cls._setters, cls._fields, strict=True):
            setter(copied, changes[name] if name in changes else getattr(self, name))
        if cls._post_init is not None:
            cls._post_init(copied)
        return copied


@dataclass_transform(eq_default=True, field_specifiers=(field,))
class Value(_Base):
    """A mutable value: unhashable, as a dataclass with ``eq``."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]


@dataclass_transform(eq_default=True, frozen_default=True, field_specifiers=(field,))
class Frozen(_Base):
    """An immutable value: hashable over its compared fields."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values(self._compare))

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise FrozenError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise FrozenError(f"cannot delete field {name!r}")
