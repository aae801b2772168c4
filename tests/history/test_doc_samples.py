"""Each command page shows real output of the current code. The page's marked samples are run
again on a fresh history drawn by the real hook commands (tests/doc_samples.py); a sample that differs from
what the installed `majordomus` prints now — ids, times, hashes and durations aside — fails, and
`.venv/bin/python tests/doc_samples.py --write` regenerates them."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

import doc_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return doc_samples.generate(tmp_path_factory.mktemp("doc-samples"))


@pytest.mark.parametrize("page", doc_samples.PAGES)
def test_the_pages_samples_are_what_the_commands_print_now(samples: dict[str, str], page: str) -> None:
    text = (doc_samples.DOCS / page).read_text(encoding="utf-8")
    names = [m.group(1) for m in doc_samples.MARK.finditer(text)]
    assert names, f"{page} marks no sample"
    assert set(names) <= set(samples), f"{page} marks samples nobody generates: {set(names) - set(samples)}"
    now, documented = doc_samples.masked(doc_samples.fill(text, samples)), doc_samples.masked(text)
    diff = "\n".join(difflib.unified_diff(documented.splitlines(), now.splitlines(), "documented", "printed now",
                                          lineterm=""))
    assert now == documented, f"{page} drifted; run .venv/bin/python tests/doc_samples.py --write\n{diff}"


def test_every_generated_sample_is_on_a_page(samples: dict[str, str]) -> None:
    marked = {m.group(1) for page in doc_samples.PAGES
              for m in doc_samples.MARK.finditer((doc_samples.DOCS / page).read_text(encoding="utf-8"))}
    assert marked == set(samples)


def test_the_mask_hides_what_moves_and_nothing_else(samples: dict[str, str]) -> None:
    line = "s-20261203121047-0ba9  claude-code  interrupted  2026-12-03 12:10  4s   main  2  a6d9c51 → 5da9ba7"
    moved = "s-20261203182116-e69f  claude-code  interrupted  2026-12-03 18:21  1m02s main  2  badb8ef → d2cb606"
    assert doc_samples.masked(line) == doc_samples.masked(moved)
    assert doc_samples.masked(line) != doc_samples.masked(line.replace("interrupted", "closed"))
    assert doc_samples.masked(samples["show-episode"]) != doc_samples.masked(
        samples["show-episode"].replace("prompts (2)", "prompts: 2"))
    assert Path(doc_samples.__file__).parent.name == "tests"
