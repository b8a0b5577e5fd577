"""The hypothesis layer against the real server (issue 16, item 6): the
conformance fixture app under ``gunicorn -w 2 -k gthread --threads 8`` on the
default SQLite backend, sent lone surrogates (escaped, and as the raw bytes
``ED A0 80``), bodies in other encodings or damaged at the byte level, JSON-RPC
and MCP mutations, odd HTTP methods, dropped connections and cancellations,
over raw sockets (tests/hostile.py).

Whatever arrives: no 5xx, no body that is not JSON-RPC (JSON, or an event
stream that ends cleanly), the id echoed whenever the server could read it,
no traceback in the server's log, the health check answered throughout (every
check within its 5-second timeout, 99 in 100 within a second: on two shared
cores one scheduling stall of a second is noise, a worker hung by hostile input
is not), and the sessions made before still work after.

The suite runs a few hundred examples; ``FLASK_MCP_FUZZ_EXAMPLES=20000``
runs a long one (docs/robustness.md has its figures).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import GunicornServer
from hostile import (
    DROPS,
    HealthWatch,
    Tally,
    check_answer,
    exchange,
    http_methods,
    ids,
    mutated,
    seeds,
    serialized,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.e2e

EXAMPLES = int(os.environ.get("FLASK_MCP_FUZZ_EXAMPLES") or 300)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
BASE = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")


class Fixture:
    """The server, its health watch, the tally, and legacy sessions: ``sessions``
    for the fuzzer (which may delete them: they are made again), ``kept`` made
    before fuzzing and never shown to the fuzzer, checked after it."""

    def __init__(self, server: GunicornServer, watch: HealthWatch) -> None:
        self.server, self.watch = server, watch
        self.port = server.port
        self.tally = Tally()
        self.kept = {version: initialize(self.port, version) for version in LEGACY}
        self.sessions = {version: initialize(self.port, version) for version in LEGACY}

    def renew(self, headers: dict[str, str]) -> None:
        """After a DELETE that ended one of the fuzzer's sessions: a new one."""
        for version, session in self.sessions.items():
            if headers.get("Mcp-Session-Id") == session:
                self.sessions[version] = initialize(self.port, version)

    def post(self, message: Any, headers: dict[str, str], **kwargs: Any) -> Any:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return exchange(self.port, "POST", "/mcp", {**BASE, **headers}, body, **kwargs)


def initialize(port: int, version: str) -> str:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}
    answer = exchange(port, "POST", "/mcp", BASE, json.dumps(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode())
    assert answer is not None and answer.status == 200, answer
    session = answer.headers["mcp-session-id"]
    exchange(port, "POST", "/mcp", {**BASE, "Mcp-Session-Id": session, "MCP-Protocol-Version": version},
             json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    return session


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    folder: Path = tmp_path_factory.mktemp("fuzz")
    server = GunicornServer("tests.conformance.app:app", workers=2, threads=8, env={
        "FLASK_MCP_BACKEND": f"sqlite:///{folder / 'sessions.sqlite3'}",
        "FLASK_MCP_CLIENT_TIMEOUT": "2",  # a tool that asks a legacy client something waits at most 2 s
        # Dropped listen streams must not hold threads for long; issue 16's stream
        # part (item 2) has its own tests with the default heartbeat.
        "FLASK_MCP_SSE_HEARTBEAT": "0.5",
    })
    try:
        with HealthWatch(server.port) as watch:
            yield Fixture(server, watch)
        log = server.output()
    finally:
        server.stop()
    assert "Traceback" not in log, log[-5000:]


# ---------------------------------------------------------------------- the properties


def test_every_seed_is_answered(fuzzed: Fixture) -> None:
    for message, headers in seeds(fuzzed.sessions):
        drop = "mid-stream" if message.get("method") == "subscriptions/listen" else None
        answer = fuzzed.post(message, headers, drop=drop)
        assert answer is not None and answer.status in (200, 202), (message, answer)
        check_answer("POST", json.dumps(message).encode(), answer, dropped=drop is not None)


@FUZZ
@given(data=st.data())
def test_hostile_requests_get_json_rpc_answers_never_a_5xx(fuzzed: Fixture, data: st.DataObject) -> None:
    message, headers = data.draw(mutated(seeds(fuzzed.sessions)), label="message")
    body = data.draw(serialized(message), label="body")
    method = data.draw(http_methods, label="method")
    drop = data.draw(st.sampled_from(DROPS) | st.none(), label="drop")
    if b"listen" in body and drop in (None, "mid-body"):
        drop = "mid-stream"  # a listen stream lasts until the client leaves
    path = data.draw(st.sampled_from(["/mcp", "/mcp", "/mcp", "/mcp/health"]), label="path")

    answer = exchange(fuzzed.port, method, path, {**BASE, **headers}, body, drop=drop)

    fuzzed.tally.add(answer)
    if answer is not None:
        check_answer(method, body, answer, dropped=drop == "mid-stream", path=path)
    if method == "DELETE":
        fuzzed.renew(headers)


@settings(max_examples=min(200, max(10, EXAMPLES // 15)), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    version=st.sampled_from(LEGACY),
    seconds=st.floats(0.05, 0.6),
    delay=st.floats(0, 0.4),
    request_id=ids.filter(lambda value: value is not None),
    cancel_id=st.sampled_from(["same", "other", "surrogate", "missing"]),
    progress=st.booleans(),
    drop=st.sampled_from([None, None, "mid-stream", "before-answer"]),
)
def test_cancelled_calls_never_get_a_5xx(
    fuzzed: Fixture, version: str, seconds: float, delay: float, request_id: Any, cancel_id: str,
    progress: bool, drop: str | None,
) -> None:
    headers = {"Mcp-Session-Id": initialize(fuzzed.port, version), "MCP-Protocol-Version": version}
    params: dict[str, Any] = {"name": "slow_compute", "arguments": {"seconds": seconds}}
    if progress:
        params["_meta"] = {"progressToken": "cancel-me"}
    call = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()
    answers: list[Any] = []
    caller = threading.Thread(target=lambda: answers.append(fuzzed.post(call, headers, drop=drop)))
    caller.start()
    time.sleep(delay)
    target = {"same": request_id, "other": "not-this-one", "surrogate": "\ud800", "missing": None}[cancel_id]
    cancel: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": "fuzz"}}
    if target is not None:
        cancel["params"]["requestId"] = target
    cancelled = fuzzed.post(json.dumps(cancel).encode(), headers)
    caller.join(15)

    assert not caller.is_alive(), "the cancelled call never ended"
    assert cancelled is not None and cancelled.status == 202, cancelled
    answer = answers[0]
    fuzzed.tally.add(answer)
    if answer is not None:
        check_answer("POST", call, answer, dropped=drop == "mid-stream")


@FUZZ
@given(
    method=st.sampled_from(["FOO", "TRACE", "PROPFIND", "PUT", "PATCH", "CONNECT", "LOCK", "QUERY"])
    | st.from_regex(r"\A[A-Z]{3,12}\Z"),
    path=st.sampled_from(["/mcp", "/mcp/health"]),
)
def test_every_method_the_endpoint_does_not_serve_gets_a_json_rpc_405(
    fuzzed: Fixture, method: str, path: str
) -> None:
    served = {"/mcp": {"GET", "POST", "DELETE", "OPTIONS", "HEAD"}, "/mcp/health": {"GET", "OPTIONS", "HEAD"}}
    if method in served[path]:
        return

    answer = exchange(fuzzed.port, method, path, BASE, b"{}")

    assert answer is not None and answer.status == 405, answer
    assert answer.mimetype == "application/json" and answer.headers["allow"]
    assert json.loads(answer.body)["error"]["code"] == -32600


def test_the_sessions_made_before_still_work(fuzzed: Fixture) -> None:
    for version, session in fuzzed.kept.items():
        message = {"jsonrpc": "2.0", "id": "after", "method": "tools/call",
                   "params": {"name": "greet", "arguments": {"name": "still here"}}}
        answer = fuzzed.post(message, {"Mcp-Session-Id": session, "MCP-Protocol-Version": version})
        assert answer is not None and answer.status == 200, (version, answer)
        payload = json.loads(answer.body) if answer.mimetype == "application/json" else None
        assert payload is None or payload["result"]["content"][0]["text"] == "Hello, still here!"


def test_the_health_check_answered_throughout(fuzzed: Fixture) -> None:
    """Never hung (each check has 5 s), and 99 in 100 within a second: one CI
    run saw a single check of 1.02 s among 155 (p99 0.09 s) with two suite runs
    on two cores, which is the scheduler, not the server."""
    watch = fuzzed.watch
    print(f"\nfuzz: {fuzzed.tally}; {watch.summary()}")
    assert not watch.failures, watch.failures[:5]
    assert len(watch.latencies) > 10
    slow = [latency for latency in watch.latencies if latency >= 1.0]
    assert len(slow) * 100 <= len(watch.latencies), sorted(watch.latencies)[-5:]
