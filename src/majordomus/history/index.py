"""The search index: SQLite FTS5 over prompt texts and episode titles, branches and changed files.

Derived and private: `.ai/local/state/search.sqlite3`, 0600, never tracked. Deleting it loses nothing; any
command that reads it rebuilds it, and each one first catches up with the archive and the records
incrementally: a file whose inode is the one indexed is not read again (every writer replaces a record by a
rename, so a rewritten record has a new inode), and a directory whose mtime is unchanged, and was already
quiet when it was last listed, is not even listed. Records are read through `archive.record` and
`episodes.store`, the product's one reader of each. A pruned record is indexed by its tombstone sentence: its
body is gone, so it cannot be found by it. The hook path never imports this module.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus.archive import record as rec
from majordomus.archive.render import tombstone
from majordomus.archive.scan import has_archive
from majordomus.episodes import store
from majordomus.errors import MissingError, UsageError
from majordomus.layout import PRIVATE_FILE, Layout, refuse_symlink
from majordomus.simple_yaml import front_matter

if TYPE_CHECKING:
    from typing import Any

SCHEMA = "majordomus-search/1"
QUIET_NS = 2_000_000_000  # a directory last changed this long before it was listed cannot hide a later change
COLUMNS = ("text", "title", "branch", "files")
OPEN, CLOSE = "\x02", "\x03"  # snippet markers, turned into a highlight by whoever shows it
_DDL = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
    # one row per indexed file: a prompt record ('p') or a closed session record ('s')
    "CREATE TABLE docs(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, ino INTEGER, size INTEGER,"
    " mtime_ns INTEGER, episode TEXT, at TEXT, provider TEXT, branch TEXT, link TEXT, pruned INTEGER NOT NULL"
    " DEFAULT 0, problem TEXT, UNIQUE(kind, name))",
    "CREATE INDEX docs_episode ON docs(kind, episode)",
    f"CREATE VIRTUAL TABLE doc_fts USING fts5({', '.join(COLUMNS)}, tokenize='unicode61 remove_diacritics 2')",
)


def index_path(layout: Layout) -> Path:
    return layout.state / "search.sqlite3"


class _Foreign(Exception):
    """The file under the index's name is not an index this version wrote; the sentence says what it is."""


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or \
        "malformed" in str(exc) or "not a database" in str(exc)


def _why(exc: sqlite3.DatabaseError) -> str:
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" or "not a database" in str(exc):
        return "is not a SQLite database"
    return f"is corrupt ({exc})"


def check_query(query: str) -> None:
    """A query FTS5 cannot parse is a usage error that says what to quote, before the index is touched."""
    if not query.strip():
        raise UsageError("search needs a query", "give one or more words, e.g. majordomus search 'rotate key'")
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute(f"CREATE VIRTUAL TABLE q USING fts5({', '.join(COLUMNS)})")
        scratch.execute("SELECT rowid FROM q WHERE q MATCH ?", (query,)).fetchall()
    except sqlite3.OperationalError as exc:
        quoted = '"' + query.replace('"', '""') + '"'
        raise UsageError(
            f"the search index cannot parse the query {query!r} ({exc}); a word with punctuation (such as - : = . "
            f"* ^, parentheses or a quote) must be inside double quotes",
            f"search for the exact text with majordomus search '{quoted}'") from exc
    finally:
        scratch.close()


@dataclass(frozen=True)
class CatchUp:
    read: int  # files (re)read this time
    removed: int


class Index:
    """An open index that has caught up with the archive and the records; `note` says whether it was rebuilt."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.path = index_path(layout)
        self.note: str | None = None
        self.caught: CatchUp | None = None
        self.conn = self._open()

    # -- opening, and rebuilding what is not ours ------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        refuse_symlink(self.layout.state)
        refuse_symlink(self.path)
        existed = self.path.exists()
        try:
            conn = self._connect()
            if existed:
                self._check(conn)
            else:
                self._create(conn)
            return conn
        except _Foreign as why:
            return self._rebuild(str(why))
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                raise
            return self._rebuild(_why(exc))

    def _connect(self) -> sqlite3.Connection:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_FILE:
                os.fchmod(fd, PRIVATE_FILE)
        finally:
            os.close(fd)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA synchronous=OFF")  # derived: a crash that tears it is answered by a rebuild
        return conn

    def _check(self, conn: sqlite3.Connection) -> None:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        if not tables:
            if self.path.stat().st_size == 0:  # a file created but never filled (a killed first build)
                self._create(conn)
                return
            raise _Foreign("holds no tables")
        if "meta" not in tables or "docs" not in tables or "doc_fts" not in tables:
            raise _Foreign("was written by another tool (it lacks this index's tables)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != SCHEMA:
            raise _Foreign(f"has schema {row[0] if row else 'none'!r}, not {SCHEMA}")
        conn.execute("SELECT id FROM docs LIMIT 1").fetchone()  # a torn first page fails here

    def _create(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                for ddl in _DDL:
                    conn.execute(ddl)
                conn.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA,))
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            conn.execute("ROLLBACK") if conn.in_transaction else None
            if "no such module: fts5" in str(exc):
                raise MissingError("this Python's sqlite3 has no FTS5, which search needs",
                                   "use a Python whose SQLite was built with FTS5 (python.org and Debian's are)"
                                   ) from exc
            raise

    def _rebuild(self, why: str) -> sqlite3.Connection:
        rel = self.path.relative_to(self.layout.root)
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        conn = self._connect()
        self._create(conn)
        self.note = f"the search index {rel} {why}; rebuilt it from the archive and the records (it is derived)"
        return conn

    def close(self) -> None:
        self.conn.close()

    # -- catching up ----------------------------------------------------------------------------------------
    def catch_up(self) -> CatchUp:
        """Read what changed since the last command, in one write transaction (a second command waits)."""
        try:
            self.caught = self._catch_up()
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc) or self.note is not None:
                raise
            self.conn.close()
            self.conn = self._rebuild(_why(exc))
            self.caught = self._catch_up()
        return self.caught

    def _catch_up(self) -> CatchUp:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            read = removed = 0
            archive = has_archive(self.layout)  # a symlinked archive is refused here, never followed
            for kind, directory, names in (("p", self.layout.prompts_dir, self._prompt_names if archive else None),
                                           ("s", self.layout.sessions_dir, self._session_names)):
                r, d = self._sync(kind, directory, names)
                read += r
                removed += d
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return CatchUp(read=read, removed=removed)

    def _prompt_names(self, directory: Path) -> list[tuple[str, int]]:
        with os.scandir(directory) as entries:  # the inode comes with the entry: no stat per file
            # rec.is_record_name, inlined: 300k directory entries at 100k records
            return [(e.name, e.inode()) for e in entries if e.name.endswith(".json") and e.name[0] != "."]

    def _session_names(self, directory: Path) -> list[tuple[str, int]]:
        wanted = set(store.listed(directory, ".md")) - {"README.md"}
        with os.scandir(directory) as entries:
            return [(e.name, e.inode()) for e in entries if e.name in wanted]

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, item: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, item))

    def _sync(self, kind: str, directory: Path, names_of: Any) -> tuple[int, int]:
        try:
            before = os.stat(directory) if names_of is not None else None
        except FileNotFoundError:
            before = None
        signature = "absent" if before is None else f"{before.st_dev}:{before.st_ino}:{before.st_mtime_ns}"
        listed_at = time.time_ns()
        stored, quiet = self._meta(f"dir.{kind}"), self._meta(f"quiet.{kind}")
        if stored == signature and quiet == "1":
            return 0, 0
        names = [] if before is None else names_of(directory)
        known: dict[str, int] = dict(self.conn.execute("SELECT name, ino FROM docs WHERE kind = ?", (kind,)))
        read = 0
        for name, inode in names:
            seen = known.pop(name, None)
            if seen == inode:
                continue  # every writer replaces a record by a rename, so a rewritten record has a new inode
            if seen is not None:
                self._drop_name(kind, name)
            path = directory / name
            try:
                st = os.lstat(path)  # before the bytes: a change after this is seen by the next command
            except FileNotFoundError:
                continue
            self._add(kind, name, path, st)
            read += 1
        for name in known:  # a file gone (records are never deleted, but a person may)
            self._drop_name(kind, name)
        self._set_meta(f"dir.{kind}", signature)
        settled = before is None or listed_at - before.st_mtime_ns > QUIET_NS
        self._set_meta(f"quiet.{kind}", "1" if settled else "0")
        return read, len(known)

    def _drop_name(self, kind: str, name: str) -> None:
        row = self.conn.execute("SELECT id FROM docs WHERE kind = ? AND name = ?", (kind, name)).fetchone()
        if row is not None:
            self.conn.execute("DELETE FROM docs WHERE id = ?", (row[0],))
            self.conn.execute("DELETE FROM doc_fts WHERE rowid = ?", (row[0],))

    def _add(self, kind: str, name: str, path: Path, st: os.stat_result) -> None:
        row: dict[str, Any] = {"kind": kind, "name": name, "ino": st.st_ino, "size": st.st_size,
                               "mtime_ns": st.st_mtime_ns, "episode": None, "at": None, "provider": None,
                               "branch": None, "link": None, "pruned": 0, "problem": None}
        text = {"text": "", "title": "", "branch": "", "files": ""}
        if stat.S_ISLNK(st.st_mode):
            row["problem"] = "is a symbolic link"
        elif kind == "p":
            try:
                r = rec.load(path)
            except rec.RecordError as exc:
                row["problem"] = str(exc)
            else:
                row.update(episode=r.episode if r.is_linked else None, at=r.started_at, provider=r.provider,
                           branch=r.branch, link=r.episode_link, pruned=int(r.pruned_at is not None))
                text["text"] = r.text if r.text is not None else (tombstone(r) or "")
        else:
            try:
                meta = front_matter(path.read_text(encoding="utf-8"))
                s = store.SessionRecord.from_front_matter(meta)
            except (OSError, UnicodeDecodeError):
                s = None
            if s is None:
                row["problem"] = "is not a session record"
            else:
                row.update(episode=s.session_id, at=s.started_at, provider=s.provider, branch=s.branch,
                           link=s.outcome)
                text.update(title=s.title or "", branch=s.branch or "", files="\n".join(s.changed_files))
        cur = self.conn.execute(
            "INSERT INTO docs(kind, name, ino, size, mtime_ns, episode, at, provider, branch, link, pruned, problem)"
            " VALUES (:kind, :name, :ino, :size, :mtime_ns, :episode, :at, :provider, :branch, :link, :pruned,"
            " :problem)", row)
        if row["problem"] is None:
            self.conn.execute("INSERT INTO doc_fts(rowid, text, title, branch, files) VALUES (?, ?, ?, ?, ?)",
                              (cur.lastrowid, text["text"], text["title"], text["branch"], text["files"]))

    # -- reading --------------------------------------------------------------------------------------------
    def prompt_counts(self) -> dict[str, int]:
        """Linked prompt records per episode."""
        return {str(e): int(n) for e, n in self.conn.execute(
            "SELECT episode, count(*) FROM docs WHERE kind = 'p' AND episode IS NOT NULL GROUP BY episode")}

    def prompt_names(self, episode: str) -> list[str]:
        """The record names of an episode's linked prompts, in the order they were captured: by their second,
        and within one second by the file's mtime (a record is written once at its capture; only a rewrite by
        reconcile or prune moves it, and then only among the prompts of its own second)."""
        return [str(n) for (n,) in self.conn.execute(
            "SELECT name FROM docs WHERE kind = 'p' AND episode = ? ORDER BY at, mtime_ns, name", (episode,))]

    def totals(self) -> tuple[int, int]:
        """(prompt records, episode records) indexed; a scan of the table, so only asked when it is said."""
        counts = dict(self.conn.execute("SELECT kind, count(*) FROM docs GROUP BY kind").fetchall())
        return int(counts.get("p", 0)), int(counts.get("s", 0))

    def search(self, query: str) -> Iterator[Hit]:
        """Every match, best first (FTS5's bm25), each with a snippet whose match is between OPEN and CLOSE."""
        check_query(query)
        rows = self.conn.execute(
            "SELECT d.kind, d.name, d.episode, d.at, d.provider, d.branch, d.link, d.pruned, bm25(doc_fts),"
            f" snippet(doc_fts, -1, '{OPEN}', '{CLOSE}', '…', 16)"
            " FROM doc_fts JOIN docs d ON d.id = doc_fts.rowid WHERE doc_fts MATCH ? ORDER BY bm25(doc_fts), d.at",
            (query,))
        for kind, name, episode, at, provider, branch, link, pruned, rank, snippet in rows:
            yield Hit(kind="prompt" if kind == "p" else "episode", name=str(name), episode=episode, at=at,
                      provider=provider, branch=branch, link=link, pruned=bool(pruned), rank=float(rank),
                      snippet=str(snippet))


@dataclass(frozen=True)
class Hit:
    kind: str  # prompt | episode
    name: str  # the record's file name
    episode: str | None
    at: str | None
    provider: str | None
    branch: str | None
    link: str | None  # a prompt's episode_link; an episode's outcome
    pruned: bool
    rank: float
    snippet: str


def opened(layout: Layout) -> Index:
    """The index, caught up; the caller prints `note` when it says the file was rebuilt."""
    index = Index(layout)
    try:
        index.catch_up()
    except BaseException:
        index.close()
        raise
    return index
