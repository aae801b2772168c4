"""A fake model API on 127.0.0.1 that the four real clients talk to instead of their vendors.

It speaks, as each client streams it:
- Anthropic Messages (`POST /v1/messages`, SSE when `stream: true`) and `/v1/messages/count_tokens`;
- OpenAI Responses (`POST /v1/responses`, SSE);
- Gemini (`:generateContent`, `:streamGenerateContent?alt=sse`, `:countTokens`);
- OpenAI chat completions (`POST /v1/chat/completions`, SSE) and `GET /v1/models`.

What it answers is scripted per test through `FakeApi.script`:
- `Text(words)`: a plain answer;
- `ToolCall(calls, after)`: call each tool in turn, in the first request that offers it, then answer `after`
  (Claude Code needs its `ToolSearch` called before it offers a deferred MCP tool);
- `Stall()`: the response's headers and first event, then nothing until the server stops (the client hangs
  mid-answer, so a test can kill it there);
- `FullContext(tokens)`: a plain answer whose reported usage says the context holds `tokens` input tokens (near
  the model's window), until the client asks for a summary of its conversation (its compaction: `summary_request`);
  that request is answered with `SUMMARY`, and every answer after it reports a small context again.

Every request is recorded (`FakeApi.requests`), and any path it does not know is logged in `unknown` and
answered 404 with a JSON error, so a test can see what a client probed.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ANSWER = "All done: nothing to change."
SUMMARY = ("<summary>The person asked for README.md to be summed up, holding back a token it named; "
           "the answer said there was nothing to change.</summary>")
SMALL_CONTEXT = 12


@dataclass(frozen=True)
class Text:
    words: str = ANSWER


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    namespace: str | None = None  # Codex groups MCP tools in a namespace (`mcp__majordomus`)

    @property
    def wanted(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ToolCall:
    """Call these tools in order, each in the first request that offers it; then answer `after`."""

    calls: tuple[Call, ...]
    after: str = ANSWER


@dataclass(frozen=True)
class Stall:
    pass


@dataclass(frozen=True)
class FullContext:
    """Answer `words`, reporting a context of `tokens` input tokens, until the client's summary request."""

    tokens: int
    words: str = ANSWER


Script = Text | ToolCall | Stall | FullContext

# What each client's compaction asks the model, in the last message it sends (pinned versions): Claude Code
# "create a detailed summary of the conversation", Codex "CONTEXT CHECKPOINT COMPACTION", Gemini CLI
# "<state_snapshot>", Copilot CLI "summary of the entire conversation" / "text summary of the conversation"
SUMMARY_ASKED = re.compile(r"(?i)summary of (the|this|the entire) conversation|CONTEXT CHECKPOINT COMPACTION|"
                           r"<state_snapshot>")


@dataclass(frozen=True)
class Figures:
    """What one answer's usage reported, as the four disjoint kinds majordomus counts (docs/usage.md): the input
    without the cache, the output with its reasoning."""

    input: int
    output: int
    cache_read: int
    cache_write: int
    reasoning: int  # inside `output`


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    raw: bytes
    at: float = field(default_factory=time.monotonic)
    reported: Figures | None = None  # set when the answer reported distinct figures (FakeApi.distinct_usage)

    @property
    def api(self) -> str:
        return api_of(self.path)


def api_of(path: str) -> str:
    if path.endswith("/messages/count_tokens"):
        return "anthropic-count"
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith(":streamGenerateContent"):
        return "gemini-stream"
    if path.endswith(":generateContent"):
        return "gemini"
    if path.endswith(":countTokens"):
        return "gemini-count"
    if path.endswith("/models"):
        return "models"
    return "unknown"


def strings(value: Any) -> list[str]:
    """Every string inside a JSON value (keys excluded)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def offered_tools(api: str, body: Any) -> set[str]:
    """The tool names a request offers the model, as `name` or `namespace/name`."""
    names: set[str] = set()
    if not isinstance(body, dict):
        return names

    def walk(tools: Any, prefix: str = "") -> None:
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            if isinstance(tool.get("function"), dict):  # chat completions
                tool = tool["function"]
            for decls in ("functionDeclarations", "function_declarations"):  # Gemini
                walk(tool.get(decls), prefix)
            name = tool.get("name")
            if isinstance(tool.get("tools"), list) and isinstance(name, str):  # a Responses namespace
                walk(tool["tools"], f"{name}/")
            elif isinstance(name, str):
                names.add(prefix + name)

    walk(body.get("tools"))
    return names


def has_tool_result(api: str, body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    if api == "anthropic":
        return any(isinstance(block, dict) and block.get("type") == "tool_result"
                   for message in body.get("messages", []) if isinstance(message.get("content"), list)
                   for block in message["content"])
    if api == "responses":
        inputs = body.get("input")
        return isinstance(inputs, list) and any(
            isinstance(item, dict) and str(item.get("type", "")).endswith("_output") for item in inputs)
    if api == "chat":
        return any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages", []))
    if api.startswith("gemini"):
        return any(isinstance(part, dict) and "functionResponse" in part
                   for content in body.get("contents", []) for part in content.get("parts", []))
    return False


def last_user_texts(api: str, body: Any) -> list[str]:
    """The strings of the last message the person's side sent (user role), where a client puts its ask."""
    if not isinstance(body, dict):
        return []
    if api == "anthropic" or api == "chat":
        users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
        return strings(users[-1].get("content")) if users else []
    if api == "responses":
        inputs = body.get("input")
        if isinstance(inputs, str):
            return [inputs]
        users = [i for i in inputs or [] if isinstance(i, dict) and i.get("role") == "user"]
        return strings(users[-1].get("content")) if users else []
    if api.startswith("gemini"):
        users = [c for c in body.get("contents", []) if isinstance(c, dict) and c.get("role", "user") == "user"]
        return strings(users[-1].get("parts")) if users else []
    return []


def summary_request(request: Request) -> bool:
    """Whether the client asks the model to sum up its conversation: its compaction."""
    return any(SUMMARY_ASKED.search(text) for text in last_user_texts(request.api, request.body))


class FakeApi:
    """The server; start() binds 127.0.0.1 port 0, stop() releases every stalled answer and closes."""

    def __init__(self) -> None:
        self.script: Script = Text()
        self.requests: list[Request] = []
        self.unknown: list[str] = []
        self.tool_calls_sent: list[str] = []
        self.summaries: list[Request] = []  # the clients' requests to sum up their conversation (compactions)
        self.reported_full = 0  # answers whose usage said the context was full
        self.distinct_usage = False  # every answer reports figures of its own (n-th answer: 100+n input, …)
        self._step = 0
        self.stalled = threading.Event()  # set when a stalled answer has sent its first event
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-api", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def next_id(self) -> int:
        return next(self._ids)

    def model_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.api in ("anthropic", "responses", "chat", "gemini", "gemini-stream")]

    def saw(self, text: str) -> bool:
        """Whether some request to a model endpoint carried this text."""
        return any(text in s for r in self.model_requests() for s in strings(r.body))

    def offered(self) -> set[str]:
        return {name for r in self.model_requests() for name in offered_tools(r.api, r.body)}

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
            if request.api == "unknown":
                self.unknown.append(f"{request.method} {request.path}")

    def wait_released(self, timeout: float) -> None:
        self._release.wait(timeout)

    def choose(self, request: Request) -> Script | Call:
        """What to answer this model request: the script, where the request is one the script is about."""
        script = self.script
        if isinstance(script, FullContext):
            if summary_request(request):
                with self._lock:
                    self.summaries.append(request)
                return Text(SUMMARY)
            return Text(script.words)
        if isinstance(script, ToolCall):
            with self._lock:
                if self._step < len(script.calls):
                    call = script.calls[self._step]
                    if call.wanted in offered_tools(request.api, request.body):
                        self._step += 1
                        self.tool_calls_sent.append(call.wanted)
                        return call
            return Text(script.after)
        if isinstance(script, Stall) and is_side_request(request):
            return Text("Title")
        return script

    def context_tokens(self, request: Request) -> int:
        """The input tokens an answer reports: the script's full context for a conversation request until the
        client's compaction asked for its summary, a small one otherwise."""
        script = self.script
        if (isinstance(script, FullContext) and not is_side_request(request) and not summary_request(request)
                and not self.summaries):
            with self._lock:
                self.reported_full += 1
            return script.tokens
        return SMALL_CONTEXT

    def figures(self, request: Request, n: int, *, cache_write: bool = True) -> Figures | None:
        """The figures the n-th answer reports when `distinct_usage` is set (kept on the request), else None.
        Gemini's API has no cache-write count (`cache_write=False`)."""
        if not self.distinct_usage:
            return None
        request.reported = Figures(input=100 + n, output=20 + n, cache_read=30 + n,
                                   cache_write=4 + n if cache_write else 0, reasoning=2 + n)
        return request.reported

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.handle_any()

            def do_POST(self) -> None:  # noqa: N802
                self.handle_any()

            def do_HEAD(self) -> None:  # noqa: N802
                self.handle_any()

            def handle_any(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = self.read_chunked()
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = Request(self.command, split.path, parse_qs(split.query),
                                  {k.lower(): v for k, v in self.headers.items()}, body, raw)
                api.record(request)
                try:
                    answer(api, self, request)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def read_chunked(self) -> bytes:
                data = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()

        return Handler


def is_side_request(request: Request) -> bool:
    """A request a client makes beside the conversation (a title, a routing decision), never stalled."""
    if request.api == "gemini":
        return True  # Gemini's router and its other helpers use the non-streaming call
    body = request.body if isinstance(request.body, dict) else {}
    return request.api == "anthropic" and not body.get("tools")


# ---- the wire formats -----------------------------------------------------------------------------------------


def send_json(handler: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
    data = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
    handler.wfile.flush()


class Sse:
    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self.handler = handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True

    def event(self, data: Any, name: str | None = None) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
        self.handler.wfile.write(frame.encode())
        self.handler.wfile.flush()


def answer(api: FakeApi, handler: BaseHTTPRequestHandler, request: Request) -> None:
    kind = request.api
    if kind == "anthropic-count":
        send_json(handler, 200, {"input_tokens": max(1, len(request.raw) // 4)})
    elif kind == "gemini-count":
        send_json(handler, 200, {"totalTokens": max(1, len(request.raw) // 4)})
    elif kind == "models":
        send_json(handler, 200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "fake", "name": name}
            for name in ("fake-model", "gpt-5", "claude-sonnet-4-5")]})
    elif kind == "anthropic":
        anthropic(api, handler, request)
    elif kind == "responses":
        responses(api, handler, request)
    elif kind == "chat":
        chat(api, handler, request)
    elif kind in ("gemini", "gemini-stream"):
        gemini(api, handler, request)
    else:
        send_json(handler, 404, {"error": {"type": "not_found_error", "message": f"no {request.path} here"}})


def stall(api: FakeApi) -> None:
    api.stalled.set()
    api.wait_released(600)


def anthropic(api: FakeApi, handler: BaseHTTPRequestHandler, request: Request) -> None:
    body = request.body if isinstance(request.body, dict) else {}
    script = api.choose(request)
    model = str(body.get("model", "claude-fake"))
    n = api.next_id()
    if isinstance(script, Call):
        block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": script.name,
                                 "input": script.arguments}
        stop_reason = "tool_use"
    else:
        block = {"type": "text", "text": script.words if isinstance(script, Text) else ""}
        stop_reason = "end_turn"
    usage = {"input_tokens": api.context_tokens(request), "output_tokens": 6, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    f = api.figures(request, n)
    if f is not None:
        usage = {"input_tokens": f.input, "output_tokens": f.output, "cache_creation_input_tokens": f.cache_write,
                 "cache_read_input_tokens": f.cache_read}
    message = {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": model, "content": [block],
               "stop_reason": stop_reason, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        send_json(handler, 200, message)
        return
    sse = Sse(handler)
    sse.event({"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}, "message_start")
    if isinstance(script, Stall):
        stall(api)
        return
    if block["type"] == "tool_use":
        sse.event({"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
                  "content_block_start")
        sse.event({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                  "content_block_delta")
    else:
        sse.event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  "content_block_start")
        sse.event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": block["text"]}},
                  "content_block_delta")
    sse.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
    sse.event({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
               "usage": {"output_tokens": usage["output_tokens"]}}, "message_delta")
    sse.event({"type": "message_stop"}, "message_stop")


def responses(api: FakeApi, handler: BaseHTTPRequestHandler, request: Request) -> None:
    body = request.body if isinstance(request.body, dict) else {}
    script = api.choose(request)
    n = api.next_id()
    rid = f"resp_{n:04d}"
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": body.get("model", "gpt-fake")}
    if isinstance(script, Call):
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n:04d}", "call_id": f"call_{n:04d}",
                                "name": script.name, "arguments": json.dumps(script.arguments),
                                "status": "completed"}
        if script.namespace:
            item["namespace"] = script.namespace
    else:
        words = script.words if isinstance(script, Text) else ""
        item = {"type": "message", "id": f"msg_{n:04d}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": words, "annotations": []}]}
    sse = Sse(handler)
    sse.event({"type": "response.created", "sequence_number": 0,
               "response": {**base, "status": "in_progress", "output": []}}, "response.created")
    if isinstance(script, Stall):
        stall(api)
        return
    added = {**item, "status": "in_progress"}
    if item["type"] == "message":
        added["content"] = []
    sse.event({"type": "response.output_item.added", "output_index": 0, "item": added}, "response.output_item.added")
    if item["type"] == "message":
        sse.event({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                   "content_index": 0, "delta": item["content"][0]["text"]}, "response.output_text.delta")
    sse.event({"type": "response.output_item.done", "output_index": 0, "item": item}, "response.output_item.done")
    tokens = api.context_tokens(request)
    usage = {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 6,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens + 6}
    f = api.figures(request, n)
    if f is not None:  # OpenAI's counting: the cache inside the input, the reasoning inside the output
        prompt = f.input + f.cache_read + f.cache_write
        usage = {"input_tokens": prompt,
                 "input_tokens_details": {"cached_tokens": f.cache_read, "cache_write_tokens": f.cache_write},
                 "output_tokens": f.output, "output_tokens_details": {"reasoning_tokens": f.reasoning},
                 "total_tokens": prompt + f.output}
    sse.event({"type": "response.completed",
               "response": {**base, "status": "completed", "output": [item], "usage": usage}}, "response.completed")


def chat(api: FakeApi, handler: BaseHTTPRequestHandler, request: Request) -> None:
    body = request.body if isinstance(request.body, dict) else {}
    script = api.choose(request)
    n = api.next_id()
    base = {"id": f"chatcmpl-{n:04d}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "fake-model")}
    tokens = api.context_tokens(request)
    usage: dict[str, Any] = {"prompt_tokens": tokens, "completion_tokens": 6, "total_tokens": tokens + 6}
    f = api.figures(request, n)
    if f is not None:
        prompt = f.input + f.cache_read + f.cache_write
        usage = {"prompt_tokens": prompt, "completion_tokens": f.output, "total_tokens": prompt + f.output,
                 "prompt_tokens_details": {"cached_tokens": f.cache_read, "cache_write_tokens": f.cache_write},
                 "completion_tokens_details": {"reasoning_tokens": f.reasoning}}
    if isinstance(script, Call):
        call = {"index": 0, "id": f"call_{n:04d}", "type": "function",
                "function": {"name": script.name, "arguments": json.dumps(script.arguments)}}
        delta: dict[str, Any] = {"tool_calls": [call]}
        finish = "tool_calls"
    else:
        delta = {"content": script.words if isinstance(script, Text) else ""}
        finish = "stop"
    if not body.get("stream"):
        message = {"role": "assistant", "content": delta.get("content")}
        if "tool_calls" in delta:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in delta["tool_calls"]]
        send_json(handler, 200, {**base, "object": "chat.completion", "usage": usage,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
        return
    sse = Sse(handler)
    sse.event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}]})
    if isinstance(script, Stall):
        stall(api)
        return
    sse.event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    sse.event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage})
    sse.event("[DONE]")


GEMINI_MODEL = re.compile(r"/models/([^/:]+):")


def gemini(api: FakeApi, handler: BaseHTTPRequestHandler, request: Request) -> None:
    script = api.choose(request)
    match = GEMINI_MODEL.search(request.path)
    model = match.group(1) if match else "gemini-fake"
    if isinstance(script, Call):
        part: dict[str, Any] = {"functionCall": {"name": script.name, "args": script.arguments}}
    elif json_schema(request) is not None:  # the router and other helpers ask for JSON of a declared schema
        part = {"text": json.dumps(sample_of(json_schema(request)))}
    else:
        part = {"text": script.words if isinstance(script, Text) else ""}
    tokens = api.context_tokens(request)
    usage = {"promptTokenCount": tokens, "candidatesTokenCount": 6, "totalTokenCount": tokens + 6}
    n = api.next_id()
    f = api.figures(request, n, cache_write=False)
    if f is not None:  # Gemini's counting: the cache inside the prompt, the thoughts beside the candidates
        usage = {"promptTokenCount": f.input + f.cache_read, "cachedContentTokenCount": f.cache_read,
                 "candidatesTokenCount": f.output - f.reasoning, "thoughtsTokenCount": f.reasoning,
                 "totalTokenCount": f.input + f.cache_read + f.output}
    chunk = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
             "usageMetadata": usage, "modelVersion": model, "responseId": f"r{n}"}
    if request.api == "gemini":
        send_json(handler, 200, chunk)
        return
    sse = Sse(handler)
    if isinstance(script, Stall):
        sse.event({"candidates": [{"content": {"role": "model", "parts": [{"text": "Let me"}]}, "index": 0}],
                   "modelVersion": model})
        stall(api)
        return
    sse.event(chunk)


def json_schema(request: Request) -> Any:
    config = request.body.get("generationConfig") if isinstance(request.body, dict) else None
    if not isinstance(config, dict):
        return None
    return config.get("responseJsonSchema", config.get("responseSchema"))


def sample_of(schema: Any) -> Any:
    """The smallest value a JSON schema (Gemini's upper-case types or JSON Schema's) accepts."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: sample_of(properties.get(name)) for name in schema.get("required", list(properties))}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(1, int(schema.get("minimum", 1)))
    if kind == "boolean":
        return False
    return "a simple request"
