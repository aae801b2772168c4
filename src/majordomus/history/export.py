"""`majordomus export`: the episodes as Markdown (for pasting), JSON (for tools) or one self-contained HTML page.

Each episode is the `show --json` shape (`detail.whole`), built and written one at a time, so an archive of
100k prompts is streamed, never held. Private by default: prompt texts only when asked (`with_prompts`).
The HTML page loads nothing: its CSS and script are inline, and its Content-Security-Policy forbids every
fetch; everything put into it goes through `html.escape`.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from majordomus.errors import InternalError, RefusedError
from majordomus.history import detail, index
from majordomus.history.text import duration, usage_rows, when
from majordomus.history.timeline import Episode
from majordomus.identity import now_utc, rfc3339
from majordomus.layout import PRIVATE_FILE, Layout, temp_name
from majordomus.usage.episode import short_tokens

if TYPE_CHECKING:
    from typing import Any

FORMATS = ("md", "json", "html")
SCHEMA = "majordomus.export/v1"


def wholes(layout: Layout, idx: index.Index, episodes: Iterable[Episode],
           with_prompts: bool) -> Iterator[dict[str, Any]]:
    """Each episode whole, one at a time; without `with_prompts` every prompt's text is withheld, and so is the
    slug of its record's name (the opening of the text)."""
    from majordomus.history.views import withhold

    for e in episodes:
        data = detail.whole(layout, e, idx.prompt_names(e.id))
        yield data if with_prompts else withhold(data)


# -- the output file ------------------------------------------------------------------------------------------
class Output:
    """stdout, or `-o FILE` written to a 0600 temp file beside it and renamed over it at the end (whatever the
    umask; never through a symbolic link at the final component; a failure leaves the old file as it was)."""

    def __init__(self, path: str | None, stdout: IO[str]) -> None:
        self.target = Path(path) if path else None
        self.tmp: Path | None = None
        self.stream: IO[str] = stdout
        if self.target is None:
            return
        if self.target.is_symlink():
            raise RefusedError(f"-o {self.target} is a symbolic link; export never writes through one",
                               "give the path of a real file (or remove the link)")
        if self.target.is_dir():
            raise RefusedError(f"-o {self.target} is a directory", "give a file name, e.g. -o episodes.html")
        self.tmp = temp_name(self.target)
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
        except OSError as exc:
            raise InternalError(f"cannot write -o {self.target} ({exc.strerror})",
                                "choose a file in a directory you can write to") from None
        os.fchmod(fd, PRIVATE_FILE)
        self.stream = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def write(self, text: str) -> None:
        self.stream.write(text)

    def commit(self) -> None:
        if self.target is None or self.tmp is None:
            self.stream.flush()
            return
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        if self.target.is_symlink():  # placed there while we wrote
            self.abort()
            raise RefusedError(f"-o {self.target} became a symbolic link; export never writes through one",
                               "give the path of a real file")
        os.replace(self.tmp, self.target)
        self.tmp = None

    def abort(self) -> None:
        if self.tmp is not None:
            try:
                self.stream.close()
            except OSError:
                pass
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
            self.tmp = None


# -- JSON -----------------------------------------------------------------------------------------------------
def write_json(out: Output, items: Iterable[dict[str, Any]], meta: dict[str, Any]) -> int:
    head = json.dumps({"schema": SCHEMA, **meta}, indent=2, ensure_ascii=False)
    out.write(head[:-2] + ',\n  "episodes": [')
    n = 0
    for item in items:
        body = json.dumps(item, indent=2, ensure_ascii=False).replace("\n", "\n    ")
        out.write(("," if n else "") + "\n    " + body)
        n += 1
    out.write(("\n  " if n else "") + f'],\n  "count": {n}\n}}\n')
    return n


# -- Markdown -------------------------------------------------------------------------------------------------
def _fence(text: str) -> str:
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _md_inline(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in " ".join(text.split()))


def write_md(out: Output, items: Iterable[dict[str, Any]], meta: dict[str, Any]) -> int:
    out.write(f"# Episodes of {_md_inline(meta['repository'])}\n\nExported {meta['generated_at']} by majordomus"
              f"{'' if meta['with_prompts'] else '; prompt texts withheld (export --with-prompts includes them)'}."
              "\n")
    n = 0
    for item in items:
        n += 1
        e = item["episode"]
        out.write(f"\n## {e['id']} — {e['state']}\n\n")
        rows = [("provider", e["provider"] or "-"), ("title", e["title"] or "-"),
                ("started", e["started_at"] or "-"), ("closed", e["closed_at"] or "-"),
                ("duration", duration(e["duration_seconds"])), ("branch", e["branch"] or "-"),
                ("heads", f"{(e['start_head'] or '-')[:7]} → {(e['head'] or '-')[:7]}")]
        rows += usage_rows(item["usage"])
        if item["resume"]:
            rows.append(("resume", item["resume"]["command"] or item["resume"]["sentence"]))
        out.write("".join(f"- **{k}**: {_md_inline(str(v))}\n" for k, v in rows))
        prompts = item["prompts"]
        out.write(f"\n### Prompts ({len(prompts)})\n\n" if prompts else "\n### Prompts: none linked\n")
        for k, p in enumerate(prompts, 1):
            if "problem" in p and "text" not in p:
                out.write(f"{k}. `{p['record']}`: this record cannot be read ({_md_inline(p['problem'])})\n")
                continue
            marks = f", redacted: {p['redacted']}" if p.get("redacted") else ""
            out.write(f"{k}. {p['started_at']} ({p['episode_link']}{marks})\n")
            body = p["text"] if p["text"] is not None else (None if p.get("text_withheld") else
                                                            p.get("tombstone") or "(no text)")
            if body is not None:
                fence = _fence(body)
                out.write(f"\n   {fence}text\n" + "".join(f"   {line}\n" for line in body.splitlines())
                          + f"   {fence}\n\n")
        commits = item["commits"]
        out.write(f"\n### Commits ({len(commits['items'])}, {commits['source']})\n\n")
        out.write("".join(f"- `{c['commit']}` {_md_inline(c['subject'])}\n" for c in commits["items"]) or "none\n")
        stat_ = item["diff_stat"]
        out.write(f"\n### Diff stat ({stat_['range']})\n\n")
        if stat_["text"]:
            fence = _fence(stat_["text"])
            out.write(f"{fence}\n{stat_['text']}\n{fence}\n")
        else:
            out.write("no change between the heads\n" if stat_["text"] == "" else "-\n")
    if n == 0:
        out.write("\nNo episodes" + (" match these filters.\n" if meta["filtered"] else " are recorded here yet.\n"))
    return n


# -- HTML -----------------------------------------------------------------------------------------------------
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f23;background:#f6f8fa}
header{position:sticky;top:0;background:#24292f;color:#fff;padding:10px 18px;display:flex;gap:16px;align-items:center}
header h1{font-size:16px;margin:0;font-weight:600}header .meta{opacity:.75;font-size:12px}
#q{margin-left:auto;padding:5px 8px;border-radius:6px;border:0;width:320px}
main{padding:14px 18px;max-width:1100px}
.episode{background:#fff;border:1px solid #d0d7de;border-left:6px solid #8c959f;border-radius:6px;margin:0 0 8px}
.episode.closed{border-left-color:#1a7f37}.episode.interrupted{border-left-color:#cf222e}
.episode.open{border-left-color:#0969da}.episode.detached{border-left-color:#bf8700}
summary{cursor:pointer;padding:8px 12px;display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}
.state{font-weight:600;text-transform:uppercase;font-size:11px;padding:1px 6px;border-radius:10px;background:#eaeef2}
.closed .state{background:#dafbe1;color:#1a7f37}.interrupted .state{background:#ffebe9;color:#cf222e}
.open .state{background:#ddf4ff;color:#0969da}.detached .state{background:#fff8c5;color:#9a6700}
.id{font-family:ui-monospace,monospace;font-size:12px}.dim{color:#57606a;font-size:12px}
.body{padding:0 14px 12px}.body h3{font-size:13px;margin:12px 0 4px}
pre{background:#f6f8fa;border:1px solid #eaeef2;border-radius:4px;padding:6px 8px;white-space:pre-wrap;
word-break:break-word;margin:4px 0}
ol.prompts li{margin:4px 0}.hidden{display:none}#none{padding:20px;color:#57606a}
"""
_JS = """
(function(){
  var q=document.getElementById('q'), eps=document.querySelectorAll('.episode'),
      none=document.getElementById('nomatch'), count=document.getElementById('count');
  function filter(){
    var words=q.value.toLowerCase().split(/\\s+/).filter(Boolean), shown=0;
    eps.forEach(function(e){
      var t=e.textContent.toLowerCase(), ok=words.every(function(w){return t.indexOf(w)>=0;});
      e.classList.toggle('hidden',!ok); if(ok) shown++;
    });
    if(none) none.classList.toggle('hidden', shown>0 || eps.length===0);
    if(count) count.textContent=shown+' of '+eps.length+' episodes';
  }
  q.addEventListener('input',filter); filter();
})();
"""


def _e(value: object) -> str:
    return html.escape("-" if value is None else str(value), quote=True)


def write_html(out: Output, items: Iterable[dict[str, Any]], meta: dict[str, Any]) -> int:
    title = f"Episodes of {meta['repository']}"
    out.write(f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
              f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
              f'<meta name="referrer" content="no-referrer">\n<title>{_e(title)}</title>\n<style>{_CSS}</style>'
              f'</head>\n<body>\n<header><h1>{_e(title)}</h1><span class="meta">exported {_e(meta["generated_at"])}'
              f' by majordomus{"" if meta["with_prompts"] else "; prompt texts withheld"} · <span id="count">'
              f'</span></span><input id="q" type="search" placeholder="Filter: words in ids, titles, prompts, '
              f'commits, files" aria-label="filter the episodes"></header>\n<main id="timeline">\n')
    n = 0
    for item in items:
        n += 1
        out.write(_html_episode(item))
    if n == 0:
        out.write(f'<p id="none">No episodes {"match these filters" if meta["filtered"] else "are recorded here yet"}'
                  '.</p>\n')
    out.write('<p id="nomatch" class="hidden">No episode on this page matches the filter.</p>\n'
              f"</main>\n<script>{_JS}</script>\n</body></html>\n")
    return n


def _spent(used: dict[str, Any]) -> str:
    """` · 12.3k tokens · $0.0421` for a counted usage, nothing otherwise (the page's summary line)."""
    if used["state"] != "counted":
        return ""
    total = sum(used[f"{k}_tokens"] for k in ("input", "output", "cache_read", "cache_write"))
    return f" · {short_tokens(total)} tokens · {used['cost'] or '-'}"


def _html_episode(item: dict[str, Any]) -> str:
    e = item["episode"]
    state = e["state"] if e["state"] in ("closed", "interrupted", "open", "detached") else "unknown"
    parts = [f'<details class="episode {state}" data-id="{_e(e["id"])}"><summary>'
             f'<span class="state">{_e(e["state"])}</span><span class="id">{_e(e["id"])}</span>'
             f'<span>{_e(e["title"])}</span><span class="dim">{_e(e["provider"])} · {_e(when(e["started_at"]))} · '
             f'{_e(duration(e["duration_seconds"]))} · {_e(e["branch"])} · {len(item["prompts"])} prompt(s) · '
             f'{len(item["commits"]["items"])} commit(s){_e(_spent(item["usage"]))}</span></summary>\n'
             '<div class="body">\n']
    if item["resume"]:
        parts.append(f'<p class="dim">resume: {_e(item["resume"]["command"] or item["resume"]["sentence"])}</p>\n')
    parts.append(f'<h3>Prompts ({len(item["prompts"])})</h3>\n<ol class="prompts">\n')
    for p in item["prompts"]:
        if "text" not in p:
            parts.append(f'<li>{_e(p["record"])}: this record cannot be read ({_e(p.get("problem"))})</li>\n')
            continue
        marks = f", redacted: {p['redacted']}" if p.get("redacted") else ""
        body = p["text"] if p["text"] is not None else (None if p.get("text_withheld") else
                                                        p.get("tombstone") or "(no text)")
        parts.append(f'<li><span class="dim">{_e(p["started_at"])} ({_e(p["episode_link"])}{_e(marks)})</span>'
                     + (f'<pre class="prompt">{_e(body)}</pre>' if body is not None else
                        ' <span class="dim">text withheld</span>') + "</li>\n")
    parts.append(f'</ol>\n<h3>Commits ({len(item["commits"]["items"])}, {_e(item["commits"]["source"])})</h3>\n<ul>')
    parts += [f'<li><code>{_e(c["commit"])}</code> {_e(c["subject"])}</li>' for c in item["commits"]["items"]]
    stat_ = item["diff_stat"]
    text = stat_["text"] if stat_["text"] else ("no change between the heads" if stat_["text"] == "" else "-")
    parts.append(f'</ul>\n<h3>Diff stat ({_e(stat_["range"])})</h3>\n<pre class="stat">{_e(text)}</pre>\n'
                 "</div></details>\n")
    return "".join(parts)


WRITERS = {"md": write_md, "json": write_json, "html": write_html}


def export(layout: Layout, episodes: list[Episode], fmt: str, out: Output, *, with_prompts: bool,
           filtered: bool) -> int:
    meta = {"generated_at": rfc3339(now_utc()), "repository": layout.root.name, "with_prompts": with_prompts,
            "filtered": filtered}
    idx = index.opened(layout)
    try:
        note = idx.note
        try:
            n = WRITERS[fmt](out, wholes(layout, idx, episodes, with_prompts), meta)
            out.commit()
        except BaseException:
            out.abort()
            raise
    finally:
        idx.close()
    if note:
        import sys

        print(f"majordomus: {note}", file=sys.stderr)
    return n
