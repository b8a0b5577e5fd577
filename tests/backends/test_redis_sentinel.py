"""``redis+sentinel://``: the URL form, an app-provided ``Sentinel.master_for``
client, 503 (never 500) whenever no primary can be found, rate-limit counters
on the primary, and sessions, events, tasks, the bus and rate limits carried
through a real ``SENTINEL FAILOVER``. Every server is a private redis-server
(primary, replica, sentinel) on a free loopback port (tests/redis_server.py);
the backend contract suite runs on Sentinel too (tests/test_backends.py and
tests/test_task_stores.py, case ``redis-sentinel``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port
from flask import Flask
from redis.sentinel import Sentinel
from redis_server import SentinelDeployment

from flask_mcp import MCP
from flask_mcp.backends import open_backend
from flask_mcp.backends.contracts import BackendUnavailable
from flask_mcp.backends.redis_sentinel import PrimaryFollowingPool, SentinelURL, parse_sentinel_url
from flask_mcp.protocol.session import Session
from flask_mcp.protocol.task_records import TaskRecord
from flask_mcp.testing import MCPTestClient

IO_TIMEOUT = 2.0


def open_url(url: str, tmp_path: Path, io_timeout: float = IO_TIMEOUT) -> Any:
    return open_backend(url, timeout=600, instance_path=str(tmp_path), io_timeout=io_timeout)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis+sentinel://127.0.0.1/main", SentinelURL(((("127.0.0.1", 26379),)), "main")),
        (
            "redis+sentinel://:s%40cret@h1:26380,h2,[::1]:26381/main/3",
            SentinelURL((("h1", 26380), ("h2", 26379), ("::1", 26381)), "main", 3, None, "s@cret"),
        ),
        (
            "REDIS+SENTINEL://app:pw@h1:1/svc?sentinel_username=watcher&sentinel_password=other",
            SentinelURL((("h1", 1),), "svc", 0, "app", "pw", "watcher", "other"),
        ),
    ],
)
def test_a_sentinel_url_names_the_sentinels_the_service_the_db_and_both_credentials(
    url: str, expected: SentinelURL
) -> None:
    assert parse_sentinel_url(url) == expected


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("redis+sentinel://h1:26379", "names no service"),
        ("redis+sentinel:///main", "names no sentinel"),
        ("redis+sentinel://h1:port/main", "no valid port"),
        ("redis+sentinel://h1:70000/main", "no valid port"),
        ("redis+sentinel://h1,:26379/main", "has no host"),
        ("redis+sentinel://h1/main/zero", "/service-name or /service-name/db"),
        ("redis+sentinel://h1/main/0/extra", "/service-name or /service-name/db"),
        ("redis+sentinel://:hunter2@h1/main?ssl=true&sentinel_password=hunter3", "unknown query key 'ssl'"),
    ],
)
def test_a_bad_sentinel_url_is_refused_at_start_up_with_the_form_and_without_its_passwords(
    url: str, complaint: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError) as refused:
        open_url(url, tmp_path)
    message = str(refused.value)
    assert complaint in message and "redis+sentinel://[[username]:password@]host" in message
    assert "hunter" not in message


def test_a_sentinel_url_builds_clients_bounded_by_the_io_timeout_and_hides_its_passwords(tmp_path: Path) -> None:
    url = "redis+sentinel://app:s3cret@h1:26379,h2:26380/svc/4?sentinel_password=s3cret2"
    backend = open_url(url, tmp_path, io_timeout=1.5)
    try:
        pool = backend.sessions.client.connection_pool
        kwargs = pool.connection_kwargs
        assert {k: kwargs[k] for k in ("db", "username", "password", "socket_timeout", "socket_connect_timeout")} == {
            "db": 4, "username": "app", "password": "s3cret", "socket_timeout": 1.5, "socket_connect_timeout": 1.5}
        sentinels = [client.connection_pool.connection_kwargs for client in pool.sentinel_manager.sentinels]
        # Finding the primary is bounded by the I/O timeout as a whole: half of it for each of two sentinels.
        assert [(s["host"], s["port"], s["socket_timeout"], s["socket_connect_timeout"], s["password"])
                for s in sentinels] == [("h1", 26379, 0.75, 0.75, "s3cret2"), ("h2", 26380, 0.75, 0.75, "s3cret2")]
        assert backend.describe() == "redis+sentinel://app:***@h1:26379,h2:26380/svc/4?sentinel_password=***"
    finally:
        backend.close()


def test_a_sentinel_url_opens_the_redis_backend_on_the_primary(
    sentinel_deployment: SentinelDeployment, tmp_path: Path
) -> None:
    url = sentinel_deployment.url(db=2) + "?sentinel_password="  # an empty one: no AUTH to the sentinels
    backend = open_url(url, tmp_path)
    try:
        backend.check()
        assert backend.describe() == url.replace("sentinel_password=", "sentinel_password=***")
        session = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18", initialized=True)
        backend.sessions.create(session)
        primary = sentinel_deployment.primary().client()
        primary.select(2)
        assert primary.exists("flask-mcp:session:" + session.id) == 1
        assert backend.sessions.get(session.id) is not None
        assert backend.sessions.delete(session.id) is True
    finally:
        backend.close()


def test_an_app_provided_master_for_client_is_used_as_is_and_a_replica_client_is_refused(
    sentinel_deployment: SentinelDeployment, tmp_path: Path
) -> None:
    sentinel = Sentinel([("127.0.0.1", port) for port in sentinel_deployment.sentinel_ports], socket_timeout=2)
    client = sentinel.master_for(sentinel_deployment.service, socket_timeout=2)
    backend = open_backend(client, timeout=600, instance_path=str(tmp_path))
    assert "sentinel service flask-mcp" in backend.describe()
    session = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18")
    backend.sessions.create(session)
    assert sentinel_deployment.primary().client().exists("flask-mcp:session:" + session.id) == 1
    backend.close()
    assert client.ping() is True  # the app's client stays open
    with pytest.raises(ValueError, match="master_for"):
        open_backend(sentinel.slave_for(sentinel_deployment.service), timeout=600, instance_path=str(tmp_path))
    client.close()
    sentinel.close()


def unreachable_urls(deployment: SentinelDeployment) -> dict[str, str]:
    return {
        "no sentinel listens": f"redis+sentinel://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/flask-mcp",
        "the sentinels know no such service": deployment.url().replace("/flask-mcp/", "/no-such-service/"),
        # A plain Redis answers SENTINEL with an error reply, not a connection error.
        "a plain Redis is named as sentinel": f"redis+sentinel://127.0.0.1:{deployment.primary_port()}/flask-mcp",
    }


@pytest.mark.parametrize("why", ["no sentinel listens", "the sentinels know no such service",
                                 "a plain Redis is named as sentinel"])
def test_no_primary_to_be_found_is_backend_unavailable_within_the_io_timeout(
    why: str, sentinel_deployment: SentinelDeployment, tmp_path: Path
) -> None:
    backend = open_url(unreachable_urls(sentinel_deployment)[why], tmp_path, io_timeout=0.5)
    try:
        for call in (backend.check, lambda: backend.sessions.get("x"), lambda: backend.bus.subscribe(["c"])):
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match="sentinel service flask-mcp|no-such-service"):
                call()
            # One discovery and one retry, each at most the I/O timeout (generous: a busy machine).
            assert time.monotonic() - started < 4 * 0.5 + 2
    finally:
        backend.close()


@pytest.mark.parametrize("why", ["no sentinel listens", "a plain Redis is named as sentinel"])
def test_an_app_whose_sentinels_cannot_name_a_primary_answers_503_not_500(
    why: str, sentinel_deployment: SentinelDeployment
) -> None:
    app = Flask("sentinel-down")
    app.config.update(MCP_BACKEND=unreachable_urls(sentinel_deployment)[why], MCP_IO_TIMEOUT=0.5)
    MCP(app, name="sentinel-down")
    client = MCPTestClient(app, protocol_version="2025-06-18")
    response = client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "1"}})
    assert response.status_code == 503, response.http.get_data(as_text=True)
    assert response.headers["Retry-After"]
    assert response.error["code"] < 0 and "unavailable" in response.error["message"].lower()


def build_app(url: str) -> Flask:
    app = Flask("sentinel-app")
    app.config.update(MCP_BACKEND=url, MCP_IO_TIMEOUT=IO_TIMEOUT)
    mcp = MCP(app, name="sentinel-app")

    @mcp.tool(rate_limit="3/minute")
    def limited() -> str:
        return "ok"

    return app


@contextmanager
def own_deployment(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[SentinelDeployment]:
    """A deployment of a test's own (it is failed over): a primary, a replica, three sentinels."""
    deployment = SentinelDeployment(tmp_path_factory.mktemp(name), sentinels=3)
    deployment.start()
    try:
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(scope="module")
def failing_over(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelDeployment]:
    with own_deployment(tmp_path_factory, "failover") as deployment:
        yield deployment


def test_sessions_events_tasks_the_bus_and_rate_limits_go_on_after_a_failover(
    failing_over: SentinelDeployment, tmp_path: Path
) -> None:
    backend = open_url(failing_over.url(), tmp_path)
    other = open_url(failing_over.url(), tmp_path)  # another process's session copies
    app = build_app(failing_over.url())
    client = MCPTestClient(app, protocol_version="2025-06-18")
    try:
        client.initialize()
        assert [client.call_tool("limited").status_code for _ in range(3)] == [200] * 3
        assert client.call_tool("limited").status_code == 429
        old_primary = failing_over.primary()
        assert list(old_primary.client().scan_iter(match="flask-mcp-ratelimit*")), "counters are on the primary"

        session = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18", data={"n": 1})
        backend.sessions.create(session)
        for seq in (0, 1):  # a stream's sequence numbers start at 0
            backend.events.append("stream-1", seq, {"message": {"jsonrpc": "2.0", "method": "m"}})
        now = time.time()
        task = TaskRecord(task_id=uuid.uuid4().hex, principal=None, status="working", status_message=None,
                          created_at=now, updated_at=now, ttl_ms=60_000, poll_interval_ms=100)
        backend.tasks.create(task)
        subscription = backend.bus.subscribe(["before"])
        assert old_primary.client().wait(1, 5000) == 1  # replicated before the failover

        new_port = failing_over.failover()
        assert new_port != old_primary.port

        # A subscription open across the failover either stays on the demoted
        # primary, which replicates the new one, PUBLISH included, and still
        # gets messages; or its connection was killed (Sentinel does so when it
        # demotes a primary) and it says "unavailable". Never silence: a
        # subscription quietly re-made would have lost what came meanwhile.
        backend.bus.publish("before", {"jsonrpc": "2.0", "method": "across"})
        try:
            across: object = subscription.get(5)
        except BackendUnavailable:
            across = "unavailable"
        assert across in (("before", {"jsonrpc": "2.0", "method": "across"}), "unavailable")
        subscription.close()

        # Every later call reaches the promoted replica (the first may find
        # its pooled connection demoted: one retry asks the sentinels again).
        assert backend.sessions.get(session.id) is not None
        assert backend.events.read("stream-1", 0) == [(1, {"message": {"jsonrpc": "2.0", "method": "m"}})]
        def complete(record: TaskRecord) -> bool:
            record.status = "completed"
            return True

        updated = backend.tasks.update(task.task_id, complete)
        assert updated is not None and updated.status == "completed"
        fresh = backend.bus.subscribe(["after"])
        backend.bus.publish("after", {"jsonrpc": "2.0", "method": "after"})
        assert fresh.get(5) == ("after", {"jsonrpc": "2.0", "method": "after"})
        fresh.close()
        # The rate limit's counter was replicated: still over the limit, counted on the new primary.
        statuses = [client.call_tool("limited").status_code for _ in range(3)]
        assert statuses[-1] == 429 and set(statuses) <= {429, 503}, statuses
        assert list(failing_over.node(new_port).client().scan_iter(match="flask-mcp-ratelimit*"))
        assert failing_over.node(new_port).client().exists("flask-mcp:session:" + session.id) == 1

        # The other store's copies are still invalidated: a save and a DELETE
        # made through the promoted replica reach it within the window of docs/redis.md.
        key = "flask-mcp:session:" + session.id
        copies = other.sessions._copies
        assert eventually(lambda: other.sessions.get(session.id) is not None and key in copies._values, within=10)
        changed = backend.sessions.get(session.id)
        assert changed is not None
        changed.data = {"n": 2}
        backend.sessions.save(changed)
        assert eventually(lambda: (found := other.sessions.get(session.id)) is not None and found.data == {"n": 2})
        backend.sessions.delete(session.id)
        assert eventually(lambda: other.sessions.get(session.id) is None)
    finally:
        backend.close()
        other.close()


def eventually(condition: Any, within: float = 1.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True



@pytest.fixture
def failing_over_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelDeployment]:
    """A deployment that has not failed over yet."""
    with own_deployment(tmp_path_factory, "failover-once") as deployment:
        yield deployment


def test_writes_leave_the_old_primary_within_a_second_of_a_planned_failover(
    failing_over_once: SentinelDeployment, tmp_path: Path
) -> None:
    """The old primary takes writes until Sentinel demotes it, and drops them
    when it resyncs: the backend's pooled connections must not stay there.
    (On a deployment of its own: run after another failover of the same
    deployment, a session written and replicated before this one was
    sometimes gone from both nodes afterwards; not understood yet.)"""
    failing_over = failing_over_once
    backend = open_url(failing_over.url(), tmp_path)
    try:
        before = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18")
        backend.sessions.create(before)  # a pooled connection to the current primary
        old = failing_over.primary_port()
        # Replication is asynchronous: a write not yet on the replica is lost with the switch.
        assert failing_over.node(old).client().wait(1, 5000) == 1
        failing_over.sentinel().execute_command("SENTINEL", "FAILOVER", failing_over.service)
        assert eventually(lambda: failing_over.primary_port() != old, within=30)
        new = failing_over.primary_port()
        old_still_primary = failing_over.node(old).role() == "master"
        time.sleep(PrimaryFollowingPool.recheck_interval + 0.1)

        after = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18")
        backend.sessions.create(after)
        assert failing_over.node(new).client().exists("flask-mcp:session:" + after.id) == 1, old_still_primary
        failing_over.wait_for_replicas(new)  # the old primary demoted and resynced...
        assert backend.sessions.get(after.id) is not None  # ...and nothing written since is lost
        assert backend.sessions.get(before.id) is not None
    finally:
        backend.close()
