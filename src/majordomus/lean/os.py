"""The stand-in for `os` in a hook (majordomus.lean says when): the builtin `posix` and what `os` adds on it.

Importing `os` costs a hook 1.0-1.8 ms (`os`, `_collections_abc`, `stat`, `posixpath`): a tenth of a prompt hook's
whole run. Every function the hook path takes from `os` is the builtin `posix` module's own; what `os` adds on top
and the hook path uses is here, with the same answers: `environ` (decoded as `os` decodes it, a snapshot: the hook
path never changes its environment), the `os.path` functions it calls, `makedirs`, `devnull` and the `SEEK_*`
numbers. Anything else, of `os` or of `os.path`, is the standard module's, imported on its first use.
"""

from __future__ import annotations

import posix as _posix  # builtin: loaded with the interpreter
import sys

TYPE_CHECKING = False  # this room's own modules cannot take it from `typing`: they make the stand-ins
if TYPE_CHECKING:
    from typing import Any

_SEP = "/"
_fspath = _posix.fspath


class LeanPath:
    """The `os.path` functions of the hook path, as posixpath answers them for `str` paths."""

    sep = _SEP

    @staticmethod
    def join(a: Any, *p: Any) -> str:
        path: str = _fspath(a)
        for b in map(_fspath, p):
            if b.startswith(_SEP):
                path = b
            elif not path or path.endswith(_SEP):
                path += b
            else:
                path += _SEP + b
        return path

    @staticmethod
    def split(p: Any) -> tuple[str, str]:
        p = _fspath(p)
        i = p.rfind(_SEP) + 1
        head, tail = p[:i], p[i:]
        if head and head != _SEP * len(head):
            head = head.rstrip(_SEP)
        return head, tail

    @staticmethod
    def dirname(p: Any) -> str:
        return LeanPath.split(p)[0]

    @staticmethod
    def basename(p: Any) -> str:
        text: str = _fspath(p)
        return text[text.rfind(_SEP) + 1:]

    @staticmethod
    def isabs(p: Any) -> bool:
        return str(_fspath(p)).startswith(_SEP)

    @staticmethod
    def normpath(path: Any) -> str:
        path = _fspath(path)
        if not path:
            return "."
        initial = 2 if path.startswith("//") and not path.startswith("///") else (1 if path.startswith(_SEP) else 0)
        parts: list[str] = []
        for comp in path.split(_SEP):
            if comp in ("", "."):
                continue
            if comp != ".." or (not initial and not parts) or (parts and parts[-1] == ".."):
                parts.append(comp)
            elif parts:
                parts.pop()
        joined = _SEP * initial + _SEP.join(parts)
        return joined or "."

    @staticmethod
    def abspath(path: Any) -> str:
        path = _fspath(path)
        if not path.startswith(_SEP):
            path = LeanPath.join(_posix.getcwd(), path)
        return LeanPath.normpath(path)

    @staticmethod
    def exists(path: Any) -> bool:
        try:
            _posix.stat(path)
        except (OSError, ValueError):
            return False
        return True

    @staticmethod
    def _mode(path: Any, follow: bool) -> int:
        try:
            return (_posix.stat(path) if follow else _posix.lstat(path)).st_mode & 0o170000
        except (OSError, ValueError):
            return 0

    @staticmethod
    def isdir(path: Any) -> bool:
        return LeanPath._mode(path, True) == 0o040000

    @staticmethod
    def isfile(path: Any) -> bool:
        return LeanPath._mode(path, True) == 0o100000

    @staticmethod
    def islink(path: Any) -> bool:
        return LeanPath._mode(path, False) == 0o120000

    @staticmethod
    def realpath(filename: Any) -> str:
        """Every link resolved, component by component, as posixpath walks them. A path with a missing component
        or a loop of links is left to posixpath itself (importing `os` then): its answer there changed between
        Pythons, and a hook never resolves such a path (the worktree it runs in exists)."""
        filename = _fspath(filename)
        path, rest, links = "", filename, 0
        if rest.startswith(_SEP):
            path, rest = _SEP, rest[1:]
        while rest:
            name, _, rest = rest.partition(_SEP)
            if name in ("", "."):
                continue
            if name == "..":
                if path:
                    path, last = LeanPath.split(path)
                    if last == "..":
                        path = LeanPath.join(path, "..", "..")
                else:
                    path = ".."
                continue
            step = LeanPath.join(path, name)
            try:
                mode = _posix.lstat(step).st_mode & 0o170000
            except (OSError, ValueError):
                return str(_standard_path().realpath(filename))
            if mode != 0o120000:
                path = step
                continue
            links += 1
            if links > 40:  # a loop, or a chain longer than the kernel would follow
                return str(_standard_path().realpath(filename))
            target = _posix.readlink(step)  # resolved where the link is: `path`, or the root when absolute
            if target.startswith(_SEP):
                path, target = _SEP, target[1:]
            rest = f"{target}/{rest}" if rest else target  # never join: a rest of "/x" (from "//") is no root
        return LeanPath.abspath(path)


def _standard(name: str) -> Any:
    """The standard module (stand_in sets majordomus.lean's, which first takes the stand-in out of the way)."""
    __import__(name)
    return sys.modules[name]


def _standard_path() -> Any:
    return _standard("os").path


def lean_makedirs(name: str, mode: int = 0o777, exist_ok: bool = False) -> None:
    head, tail = LeanPath.split(name)
    if not tail:
        head, tail = LeanPath.split(head)
    if head and tail and not LeanPath.exists(head):
        try:
            lean_makedirs(head, exist_ok=exist_ok)
        except FileExistsError:
            pass  # made by another process meanwhile
        if tail == ".":
            return
    try:
        _posix.mkdir(name, mode)
    except OSError:
        if not exist_ok or not LeanPath.isdir(name):
            raise


def _forwarding_path(attribute: str) -> object:
    if attribute.startswith("__") and attribute.endswith("__"):
        raise AttributeError(attribute)
    return getattr(_standard_path(), attribute)


def stand_in(forwarding: Any, standard: Any) -> Any:
    """The module a hook takes for `os`: `posix`, the names above, and the standard `os` for anything else
    (`forwarding` and `standard` are majordomus.lean's)."""
    global _standard
    _standard = standard
    made: Any = type(sys)("os")  # a module object, as `os` is; nothing here imports `types`
    made.__dict__.update({k: v for k, v in _posix.__dict__.items() if not k.startswith("__")})
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    made.environ = {k.decode(encoding, errors): v.decode(encoding, errors) for k, v in _posix.environ.items()}
    path: Any = type(sys)("posixpath")
    path.__dict__.update({k: getattr(LeanPath, k) for k in vars(LeanPath) if not k.startswith("__")})
    path.__lean__ = True
    path.__getattr__ = _forwarding_path
    made.path = path
    made.sep, made.curdir, made.pardir, made.devnull = _SEP, ".", "..", "/dev/null"
    made.SEEK_SET, made.SEEK_CUR, made.SEEK_END = 0, 1, 2
    made.makedirs = lean_makedirs
    made.__lean__ = True
    made.__getattr__ = forwarding
    return made
