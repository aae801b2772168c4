"""samples.yaml and providers.yaml are tied in both directions: every declared provider has the samples its rows
call for, and no sample names a provider that is not declared. Adding a provider without test data fails here."""

from __future__ import annotations

import pytest

from clients.samples import (
    DECLARED,
    SAMPLES,
    has_prompt_row,
    has_session_row,
    is_installable,
    session_payload,
    writes_executables,
)
from majordomus.clients.payload import first_scalar


def test_every_sample_names_a_declared_provider() -> None:
    assert sorted(set(SAMPLES) - set(DECLARED)) == []


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_declared_provider_has_the_samples_its_rows_call_for(name: str) -> None:
    assert name in SAMPLES, f"{name} is declared in providers.yaml but has no entry in tests/clients/samples.yaml"
    p, sample = DECLARED[name], SAMPLES[name]
    wanted = set()
    if has_session_row(p):
        wanted |= {"start", "end", "ends"}
        row = p.session_row()
        if row is not None and "turn" in row.events:
            wanted.add("turn")
    if has_prompt_row(p):
        wanted |= {"prompt", "archived"}
    if is_installable(p) and not writes_executables(p):  # a hook file install merges into (Cline's are scripts)
        wanted |= {"foreign", "wired"}
    assert sorted(wanted - set(sample)) == [], f"{name}: samples.yaml lacks these for its rows"
    assert sorted(set(sample) - wanted) == [], f"{name}: samples.yaml has samples no row of it uses"


@pytest.mark.parametrize("name", sorted(n for n, p in DECLARED.items() if has_session_row(p)))
def test_every_deliberate_end_a_row_declares_has_a_sample_that_closes(name: str) -> None:
    row = DECLARED[name].session_row()
    assert row is not None
    ends = SAMPLES[name]["ends"]
    assert ends and set(ends.values()) <= {"closed", "interrupted"}, name
    assert sorted(r for r in row.deliberate if ends.get(r) != "closed") == [], name
    assert sorted(r for r, outcome in ends.items() if outcome == "closed" and r not in row.deliberate) == [], name


@pytest.mark.parametrize("name", sorted(n for n, p in DECLARED.items() if has_session_row(p)))
def test_every_sample_payload_carries_the_keys_its_row_reads(name: str) -> None:
    row = DECLARED[name].session_row()
    assert row is not None
    assert first_scalar(session_payload(name, "start", "ps-1"), row.session_keys) == "ps-1"
    end = session_payload(name, "end", "ps-1", "some-reason")
    assert first_scalar(end, row.session_keys) == "ps-1"
    assert first_scalar(end, row.reason_keys) == "some-reason"
    assert first_scalar(session_payload(name, "end", "ps-1"), row.reason_keys) is None
