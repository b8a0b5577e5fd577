"""The Redis session store's short write path (flask_mcp/backends/redis_direct.py)
against private redis-server instances: one command per create, the client's
retry on a dropped connection, 503s when Redis is gone, a reply error that
leaves the connection usable, fork safety and the clients it hands to redis-py;
and ``initialize`` sending its session before building the answer."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import pytest
import redis
from conftest import free_port
from flask import Flask
from redis_server import SentinelDeployment

from flask_mcp import MCP, Context
from flask_mcp.backends.contracts import BackendUnavailable, Session
from flask_mcp.backends.redis import RedisSessionStore, client_from_url
from flask_mcp.backends.redis_sentinel import client_from_sentinel_url
from flask_mcp.protocol.session import new_session_id
from flask_mcp.testing import MCPTestClient


def _admin(redis_port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=redis_port, protocol=2, socket_timeout=2, decode_responses=True)


def _commands(redis_port: int) -> dict[str, int]:
    """Calls per command since the last CONFIG RESETSTAT (the admin's own excluded)."""
    stats = _admin(redis_port).info("commandstats")
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
def test_create_is_one_set_with_the_idle_timer(redis_port: int, protocol: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}/3?protocol={protocol}"), timeout=120)
    assert store._writes.direct
    _create(store)  # the connection's handshake (HELLO, SELECT) happens once
    _admin(redis_port).config_resetstat()
    session = _create(store)
    assert _commands(redis_port) == {"set": 1}
    admin = _admin(redis_port)
    admin.select(3)
    ttl = admin.pttl(store.key_prefix + session.id)
    assert 119_000 < ttl <= 120_000
    fetched = store.get(session.id)
    assert fetched is not None and fetched.client_info == {"name": "t"}
    store.close()


def test_a_dropped_connection_is_retried_once(redis_port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}"), timeout=60)
    _create(store)
    admin = _admin(redis_port)
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


def test_a_connection_dropped_while_the_reply_is_awaited_is_sent_again(redis_port: int) -> None:
    """The SET goes out at once and its reply is read later: a connection that
    dies in between is retried by the client's policy, as client.set would."""
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}"), timeout=60)
    _create(store)
    admin = _admin(redis_port)
    admin.execute_command("CLIENT", "PAUSE", "300", "WRITE")  # the SET waits unprocessed...
    session = _session()
    session.id = new_session_id()
    finish = store.begin_create(session)
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1  # ...and its connection dies
    finish()
    assert admin.exists(store.key_prefix + session.id) == 1
    store.close()


def test_a_server_that_stops_answering_fails_in_the_io_timeout(redis_port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}", io_timeout=0.5), timeout=60)
    _create(store)
    admin = _admin(redis_port)
    admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
    start = time.monotonic()
    with pytest.raises(BackendUnavailable):
        _create(store)
    assert time.monotonic() - start < 2.5
    admin.execute_command("CLIENT", "UNPAUSE")
    session = _create(store)  # the timed-out connection was closed, not left half read
    assert admin.exists(store.key_prefix + session.id) == 1
    store.close()


def test_a_reply_error_leaves_the_connection_in_step(redis_port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}"), timeout=60)
    _create(store)
    admin = _admin(redis_port)
    admin.config_set("maxmemory", "1")
    admin.config_set("maxmemory-policy", "noeviction")
    with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
        _create(store)
    admin.config_set("maxmemory", "0")
    _admin(redis_port).config_resetstat()
    session = _create(store)
    assert _commands(redis_port) == {"set": 1}  # same connection, no reconnection handshake
    assert admin.exists(store.key_prefix + session.id) == 1
    store.close()


def test_records_stay_ascii_json(redis_port: int) -> None:
    """Non-ASCII client info is stored as the stdlib wrote it before (escaped),
    so a client decoding its replies with any ASCII-compatible encoding reads it."""
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}"), timeout=60)
    plain = _create(store)
    accented = _create(store, name="Zoë ✓")
    admin = redis.Redis(host="127.0.0.1", port=redis_port, protocol=2, socket_timeout=2)
    raw = admin.get(store.key_prefix + accented.id)
    assert raw is not None and raw.isascii()
    assert json.loads(raw)["client_info"] == {"name": "Zoë ✓"}
    assert json.loads(admin.get(store.key_prefix + plain.id) or b"")["id"] == plain.id
    latin = RedisSessionStore(
        redis.Redis(host="127.0.0.1", port=redis_port, decode_responses=True, encoding="latin-1"), timeout=60
    )
    fetched = latin.get(accented.id)
    assert fetched is not None and fetched.client_info == {"name": "Zoë ✓"}
    store.close()
    latin.close()


def test_a_forked_child_opens_its_own_connection(redis_port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}"), timeout=60)
    _create(store)
    admin = _admin(redis_port)
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
    _admin(redis_port).config_resetstat()
    _create(store)
    assert _commands(redis_port) == {"set": 1}
    store.close()


@pytest.mark.parametrize(
    "client_kwargs",
    [{"single_connection_client": True}, {"decode_responses": True}, {"protocol": 3}],
    ids=["single-connection", "decode-responses", "resp3"],
)
def test_app_clients(redis_port: int, client_kwargs: dict[str, object]) -> None:
    client = redis.Redis(host="127.0.0.1", port=redis_port, socket_timeout=2, **client_kwargs)  # type: ignore[arg-type]
    store = RedisSessionStore(client, timeout=60)
    assert store._writes.direct is not client_kwargs.get("single_connection_client", False)
    session = _create(store)
    fetched = store.get(session.id)
    assert fetched is not None and fetched.id == session.id
    store.close()
    client.close()


def test_close_closes_the_kept_connections(redis_port: int) -> None:
    store = RedisSessionStore(client_from_url(f"redis://127.0.0.1:{redis_port}"), timeout=60)
    _create(store)
    admin = _admin(redis_port)

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


# ---------------------------------------------------------------------- initialize's write in flight


MakeClient = Callable[..., MCPTestClient]
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _app(redis_port: int) -> tuple[Flask, MCP]:
    app = Flask("pipelined")
    app.config.update(TESTING=True, MCP_BACKEND=f"redis://127.0.0.1:{redis_port}/5")
    return app, MCP(app)


def _session_key(app: Flask, session_id: str) -> str:
    store = app.extensions["mcp"].server.sessions
    return f"{store.key_prefix}{session_id}"


def test_initialize_sends_the_session_before_building_its_answer(redis_port: int, make_client: MakeClient) -> None:
    """The SET travels while the answer is built (the worker does not sleep on
    the socket afterwards): the app's instructions find the key already there."""
    app, mcp = _app(redis_port)
    admin = redis.Redis(host="127.0.0.1", port=redis_port, db=5, socket_timeout=2)
    seen: list[bool] = []

    @mcp.instructions
    def instructions(ctx: Context) -> str:
        key = _session_key(app, ctx.session_id or "")
        deadline = time.monotonic() + 2
        while not admin.exists(key) and time.monotonic() < deadline:
            time.sleep(0.001)
        seen.append(bool(admin.exists(key)))
        return "hello"

    client = make_client(app, "2025-11-25")
    assert client.initialize().result["instructions"] == "hello"
    assert seen == [True]
    assert client.session_id is not None
    assert admin.exists(_session_key(app, client.session_id)) == 1
    app.extensions["mcp"].backend.close()


def test_a_failed_initialize_leaves_no_session_behind(redis_port: int, make_client: MakeClient) -> None:
    app, mcp = _app(redis_port)
    admin = redis.Redis(host="127.0.0.1", port=redis_port, db=5, socket_timeout=2)

    @mcp.instructions
    def instructions() -> str:
        raise RuntimeError("the app's instructions failed")

    response = make_client(app, "2025-11-25").request("initialize", INITIALIZE)
    assert response.status_code == 500
    assert "Internal error" in response.error["message"]
    assert "Mcp-Session-Id" not in response.headers
    assert admin.dbsize() == 0  # written while the answer was built, deleted when it failed
    app.extensions["mcp"].backend.close()


def test_what_the_instructions_write_to_the_new_session_is_kept(redis_port: int, make_client: MakeClient) -> None:
    app, mcp = _app(redis_port)

    @mcp.instructions
    def instructions(ctx: Context) -> str:
        assert ctx.session is not None
        ctx.session.data["greeted"] = True
        return "hello"

    client = make_client(app, "2025-11-25")
    client.initialize()
    assert client.session_id is not None
    stored = app.extensions["mcp"].server.sessions.get(client.session_id)
    assert stored is not None and stored.data == {"greeted": True}
    app.extensions["mcp"].backend.close()


def test_redis_gone_during_initialize_is_a_503(redis_port: int, make_client: MakeClient) -> None:
    app, _ = _app(redis_port)
    _admin(redis_port).shutdown(nosave=True)
    response = make_client(app, "2025-11-25").request("initialize", INITIALIZE)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert "temporarily unavailable" in response.error["message"]
    assert "Mcp-Session-Id" not in response.headers
