"""A hostile HTTP client for the fuzz tests against a real server
(tests/e2e/test_fuzz_gunicorn.py): raw sockets, so any method, any bytes and any
way of walking away can be sent; hypothesis strategies that produce lone
surrogates, other encodings, odd methods and dropped connections; the valid
requests they start from (``seeds``); and the properties every answer of the
endpoint must have. bench/memory.py's hostile mix draws from the same strategies.

Not a test module: helpers, like auth_servers.py.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from json_paths import delete_at, get_at, paths, set_at

# ---------------------------------------------------------------------- the client


class Stalled(AssertionError):
    """The server did not finish its answer in time."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes  # de-chunked
    complete: bool  # the whole body arrived (the last chunk, or Content-Length bytes)
    seconds: float

    @property
    def mimetype(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


#: How a client may walk away: never, halfway through its body, right after
#: sending it, or after the first event of the answer.
DROPS = (None, "mid-body", "before-answer", "mid-stream")


def exchange(
    port: int,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    *,
    drop: str | None = None,
    timeout: float = 10.0,
) -> Answer | None:
    """One request on a fresh connection (``Connection: close``); ``None``
    when the client dropped the connection before any answer."""
    started = time.monotonic()
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        if drop == "mid-body":
            sock.sendall(head + body[: len(body) // 2])
            return None
        sock.sendall(head + body)
        if drop == "before-answer":
            return None
        received = b""
        deadline = started + timeout
        while True:
            if drop == "mid-stream" and _first_event_in(received):
                break
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = sock.recv(65536)
            except TimeoutError:
                raise Stalled(f"{method} {path}: no complete answer after {timeout} s ({received[:300]!r})") from None
            if not data:
                break
            received += data
    return _parse(received, method, time.monotonic() - started, dropped=drop == "mid-stream")


def _first_event_in(received: bytes) -> bool:
    _, sep, rest = received.partition(b"\r\n\r\n")
    return bool(sep) and b"\n\n" in rest


def _parse(raw: bytes, method: str, seconds: float, *, dropped: bool) -> Answer:
    head, sep, rest = raw.partition(b"\r\n\r\n")
    assert sep, f"no complete HTTP head: {raw[:300]!r}"
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if method == "HEAD" or status in (204, 304):
        return Answer(status, headers, b"", True, seconds)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body, complete = _dechunk(rest)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        body, complete = rest[:length], len(rest) >= length
    else:
        body, complete = rest, not dropped
    return Answer(status, headers, body, complete, seconds)


def _dechunk(data: bytes) -> tuple[bytes, bool]:
    """The body, and whether its last (empty) chunk arrived."""
    body = b""
    while True:
        size_line, sep, data = data.partition(b"\r\n")
        if not sep:
            return body, False
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            return body, False
        if size == 0:
            return body, True
        if len(data) < size + 2:
            return body + data[:size], False
        body += data[:size]
        data = data[size + 2:]


class HealthWatch:
    """Polls the health check from a thread of its own while a test runs:
    every answer's latency, and every failure."""

    def __init__(self, port: int, path: str = "/mcp/health", period: float = 0.1) -> None:
        self.port, self.path, self.period = port, path, period
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-watch", daemon=True)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            started = time.monotonic()
            try:
                answer = exchange(self.port, "GET", self.path, {}, b"", timeout=5)
                assert answer is not None and answer.status == 200, answer
                json.loads(answer.body)
            except (AssertionError, OSError, ValueError) as exc:
                self.failures.append(f"{type(exc).__name__}: {exc}")
            self.latencies.append(time.monotonic() - started)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    def summary(self) -> str:
        ordered = sorted(self.latencies) or [0.0]
        p50, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]
        return f"{len(self.latencies)} health checks: median {p50:.3f} s, p99 {p99:.3f} s, worst {self.worst:.3f} s"


# ---------------------------------------------------------------------- the properties


#: Refusals that come before the body is read: no id to echo.
BEFORE_THE_BODY = frozenset({401, 403, 405, 406, 413, 415, 429})


def readable_id(body: bytes) -> Any:
    """The id of the request in ``body``, when a server that reads UTF-8 JSON
    can read one (``None`` if none). Only a request's: the id of a response the
    client sends belongs to the server's requests, and is not echoed."""
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if isinstance(payload, dict) and "method" in payload:
        value = payload.get("id")
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value
    return None


def check_answer(method: str, body: bytes, answer: Answer, *, dropped: bool = False, path: str = "/mcp") -> None:
    """What every answer of the endpoint must be: no 5xx; empty only where
    that is an answer (202, a DELETE's 200, HEAD, OPTIONS); otherwise JSON-RPC
    as JSON or as a complete event stream (the health check: its own JSON);
    the request's id echoed whenever the server could read it."""
    where = f"{method} -> {answer.status} {answer.headers.get('content-type')} {answer.body[:300]!r}"
    assert answer.status < 500, where
    if not dropped:
        assert answer.complete, "a cut body: " + where
    if not answer.body:
        assert answer.status == 202 or method in ("HEAD", "OPTIONS", "DELETE"), "empty: " + where
        return
    if path.endswith("/health") and answer.status == 200:
        assert answer.mimetype == "application/json" and json.loads(answer.body)["status"] == "ok", where
        return
    if answer.mimetype == "text/event-stream":
        messages = [json.loads(data) for data in _sse_data(answer.body)]
        assert messages or dropped, "an event stream without events: " + where
        final = messages[-1] if messages and not dropped else None
    else:
        assert answer.mimetype == "application/json", "not JSON: " + where
        final = json.loads(answer.body)
        messages = final if isinstance(final, list) else [final]
    for message in messages:
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", where
    if final is None or isinstance(final, list):
        return
    assert ("result" in final) != ("error" in final), where
    request_id = readable_id(body) if method == "POST" else None
    if request_id is not None and answer.status not in BEFORE_THE_BODY:
        assert final.get("id") == request_id, f"id {request_id!r} not echoed: {where}"


def _sse_data(body: bytes) -> Iterator[str]:
    for block in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        lines = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if lines and any(lines):
            yield "\n".join(lines)


# ---------------------------------------------------------------------- strategies


#: Text that holds lone surrogates (and valid pairs, and anything else);
#: ``st.text`` drops surrogates even from an alphabet that holds them.
surrogate_text = st.lists(
    st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.sampled_from("\ud800\udfff")),
    max_size=12,
).map("".join)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 2, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12) | surrogate_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(surrogate_text, children, max_size=4),
    max_leaves=20,
)

ids = st.one_of(st.integers(), surrogate_text, st.integers(min_value=2**63 - 2, max_value=2**80),
                st.text(min_size=250, max_size=300), st.none(), st.floats(allow_nan=False, allow_infinity=False),
                st.booleans())

ODD_METHODS = ["GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD", "TRACE", "FOO", "PROPFIND", "MKCOL", "LOCK",
               "SEARCH", "PURGE", "QUERY", "BREW", "M-SEARCH"]
#: What gunicorn itself accepts as a method (it refuses others with its own page).
http_methods = st.one_of(st.just("POST"), st.just("POST"), st.sampled_from(ODD_METHODS),
                         st.from_regex(r"\A[A-Z]{3,12}\Z"))

ENCODINGS = ["utf-8", "utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le",
             "utf-32-be", "latin-1", "cp1252"]


@st.composite
def serialized(draw: st.DrawFn, message: Any) -> bytes:
    """``message`` as bytes: JSON escapes or raw UTF-8 (lone surrogates as the
    bytes ``ED A0 80``...), in some encoding, maybe damaged at the byte level."""
    text = json.dumps(message, ensure_ascii=draw(st.booleans()))
    encoding = draw(st.sampled_from(ENCODINGS))
    errors = "surrogatepass" if encoding.startswith("utf") else "replace"
    data = text.encode(encoding, errors=errors)
    for _ in range(draw(st.integers(0, 2))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "surrogate"]))
        if kind == "flip":
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + 1:]
        elif kind == "truncate":
            data = data[:at]
        else:
            data = data[:at] + draw(st.sampled_from([b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\\ud800", b"\\udc00"])) \
                + data[at:]
    return data


@st.composite
def mutated(draw: st.DrawFn, seeds: list[tuple[dict[str, Any], dict[str, str]]]) -> tuple[Any, dict[str, str]]:
    """A valid message with its headers, changed at the JSON, JSON-RPC, MCP and header levels."""
    message, headers = copy.deepcopy(draw(st.sampled_from(seeds)))
    body: Any = message
    if draw(st.integers(0, 3)) == 0:
        body["id"] = draw(ids)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["replace", "delete", "add", "header", "drop-header", "batch"]))
        inside = list(paths(body))
        if kind == "replace" and inside:
            set_at(body, draw(st.sampled_from(inside)), draw(json_values))
        elif kind == "delete" and inside:
            path = draw(st.sampled_from(inside))
            delete_at(body, path)
        elif kind == "add":
            containers = [p for p in [(), *inside] if isinstance(get_at(body, p), dict)]
            if containers:
                key = draw(st.sampled_from(["id", "method", "params", "_meta", "name", "arguments", "uri", "cursor",
                                            "requestId", "progressToken", "requestState"]) | surrogate_text)
                get_at(body, draw(st.sampled_from(containers)))[key] = draw(json_values)
        elif kind == "header":
            name = draw(st.sampled_from(["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Session-Id",
                                         "Mcp-Param-Region", "Accept", "Content-Type", "Last-Event-ID",
                                         "Authorization", "Origin"]))
            headers[name] = draw(header_values)
        elif kind == "drop-header" and headers:
            headers.pop(draw(st.sampled_from(sorted(headers))))
        elif kind == "batch":
            body = [body, draw(json_values)] if draw(st.booleans()) else [body, copy.deepcopy(body)]
    return body, headers


header_values = st.one_of(
    st.sampled_from(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "application/json",
                     "text/event-stream", "application/json; charset=utf-16", "text/plain", "*/*", ""]),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20),
)


# ---------------------------------------------------------------------- seeds

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzzer", "version": "1"},
}


def seeds(sessions: dict[str, str]) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Valid requests of every revision, with the headers a client sends (the slow tools left out)."""

    def modern(method: str, params: dict[str, Any], name: str | None = None, meta: dict[str, Any] = META,
               **headers: str) -> tuple[dict[str, Any], dict[str, str]]:
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        extra = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method, **headers}
        if name is not None:
            extra["Mcp-Name"] = name
        return message, extra

    def legacy(version: str, message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        return {"jsonrpc": "2.0", **message}, {"Mcp-Session-Id": sessions[version], "MCP-Protocol-Version": version}

    call = "tools/call"
    initialize_params = {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "f", "version": "1"}}
    return [
        modern("server/discover", {}),
        modern("tools/list", {}),
        modern(call, {"name": "greet", "arguments": {"name": "fuzz"}}, "greet"),
        modern(call, {"name": "test_tool_with_progress", "arguments": {}}, "test_tool_with_progress",
               {**META, "progressToken": "p1"}),
        modern(call, {"name": "test_tool_with_logging", "arguments": {}}, "test_tool_with_logging",
               {**META, "io.modelcontextprotocol/logLevel": "debug"}),
        modern(call, {"name": "test_error_handling", "arguments": {}}, "test_error_handling"),
        modern(call, {"name": "test_x_mcp_header", "arguments": {"region": "eu"}}, "test_x_mcp_header",
               META, **{"Mcp-Param-Region": "eu"}),
        modern(call, {"name": "test_elicitation", "arguments": {"message": "hi"}}, "test_elicitation",
               {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}),
        modern("resources/list", {}),
        modern("resources/read", {"uri": "test://static-text"}, "test://static-text"),
        modern("resources/read", {"uri": "test://template/7/data"}, "test://template/7/data"),
        modern("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
               "test_prompt_with_arguments"),
        modern("completion/complete", {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                                       "argument": {"name": "arg1", "value": "pa"}}),
        modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
        ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params}, {}),
        legacy("2025-11-25", {"id": 2, "method": call, "params": {"name": "greet", "arguments": {"name": "x"}}}),
        legacy("2025-11-25", {"id": 3, "method": call, "params": {
            "name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": 5}}}),
        legacy("2025-11-25", {"id": 4, "method": "resources/subscribe", "params": {"uri": "test://watched-resource"}}),
        legacy("2025-11-25", {"id": 5, "method": "logging/setLevel", "params": {"level": "debug"}}),
        legacy("2025-11-25", {"method": "notifications/cancelled", "params": {"requestId": 2}}),
        legacy("2025-11-25", {"id": 9, "result": {}}),
        legacy("2025-06-18", {"id": 6, "method": "ping"}),
        legacy("2025-06-18", {"id": 7, "method": "prompts/list"}),
        legacy("2025-03-26", {"id": 8, "method": call, "params": {"name": "greet", "arguments": {"name": "y"}}}),
    ]


@dataclass
class Tally:
    """What a fuzz run saw, for its report."""

    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    dropped: int = 0
    slowest: float = 0.0

    def add(self, answer: Answer | None) -> None:
        self.requests += 1
        if answer is None:
            self.dropped += 1
            return
        self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
        self.slowest = max(self.slowest, answer.seconds)
