"""Long-lived streams cannot take a server off the air (real gunicorn, real
sockets): a listen stream whose client went away frees its thread within
about a second, not at its next heartbeat (15 s by default, kept here), and
past ``MCP_STREAM_SHARE`` (0.5) of a worker's threads new streams get ``503``
with ``Retry-After``, so health checks and tool calls always find a thread.

Only loopback traffic; the servers are started here and stopped by their PID.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import JSON_HEADERS, GunicornServer, validate_message

pytestmark = pytest.mark.e2e

APP = "tests.streaming_app:app"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "e2e-reserve", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: The bound on every probe's answer while streams come and go.
PROMPT = 1.0


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


class Listen:
    """One ``subscriptions/listen`` POST on its own connection: either an open
    stream (read up to its acknowledgement) or a refusal (status, headers, body)."""

    def __init__(self, port: int, listen_id: str) -> None:
        self.id = listen_id
        body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.connection.request("POST", "/mcp", body=json.dumps(body), headers=modern_headers("subscriptions/listen"))
        response = self.connection.getresponse()
        self.status = response.status
        self.headers = {name.lower(): value for name, value in response.getheaders()}
        if self.status == 200:
            line = b""
            while b"subscriptions/acknowledged" not in line:
                line = response.readline()
                assert line, "the stream ended before its acknowledgement"
            self.body: Any = None
        else:
            self.body = json.loads(response.read())
            self.connection.close()

    @property
    def open(self) -> bool:
        return self.status == 200

    def drop(self) -> None:
        """The client goes away without a word."""
        self.connection.close()


def assert_refused(listen: Listen) -> None:
    assert listen.status == 503, (listen.status, listen.body)
    assert listen.headers.get("retry-after") == "1", listen.headers
    assert listen.headers.get("content-type", "").startswith("application/json"), listen.headers
    validate_message(MODERN, "subscriptions/listen", listen.body)
    assert listen.body["id"] == listen.id
    assert listen.body["error"]["code"] == -32603
    assert "MCP_STREAM_SHARE" in listen.body["error"]["message"]


class Prober:
    """Health checks and ``tools/call``s, one after the other on new connections,
    each timed, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.timings: list[tuple[str, float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            started = time.monotonic()
            try:
                if n % 2:
                    response = requests.get(self.url + "/health", timeout=5 * PROMPT)
                    outcome = "ok" if response.status_code == 200 and response.json()["status"] == "ok" else "bad"
                    kind = "health"
                else:
                    body = {"jsonrpc": "2.0", "id": f"probe-{n}", "method": "tools/call",
                            "params": {"name": "whoami", "arguments": {}, "_meta": META}}
                    response = requests.post(self.url, json=body, headers=modern_headers("tools/call", "whoami"),
                                             timeout=5 * PROMPT)
                    outcome = "ok" if response.status_code == 200 and "pid" in response.text else "bad"
                    kind = "tools/call"
            except requests.RequestException as exc:
                outcome, kind = f"failed: {exc}", "health" if n % 2 else "tools/call"
            self.timings.append((kind, time.monotonic() - started, outcome))
            self._stop.wait(0.05)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[GunicornServer]:
    workers, threads = request.param
    env = {"FLASK_MCP_BACKEND": f"sqlite:///{tmp_path / 'sessions.sqlite3'}", "STREAM_MARKERS": str(tmp_path)}
    server = GunicornServer(APP, workers=workers, threads=threads, env=env)
    try:
        yield server
    finally:
        server.stop()
    assert "Traceback" not in server.output(), server.output()


@pytest.mark.parametrize("server", [(2, 16)], indirect=True)
def test_forty_dropped_listen_streams_never_keep_health_checks_or_calls_waiting(server: GunicornServer) -> None:
    """The issue's scenario: 40 listen streams opened at once and dropped after
    0.5 s, on 2 workers x 16 threads; probes run before, during and after."""
    with Prober(server.url) as prober:
        time.sleep(0.5)
        with ThreadPoolExecutor(40) as pool:
            listens = list(pool.map(lambda i: Listen(server.port, f"drop-{i}"), range(40)))
        time.sleep(0.5)
        for listen in listens:
            listen.drop()
        dropped = time.monotonic()
        time.sleep(2.0)
        # Every stream freed its thread: each worker takes its share again.
        reopened = [Listen(server.port, f"again-{i}") for i in range(4)]
        freed_after = time.monotonic() - dropped
        for listen in reopened:
            listen.drop()
        time.sleep(0.5)
    opened = [listen for listen in listens if listen.open]
    refused = [listen for listen in listens if not listen.open]
    assert 0 < len(opened) <= 16, len(opened)  # at most 8 (half of 16 threads) per worker
    assert len(refused) == 40 - len(opened)
    for listen in refused:
        assert_refused(listen)
    assert all(listen.open for listen in reopened), [(r.status, r.body) for r in reopened]
    assert freed_after < 5, freed_after
    assert len(prober.timings) > 20, prober.timings
    kinds = {kind for kind, _, _ in prober.timings}
    assert kinds == {"health", "tools/call"}
    slow = [(kind, round(seconds, 2), outcome) for kind, seconds, outcome in prober.timings
            if seconds >= PROMPT or outcome != "ok"]
    assert not slow, f"{len(slow)} of {len(prober.timings)} probes were late or failed: {slow[:10]}"


@pytest.mark.parametrize("server", [(1, 4)], indirect=True)
def test_a_dropped_listen_stream_frees_its_thread_within_about_a_second(server: GunicornServer) -> None:
    """One worker with 4 threads holds 2 streams (its share); the third is
    refused; once the two clients leave, a new stream is taken within about
    a second (the heartbeat is the default 15 s)."""
    first = [Listen(server.port, f"hold-{i}") for i in range(2)]
    assert all(listen.open for listen in first), [(r.status, r.body) for r in first]
    third = Listen(server.port, "third")
    assert_refused(third)
    # Ordinary requests still get through while the streams are held.
    assert requests.get(server.url + "/health", timeout=PROMPT).status_code == 200

    for listen in first:
        listen.drop()
    dropped = time.monotonic()
    held: list[Listen] = []
    attempts = 0
    while len(held) < 2:  # both threads must be free again: two streams at once
        attempts += 1
        listen = Listen(server.port, f"again-{attempts}")
        if listen.open:
            held.append(listen)
            continue
        assert_refused(listen)
        assert time.monotonic() - dropped < 5, "the dropped streams kept their threads"
        time.sleep(0.05)
    freed_after = time.monotonic() - dropped
    for listen in held:
        listen.drop()
    assert freed_after < 1.5, f"the threads were freed {freed_after:.2f} s after the clients left"


@pytest.mark.parametrize("server", [(1, 4)], indirect=True)
def test_a_2026_call_whose_client_leaves_before_its_first_message_is_cancelled(
    server: GunicornServer, tmp_path: Path
) -> None:
    """``quiet`` sends nothing for 10 s; its client asked for progress, so the
    answer may become an event stream, and nothing has been written when the
    client leaves. Its thread notices within about a second and the call is
    cancelled (2026-07-28: a closed stream is a cancellation)."""
    body = {"jsonrpc": "2.0", "id": "quiet-1", "method": "tools/call",
            "params": {"name": "quiet", "arguments": {}, "_meta": {**META, "progressToken": "quiet-1"}}}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", "/mcp", body=json.dumps(body), headers=modern_headers("tools/call", "quiet"))
    time.sleep(0.5)  # the call is running
    connection.close()  # the client leaves before any answer
    left = time.time()
    marker = tmp_path / "quiet-1.json"
    deadline = time.monotonic() + 8
    while not marker.exists():
        assert time.monotonic() < deadline, "the call went on after its client left"
        time.sleep(0.05)
    record = json.loads(marker.read_text())
    assert record["outcome"] == "RequestCancelled", record
    assert record["stopped"] - left < 1.5, f"stopped {record['stopped'] - left:.2f} s after the client left"
