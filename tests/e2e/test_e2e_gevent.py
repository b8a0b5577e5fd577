"""Streaming under real gunicorn with the gevent worker (``-k gevent``, 2 workers),
on a SQLite file and on Redis: the worker monkey-patches ``threading``, ``queue``,
``time.sleep`` and sockets, so the thread a streamed request runs in, the
queues and events that relay its messages, the SQLite bus's polling and the
Redis bus's socket waits all become greenlets and cooperative waits.

Every scenario of tests/e2e/test_e2e_streaming.py runs again here, against this
module's ``cluster`` (its tests are copied into this module's namespace below,
so pytest collects them here too): progress and logs ahead of a result, a legacy
question answered through the other worker, cancellations, list changes made by
either worker reaching a listen stream, a stream resumed on the other worker,
and the official client. Plus what gevent is chosen for: many
idle listen streams (more than a gthread worker has threads) that hold no
worker, keep their heartbeats and all get a change, while POSTs still answer.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator

import pytest
import requests
import test_e2e_streaming
from conftest import unavailable
from test_e2e_streaming import (
    BACKENDS,
    LEGACY,
    MODERN,
    MODERN_META,
    SCENARIO,
    STREAM_TIMEOUT,
    SUB_KEY,
    THREADS,
    WORKERS,
    Cluster,
    EventStream,
    assert_clean_log,
    json_body,
    modern_call,
    modern_headers,
    open_stream,
    pin,
    running_cluster,
    warm_up,
)

# Every test of the gthread module runs here again, on this module's gevent ``cluster``.
globals().update({name: test for name, test in vars(test_e2e_streaming).items() if name.startswith("test_")})

pytestmark = pytest.mark.e2e

#: Listen streams held open at once: more than the threads of both workers of
#: the gthread cluster (2 x 8), so at least one gevent worker holds more streams
#: than a gthread worker could.
MANY = 3 * WORKERS * THREADS
#: More listen streams than a redis-py 8 client's connection pool holds (100), in at least one worker.
BEYOND_POOL = WORKERS * 110


@pytest.fixture(scope="module", params=BACKENDS)
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``gunicorn -w 2 -k gevent`` on one backend, shared by the tests of that backend."""
    if importlib.util.find_spec("gevent") is None:
        unavailable("gevent is not installed (it is in the test extra)")
    folder = tmp_path_factory.mktemp(f"gevent-{request.param}")
    with running_cluster(request.param, folder, "gevent", extra_args=["--worker-connections", "1000"]) as c:
        yield c


def listen(url: str, listen_id: str) -> EventStream:
    """An open ``subscriptions/listen`` stream for tool-list changes, its acknowledgement read."""
    body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
    stream = open_stream(url, body, modern_headers("subscriptions/listen"))
    try:
        ack = stream.next(time.monotonic() + SCENARIO, f"acknowledgement of {listen_id}")
        assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["_meta"] == {SUB_KEY: listen_id}
    except BaseException:
        stream.close()
        raise
    return stream


def test_many_idle_listen_streams_leave_the_workers_free_and_all_get_a_change(cluster: Cluster) -> None:
    streams: list[EventStream] = []
    try:
        for i in range(MANY):
            streams.append(listen(cluster.url, f"many-{i}"))

        # Both workers still answer ordinary calls (and a streamed one) while every stream is open.
        assert warm_up(cluster.server) == cluster.workers
        counted = open_stream(
            cluster.url,
            modern_call("count", {"n": 3}, "count-beside-streams", meta={"progressToken": "beside"}),
            modern_headers("tools/call", "count"),
        )
        try:
            messages = counted.rest(time.monotonic() + SCENARIO)
        finally:
            counted.close()
        assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3], messages
        assert messages[-1]["result"]["structuredContent"]["counted"] == 3

        response = requests.post(cluster.url, headers=modern_headers("tools/call", "change_tools"),
                                 json=modern_call("change_tools", {}, "change-many"), timeout=SCENARIO)
        assert response.status_code == 200, (response.status_code, response.text[:500])
        assert json_body(response, "tools/call", MODERN)["result"]["structuredContent"]["pid"] in cluster.workers

        until = time.monotonic() + SCENARIO
        for i, stream in enumerate(streams):
            note = stream.next(until, f"tools/list_changed on stream {i}")
            assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                            "params": {"_meta": {SUB_KEY: f"many-{i}"}}}, note
    finally:
        for stream in streams:
            stream.close()
    assert_clean_log(cluster)


def test_an_idle_listen_stream_gets_heartbeats_and_stays_open(cluster: Cluster) -> None:
    """Keep-alive comments come every ``HEARTBEAT`` seconds while nothing else does."""
    body = {"jsonrpc": "2.0", "id": "beat", "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}}
    response = requests.post(cluster.url, headers=modern_headers("subscriptions/listen"), json=body, stream=True,
                             timeout=STREAM_TIMEOUT)
    try:
        assert response.status_code == 200
        received = b""
        chunks = response.iter_content(chunk_size=None)
        until = time.monotonic() + SCENARIO
        while received.count(b": keep-alive\n\n") < 5:
            assert time.monotonic() < until, f"fewer than 5 heartbeats in {SCENARIO} s: {received!r}"
            received += next(chunks)
        ack, *blocks, _ = received.split(b"\n\n")  # the last piece may be an unfinished block
        assert ack.startswith(b"event: message\ndata: ") and b"notifications/subscriptions/acknowledged" in ack
        assert blocks and all(block == b": keep-alive" for block in blocks), received  # nothing else came
    finally:
        response.close()
    assert_clean_log(cluster)


def test_more_listen_streams_than_a_redis_pool_holds_leave_sessions_working(cluster: Cluster) -> None:
    """Over a hundred listen streams in a worker, then a legacy ``initialize``
    (which stores a session) on a connection pinned to each worker. redis-py
    caps a client's pool at 100 connections and every subscription holds one
    for its life: subscriptions have a pool of their own."""
    streams: list[EventStream] = []
    try:
        for i in range(BEYOND_POOL):
            streams.append(listen(cluster.url, f"pool-{i}"))
        for worker in sorted(cluster.workers):
            connection = pin(cluster, lambda pid: pid == worker, f"worker {worker}")  # noqa: B023
            try:
                status, _, body = connection.post(
                    {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                     "params": {"protocolVersion": LEGACY, "capabilities": {},
                                "clientInfo": {"name": "e2e-gevent", "version": "1.0"}}},
                    {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
                )
            finally:
                connection.close()
            assert status == 200, (worker, status, body[:500])
    finally:
        for stream in streams:
            stream.close()
    assert_clean_log(cluster)
