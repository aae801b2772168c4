"""What `capture install` changed in a person's files, kept so that `capture uninstall` takes out exactly that.

`.ai/local/state/installed/<provider>.json` (0600, never shared): for each file install wrote, its bytes before
(absent when install created it), its mode, the directories install made for it, whether those bytes still
describe the file (`before_known`: false once a person edited it between two installs), and the SHA-256 of what
install wrote last. A file that still holds exactly that gets its bytes back on uninstall; any other file loses
only majordomus's own entries. No record is kept before `majordomus init` (there is no `.ai/local/` to keep it in).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from majordomus.identity import session_key
from majordomus.layout import Layout, ensure_dir, write_atomic

SCHEMA = "majordomus.install/v1"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FileRecord:
    written: str  # SHA-256 of the bytes install wrote last
    before: str | None = None  # base64 of the bytes before the first install; None: install created the file
    before_known: bool = True  # false once the file changed between two installs: `before` no longer tells
    mode: int | None = None  # the file's mode before install
    made_dirs: list[str] = field(default_factory=list)  # directories install created for it, outermost first

    def before_bytes(self) -> bytes | None:
        return None if self.before is None else base64.b64decode(self.before)


@dataclass
class InstallRecord:
    provider: str
    files: dict[str, FileRecord] = field(default_factory=dict)  # by path relative to the worktree

    def note(self, rel: str, before: bytes | None, mode: int | None, made_dirs: list[str], written: bytes) -> None:
        """Install is about to replace `before` (None: no such file) with `written`."""
        known = self.files.get(rel)
        if known is None:
            self.files[rel] = FileRecord(written=digest(written),
                                         before=None if before is None else base64.b64encode(before).decode(),
                                         mode=mode, made_dirs=made_dirs)
            return
        if before is None or digest(before) != known.written:
            known.before_known = False  # a person (or another tool) changed it since: its old bytes are not theirs
        known.written = digest(written)
        known.made_dirs = [*known.made_dirs, *(d for d in made_dirs if d not in known.made_dirs)]


def path_of(layout: Layout, provider: str) -> Path:
    return layout.state / "installed" / f"{session_key(provider)}.json"


def load(layout: Layout, provider: str) -> InstallRecord | None:
    try:
        raw = json.loads(path_of(layout, provider).read_text(encoding="utf-8"))
        files = {rel: FileRecord(**data) for rel, data in raw["files"].items()}
        return InstallRecord(provider=str(raw["provider"]), files=files)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none, or unreadable: uninstall then finds majordomus's entries by their shape


def save(layout: Layout, record: InstallRecord) -> None:
    path = path_of(layout, record.provider)
    ensure_dir(path.parent)
    body = {"schema": SCHEMA, "provider": record.provider,
            "files": {rel: asdict(f) for rel, f in sorted(record.files.items())}}
    write_atomic(path, (json.dumps(body, indent=2) + "\n").encode())


def forget(layout: Layout, provider: str) -> None:
    path = path_of(layout, provider)
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()  # only when no other provider's record is left
    except OSError:
        pass
