"""docs/clients.md's table of how each real client ends an interactive sitting is the observed data of the runs
(tests/real_clients/endings_observed.yaml, which tests/real_clients/test_interactive_endings.py holds the clients
to): a row that disagrees, is missing or is extra fails here, in the fast suite."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/clients.md"
DATA = ROOT / "tests/real_clients/endings_observed.yaml"
HEADING = "## How each client really ends a sitting"
COLUMNS = ["client", "ending", "event sent", "end reason", "recorded", "last turn"]


def table_rows() -> list[dict[str, str]]:
    text = DOC.read_text()
    section = text[text.index(HEADING):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS, header
    rows = []
    for line in lines[2:]:
        cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        rows.append(dict(zip(COLUMNS, cells, strict=True)))
    return rows


def data_rows() -> list[dict[str, str]]:
    observed = yaml.safe_load(DATA.read_text())
    rows = []
    for client, endings in observed.items():
        for ending, seen in endings.items():
            if not seen.get("offered", True):
                rows.append({"client": client, "ending": ending, "event sent": "not offered",
                             "end reason": "—", "recorded": "—", "last turn": "—"})
                continue
            rows.append({"client": client, "ending": ending, "event sent": seen["event"],
                         "end reason": seen["end_reason"], "recorded": seen["outcome"],
                         "last turn": seen["last_turn"]})
    return rows


def test_the_docs_table_of_endings_is_what_the_real_clients_did() -> None:
    assert table_rows() == data_rows()


def test_an_ending_without_an_end_event_is_recorded_closed_only_in_the_words_of_the_clients_own_state_file() -> None:
    """No end hook came: only a client whose own session file says it ended the session (providers.yaml
    `state_file`, its `orderly` statuses; Cline) can have such a sitting `closed`, and the end reason is that word."""
    from majordomus.clients.providers import get_provider

    def said_by_its_file(row: dict[str, str]) -> bool:
        state = get_provider(row["client"]).state_file
        return state is not None and row["end reason"] in state.orderly

    assert [r for r in data_rows() if r["event sent"] == "none" and r["recorded"] == "closed"
            and not said_by_its_file(r)] == []
