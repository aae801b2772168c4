"""`@value`: a frozen record class, like a frozen dataclass but without importing `dataclasses`.

`dataclasses` imports `inspect` (and with it `ast`, `dis`, `tokenize`): about 8 ms on every hook run,
a third of the whole budget. Records on the hook path use this instead; type checkers see a dataclass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:
    def dataclass_transform(**_: object):  # noqa: D103 - a no-op at run time
        return lambda f: f


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    title = cls.__name__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{title}() takes {len(names)} fields, {len(args)} given")
        given = dict(zip(names, args))
        for key, item in kwargs.items():
            if key not in names or key in given:
                raise TypeError(f"{title}() got an unexpected or repeated field {key!r}")
            given[key] = item
        for name in names:
            if name in given:
                object.__setattr__(self, name, given[name])
            elif name in defaults:
                object.__setattr__(self, name, defaults[name])
            else:
                raise TypeError(f"{title}() is missing the field {name!r}")

    def __setattr__(self: Any, key: str, item: Any) -> None:
        raise AttributeError(f"{title} is frozen: cannot set {key!r}")

    def __eq__(self: Any, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in names)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    def __repr__(self: Any) -> str:
        return f"{title}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    for func in (__init__, __setattr__, __eq__, __hash__, __repr__):
        setattr(cls, func.__name__, func)
    setattr(cls, "__match_args__", names)
    return cls


def replace(record: T, **changes: Any) -> T:
    """A copy of a `@value` record with some fields changed (`dataclasses.replace`, without the import)."""
    names: tuple[str, ...] = type(record).__match_args__  # type: ignore[attr-defined]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {unknown[0]!r}")
    return type(record)(**{name: changes.get(name, getattr(record, name)) for name in names})


def fields_of(record: object) -> dict[str, Any]:
    """The fields of a `@value` record in declaration order."""
    return {name: getattr(record, name) for name in type(record).__match_args__}  # type: ignore[attr-defined]
