"""Legacy ``notifications/cancelled`` for calls answered as plain JSON (no
progress token, no logs, no questions): the tool sees the cancellation through
``ctx.cancelled`` / ``check_cancelled()`` within a second, from the same app or
another one sharing the backend (as another gunicorn worker would), and the call
gets no JSON-RPC answer (``202``, empty), as the spec asks of a cancelled request.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port
from flask import Flask
from redis_server import start_redis_server, stop_redis_server

from flask_mcp import MCP, Context
from flask_mcp.backends import open_backend
from flask_mcp.protocol.cancellation import Cancellations
from flask_mcp.testing import MCPResponse, MCPTestClient

LEGACY = "2025-11-25"
#: How long ``wait`` runs when nobody cancels it.
RUNS_FOR = 10.0


class Calls:
    """What the tools saw: when each started and when it noticed its cancellation."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.noticed: dict[str, float] = {}
        self.finished: list[str] = []


def make_app(uri: str, calls: Calls) -> Flask:
    app = Flask(__name__)
    app.config["MCP_BACKEND"] = uri
    mcp = MCP(app)

    @mcp.tool
    def wait(how: str, ctx: Context) -> str:
        """Runs for RUNS_FOR seconds unless cancelled (looking with ``how``)."""
        calls.started.set()
        deadline = time.monotonic() + RUNS_FOR
        try:
            while time.monotonic() < deadline:
                if how == "flag" and ctx.cancelled:
                    calls.noticed[how] = time.monotonic()
                    return "stopped early"
                if how == "check":
                    try:
                        ctx.check_cancelled()
                    except BaseException:
                        calls.noticed[how] = time.monotonic()
                        raise
                time.sleep(0.01)
            return "finished"
        finally:
            calls.finished.append(how)

    @mcp.tool
    def stubborn(ctx: Context) -> str:
        """Never looks at its cancellation; takes a second."""
        calls.started.set()
        time.sleep(1.0)
        calls.finished.append("stubborn")
        return "done anyway"

    return app


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Flask, Flask, Calls]]:
    """Two apps on one SQLite file: two workers of one deployment."""
    calls = Calls()
    uri = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    yield make_app(uri, calls), make_app(uri, calls), calls


def session_pair(first: Flask, second: Flask) -> tuple[MCPTestClient, MCPTestClient]:
    """One legacy session, driven through either app."""
    a = MCPTestClient(first, protocol_version=LEGACY)
    a.initialize()
    b = MCPTestClient(second, protocol_version=LEGACY)
    b.session_id, b.negotiated_version = a.session_id, a.negotiated_version
    return a, b


def call_in_background(client: MCPTestClient, name: str, arguments: dict[str, Any], request_id: str) -> Any:
    answer: list[MCPResponse] = []
    thread = threading.Thread(target=lambda: answer.append(client.call_tool(name, arguments, id=request_id)))
    thread.start()

    def result() -> MCPResponse:
        thread.join(RUNS_FOR + 5)
        assert not thread.is_alive(), "the call never ended"
        return answer[0]

    return result


def assert_no_answer(response: MCPResponse) -> None:
    assert response.status_code == 202, (response.status_code, response.http.data[:300])
    assert response.http.data == b""
    assert response.messages == []


@pytest.mark.parametrize("how", ["flag", "check"])
@pytest.mark.parametrize("through", ["same-app", "other-app"])
def test_a_plain_json_legacy_call_sees_its_cancellation_within_a_second(
    shared: tuple[Flask, Flask, Calls], how: str, through: str
) -> None:
    first, second, calls = shared
    runner, other = session_pair(first, second)
    canceller = runner if through == "same-app" else other
    result = call_in_background(runner, "wait", {"how": how}, f"wait-{how}")
    assert calls.started.wait(5), "the tool never started"
    sent = time.monotonic()
    ack = canceller.notify("notifications/cancelled", {"requestId": f"wait-{how}", "reason": "changed my mind"})
    assert ack.status_code == 202
    response = result()
    assert how in calls.noticed, f"the tool never saw its cancellation (it {calls.finished})"
    assert calls.noticed[how] - sent < 1.0, f"seen {calls.noticed[how] - sent:.2f} s after the cancellation"
    assert_no_answer(response)


def test_a_cancelled_call_that_ignores_it_still_gets_no_answer(shared: tuple[Flask, Flask, Calls]) -> None:
    first, second, calls = shared
    runner, other = session_pair(first, second)
    result = call_in_background(runner, "stubborn", {}, "stubborn-1")
    assert calls.started.wait(5)
    other.notify("notifications/cancelled", {"requestId": "stubborn-1"})
    assert_no_answer(result())
    assert calls.finished == ["stubborn"]  # it ran to its end; only its answer was dropped


def test_a_cancellation_of_another_id_or_session_leaves_the_call_alone(shared: tuple[Flask, Flask, Calls]) -> None:
    first, second, calls = shared
    runner, other = session_pair(first, second)
    stranger = MCPTestClient(second, protocol_version=LEGACY)
    stranger.initialize()
    result = call_in_background(runner, "stubborn", {}, "mine")
    assert calls.started.wait(5)
    other.notify("notifications/cancelled", {"requestId": "not-mine"})
    other.notify("notifications/cancelled", {"requestId": 7})
    stranger.notify("notifications/cancelled", {"requestId": "mine"})  # the same id in another session
    response = result()
    assert response.status_code == 200
    assert response.result["content"] == [{"type": "text", "text": "done anyway"}]


def test_a_cancelled_request_id_can_be_used_again_afterwards(shared: tuple[Flask, Flask, Calls]) -> None:
    first, second, calls = shared
    runner, _ = session_pair(first, second)
    result = call_in_background(runner, "wait", {"how": "flag"}, "again")
    assert calls.started.wait(5)
    runner.notify("notifications/cancelled", {"requestId": "again"})
    assert_no_answer(result())
    assert runner.call_tool("stubborn", {}, id="again").result["content"][0]["text"] == "done anyway"


def test_cancellations_are_heard_again_once_a_failed_backend_is_back(tmp_path: Path) -> None:
    """The per-process subscription is lost when Redis goes away under a call in
    flight; the reader subscribes again by itself, without waiting for a new call."""
    port = free_port()
    server = start_redis_server(port, why="the test stops and restarts its own")
    url = f"redis://127.0.0.1:{port}/0"
    listening = open_backend(url, timeout=60, instance_path=str(tmp_path))
    assert listening.bus is not None  # a redis:// backend has a bus
    cancellations = Cancellations(listening.bus, interval=0.05)
    try:
        watch = cancellations.watch("session-1", "call-1")
        stop_redis_server(server)
        time.sleep(0.3)  # the reader finds the subscription broken and lets it go
        server = start_redis_server(port, why="the test stops and restarts its own")
        deadline = time.monotonic() + 5
        sender = open_backend(url, timeout=60, instance_path=str(tmp_path))
        assert sender.bus is not None
        try:
            while not watch.is_cancelled() and time.monotonic() < deadline:
                Cancellations(sender.bus).publish("session-1", "call-1")  # until the reader is back
                time.sleep(0.1)
        finally:
            sender.close()
        assert watch.is_cancelled(), "the cancellation was never heard after Redis came back"
        watch.close()
    finally:
        stop_redis_server(server)
        listening.close()


@pytest.mark.parametrize("uri", ["memory://", "redis"])
def test_the_reader_hands_a_cancellation_over_as_it_arrives(uri: str, tmp_path: Path) -> None:
    """The background reader waits on the subscription instead of sleeping
    between looks: a cancellation reaches its call's flag (without the call
    looking) well within ``interval``."""
    server = None
    if uri == "redis":
        port = free_port()
        server = start_redis_server(port, why="the test starts its own")
        uri = f"redis://127.0.0.1:{port}/0"
    backend = open_backend(uri, timeout=60, instance_path=str(tmp_path))
    assert backend.bus is not None
    cancellations = Cancellations(backend.bus, interval=30.0)
    try:
        watch = cancellations.watch("session-1", "call-1")
        time.sleep(0.2)  # the reader is waiting on the subscription by now
        cancellations.publish("session-1", "call-1")
        deadline = time.monotonic() + 2
        while not watch.cancelled:  # the flag itself: no drain() by the call
            assert time.monotonic() < deadline, "the cancellation waited for the reader's next look"
            time.sleep(0.005)
        watch.close()
    finally:
        backend.close()
        if server is not None:
            stop_redis_server(server)


def test_a_call_that_joins_while_the_reader_closes_the_idle_subscription_still_hears_its_cancellation(
    tmp_path: Path,
) -> None:
    """Calls join and leave without the lock; the reader lets an idle
    subscription go in two steps. With ``idle_close=0`` it tries between
    every two calls: each call must still hear its own cancellation (one that
    joined a subscription being closed would wait here until the deadline)."""
    backend = open_backend("memory://", timeout=60, instance_path=str(tmp_path))
    assert backend.bus is not None
    cancellations = Cancellations(backend.bus, interval=0.001, idle_close=0.0)
    closed_between = 0
    try:
        for n in range(400):
            had_thread = cancellations._thread is not None
            watch = cancellations.watch("session-1", n)
            closed_between += not had_thread
            cancellations.publish("session-1", n)
            deadline = time.monotonic() + 2
            while not watch.is_cancelled():
                assert time.monotonic() < deadline, f"call {n} never heard its cancellation"
                time.sleep(0.0005)
            watch.close()
            time.sleep(random.uniform(0, 0.002))  # the reader finds no call now and then, at varying moments
        assert closed_between > 1, "the reader never let the subscription go: the race was not exercised"
    finally:
        backend.close()
