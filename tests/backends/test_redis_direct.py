"""The Redis session store's short write path (flask_mcp/backends/redis_direct.py)
against private redis-server instances: one command per create, the client's
retry on a dropped connection, 503s when Redis is gone, a reply error that
leaves the connection usable, fork safety and the clients it hands to redis-py."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
import redis
from conftest import free_port
from redis_server import SentinelDeployment, start_redis_server, stop_redis_server

from flask_mcp.backends.contracts import BackendUnavailable, Session
from flask_mcp.backends.redis import RedisSessionStore, client_from_url
from flask_mcp.backends.redis_sentinel import client_from_sentinel_url
from flask_mcp.protocol.session import new_session_id


@pytest.fixture
def port() -> Iterator[int]:
    number = free_port()
    process = start_redis_server(number, why="the direct write tests start their own")
    try:
        yield number
    finally:
        stop_redis_server(process)


def _admin(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=2, decode_responses=True)


def _commands(port: int) -> dict[str, int]:
    """Calls per command since the last CONFIG RESETSTAT (the admin's own excluded)."""
    stats = _admin(port).info("commandstats")
    admin = ("cmdstat_info", "cmdstat_config|resetstat")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items() if name not in admin}


def _session(**client_info: object) -> Session:
    return Session(id="", protocol_version="2025-11-25", client_info=dict(client_info) or {"name": "t"})


def _create(store: RedisSessionStore, **client_info: object) -> Session:
    session = _session(**client_info)
    session.id = new_session_id()
    store.create(session)
    return session


@pytest.mark.parametrize("protocol", [2, 3])
def test_create_is_one_set_with_the_idle_timer(port: int, protocol: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}/3?protocol={protocol}"), timeout=120)
    assert store._writes.direct
    _create(store)  # the connection's handshake (HELLO, SELECT) happens once
    _admin(port).config_resetstat()
    session = _create(store)
    assert _commands(port) == {"set": 1}
    admin = _admin(port)
    admin.select(3)
    ttl = admin.pttl(store.key_prefix + session.id)
    assert 119_000 < ttl <= 120_000
    fetched = store.get(session.id)
    assert fetched is not None and fetched.client_info == {"name": "t"}
    store.close()


def test_a_dropped_connection_is_retried_once(port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}"), timeout=60)
    _create(store)
    admin = _admin(port)
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1  # what a server restart or timeout does
    session = _create(store)
    assert admin.exists(store.key_prefix + session.id) == 1
    store.close()


def test_redis_gone_is_unavailable_within_the_io_timeout() -> None:
    dead = free_port()
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{dead}", io_timeout=0.5), timeout=60)
    start = time.monotonic()
    with pytest.raises(BackendUnavailable):
        _create(store)
    assert time.monotonic() - start < 3


def test_a_server_that_stops_answering_fails_in_the_io_timeout(port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}", io_timeout=0.5), timeout=60)
    _create(store)
    admin = _admin(port)
    admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
    start = time.monotonic()
    with pytest.raises(BackendUnavailable):
        _create(store)
    assert time.monotonic() - start < 2.5
    admin.execute_command("CLIENT", "UNPAUSE")
    session = _create(store)  # the timed-out connection was closed, not left half read
    assert admin.exists(store.key_prefix + session.id) == 1
    store.close()


def test_a_reply_error_leaves_the_connection_in_step(port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}"), timeout=60)
    _create(store)
    admin = _admin(port)
    admin.config_set("maxmemory", "1")
    admin.config_set("maxmemory-policy", "noeviction")
    with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
        _create(store)
    admin.config_set("maxmemory", "0")
    _admin(port).config_resetstat()
    session = _create(store)
    assert _commands(port) == {"set": 1}  # same connection, no reconnection handshake
    assert admin.exists(store.key_prefix + session.id) == 1
    store.close()


def test_records_stay_ascii_json(port: int) -> None:
    """Non-ASCII client info is stored as the stdlib wrote it before (escaped),
    so a client decoding its replies with any ASCII-compatible encoding reads it."""
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}"), timeout=60)
    plain = _create(store)
    accented = _create(store, name="Zoë ✓")
    admin = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=2)
    raw = admin.get(store.key_prefix + accented.id)
    assert raw is not None and raw.isascii()
    assert json.loads(raw)["client_info"] == {"name": "Zoë ✓"}
    assert json.loads(admin.get(store.key_prefix + plain.id) or b"")["id"] == plain.id
    latin = RedisSessionStore(
        redis.Redis(host="127.0.0.1", port=port, decode_responses=True, encoding="latin-1"), timeout=60
    )
    fetched = latin.get(accented.id)
    assert fetched is not None and fetched.client_info == {"name": "Zoë ✓"}
    store.close()
    latin.close()


def test_a_forked_child_opens_its_own_connection(port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}"), timeout=60)
    _create(store)
    admin = _admin(port)
    before = {c["id"] for c in admin.client_list()}
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            session = _create(store)
            code = 0 if admin.exists(store.key_prefix + session.id) else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's connection was neither used nor closed by the child.
    assert {c["id"] for c in admin.client_list()} >= before - {admin.client_id()}
    _admin(port).config_resetstat()
    _create(store)
    assert _commands(port) == {"set": 1}
    store.close()


@pytest.mark.parametrize(
    "client_kwargs",
    [{"single_connection_client": True}, {"decode_responses": True}, {"protocol": 3}],
    ids=["single-connection", "decode-responses", "resp3"],
)
def test_app_clients(port: int, client_kwargs: dict[str, object]) -> None:
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, **client_kwargs)  # type: ignore[arg-type]
    store = RedisSessionStore(client, timeout=60)
    assert store._writes.direct is not client_kwargs.get("single_connection_client", False)
    session = _create(store)
    fetched = store.get(session.id)
    assert fetched is not None and fetched.id == session.id
    store.close()
    client.close()


def test_close_closes_the_kept_connections(port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{port}"), timeout=60)
    _create(store)
    admin = _admin(port)

    def writers() -> int:
        return sum(1 for client in admin.client_list() if client["cmd"] == "set")

    assert writers() == 1
    store.close()
    deadline = time.monotonic() + 5
    while writers():
        assert time.monotonic() < deadline, admin.client_list()
        time.sleep(0.01)


def test_a_sentinel_managed_client_writes_through_its_own_connections(sentinel_deployment: SentinelDeployment) -> None:
    """Sentinel's connections ask the sentinels where to connect; the short
    path would bypass that (it once wrote to redis-py's default address)."""
    client = client_from_sentinel_url(sentinel_deployment.url())
    store = RedisSessionStore(client, timeout=60)
    try:
        assert not store._writes.direct
        session = Session(id=new_session_id(), protocol_version="2025-11-25")
        store.create(session)
        assert sentinel_deployment.primary().client().exists(store.key_prefix + session.id) == 1
        assert store.get(session.id) is not None
    finally:
        store.close()
        client.close()
