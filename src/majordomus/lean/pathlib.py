"""The stand-in for `pathlib` in a hook (majordomus.lean says when): `Path` as the few operations the hook path
uses, on `os.path`.

Importing `pathlib` costs a hook 10-18 ms (it imports `fnmatch`, `re`, `urllib.parse`, `ipaddress`). In a hook,
`from pathlib import Path` gives `LitePath`, and everything a hook reaches through `Layout` is one; a method or
name not defined here is the standard `pathlib`'s, imported on its first use (a method runs on the standard
`Path` of the same string). Imports nothing but `os` (in a hook, its stand-in).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path as LitePath
    from typing import Any

    __all__ = ["LitePath"]
else:
    class LitePath:
        """An absolute or relative POSIX path as a string, with pathlib's spelling of what the hooks call."""

        __slots__ = ("_s",)

        def __init__(self, *parts: object) -> None:
            text = os.path.join(*(os.fspath(p) for p in parts)) if parts else "."
            # pathlib's normalisation: no trailing slash, no `.` parts, no doubled separator
            if text not in ("/", "//"):
                text = text.rstrip("/")
            segs = [s for s in text.split("/") if s not in ("", ".")]
            self._s = ("/" if text.startswith("/") else "") + "/".join(segs) or "."

        def __fspath__(self) -> str:
            return self._s

        def __str__(self) -> str:
            return self._s

        def __repr__(self) -> str:
            return f"LitePath({self._s!r})"

        def __eq__(self, other: object) -> bool:
            if isinstance(other, LitePath) or hasattr(type(other), "__fspath__"):  # os.PathLike's own test
                return self._s == os.fspath(other)
            return NotImplemented

        def __hash__(self) -> int:
            return hash(self._s)

        def __truediv__(self, other: object) -> LitePath:
            return LitePath(self._s, other)

        def __rtruediv__(self, other: object) -> LitePath:
            return LitePath(other, self._s)

        @property
        def name(self) -> str:
            return os.path.basename(self._s)

        @property
        def parent(self) -> LitePath:
            head = os.path.dirname(self._s)
            return LitePath(head) if head else LitePath(".")

        @property
        def suffix(self) -> str:
            name = self.name
            dot = name.rfind(".")
            return name[dot:] if 0 < dot < len(name) - 1 else ""

        def with_name(self, name: str) -> LitePath:
            return LitePath(os.path.dirname(self._s), name)

        def relative_to(self, other: object) -> LitePath:
            base = os.fspath(other).rstrip("/") or "/"
            if self._s == base:
                return LitePath(".")
            prefix = base if base.endswith("/") else base + "/"
            if not self._s.startswith(prefix):
                raise ValueError(f"{self._s!r} is not in the subpath of {base!r}")
            return LitePath(self._s[len(prefix):])

        def resolve(self) -> LitePath:
            return LitePath(os.path.realpath(self._s))

        def absolute(self) -> LitePath:
            return LitePath(os.path.abspath(self._s))

        def exists(self) -> bool:
            return os.path.exists(self._s)

        def is_file(self) -> bool:
            return os.path.isfile(self._s)

        def is_dir(self) -> bool:
            return os.path.isdir(self._s)

        def is_symlink(self) -> bool:
            return os.path.islink(self._s)

        def stat(self) -> os.stat_result:
            return os.stat(self._s)

        def lstat(self) -> os.stat_result:
            return os.lstat(self._s)

        def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
            if parents:
                os.makedirs(self._s, mode, exist_ok=exist_ok)
                return
            try:
                os.mkdir(self._s, mode)
            except FileExistsError:
                if not exist_ok or not os.path.isdir(self._s):
                    raise

        def unlink(self, missing_ok: bool = False) -> None:
            try:
                os.unlink(self._s)
            except FileNotFoundError:
                if not missing_ok:
                    raise

        def read_bytes(self) -> bytes:
            with open(self._s, "rb") as handle:
                return handle.read()

        def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
            with open(self._s, encoding=encoding, errors=errors) as handle:
                return handle.read()

        def write_text(self, data: str, encoding: str | None = None) -> int:
            with open(self._s, "w", encoding=encoding) as handle:
                return handle.write(data)

        @classmethod
        def cwd(cls) -> LitePath:
            return cls(os.getcwd())

        def __getattr__(self, name: str) -> object:
            """What a hook did not foresee (`glob`, `iterdir`, …): the standard Path's, of the same string."""
            return getattr(_standard("pathlib").Path(self._s), name)


def _standard(name: str) -> Any:
    """The standard module (stand_in sets majordomus.lean's, which first takes the stand-in out of the way)."""
    __import__(name)
    return sys.modules[name]


def stand_in(forwarding: Any, standard: Any) -> Any:
    """The module a hook takes for `pathlib` (`forwarding` and `standard` are majordomus.lean's)."""
    global _standard
    _standard = standard
    made: Any = type(sys)("pathlib")
    made.Path = made.PurePath = made.PosixPath = LitePath
    made.__lean__ = True
    made.__getattr__ = forwarding
    return made
