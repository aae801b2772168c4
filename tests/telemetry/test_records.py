"""The export's plain values and where it sends them, as a library: endpoints from the standard variables, URLs
kept without credentials, timestamps, ids that a resend repeats, and no prompt text without --with-prompts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from majordomus.archive.record import PromptRecord
from majordomus.errors import UsageError
from majordomus.history.timeline import Episode
from majordomus.identity import parse_rfc3339
from majordomus.telemetry import cursor, records
from majordomus.telemetry.otlp import Endpoints, endpoints


def test_the_otlp_flag_is_a_base_url_and_the_per_signal_variables_are_used_as_they_are() -> None:
    assert endpoints("http://c:4318/") == Endpoints("http://c:4318/v1/traces", "http://c:4318/v1/logs")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://o:4318", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://l/x"}
    assert endpoints(None, env) == Endpoints("https://o:4318/v1/traces", "https://l/x")
    assert endpoints("http://flag:1", env).traces == "http://flag:1/v1/traces"  # the flag wins
    with pytest.raises(UsageError):
        endpoints(None, {})
    with pytest.raises(UsageError):
        endpoints("ftp://c:21")


def test_a_url_is_kept_without_its_user_information_query_or_fragment() -> None:
    assert cursor.shown("https://u:p@h:4318/v1/traces?token=1#x") == "https://h:4318/v1/traces"
    assert cursor.shown("http://[::1]:4318/v1/logs") == "http://[::1]:4318/v1/logs"


def test_timestamps_are_read_as_the_record_writes_them() -> None:
    for at in ("2026-12-06T19:10:56Z", "1970-01-01T00:00:00Z", "2024-02-29T23:59:59Z"):
        moment = parse_rfc3339(at)
        assert moment is not None and records.nanos(at) == int(moment.timestamp()) * 10**9
    for bad in ("2026-02-30T00:00:00Z", "2026-12-06 19:10:56Z", "2026-12-06T19:10:+5Z", "", None):
        assert records.nanos(bad) is None


@given(st.integers(1, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61),
       st.integers(0, 61))
def test_the_sliced_timestamp_reads_what_the_general_parser_reads(year: int, month: int, day: int, hour: int,
                                                                 minute: int, second: int) -> None:
    at = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"  # existing or not
    moment = parse_rfc3339(at)
    assert records.nanos(at) == (None if moment is None else int(moment.timestamp()) * 10**9)


def episode(state: str, **extra: object) -> Episode:
    return Episode(id="s-20261206191056-143c", provider="codex", state=state, started_at="2026-12-06T19:10:56Z",
                   closed_at="2026-12-06T19:20:56Z", branch="main", title=None, worktree_id="w", start_head="a",
                   head="b", **extra)  # type: ignore[arg-type]


def test_the_ids_are_the_same_on_every_run_and_the_status_follows_the_outcome() -> None:
    sources = records.Sources.__new__(records.Sources)
    sources.compacted, sources.client_sessions, sources.turns = {}, {}, {}
    a = records.episode_span("local:r", episode("interrupted", end_reason="other"), sources)
    b = records.episode_span("local:r", episode("interrupted", end_reason="other"), sources)
    assert a is not None and b is not None and (a.trace_id, a.span_id) == (b.trace_id, b.span_id)
    assert (a.status, a.description) == ("error", "other") and a.end - a.start == 600 * 10**9
    closed = records.episode_span("local:r", episode("closed"), sources)
    assert closed is not None and (closed.status, closed.description) == ("ok", None)
    assert records.episode_span("local:r", episode("open"), sources) is None  # sent once it ends
    assert closed.attributes["gen_ai.provider.name"] == "openai"


def test_a_prompt_log_record_carries_its_text_only_with_prompts() -> None:
    r = PromptRecord(schema="majordomus.capture/v1", started_at="2026-12-06T19:10:56Z", provider="claude-code",
                     episode="s-1", episode_link="open", text="use [redacted:aws] and [redacted:aws]",
                     redacted="aws")
    without = records.prompt_log("local:r", "name.json", r, False)
    assert without is not None and without.body is None
    assert without.attributes["majordomus.prompt.redactions"] == 2
    assert without.attributes["majordomus.prompt.redacted"] == ["aws"]
    with_text = records.prompt_log("local:r", "name.json", r, True)
    assert with_text is not None and with_text.body == r.text and with_text.trace_id == without.trace_id
