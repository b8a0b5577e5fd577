"""One Redis pub/sub connection per worker process under a real
``gunicorn -k gevent --preload`` (issue #34): the workers are forked from a
master that loaded the app (and its Redis bus), and the gevent worker turns
the bus's dispatcher thread into a greenlet. Hundreds of listen streams hold
one subscriber client per worker on a private redis-server, all get a change,
leave no channel behind once closed, and after ``CLIENT KILL`` new streams
subscribe again."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator

import pytest
import redis
import requests
from conftest import GunicornServer, free_port, unavailable
from redis_server import start_redis_server, stop_redis_server
from test_e2e_streaming import (
    MODERN_META,
    SCENARIO,
    SUB_KEY,
    Cluster,
    EventStream,
    modern_call,
    modern_headers,
    open_stream,
    warm_up,
)

pytestmark = pytest.mark.e2e

APP = "tests.streaming_app:app"
STREAMS = 300
EVENTS = "flask-mcp:bus:flask-mcp:events"


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    port = free_port()
    server = start_redis_server(port, why="the test counts the clients of a server of its own")
    try:
        yield port
    finally:
        stop_redis_server(server)


@pytest.fixture(scope="module")
def cluster(redis_port: int) -> Iterator[Cluster]:
    if importlib.util.find_spec("gevent") is None:
        unavailable("gevent is not installed (it is in the test extra)")
    env = {"FLASK_MCP_BACKEND": f"redis://127.0.0.1:{redis_port}/0", "FLASK_MCP_SSE_HEARTBEAT": "0.5"}
    server = GunicornServer(APP, workers=2, worker_class="gevent", env=env,
                            extra_args=["--worker-connections", "1000", "--preload"])
    try:
        yield Cluster(server, server.log_path.parent, warm_up(server))
    finally:
        server.stop()


@pytest.fixture
def admin(redis_port: int) -> Iterator[redis.Redis]:
    client = redis.Redis(host="127.0.0.1", port=redis_port, protocol=2, socket_timeout=2, decode_responses=True)
    yield client
    client.close()


def subscribers(admin: redis.Redis) -> list[dict[str, str]]:
    return [c for c in admin.client_list() if "P" in c["flags"]]


def listen(url: str, listen_id: str) -> EventStream:
    body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
    stream = open_stream(url, body, modern_headers("subscriptions/listen"))
    try:
        ack = stream.next(time.monotonic() + SCENARIO, f"acknowledgement of {listen_id}")
        assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged", ack
    except BaseException:
        stream.close()
        raise
    return stream


def change_tools(url: str) -> None:
    response = requests.post(url, headers=modern_headers("tools/call", "change_tools"),
                             json=modern_call("change_tools", {}, "change"), timeout=SCENARIO)
    assert response.status_code == 200, (response.status_code, response.text[:500])


def numsub(admin: redis.Redis) -> int:
    return int(admin.pubsub_numsub(EVENTS)[0][1])


def test_hundreds_of_listen_streams_hold_one_pubsub_connection_per_worker(
    cluster: Cluster, admin: redis.Redis
) -> None:
    streams: list[EventStream] = []
    try:
        for i in range(STREAMS):
            streams.append(listen(cluster.url, f"bus-{i}"))
        held = subscribers(admin)
        assert 1 <= len(held) <= len(cluster.workers), held
        assert 1 <= numsub(admin) <= len(cluster.workers)  # the channel once per worker
        assert all(c["sub"] == "1" for c in held), held

        change_tools(cluster.url)
        until = time.monotonic() + SCENARIO
        for i, stream in enumerate(streams):
            note = stream.next(until, f"tools/list_changed on stream {i}")
            assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                            "params": {"_meta": {SUB_KEY: f"bus-{i}"}}}, note
    finally:
        for stream in streams:
            stream.close()
    # Each stream notices its client left within a heartbeat; the last one unsubscribes.
    deadline = time.monotonic() + SCENARIO
    while numsub(admin):
        assert time.monotonic() < deadline, f"{numsub(admin)} subscribers of the events channel left"
        time.sleep(0.1)
    assert "Traceback" not in cluster.server.output()


def test_after_client_kill_new_listen_streams_subscribe_again(cluster: Cluster, admin: redis.Redis) -> None:
    first = [listen(cluster.url, f"before-{i}") for i in range(20)]
    try:
        killed = {c["id"] for c in subscribers(admin)}
        assert killed
        admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        for stream in first:  # every stream of the process hears it: its stream ends
            stream.rest(time.monotonic() + SCENARIO)
    finally:
        for stream in first:
            stream.close()
    again = [listen(cluster.url, f"after-{i}") for i in range(20)]
    try:
        assert {c["id"] for c in subscribers(admin)}.isdisjoint(killed)
        change_tools(cluster.url)
        until = time.monotonic() + SCENARIO
        for i, stream in enumerate(again):
            note = stream.next(until, f"tools/list_changed on stream after-{i}")
            assert note is not None and note["method"] == "notifications/tools/list_changed", note
    finally:
        for stream in again:
            stream.close()
