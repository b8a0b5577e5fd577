"""The Redis backend beyond the contract: TTLs refreshed in batches, clients the
app hands in, servers without GETEX, and a server that is down or restarts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from backend_cases import (
    REDIS,
    TIMEOUT,
    Case,
    full_session,
    open_case,
)
from conftest import REDIS_URL, FakeClock, free_port, shared_redis
from redis_server import start_redis_server, stop_redis_server

from flask_mcp.backends.contracts import BackendUnavailable
from flask_mcp.backends.redis import RedisEventLog, RedisMessageBus, RedisSessionStore
from flask_mcp.backends.registry import open_backend


@pytest.fixture(params=REDIS)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    with open_case(request.param, tmp_path, request) as opened:
        yield opened


def test_redis_forgets_a_stream_a_retention_after_its_last_event(case: Case) -> None:
    assert case.redis_client is not None
    events = RedisEventLog(case.redis_client, retention=0.3, key_prefix=case.prefix + "short:")
    events.append("s", 0, {"message": None, "final": False})
    assert events.read("s", 0) == []
    time.sleep(0.5)
    assert events.read("s", 0) is None


def test_redis_refreshes_the_ttl_on_a_read_once_refresh_slack_has_passed(case: Case) -> None:
    """Batched as SQLite's ``last_seen``: a read refreshes the TTL only when
    this process last did over ``refresh_slack`` seconds ago."""
    assert case.redis_client is not None
    clock = FakeClock()
    store = RedisSessionStore(case.redis_client, timeout=TIMEOUT, key_prefix=case.prefix + "slack:", clock=clock)
    try:
        session = full_session()
        store.create(session)
        key = store.key_prefix + session.id
        case.redis_client.pexpire(key, 5000)  # as if most of the timeout had passed

        assert store.get(session.id) is not None
        assert case.redis_client.pttl(key) <= 5000  # refreshed by the create, just now
        clock.advance(store.refresh_slack + 0.1)
        assert store.get(session.id) is not None
        assert case.redis_client.pttl(key) > 50_000
        case.redis_client.pexpire(key, 5000)
        got = store.get(session.id)
        assert got is not None
        store.save(got)
        assert 0 < case.redis_client.pttl(key) <= 5000  # a save keeps the TTL
    finally:
        store.close()


def test_redis_expires_an_idle_session_on_the_server(case: Case) -> None:
    assert case.redis_client is not None
    store = RedisSessionStore(case.redis_client, timeout=0.3, key_prefix=case.prefix + "short:")
    session = full_session()
    store.create(session)
    assert case.redis_client.exists(case.prefix + "short:" + session.id)

    deadline = time.monotonic() + 5
    while case.redis_client.exists(case.prefix + "short:" + session.id) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert store.get(session.id) is None


def test_a_reused_redis_client_that_decodes_responses_works_too(tmp_path: Path) -> None:
    shared_redis().close()
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True, socket_timeout=2)
    prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"
    store = RedisSessionStore(client, key_prefix=prefix)
    bus = RedisMessageBus(client, channel_prefix=prefix)
    session = full_session()
    try:
        store.create(session)
        got = store.get(session.id)
        assert got is not None
        assert got.client_info == session.client_info
        with bus.subscribe(["text"]) as subscription:
            bus.publish("text", {"ü": "ß"})
            assert subscription.get(5) == ("text", {"ü": "ß"})
    finally:
        store.delete(session.id)
        client.close()


def test_redis_at_a_closed_port_is_unavailable_quickly(tmp_path: Path) -> None:
    backend = open_backend("redis://127.0.0.1:1/0", timeout=42, instance_path=str(tmp_path))
    assert backend.bus is not None
    calls: list[Callable[[], object]] = [
        lambda: backend.sessions.create(full_session()),
        lambda: backend.sessions.get("x"),
        lambda: backend.sessions.save(full_session()),
        lambda: backend.sessions.delete("x"),
        lambda: backend.sessions.touch("x"),
        lambda: backend.bus.publish("c", {}),  # type: ignore[union-attr]
        lambda: backend.bus.subscribe(["c"]),  # type: ignore[union-attr]
        backend.check,
    ]
    started = time.monotonic()
    try:
        for call in calls:
            with pytest.raises(BackendUnavailable, match="127.0.0.1:1"):
                call()
    finally:
        backend.close()
    assert time.monotonic() - started < 5


def test_redis_requests_fail_while_the_server_is_down_and_recover_when_it_is_back(tmp_path: Path) -> None:
    port = free_port()
    server = start_redis_server(port, why="needed to stop and restart a private server")
    backend = open_backend(f"redis://127.0.0.1:{port}/0", timeout=42, instance_path=str(tmp_path))
    try:
        session = full_session()
        backend.sessions.create(session)
        assert backend.sessions.get(session.id) is not None

        stop_redis_server(server)
        with pytest.raises(BackendUnavailable):
            backend.sessions.get(session.id)
        with pytest.raises(BackendUnavailable):
            backend.check()

        server = start_redis_server(port)
        backend.sessions.create(session)  # the same backend object reconnects by itself
        assert backend.sessions.get(session.id) is not None
        with backend.require_bus("test").subscribe(["back"]) as subscription:
            backend.require_bus("test").publish("back", {"ok": True})
            assert subscription.get(5) == ("back", {"ok": True})
    finally:
        backend.close()
        stop_redis_server(server)


def test_redis_reads_refresh_the_ttl_on_a_server_without_getex() -> None:
    """Servers before Redis 6.2 (or with GETEX renamed away) get GET and PEXPIRE in a transaction."""
    port = free_port()
    server = start_redis_server(port, "--rename-command", "GETEX", "", why="needed for a private server without GETEX")
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
            client.getex("x", px=1000)
        store = RedisSessionStore(client, timeout=60)
        session = full_session()
        store.create(session)
        key = store.key_prefix + session.id
        client.pexpire(key, 5000)
        store._refreshed.clear()  # as if refresh_slack had passed since the create
        got = store.get(session.id)
        assert got is not None and got.id == session.id
        assert client.pttl(key) > 50_000
        assert not store._getex  # it asked once, and now goes straight to the transaction
        client.pexpire(key, 5000)
        store._refreshed.clear()
        assert store.get(session.id) is not None
        assert client.pttl(key) > 50_000
        assert store.get("unknown") is None
    finally:
        client.close()
        stop_redis_server(server)


def test_a_primary_short_of_the_replicas_it_asks_for_is_unavailable_not_a_failure(tmp_path: Path) -> None:
    """``min-replicas-to-write 1`` with no replica: every write is refused with
    NOREPLICAS, which is Redis saying "not now" (a 503), not a bug (a 500)."""
    port = free_port()
    server = start_redis_server(port, "--min-replicas-to-write", "1", why="needed for a primary without its replica")
    backend = open_backend(f"redis://127.0.0.1:{port}/0", timeout=42, instance_path=str(tmp_path))
    try:
        session = full_session()
        with pytest.raises(BackendUnavailable, match="NOREPLICAS"):
            backend.sessions.create(session)
        with pytest.raises(BackendUnavailable, match="NOREPLICAS"):
            backend.sessions.save(session)
        backend.require_bus("test").publish("c", {})  # PUBLISH is no write: it goes through
    finally:
        backend.close()
        stop_redis_server(server)
