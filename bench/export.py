"""`majordomus export`: peak memory and time at 10k and 100k prompt records, against a bare read of the archive.

    .venv/bin/python bench/export.py [--sizes 10000,100000]

The archive is bench/search.py's (the product's own writers: 50 closed episodes, every prompt linked to one,
both renderings beside each record). Per size, each real `majordomus export` subprocess is run once, its peak
RSS read from wait4 (ru_maxrss), beside the baseline measured in the same run just before it: a child of the
same interpreter that reads and parses every record (bench/prompt_archive.py's bare read+parse); each child is
launched by a bare interpreter, so no child is charged with the pages of this process. Target: peak
≤ 100 MiB at 100k prompts. The first export builds the search index (its prompt names per episode); an
`export` that answers wrongly (not 50 episodes, not every prompt once) counts as an error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from prompt_archive import BARE, MAJORDOMUS, child
from search import EPISODES, git_repo, synthesize

TARGET_MIB = 100.0
RUNS = (("json", ["--format", "json"]), ("html", ["--format", "html"]),
        ("json --with-prompts", ["--format", "json", "--with-prompts"]),
        ("html --with-prompts", ["--format", "html", "--with-prompts"]))


def answered(fmt: str, path: Path) -> tuple[int, int]:
    """(episodes, prompts) the exported file holds."""
    text = path.read_text(encoding="utf-8")
    if fmt == "json":
        data = json.loads(text)
        return data["count"], sum(len(item["prompts"]) for item in data["episodes"])
    return text.count('<details class="episode '), text.count('<li><span class="dim">')


def run_size(tmp: Path, size: int) -> list[tuple[str, float, float, float, float, int]]:
    repo = git_repo(tmp / f"export-{size}")
    synthesize(repo, size)
    prompts = repo / ".ai/local/prompts"
    rows = []
    first = True
    for label, argv in RUNS:
        bare_s, bare_mib, _, _, _ = child([sys.executable, "-c", BARE, str(prompts)], repo)
        out = tmp / f"out-{size}.{argv[1]}"
        seconds, mib, _, code, _ = child([str(MAJORDOMUS), "export", *argv, "-o", str(out)], repo)
        errors = int(code != 0)
        if code == 0:
            errors += answered(argv[1], out) != (EPISODES, size)
            out.unlink()
        rows.append((label + (" (builds the index)" if first else ""), seconds, mib, bare_s, bare_mib, errors))
        first = False
    shutil.rmtree(repo)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    import compileall

    import majordomus

    compileall.compile_dir(str(Path(majordomus.__file__).parent), quiet=1)  # as a regular install is
    print("export (real subprocesses, -o FILE; bare = read+parse of every record by the same interpreter, "
          "measured just before each)")
    print(f"  {'size':>7} {'export':<38} {'seconds':>8} {'peak MiB':>9} {'target':>7} {'bare s':>7} "
          f"{'bare MiB':>9} {'MiB/bare':>8} {'errors':>6}")
    errors = 0
    with tempfile.TemporaryDirectory(prefix="mj-export-bench-") as tmp:
        for size in sizes:
            for label, seconds, mib, bare_s, bare_mib, wrong in run_size(Path(tmp), size):
                errors += wrong
                verdict = "" if mib <= TARGET_MIB else "  MISSED"
                print(f"  {size:>7} {label:<38} {seconds:8.2f} {mib:9.1f} {'<= 100':>7} {bare_s:7.2f} "
                      f"{bare_mib:9.1f} {mib / bare_mib:7.2f}x {wrong:>6}{verdict}")
    if errors:
        raise SystemExit("wrong results: see the errors column")


if __name__ == "__main__":
    main()
