"""Streaming under real gunicorn (2 gthread workers, several threads each), on
both backends that carry messages between processes (a SQLite file, Redis):
progress and logs ahead of a result, a legacy question answered through the
other worker, a legacy cancellation sent through either worker, list changes
reaching a ``subscriptions/listen`` stream, and the official Python client.

Which worker serves a request cannot be chosen, only observed. The tests that
need a request to reach a given worker send it on a *pinned* connection: a
keep-alive TCP connection whose worker was learned with ``whoami``. Gunicorn
hands an accepted connection to one worker for its whole life, so while the
socket stays open (checked after every answer) every request sent on it
reaches that worker. That makes "the answer went to the other worker" a fact
the test checks, not a likelihood.

Only loopback traffic; the servers are started here and stopped by their PID.
Every read has a timeout and every scenario a deadline, so nothing can hang.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import requests
from conftest import JSON_HEADERS, GunicornServer, _validator, backend_uri, validate_message, worker_pids
from mcp import Client, types
from mcp.client import ClientRequestContext

from flask_mcp.testing import parse_sse, sse_event_id

pytestmark = pytest.mark.e2e

APP = "tests.streaming_app:app"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
WORKERS = 2
THREADS = 8
#: Seconds between the server's keep-alive comments on an idle stream: they let
#: a reader look at the clock while nothing else arrives.
HEARTBEAT = 0.2
#: Any single HTTP exchange; for streams, (connect, longest wait between two reads).
TIMEOUT = 10.0
STREAM_TIMEOUT = (5.0, 5.0)
#: How long one scenario may take before it counts as hung.
SCENARIO = 8.0
SUB_KEY = "io.modelcontextprotocol/subscriptionId"
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "e2e-streaming", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

BACKENDS = ["sqlite", "redis"]


# ---------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class Cluster:
    server: GunicornServer
    markers: Path  # where ``slow`` records how it stopped
    workers: frozenset[int]

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port


def warm_up(server: GunicornServer) -> frozenset[int]:
    """Return the workers once each has loaded the app and answered (gunicorn is
    ready when the first one is)."""
    deadline = time.monotonic() + 20
    pids: set[int] = set()
    while len(pids) != WORKERS:
        assert time.monotonic() < deadline, f"expected {WORKERS} workers, have {pids}"
        time.sleep(0.05)
        pids = worker_pids(server)
    answered: set[int] = set()
    with ThreadPoolExecutor(8) as pool:
        while answered != pids:
            assert time.monotonic() < deadline, f"workers {pids - answered} never answered"
            answered.update(pool.map(lambda _: stateless_whoami(server.url), range(16)))
    return frozenset(pids)


@contextmanager
def running_cluster(backend: str, folder: Path, worker_class: str, **server_options: Any) -> Iterator[Cluster]:
    """``gunicorn -w 2`` of ``worker_class`` on ``backend``, files in ``folder``;
    stopped (by its PID) on exit."""
    markers = folder / "markers"
    markers.mkdir()
    env = {
        "FLASK_MCP_BACKEND": backend_uri(backend, folder),
        "FLASK_MCP_SSE_HEARTBEAT": str(HEARTBEAT),
        "FLASK_MCP_CLIENT_TIMEOUT": "20",  # an unanswered question never holds a thread for long
        "STREAM_MARKERS": str(markers),
    }
    server = GunicornServer(APP, workers=WORKERS, worker_class=worker_class, env=env, **server_options)
    try:
        assert f"Using worker: {worker_class}" in server.output()
        yield Cluster(server, markers, warm_up(server))
    finally:
        server.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``gunicorn -w 2 --threads 8`` (gthread) on one backend, shared by the
    tests of that backend (each uses its own sessions and request ids)."""
    with running_cluster(request.param, tmp_path_factory.mktemp(request.param), "gthread", threads=THREADS) as c:
        yield c


def assert_clean_log(cluster: Cluster) -> None:
    output = cluster.server.output()
    assert "Traceback" not in output, output


# ---------------------------------------------------------------- messages


def json_body(response: requests.Response, method: str | None, version: str) -> dict[str, Any]:
    """The JSON-RPC body of a plain JSON answer, checked against the revision's schema."""
    assert response.headers.get("Content-Type", "").startswith("application/json"), (
        response.status_code,
        response.headers,
        response.text[:500],
    )
    body: dict[str, Any] = response.json()
    validate_message(version, method, body)
    return body


def validate_as(version: str, definition: str, message: dict[str, Any]) -> None:
    """Check a message against one named definition of the revision's schema."""
    _validator(version, definition).validate(message)


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def modern_call(
    name: str, arguments: dict[str, Any], request_id: str, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {**MODERN_META, **(meta or {})}},
    }


def stateless_whoami(url: str) -> int:
    """The pid of the worker that answered a 2026-07-28 call (on a new connection)."""
    response = requests.post(
        url, headers=modern_headers("tools/call", "whoami"), json=modern_call("whoami", {}, "whoami"), timeout=TIMEOUT
    )
    assert response.status_code == 200, (response.status_code, response.text[:500])
    return int(json_body(response, "tools/call", MODERN)["result"]["structuredContent"]["pid"])


class _Late(Enum):
    LATE = "the deadline passed"


class EventStream:
    """The JSON-RPC messages of one event-stream answer, read against deadlines.
    Each socket read is bounded by ``STREAM_TIMEOUT``; the heartbeats let the
    reader notice a deadline while no message comes."""

    def __init__(self, response: requests.Response) -> None:
        assert response.status_code == 200, (response.status_code, response.text[:500])
        assert response.headers.get("Content-Type", "").startswith("text/event-stream"), response.headers
        assert response.headers.get("Cache-Control") == "no-cache"
        self.response = response
        self._chunks = response.iter_content(chunk_size=None)
        self._buffer = b""
        self.ended = False
        #: The latest SSE ``id`` and ``retry`` seen (2025-11-25 resumable streams).
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def _read(self, until: float) -> dict[str, Any] | None | _Late:
        """The next message; ``None`` when the stream ended; ``LATE`` when
        ``until`` passed first."""
        while True:
            while b"\n\n" not in self._buffer:
                if time.monotonic() > until:
                    return _Late.LATE
                try:
                    self._buffer += next(self._chunks)
                except StopIteration:
                    assert not self._buffer.strip(), f"the stream ended mid-event: {self._buffer!r}"
                    self.ended = True
                    return None
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            lines = block.split(b"\n")
            ids = [line[3:].strip().decode() for line in lines if line.startswith(b"id:")]
            self.last_event_id = ids[-1] if ids else self.last_event_id
            self.retry_ms = next((int(line[6:]) for line in lines if line.startswith(b"retry:")), self.retry_ms)
            data = [line[5:].strip() for line in lines if line.startswith(b"data:")]
            if any(data):
                message: dict[str, Any] = json.loads(b"".join(data))
                return message
            # A comment (heartbeat), a priming event or a retry field: loop, which looks at the clock.

    def next(self, until: float, what: str = "a message") -> dict[str, Any] | None:
        """The next message, or ``None`` when the stream ended; fails at ``until``."""
        message = self._read(until)
        assert message is not _Late.LATE, f"no {what} before the deadline"
        return message

    def rest(self, until: float) -> list[dict[str, Any]]:
        """Every message until the stream ends, which must happen before ``until``."""
        messages = []
        while (message := self.next(until, "end of the stream")) is not None:
            messages.append(message)
        return messages

    def during(self, seconds: float) -> list[dict[str, Any]]:
        """The messages of the next ``seconds`` (the stream must stay open)."""
        until = time.monotonic() + seconds
        messages = []
        while (message := self._read(until)) is not _Late.LATE:
            assert message is not None, "the stream ended"
            messages.append(message)
        return messages

    def close(self) -> None:
        self.response.close()


def open_stream(url: str, body: dict[str, Any], headers: dict[str, str]) -> EventStream:
    return EventStream(requests.post(url, headers=headers, json=body, stream=True, timeout=STREAM_TIMEOUT))


class LegacySession:
    """A 2025-11-25 session driven with raw HTTP; every request is a new
    connection, so the requests spread over the workers."""

    def __init__(self, url: str, capabilities: dict[str, Any]) -> None:
        self.url = url
        response = requests.post(
            url,
            headers=JSON_HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": capabilities,
                    "clientInfo": {"name": "e2e-streaming", "version": "1.0"},
                },
            },
            timeout=TIMEOUT,
        )
        assert response.status_code == 200, (response.status_code, response.text[:500])
        assert json_body(response, "initialize", LEGACY)["result"]["protocolVersion"] == LEGACY
        self.id = response.headers["Mcp-Session-Id"]
        initialized = self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202, (initialized.status_code, initialized.text[:500])

    @property
    def headers(self) -> dict[str, str]:
        return {**JSON_HEADERS, "Mcp-Session-Id": self.id, "MCP-Protocol-Version": LEGACY}

    def send(self, message: dict[str, Any]) -> requests.Response:
        return requests.post(self.url, headers=self.headers, json=message, timeout=TIMEOUT)

    def request(self, method: str, params: dict[str, Any], request_id: str) -> dict[str, Any]:
        response = self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        assert response.status_code == 200, (response.status_code, response.text[:500])
        return json_body(response, method, LEGACY)

    def open(self, method: str, params: dict[str, Any], request_id: str) -> EventStream:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return open_stream(self.url, body, self.headers)

    def end(self) -> None:
        assert requests.delete(self.url, headers=self.headers, timeout=TIMEOUT).status_code == 200


class PinnedConnection:
    """One keep-alive TCP connection, hence one gunicorn worker (see the module
    docstring); ``pid`` is that worker, learned with ``whoami``."""

    def __init__(self, connection: http.client.HTTPConnection) -> None:
        self._connection = connection
        if connection.sock is None:
            connection.connect()
        self._socket = connection.sock
        self.pid = self.whoami()

    def post(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes]:
        """Send one message on this connection: (status, content type, body)."""
        assert self._connection.sock is self._socket, "the pinned connection was closed"
        self._connection.request("POST", "/mcp", body=json.dumps(message).encode(), headers=headers)
        response = self._connection.getresponse()
        body = response.read()
        # http.client drops the socket when the server closes the connection
        # after an answer; a later request would then open a new one, maybe to
        # another worker, so this must not happen.
        assert self._connection.sock is self._socket, f"the server closed the connection after a {response.status}"
        return response.status, response.getheader("Content-Type", ""), body

    def get(self, headers: dict[str, str]) -> tuple[int, str, bytes]:
        """A GET on this connection, read to its end: (status, content type, body)."""
        assert self._connection.sock is self._socket, "the pinned connection was closed"
        self._connection.request("GET", "/mcp", headers=headers)
        response = self._connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()

    def whoami(self) -> int:
        status, content_type, body = self.post(
            modern_call("whoami", {}, "pinned-whoami"), modern_headers("tools/call", "whoami")
        )
        assert status == 200 and content_type.startswith("application/json"), (status, content_type, body[:500])
        message = json.loads(body)
        validate_message(MODERN, "tools/call", message)
        return int(message["result"]["structuredContent"]["pid"])

    def close(self) -> None:
        self._connection.close()


class _HasPid(Protocol):
    pid: int


Pinned = TypeVar("Pinned", bound=_HasPid)


def connection_to_worker(port: int, wrap: Callable[[http.client.HTTPConnection], Pinned],
                         wanted: Callable[[int], bool], what: str, *, timeout: float = TIMEOUT) -> Pinned:
    """A new connection (``wrap`` learns its worker's ``pid``) served by a
    worker ``wanted`` accepts. Connections are opened a few at a time, all
    before the first request (so that both workers may accept some); the
    others are closed."""
    seen: list[int] = []
    for attempt in range(20):
        # A pause between batches: a worker that is busy (or starved of CPU on a loaded
        # machine) accepts nothing until it runs again, and the other takes every connection.
        time.sleep(0.05 * attempt)
        batch = [http.client.HTTPConnection("127.0.0.1", port, timeout=timeout) for _ in range(4)]
        chosen: tuple[http.client.HTTPConnection, Pinned] | None = None
        try:
            for connection in batch:
                connection.connect()
            for connection in batch:
                candidate = wrap(connection)
                seen.append(candidate.pid)
                if wanted(candidate.pid):
                    chosen = connection, candidate
                    break
        finally:
            for connection in batch:
                if chosen is None or connection is not chosen[0]:
                    connection.close()
        if chosen is not None:
            return chosen[1]
    raise AssertionError(f"no new connection reached {what} in 80 attempts (workers seen: {seen})")


def pin(cluster: Cluster, wanted: Callable[[int], bool], what: str) -> PinnedConnection:
    """A new connection served by a worker ``wanted`` accepts."""
    return connection_to_worker(cluster.port, PinnedConnection, wanted, what)


def wait_for_marker(path: Path, until: float) -> dict[str, Any]:
    while not path.exists():
        assert time.monotonic() < until, f"{path.name} was never written: the call did not stop"
        time.sleep(0.05)
    record: dict[str, Any] = json.loads(path.read_text())
    return record


# ---------------------------------------------------------------- 1. progress and logs


def assert_counted_in_order(version: str, messages: list[dict[str, Any]], request_id: str, token: str, n: int) -> None:
    """Progress i and the log "step i" for i = 1..n, in that order, then the result, then nothing."""
    expected = []
    for i in range(1, n + 1):
        expected += [("notifications/progress", float(i)), ("notifications/message", f"step {i}")]
    assert messages, "the stream ended without a message"
    *notes, last = messages
    seen = []
    for note in notes:
        validate_message(version, None, note)
        assert "id" not in note, note
        if note["method"] == "notifications/progress":
            step = note["params"]["progress"]
            assert note["params"] == {"progressToken": token, "progress": step, "total": n, "message": f"step {step}"}
            seen.append((note["method"], float(step)))
        else:
            assert note["method"] == "notifications/message", note
            assert note["params"]["level"] == "info", note
            seen.append((note["method"], note["params"]["data"]))
    assert seen == expected
    validate_message(version, "tools/call", last)
    assert last["id"] == request_id
    assert last["result"]["structuredContent"]["counted"] == n


def test_progress_and_log_notifications_arrive_in_order_before_the_result(cluster: Cluster) -> None:
    n = 5
    stream = open_stream(
        cluster.url,
        modern_call("count", {"n": n}, "count-2026",
                    meta={"progressToken": "count-2026", "io.modelcontextprotocol/logLevel": "info"}),
        modern_headers("tools/call", "count"),
    )
    try:
        messages = stream.rest(time.monotonic() + SCENARIO)
    finally:
        stream.close()
    assert_counted_in_order(MODERN, messages, "count-2026", "count-2026", n)

    session = LegacySession(cluster.url, {})
    assert session.request("logging/setLevel", {"level": "info"}, "level")["result"] == {}
    stream = session.open("tools/call", {"name": "count", "arguments": {"n": n},
                                         "_meta": {"progressToken": "count-legacy"}}, "count-legacy")
    try:
        messages = stream.rest(time.monotonic() + SCENARIO)
    finally:
        stream.close()
    assert_counted_in_order(LEGACY, messages, "count-legacy", "count-legacy", n)
    session.end()
    assert_clean_log(cluster)


# ---------------------------------------------------------------- 2. a question answered elsewhere


def test_a_legacy_elicitation_answered_through_the_other_worker_completes(cluster: Cluster) -> None:
    """Six times: the call waits in one worker (it logs which before asking),
    the answer is POSTed on a connection pinned to the other worker, and the
    call ends with the answer in its greeting."""
    session = LegacySession(cluster.url, {"elicitation": {}})
    assert session.request("logging/setLevel", {"level": "info"}, "level")["result"] == {}
    placements = []
    for rep in range(6):
        request_id = f"ask-{rep}"
        until = time.monotonic() + SCENARIO
        stream = session.open("tools/call", {"name": "ask_name", "arguments": {}}, request_id)
        try:
            log = stream.next(until, "log line naming the worker")
            assert log is not None
            validate_message(LEGACY, None, log)
            assert log["method"] == "notifications/message", log
            holder = int(log["params"]["data"]["worker"])
            assert holder in cluster.workers

            question = stream.next(until, "elicitation/create")
            assert question is not None
            validate_as(LEGACY, "ElicitRequest", question)
            assert question["method"] == "elicitation/create"
            assert question["params"] == {"message": "What is your name?", "requestedSchema": NAME_SCHEMA}

            other = pin(cluster, lambda pid: pid != holder, f"a worker other than {holder}")  # noqa: B023
            try:
                answer = {"jsonrpc": "2.0", "id": question["id"],
                          "result": {"action": "accept", "content": {"name": f"Ada {rep}"}}}
                status, _, body = other.post(answer, session.headers)
                assert status == 202, (status, body[:500])
                answered_by = other.whoami()  # the same connection, so the worker that took the answer
            finally:
                other.close()
            assert answered_by == other.pid != holder

            result = stream.next(until, "result")
            assert result is not None
            validate_message(LEGACY, "tools/call", result)
            assert result["id"] == request_id
            assert not result["result"].get("isError"), result
            assert result["result"]["structuredContent"] == {"greeting": f"Hello, Ada {rep}!", "pid": holder}
            assert stream.next(until, "end of the stream") is None
        finally:
            stream.close()
        placements.append((holder, answered_by))
    assert len(placements) == 6 and all(holder != answered for holder, answered in placements), placements
    session.end()
    assert_clean_log(cluster)


# ---------------------------------------------------------------- 3. cancellation


@pytest.mark.parametrize("through", ["other-worker", "same-worker"])
def test_a_legacy_cancellation_stops_the_call_at_its_next_context_call(cluster: Cluster, through: str) -> None:
    """``slow`` would report progress for 10 s; ``notifications/cancelled``,
    POSTed on a connection pinned to the other (or the same) worker, must end
    its stream without a result and stop it within a few beats."""
    session = LegacySession(cluster.url, {})
    request_id = f"slow-{uuid.uuid4().hex}"
    until = time.monotonic() + SCENARIO  # shorter than the 10 s the call runs uncancelled
    stream = session.open("tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": request_id}},
                          request_id)
    try:
        first = stream.next(until, "first progress report")
        assert first is not None
        validate_message(LEGACY, None, first)
        assert first["method"] == "notifications/progress" and first["params"]["progress"] == 1, first
        holder = int(first["params"]["message"].split()[-1])  # "worker <pid>"
        assert holder in cluster.workers

        if through == "other-worker":
            connection = pin(cluster, lambda pid: pid != holder, f"a worker other than {holder}")
        else:
            connection = pin(cluster, lambda pid: pid == holder, f"worker {holder}")
        try:
            sent = time.time()
            status, _, body = connection.post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": request_id, "reason": "the e2e test changed its mind"}},
                session.headers,
            )
            assert status == 202, (status, body[:500])
            assert connection.whoami() == connection.pid
        finally:
            connection.close()
        assert (connection.pid != holder) == (through == "other-worker")

        rest = stream.rest(until)  # the stream must end, long before the 10 s
    finally:
        stream.close()
    for message in rest:
        validate_message(LEGACY, None, message)
        assert message.get("method") == "notifications/progress", f"something else than progress: {message}"
    assert all("id" not in m for m in rest), "a cancelled call must get no result"

    marker = wait_for_marker(cluster.markers / f"{request_id}.json", until)
    assert marker["outcome"] == "RequestCancelled", marker
    assert marker["pid"] == holder
    assert marker["stopped"] - sent < 2.0, f"stopped {marker['stopped'] - sent:.2f} s after the cancellation"
    assert marker["stopped"] - marker["started"] < 5.0, marker
    session.end()
    assert_clean_log(cluster)


@pytest.mark.parametrize("through", ["other-worker", "same-worker"])
def test_a_legacy_call_answered_as_plain_json_is_cancelled_too(cluster: Cluster, through: str) -> None:
    """``slow`` without a progress token answers as plain JSON (nothing streams);
    ``notifications/cancelled`` sent to the other (or the same) worker stops it
    within a second, and the POST gets no result: ``202``, empty."""
    session = LegacySession(cluster.url, {})
    request_id = f"plain-{uuid.uuid4().hex}"
    holder = pin(cluster, lambda pid: True, "any worker")
    answer: list[tuple[int, str, bytes]] = []
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}
    caller = threading.Thread(target=lambda: answer.append(holder.post(call, session.headers)))
    until = time.monotonic() + SCENARIO
    try:
        caller.start()
        time.sleep(0.5)  # the call is running in the holder's worker
        if through == "other-worker":
            connection = pin(cluster, lambda pid: pid != holder.pid, f"a worker other than {holder.pid}")
        else:
            connection = pin(cluster, lambda pid: pid == holder.pid, f"worker {holder.pid}")
        try:
            sent = time.time()
            status, _, body = connection.post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": request_id, "reason": "the e2e test changed its mind"}},
                session.headers,
            )
            assert status == 202, (status, body[:500])
        finally:
            connection.close()
        assert (connection.pid != holder.pid) == (through == "other-worker")
        caller.join(max(until - time.monotonic(), 0))
        assert not caller.is_alive(), "the cancelled call never answered"
    finally:
        holder.close()
    status, content_type, body = answer[0]
    assert (status, body) == (202, b""), (status, content_type, body[:500])
    marker = wait_for_marker(cluster.markers / f"{request_id}.json", until)
    assert marker["outcome"] == "RequestCancelled", marker
    assert marker["pid"] == holder.pid
    assert marker["stopped"] - sent < 1.0, f"stopped {marker['stopped'] - sent:.2f} s after the cancellation"
    session.end()
    assert_clean_log(cluster)


# ---------------------------------------------------------------- 4. listen streams


def test_a_tool_list_change_made_by_either_worker_reaches_a_listen_stream(cluster: Cluster) -> None:
    """A listen stream is held by one worker; ``change_tools`` runs once in each
    worker (pinned connections), so one change is made by the worker holding
    the stream and one by the other. Twice, with two streams."""
    for rep in range(2):
        listen_id = f"listen-{rep}"
        body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
        validate_as(MODERN, "SubscriptionsListenRequest", body)
        stream = open_stream(cluster.url, body, modern_headers("subscriptions/listen"))
        try:
            until = time.monotonic() + SCENARIO
            ack = stream.next(until, "acknowledgement")
            assert ack is not None
            validate_as(MODERN, "SubscriptionsAcknowledgedNotification", ack)
            assert ack["params"] == {"_meta": {SUB_KEY: listen_id}, "notifications": {"toolsListChanged": True}}

            expected = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                        "params": {"_meta": {SUB_KEY: listen_id}}}
            for worker in sorted(cluster.workers):
                until = time.monotonic() + SCENARIO
                connection = pin(cluster, lambda pid: pid == worker, f"worker {worker}")  # noqa: B023
                try:
                    status, content_type, raw = connection.post(
                        modern_call("change_tools", {}, f"change-{rep}-{worker}"),
                        modern_headers("tools/call", "change_tools"),
                    )
                finally:
                    connection.close()
                assert status == 200 and content_type.startswith("application/json"), (status, raw[:500])
                changed = json.loads(raw)
                validate_message(MODERN, "tools/call", changed)
                assert changed["result"]["structuredContent"] == {"pid": worker}

                note = stream.next(until, f"tools/list_changed after a change in worker {worker}")
                assert note is not None
                validate_as(MODERN, "ToolListChangedNotification", note)
                assert note == expected
                # The tool was added and removed: more of the same may follow; let them pass.
                for later in stream.during(0.5):
                    assert later == expected, later
        finally:
            stream.close()
    assert_clean_log(cluster)


# ---------------------------------------------------------------- 4b. a stream resumed on the other worker


def sse_messages(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, message)`` of every event of a whole SSE body that carries one."""
    return [
        (sse_event_id(block), json.loads(data))
        for block in body.replace(b"\r\n", b"\n").split(b"\n\n")
        for data in parse_sse(block)
    ]


def test_a_stream_let_go_mid_call_is_resumed_on_the_other_worker(cluster: Cluster) -> None:
    """2025-11-25: the call lets its connection go after a third of its progress;
    the client resumes with Last-Event-ID on a connection pinned to the worker
    *not* running the call, which replays what it missed from the backend and
    follows the rest live (the call is still running) up to the result."""
    n = 15
    session = LegacySession(cluster.url, {})
    stream = session.open("tools/call", {"name": "relay", "arguments": {"n": n}, "_meta": {"progressToken": "relay"}},
                          "relay-1")
    try:
        first = stream.rest(time.monotonic() + SCENARIO)  # the server ends this connection itself
    finally:
        stream.close()
    assert [m["params"]["progress"] for m in first] == list(range(1, n // 3 + 1)), first
    assert stream.retry_ms == 100 and stream.last_event_id is not None
    runner = int(first[0]["params"]["message"].split()[1])
    other = pin(cluster, lambda pid: pid != runner, "the worker not running the call")
    try:
        status, content_type, body = other.get(
            {"Accept": "text/event-stream", "Last-Event-ID": stream.last_event_id, "Mcp-Session-Id": session.id,
             "MCP-Protocol-Version": LEGACY}
        )
    finally:
        other.close()
    assert status == 200 and content_type.startswith("text/event-stream"), (status, body[:300])
    resumed = sse_messages(body)
    *notes, (final_id, final) = resumed
    for _, note in notes:
        validate_message(LEGACY, None, note)
    assert [m["params"]["progress"] for _, m in notes] == list(range(n // 3 + 1, n + 1))
    validate_message(LEGACY, "tools/call", final)
    assert final["id"] == "relay-1" and final["result"]["structuredContent"] == {"counted": n, "pid": runner}
    ids = [event_id for event_id, _ in resumed]
    assert None not in ids and len(set(ids)) == len(ids) and final_id == ids[-1]
    session.end()
    assert_clean_log(cluster)


# ---------------------------------------------------------------- 5. the official Python client


class Person:
    """The official client's callbacks for a person called ``name``: every progress
    report kept, every question kept and answered with the name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reports: list[tuple[float, float | None, str | None]] = []
        self.asked: list[Any] = []

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.reports.append((progress, total, message))

    async def answer(self, context: ClientRequestContext, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action="accept", content={"name": self.name})

    async def heard(self, n: int) -> None:
        """Progress callbacks run as tasks of their own: let the last of ``n`` reports land."""
        for _ in range(100):
            if len(self.reports) >= n:
                return
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_client_gets_every_progress_report_and_answers_an_elicitation(
    cluster: Cluster, mode: str
) -> None:
    """Default mode speaks 2026-07-28 (the question is an ``input_required``
    result, answered on a retried call); legacy mode gets ``elicitation/create``
    on the call's stream and POSTs the answer."""
    n = 6
    person = Person("Grace")
    reports, asked = person.reports, person.asked

    async def scenario() -> tuple[str, Any, Any]:
        async with Client(cluster.url, mode=mode, elicitation_callback=person.answer,
                          read_timeout_seconds=15) as client:
            counted = await client.call_tool("count", {"n": n}, progress_callback=person.progress)
            await person.heard(n)
            greeted = await client.call_tool("ask_name", {})
            return str(client.protocol_version), counted, greeted

    version, counted, greeted = asyncio.run(asyncio.wait_for(scenario(), 45))

    assert version == (MODERN if mode == "auto" else LEGACY)
    assert counted.is_error is False
    assert counted.structured_content["counted"] == n
    assert reports == [(float(i), float(n), f"step {i}") for i in range(1, n + 1)]

    assert len(asked) == 1, asked
    assert asked[0].message == "What is your name?"
    assert asked[0].requested_schema == NAME_SCHEMA
    assert greeted.is_error is False
    assert greeted.structured_content["greeting"] == "Hello, Grace!"
    assert greeted.structured_content["pid"] in cluster.workers
    assert_clean_log(cluster)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_client_calls_an_async_def_tool_that_awaits_progress_and_a_question(
    cluster: Cluster, mode: str
) -> None:
    """An ``async def`` tool runs through the app's ``ensure_sync`` in the worker
    (gthread here, gevent in test_e2e_gevent.py): its awaited progress reports and
    question reach the official client as a plain tool's do, in both modes."""
    n = 3
    person = Person("Ada")
    reports, asked = person.reports, person.asked

    async def scenario() -> Any:
        async with Client(cluster.url, mode=mode, elicitation_callback=person.answer,
                          read_timeout_seconds=15) as client:
            result = await client.call_tool("count_then_ask", {"n": n}, progress_callback=person.progress)
            await person.heard(n)
            return result

    result = asyncio.run(asyncio.wait_for(scenario(), 45))

    assert result.is_error is False, result
    content = dict(result.structured_content)
    assert content.pop("pid") in cluster.workers
    assert content == {"greeting": "Hello, Ada!", "counted": n, "in_a_coroutine": True, "g": "count_then_ask"}
    assert [a.message for a in asked] == ["What is your name?"]
    if mode == "legacy":  # one run: the progress went out on the call's stream before the question
        assert reports == [(float(i), float(n), f"step {i}") for i in range(1, n + 1)]
    else:  # 2026-07-28: the call runs again with the answer, and reports again each round
        assert reports[:n] == [(float(i), float(n), f"step {i}") for i in range(1, n + 1)]
    assert_clean_log(cluster)


def test_the_official_client_resumes_a_stream_the_server_let_go(cluster: Cluster) -> None:
    """Legacy mode (2025-11-25): the call lets its connection go; the official
    client reconnects with Last-Event-ID (after the ``retry`` the call sent) on
    whichever worker, and receives the rest of the progress and the result."""
    n = 12
    reports: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(progress)

    async def scenario() -> tuple[str, Any]:
        async with Client(cluster.url, mode="legacy", read_timeout_seconds=15) as client:
            result = await client.call_tool("relay", {"n": n}, progress_callback=on_progress)
            for _ in range(100):
                if len(reports) >= n:
                    break
                await asyncio.sleep(0.02)
            return str(client.protocol_version), result

    version, result = asyncio.run(asyncio.wait_for(scenario(), 45))
    assert version == LEGACY
    assert result.is_error is False
    assert result.structured_content["counted"] == n
    assert sorted(reports) == [float(i) for i in range(1, n + 1)]  # each report once, none lost
    assert_clean_log(cluster)
