"""The recorded history as capabilities: `history.episodes`, `history.show`, `history.commit`, `history.search`.

The same answers as `majordomus episodes|show|search --json` (docs/episodes-command.md, show-command.md,
search-command.md), built by the same code (`history.views`). Every route is behind the owner's token like
every other (mcp/http.py); `show` withholds prompt texts unless asked (`with_prompts`, docs/decisions.md).
`history.views` opens the search index, which imports `sqlite3`: it is imported inside the handlers, so a
server that is never asked about its history never loads it.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from majordomus.capabilities.registry import (
    Caller,
    Capability,
    Hints,
    HttpExposure,
    JsonObject,
    Refusal,
    RefusalCode,
    Services,
)
from majordomus.capabilities.text import EXTERNAL_ID_PATTERN
from majordomus.errors import MajordomusError, MissingError, RefusedError, UsageError
from majordomus.history.timeline import STATES, Filters
from majordomus.layout import Layout

LIMIT_MAX = 10_000
SEARCH_LIMIT = 100
NAME_MAX = 256
QUERY_MAX = 1024
NO_LAYOUT = "this server was started without a repository to read the history of; start it inside one"

# -- inputs ---------------------------------------------------------------------------------------------------
_TEXT = {"type": "string", "minLength": 1, "maxLength": NAME_MAX, "pattern": EXTERNAL_ID_PATTERN}
_MOMENT = {"type": "string", "format": "date-time", "maxLength": 64}
FILTERS: JsonObject = {
    "outcome": {"type": "string", "enum": list(STATES),
                "description": "only episodes in this state (closed and interrupted are a record's outcome)"},
    "provider": {"type": "string", "minLength": 1, "maxLength": NAME_MAX,
                 "description": "only this client's episodes (claude-code, codex, gemini, generic, …)"},
    "branch": {"type": "string", "minLength": 1, "maxLength": NAME_MAX, "description": "only episodes on this branch"},
    "since": {**_MOMENT, "description": "started at or after this RFC 3339 time (e.g. 2026-12-02T08:00:00Z)"},
    "until": {**_MOMENT, "description": "started at or before this RFC 3339 time"},
    "open": {"type": "boolean", "description": "true: only open and detached episodes"},
}
_RFC3339 = re.compile(r"\s*(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\s*")

# -- outputs --------------------------------------------------------------------------------------------------
_S = {"type": ["string", "null"]}
_STATE = {"type": "string", "enum": [*STATES, "unknown"],
          "description": "closed, interrupted, open, detached; unknown for a record whose outcome is neither"}
_ROW_PROPERTIES: JsonObject = {
    "id": {"type": "string", "minLength": 1}, "provider": _S, "state": _STATE,
    "outcome": {"type": ["string", "null"], "enum": ["closed", "interrupted", None]},
    "started_at": _S, "closed_at": _S, "duration_seconds": {"type": ["integer", "null"], "minimum": 0},
    "branch": _S, "prompts": {"type": "integer", "minimum": 0}, "title": _S, "end_reason": _S, "last_turn": _S,
    "worktree_id": _S, "record": {**_S, "description": "the repository-relative path of the record or open file"},
}
_COUNT = {"type": "integer", "minimum": 0}
_TOKENS: JsonObject = {"input_tokens": {**_COUNT, "description": "prompt tokens read from no cache"},
                       "output_tokens": {**_COUNT, "description": "answer tokens, reasoning included"},
                       "cache_read_tokens": _COUNT, "cache_write_tokens": _COUNT}
_COST = {"type": ["number", "null"], "minimum": 0, "description": "US dollars by the price table; null when a price "
                                                                  "is unknown"}
USAGE: JsonObject = {
    "type": "object", "description": "what the episode used, read from its client's own record once it ended "
                                     "(docs/usage.md)",
    "properties": {
        "state": {"type": "string", "enum": ["counted", "pending", "unsupported", "unknown-session", "missing",
                                             "unreadable"]},
        **_TOKENS,
        "models": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["model", "requests", *_TOKENS, "cost_usd", "price"],
            "properties": {"model": {"type": "string"}, "requests": _COUNT, **_TOKENS, "cost_usd": _COST,
                           "price": {"oneOf": [{"type": "null"}, {
                               "type": "object", "required": ["as_of", "source"], "additionalProperties": False,
                               "properties": {"as_of": {"type": "string"},
                                              "source": {"type": "string", "enum": ["table", "policy"]}}}]}}}},
        "cost_usd": _COST,
        "cost": {**_S, "description": "the cost as shown, or 'price unknown'"},
        "note": {**_S, "description": "why the usage is not counted, or what of the record was not"},
    },
    "required": ["state", *_TOKENS, "models", "cost_usd", "cost", "note"], "additionalProperties": False,
}
ROW: JsonObject = {"type": "object", "properties": {**_ROW_PROPERTIES, "usage": USAGE},
                   "required": [*_ROW_PROPERTIES, "usage"], "additionalProperties": False}
_WHOLE_PROPERTIES: JsonObject = {
    **_ROW_PROPERTIES, "start_head": _S, "head": _S, "compactions": {"type": "integer", "minimum": 0},
    "changed_files": {"type": "array", "items": {"type": "string"}},
    "truncated": {"type": "array", "items": {"type": "string"}},
    "detached_at": _S, "last_activity_at": _S, "older_schema": _S,
}
_PROMPT_PROPERTIES: JsonObject = {
    "record": {"type": "string", "minLength": 1}, "started_at": _S, "provider": _S, "episode_link": _S,
    "session": _S, "redacted": _S, "pruned": {"type": "boolean"},
    "text": {**_S, "description": "the prompt as archived (redacted); null when pruned or withheld"},
    "tombstone": {**_S, "description": "the sentence in place of a pruned body"},
}
PROMPT: JsonObject = {"oneOf": [
    {"type": "object", "properties": {**_PROMPT_PROPERTIES,
                                      "text_withheld": {"type": "boolean", "const": True,
                                                        "description": "present when the text was not asked for"}},
     "required": list(_PROMPT_PROPERTIES), "additionalProperties": False},
    {"type": "object", "description": "a record that cannot be read, and why",
     "properties": {"record": {"type": "string", "minLength": 1}, "problem": {"type": "string"}},
     "required": ["record", "problem"], "additionalProperties": False},
]}
NOTE: JsonObject = {"type": "string", "minLength": 1,
                    "description": "what the command says on stderr: the search index was rebuilt and why (it is "
                                   "derived); for search, that the query was searched as literal words"}
_SCHEMA_OF = {name: {"type": "string", "const": f"majordomus.{name}/v1"} for name in ("episodes", "show", "search")}


def _obj(properties: JsonObject, *optional: str) -> JsonObject:
    return {"type": "object", "properties": properties,
            "required": [n for n in properties if n not in optional], "additionalProperties": False}


EPISODES_OUT = _obj({"schema": _SCHEMA_OF["episodes"], "count": {"type": "integer", "minimum": 0},
                     "episodes": {"type": "array", "items": ROW}, "note": NOTE}, "note")
SHOW_OUT = _obj({
    "schema": _SCHEMA_OF["show"],
    "episode": _obj(_WHOLE_PROPERTIES),
    "usage": USAGE,
    "prompts": {"type": "array", "items": PROMPT},
    "commits": _obj({"source": {"type": "string"}, "note": _S,
                     "items": {"type": "array", "items": _obj({"commit": {"type": "string"},
                                                               "subject": {"type": "string"}})}}),
    "diff_stat": _obj({"range": {"type": "string"}, "text": _S}),
    "resume": {"oneOf": [{"type": "null"}, _obj({"command": _S, "session": _S, "session_from": _S,
                                                 "evidence": _S, "sentence": {"type": "string"}})],
               "description": "how to resume an interrupted episode in its own client; null otherwise"},
    "note": NOTE,
}, "note")
COMMIT_OUT = _obj({
    "schema": _SCHEMA_OF["show"], "commit": {"type": "string", "pattern": "^[0-9a-f]{40,64}$"},
    "subject": {"type": "string"}, "committed_at": {"type": "string"}, "ambiguous": {"type": "boolean"},
    "message": {"type": "string", "minLength": 1, "description": "the sentence `majordomus show <commit>` prints"},
    "candidates": {"type": "array", "items": _obj({
        "episode": _obj({**_ROW_PROPERTIES, "prompts": {"type": "null"}}),
        "evidence": {"type": "string", "minLength": 1}})},
})
SEARCH_OUT = _obj({
    "schema": _SCHEMA_OF["search"], "query": {"type": "string", "description": "the FTS5 query that ran"},
    "count": {"type": "integer", "minimum": 0},
    "highlight": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2,
                  "description": "what the snippets put before and after a match"},
    "results": {"type": "array", "items": _obj({
        "kind": {"type": "string", "enum": ["prompt", "episode"]}, "record": {"type": "string", "minLength": 1},
        "episode": _S, "episode_state": {"type": ["string", "null"], "enum": [*STATES, "unknown", None]},
        "at": _S, "provider": _S, "branch": _S, "episode_link": _S, "pruned": {"type": "boolean"},
        "rank": {"type": "number", "description": "FTS5 bm25: lower is better"}, "snippet": {"type": "string"},
        "episode_usage": {"oneOf": [{"type": "null"}, USAGE], "description": "the usage of the hit's episode"}})},
    "note": NOTE,
}, "note")


# -- handlers -------------------------------------------------------------------------------------------------
def _layout(services: Services) -> Layout | Refusal:
    if services.layout is None:
        return Refusal("refused", NO_LAYOUT)
    return services.layout


def _refusal(exc: MajordomusError) -> Refusal:
    """A sentence of the history readers as a refusal: the CLI's exit code, as a code."""
    code: RefusalCode = "invalid_input" if isinstance(exc, UsageError) else \
        "not_found" if isinstance(exc, MissingError) else "refused" if isinstance(exc, RefusedError) else "internal"
    return Refusal(code, exc.line().removeprefix("majordomus: "))


def utc_moment(raw: str, name: str) -> str | Refusal:
    """An RFC 3339 time as the UTC `YYYY-MM-DDTHH:MM:SSZ` the records are compared in (fractions dropped: a start
    is to the second); a time outside what can be converted is clamped to the first or last second there is."""
    match = _RFC3339.fullmatch(raw)
    if match is None:
        return Refusal("invalid_input", f"argument '{name}' must be an RFC 3339 time such as 2026-12-02T08:00:00Z")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    zone = match[8].upper()
    try:
        moment = datetime(max(year, 1), month, day, hour, minute, min(second, 59),
                          tzinfo=timezone.utc if zone == "Z" else datetime.strptime(zone, "%z").tzinfo)
    except ValueError:
        return Refusal("invalid_input", f"argument '{name}' names no day there is ({raw.strip()!r}); give an RFC "
                                        "3339 time such as 2026-12-02T08:00:00Z")
    try:
        utc = moment.astimezone(timezone.utc)
    except OverflowError:  # a moment in year 1 or 9999 whose offset moves it out of the calendar
        return "0000-01-01T00:00:00Z" if year <= 1 else "9999-12-31T23:59:59Z"
    if year == 0:
        return "0000-01-01T00:00:00Z"
    # by hand: strftime writes year 40 as `40`, which sorts after `2026`
    return (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z")


def _text(args: JsonObject, name: str) -> str | Refusal:
    """A one-line name argument, trimmed; what its schema's pattern says, to the character."""
    value = str(args[name]).strip()
    if not value or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return Refusal("invalid_input", f"argument '{name}' must be one non-blank line without control characters")
    return value


def filters_of(args: JsonObject, default_limit: int | None = None) -> Filters | Refusal:
    moments: dict[str, str | None] = {}
    for name in ("since", "until"):
        moment = utc_moment(args[name], name) if name in args else None
        if isinstance(moment, Refusal):
            return moment
        moments[name] = moment
    since, until = moments["since"], moments["until"]  # since after until is an empty window, not an error
    return Filters(outcome=args.get("outcome"), provider=args.get("provider"), branch=args.get("branch"),
                   since=since, until=until, open_only=bool(args.get("open", False)),
                   limit=args.get("limit", default_limit))


def _noted(data: JsonObject, note: str | None) -> JsonObject:
    if note:
        data["note"] = note
    return data


def list_history(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    from majordomus.history import views

    layout = _layout(services)
    filters = filters_of(args)
    if isinstance(layout, Refusal) or isinstance(filters, Refusal):
        return layout if isinstance(layout, Refusal) else filters  # type: ignore[return-value]
    try:
        found = views.listing(layout.require(), filters)
    except MajordomusError as exc:
        return _refusal(exc)
    return _noted(found.to_json(layout.root), found.note)


def show(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    from majordomus.history import views
    from majordomus.history.timeline import all_episodes, by_prefix

    layout = _layout(services)
    arg = _text(args, "episode")
    if isinstance(layout, Refusal) or isinstance(arg, Refusal):
        return layout if isinstance(layout, Refusal) else arg  # type: ignore[return-value]
    try:
        found = by_prefix(all_episodes(layout.require()), arg)
        if not found:
            return Refusal("not_found", f"no episode id starts with '{arg}'; call majordomus_history_episodes to "
                                        "see the ids (a commit goes to majordomus_history_commit)")
        if len(found) > 1:
            return Refusal("invalid_input", views.candidates_sentence(arg, found) + "; give more of the id")
        data, note = views.whole(layout, found[0], with_prompts=args.get("with_prompts", False) is True)
    except MajordomusError as exc:
        return _refusal(exc)
    return _noted(data, note)


def commit(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    from majordomus.history import detail, views
    from majordomus.history.timeline import all_episodes

    layout = _layout(services)
    arg = _text(args, "commit")
    if isinstance(layout, Refusal) or isinstance(arg, Refusal):
        return layout if isinstance(layout, Refusal) else arg  # type: ignore[return-value]
    try:
        found = detail.resolve_commit(layout.require(), arg)
        if found is None:
            return Refusal("not_found", f"'{arg}' is not a commit of this repository")
        data, _ = views.of_commit(layout, all_episodes(layout), found)
    except MajordomusError as exc:
        return _refusal(exc)
    return data


def search(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    from majordomus.history import index, views

    layout = _layout(services)
    words = _text(args, "query")
    filters = filters_of(args, SEARCH_LIMIT)
    for bad in (layout, words, filters):
        if isinstance(bad, Refusal):
            return bad
    assert isinstance(layout, Layout) and isinstance(words, str) and isinstance(filters, Filters)
    query, said = words, None
    if args.get("syntax") == "words":
        query = views.literal(words)
    else:
        try:
            index.check_query(words)
        except UsageError as exc:  # a grammar no schema can state: searched literally, and said so
            query = views.literal(words)
            said = f"{exc.message}; searched for the literal words instead: {query}"
    try:
        found = views.search(layout.require(), query, filters)
    except MajordomusError as exc:
        return _refusal(exc)
    return _noted(found.to_json(query), "; ".join(n for n in (said, found.note) if n) or None)


# -- declarations ---------------------------------------------------------------------------------------------
_TAGS = ("history", "episodes", "prompts")
_HINTS = Hints(read_only=True, idempotent=True)
_LIMIT = {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX}
AMBIGUOUS = ("'<prefix>' is ambiguous: it names N episode(s): <id> (<provider>, <state>, <start>); …; give more of "
             "the id")

CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        id="history.episodes",
        kind="query",
        title="Recorded episodes",
        description="The episodes of this repository, newest first, as `majordomus episodes --json` prints them "
                    "(schema majordomus.episodes/v1): the closed records every clone has, and this worktree's "
                    "open and detached ones, each with its linked prompt count. Filters as the command's.",
        input_schema={"type": "object", "properties": {**FILTERS, "limit": {**_LIMIT, "description": "at most "
                                                                            "this many (after the other filters)"}},
                      "additionalProperties": False},
        output_schema=EPISODES_OUT,
        effect="read",
        hints=_HINTS,
        stability="behaviorally_verified",
        handler=list_history,
        tags=_TAGS,
        tool="majordomus_history_episodes",
        http=HttpExposure("GET", "/api/v1/history/episodes"),
        blocking=True,
        errors=(("invalid_input", "argument 'since' must be an RFC 3339 time such as 2026-12-02T08:00:00Z"),),
    ),
    Capability(
        id="history.show",
        kind="query",
        title="One recorded episode",
        description="One episode whole, as `majordomus show --json <episode>` prints it (schema "
                    "majordomus.show/v1): its record's fields, its prompts in order with their episode_link and "
                    "redaction marks, the commits of its window, the diff stat, and for an interrupted episode the "
                    "client's own resume command. Prompt texts only with `with_prompts: true`; otherwise each "
                    "prompt's `text` is null and `text_withheld` true.",
        input_schema={"type": "object", "properties": {
            "episode": {**_TEXT, "description": "an episode id or a prefix of one (with or without `s-`)"},
            "with_prompts": {"type": "boolean", "default": False,
                             "description": "include the prompt texts (private: withheld by default)"}},
            "required": ["episode"], "additionalProperties": False},
        output_schema=SHOW_OUT,
        effect="read",
        hints=_HINTS,
        stability="behaviorally_verified",
        handler=show,
        tags=_TAGS,
        tool="majordomus_history_show",
        http=HttpExposure("GET", "/api/v1/history/show"),
        blocking=True,
        errors=(("not_found", "no episode id starts with '<prefix>'; call majordomus_history_episodes to see the "
                              "ids (a commit goes to majordomus_history_commit)"),
                ("invalid_input", AMBIGUOUS)),
    ),
    Capability(
        id="history.commit",
        kind="query",
        title="The episodes of a commit",
        description="The episodes whose window and worktree produced a commit, as `majordomus show --json "
                    "<commit>` prints it: named by its Majordomus-Episode trailer first, else committed inside "
                    "an episode's window and reachable from its head and not from its start head. Stated as "
                    "evidence, never guessed: an ambiguous commit lists every candidate and chooses none.",
        input_schema={"type": "object", "properties": {
            "commit": {**_TEXT, "description": "any name git accepts for a commit: a hash, a prefix, HEAD~2"}},
            "required": ["commit"], "additionalProperties": False},
        output_schema=COMMIT_OUT,
        effect="read",
        hints=_HINTS,
        stability="behaviorally_verified",
        handler=commit,
        tags=_TAGS,
        tool="majordomus_history_commit",
        http=HttpExposure("GET", "/api/v1/history/commit"),
        blocking=True,
        errors=(("not_found", "'<name>' is not a commit of this repository"),),
    ),
    Capability(
        id="history.search",
        kind="query",
        title="Search the history",
        description="Search prompt texts and episode titles, branches and changed files, as `majordomus search "
                    "--json` does (schema majordomus.search/v1): ranked (FTS5 bm25), each hit with its episode, "
                    "time, link provenance and a highlighted snippet of the (redacted) text. `query` is FTS5 "
                    "syntax (words, \"phrases\", OR, NOT, prefix*); one FTS5 cannot parse is searched as "
                    "literal words, and `note` says so and what to quote (the answer's `query` is what ran). "
                    "With `syntax: words` every word is matched literally. Filters as the command's; at most "
                    f"`limit` hits ({SEARCH_LIMIT} unless given).",
        input_schema={"type": "object", "properties": {
            "query": {**_TEXT, "maxLength": QUERY_MAX, "description": "what to find"},
            "syntax": {"type": "string", "enum": ["fts5", "words"], "default": "fts5",
                       "description": "fts5 (default): FTS5 syntax, and a query it cannot parse is searched as "
                                      "literal words (with a note); words: each word is matched as written"},
            **FILTERS,
            "limit": {**_LIMIT, "default": SEARCH_LIMIT, "description": "at most this many hits"}},
            "required": ["query"], "additionalProperties": False},
        output_schema=SEARCH_OUT,
        effect="read",
        hints=_HINTS,
        stability="behaviorally_verified",
        handler=search,
        tags=_TAGS,
        tool="majordomus_history_search",
        http=HttpExposure("GET", "/api/v1/history/search"),
        blocking=True,
        errors=(("invalid_input", "argument 'query' must be one non-blank line without control characters"),),
    ),
)
