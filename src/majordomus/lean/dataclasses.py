"""The stand-in for `dataclasses` in a hook (majordomus.lean says when): `@dataclass(frozen=True)` records, their
`fields` and `replace`, without importing `dataclasses`.

`dataclasses` imports `inspect` (and with it `ast`, `dis`, `tokenize`): 15-26 ms of a hook run, more than the
run's own work. The hook path's records are frozen dataclasses; here the decorator gives them what the standard
one does for theirs (`__init__` with the defaults, `__eq__`, `__hash__`, `__repr__`, `__match_args__`, frozen
attributes). Anything else asked of it (a dataclass that is not frozen, `asdict`, `field`) is the standard
module's, imported then.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # the room's own (majordomus.lean)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


class FrozenInstanceError(AttributeError):
    """What assigning to a frozen record raises, as the standard module's does."""


def _frozen(cls: Any) -> Any:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    title = cls.__name__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{title}.__init__() takes {len(names)} arguments, {len(args)} given")
        given = dict(zip(names, args))
        for key, item in kwargs.items():
            if key not in names or key in given:
                raise TypeError(f"{title}.__init__() got an unexpected or repeated argument {key!r}")
            given[key] = item
        for name in names:
            if name in given:
                object.__setattr__(self, name, given[name])
            elif name in defaults:
                object.__setattr__(self, name, defaults[name])
            else:
                raise TypeError(f"{title}.__init__() missing the argument {name!r}")

    def __setattr__(self: Any, key: str, item: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {key!r}")

    def __delattr__(self: Any, key: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {key!r}")

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    def __repr__(self: Any) -> str:
        return f"{title}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    for func in (__init__, __setattr__, __delattr__, __eq__, __hash__, __repr__):
        func.__qualname__ = f"{cls.__qualname__}.{func.__name__}"
        setattr(cls, func.__name__, func)
    cls.__match_args__ = names  # type: ignore[misc]
    cls.__lean_fields__ = names
    return cls


def dataclass(cls: Any = None, /, **options: Any) -> Any:
    """`@dataclass(frozen=True)`; any other form is the standard decorator's."""
    if options != {"frozen": True}:
        made = _standard("dataclasses").dataclass
        return made(cls, **options) if cls is not None else made(**options)
    return _frozen if cls is None else _frozen(cls)


class _Field:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def fields(record: Any) -> tuple[_Field, ...]:
    return tuple(_Field(n) for n in type(record).__lean_fields__)


def replace(record: T, /, **changes: Any) -> T:
    names: tuple[str, ...] = type(record).__lean_fields__  # type: ignore[attr-defined]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise TypeError(f"{type(record).__name__}.__init__() got an unexpected keyword argument {unknown[0]!r}")
    return type(record)(**{name: changes.get(name, getattr(record, name)) for name in names})


def _standard(name: str) -> Any:
    """The standard module (stand_in sets majordomus.lean's, which first takes the stand-in out of the way)."""
    __import__(name)
    return sys.modules[name]


def stand_in(forwarding: Any, standard: Any) -> Any:
    """The module a hook takes for `dataclasses` (`forwarding` and `standard` are majordomus.lean's)."""
    global _standard
    _standard = standard
    made: Any = type(sys)("dataclasses")
    made.dataclass, made.fields, made.replace = dataclass, fields, replace
    made.FrozenInstanceError = FrozenInstanceError
    made.__lean__ = True
    made.__getattr__ = forwarding
    return made
