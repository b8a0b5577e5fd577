"""The operator gauges (flask_mcp.telemetry.gauges, made in flask_mcp.telemetry.otel): sessions
live, tasks live, running and ended, streams open; read with the SDK's
InMemoryMetricReader through Flask's test client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import pytest
from conftest import connect, free_port
from flask import Flask
from redis_server import start_redis_server, stop_redis_server

from flask_mcp import MCP, Context
from flask_mcp.backends.contracts import NotCountable, StoreCount
from flask_mcp.telemetry.gauges import CachedCount
from flask_mcp.testing import MCPTestClient

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install opentelemetry-sdk)")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint  # noqa: E402

MakeClient = Callable[..., MCPTestClient]
TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def release() -> threading.Event:
    """Lets the app's waiting tools finish."""
    return threading.Event()


@pytest.fixture
def app(app: Flask, reader: InMemoryMetricReader, release: threading.Event) -> Flask:
    app.config.update(SECRET_KEY="gauge-tests", MCP_BACKEND="memory://")
    mcp = MCP(app)
    app.extensions["mcp"].telemetry.use(meter_provider=MeterProvider(metric_readers=[reader]))

    @mcp.tool(task="optional")
    def waits(ctx: Context) -> str:
        """Reports progress, then waits for the test to release it."""
        ctx.report_progress(1, 2)
        assert release.wait(10)
        return "released"

    return app


def _points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    """The metric's values by their attributes, at one collection."""
    data = reader.get_metrics_data()
    found: dict[tuple[tuple[str, Any], ...], Any] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        assert isinstance(point, NumberDataPoint)
                        found[tuple(sorted((point.attributes or {}).items()))] = point.value
    return found


def test_sessions_live_counts_the_store_and_is_cached(app: Flask, make_client: MakeClient,
                                                      reader: InMemoryMetricReader) -> None:
    for _ in range(3):
        connect(make_client, app, "2025-11-25")
    assert _points(reader, "flask_mcp.sessions.live") == {(): 3}
    connect(make_client, app, "2025-11-25")
    assert _points(reader, "flask_mcp.sessions.live") == {(): 3}  # counted once per MAX_AGE, not per collection
    cached = app.extensions["mcp"].telemetry.otel.sources.sessions
    cached.max_age = 0.0
    deadline = time.monotonic() + 10
    while _points(reader, "flask_mcp.sessions.live") != {(): 4}:  # the old count at once, the new one next
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_tasks_live_running_and_ended(app: Flask, make_client: MakeClient, reader: InMemoryMetricReader,
                                     release: threading.Event) -> None:
    client = connect(make_client, app, "2026-07-28", capabilities={"extensions": {TASKS: {}}})
    task_id = client.call_tool("waits").result["taskId"]
    assert _points(reader, "flask_mcp.tasks.running") == {(): 1}
    assert _points(reader, "flask_mcp.tasks.live") == _by_status(working=1)  # memory:// counts by status
    release.set()
    deadline = time.monotonic() + 10
    while client.get_task(task_id).result["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    while _points(reader, "flask_mcp.tasks.ended") != {(("flask_mcp.task.status", "completed"),): 1}:
        assert time.monotonic() < deadline  # the count follows the record's update by a moment
        time.sleep(0.01)
    assert _points(reader, "flask_mcp.tasks.running") == {(): 0}
    assert _points(reader, "flask_mcp.tasks.live") == _by_status(working=1)  # cached: counted once per MAX_AGE
    app.extensions["mcp"].telemetry.otel.sources.task_statuses.max_age = 0.0
    while _points(reader, "flask_mcp.tasks.live") != _by_status(completed=1):  # the old count, the new one next
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _by_status(**counts: int) -> dict[tuple[tuple[str, Any], ...], Any]:
    """``flask_mcp.tasks.live`` as _points reads it: every status, 0 unless given."""
    statuses = dict.fromkeys(("working", "input_required", "completed", "failed", "cancelled"), 0) | counts
    return {(("flask_mcp.task.status", status),): n for status, n in statuses.items()}


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_tasks_live_by_status_where_the_store_can_tell_and_in_total_where_not(
    store: str, tmp_path: Path, reader: InMemoryMetricReader, make_client: MakeClient
) -> None:
    app = Flask(__name__)
    if store == "redis":  # a private redis-server: the count is store-wide
        port = free_port()
        server = start_redis_server(port)
        backend = f"redis://127.0.0.1:{port}/0"
    else:
        backend = f"sqlite:///{tmp_path / 'tasks.sqlite3'}"
    try:
        app.config.update(SECRET_KEY="gauge-tests", MCP_BACKEND=backend)
        mcp = MCP(app)
        app.extensions["mcp"].telemetry.use(meter_provider=MeterProvider(metric_readers=[reader]))
        _one_task(mcp, app, make_client)
        if store == "sqlite":
            assert _points(reader, "flask_mcp.tasks.live") == _by_status(completed=1)
        else:  # Redis keeps no count by status (docs/observability.md): the total, unlabelled
            assert _points(reader, "flask_mcp.tasks.live") == {(): 1}
    finally:
        if store == "redis":
            stop_redis_server(server)


def _one_task(mcp: MCP, app: Flask, make_client: MakeClient) -> None:
    """Run one task to its end."""

    @mcp.tool(task="optional")
    def quick() -> str:
        """Ends at once."""
        return "done"

    client = connect(make_client, app, "2026-07-28", capabilities={"extensions": {TASKS: {}}})
    task_id = client.call_tool("quick").result["taskId"]
    deadline = time.monotonic() + 10
    while client.get_task(task_id).result["status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_streams_open_counts_a_streamed_response_while_it_is_open(
    app: Flask, make_client: MakeClient, reader: InMemoryMetricReader, release: threading.Event
) -> None:
    client = make_client(app, "2026-07-28")
    params = {"name": "waits", "arguments": {}, "_meta": {**client.request_meta(), "progressToken": "p"}}
    headers = {"Accept": "application/json, text/event-stream", **client.standard_headers("tools/call", params)}
    kinds = ("flask_mcp.stream.kind",)
    assert _points(reader, "flask_mcp.streams.open") == {((kinds[0], "long_lived"),): 0, ((kinds[0], "response"),): 0}
    response = app.test_client().post(
        "/mcp", data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
        content_type="application/json", headers=headers, buffered=False)
    assert response.mimetype == "text/event-stream"
    assert _points(reader, "flask_mcp.streams.open")[((kinds[0], "response"),)] == 1
    release.set()
    assert b"released" in b"".join(cast(Iterable[bytes], response.response))
    response.close()
    assert _points(reader, "flask_mcp.streams.open")[((kinds[0], "response"),)] == 0


class _Store:
    """A store whose count the test controls: how often it was asked, how long it takes."""

    def __init__(self) -> None:
        self.live = 0
        self.asked = 0
        self.go = threading.Event()
        self.go.set()

    def count(self) -> StoreCount:
        self.asked += 1
        assert self.go.wait(10)
        return StoreCount(self.live)


def test_a_cached_count_waits_at_most_its_bound_and_counts_once_per_age() -> None:
    store = _Store()
    now = [100.0]
    cached = CachedCount(store.count, wait=0.05, max_age=30.0, clock=lambda: now[0])
    store.live = 5
    assert cached.value() == 5 and store.asked == 1
    store.live = 6
    now[0] += 29
    assert cached.value() == 5 and store.asked == 1  # still fresh: no count
    now[0] += 2
    store.go.clear()  # the next count hangs (a slow store)
    started = time.monotonic()
    assert cached.value() == 5  # stale: the last count at once, a new one in the background
    assert time.monotonic() - started < 1
    deadline = time.monotonic() + 10
    while store.asked < 2:  # the background count began
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert cached.value() == 5 and store.asked == 2  # one count at a time
    store.go.set()
    while cached.value() != 6:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_first_count_that_hangs_is_given_up_after_the_wait() -> None:
    store = _Store()
    store.go.clear()
    cached = CachedCount(store.count, wait=0.05)
    started = time.monotonic()
    assert cached.value() is None
    assert 0.04 < time.monotonic() - started < 5
    store.go.set()


def test_a_store_that_cannot_count_is_not_asked_again() -> None:
    asked = []

    def cannot() -> StoreCount:
        asked.append(1)
        raise NotCountable("a cache keeps no list of its keys")

    cached = CachedCount(cannot, max_age=0.0)
    assert cached.value() is None
    assert cached.value() is None and cached.uncountable and len(asked) == 1
