"""Rate limits: ``MCP_RATE_LIMIT`` per caller on the endpoint, per-tool limits,
the app's own Flask-Limiter shared, the session backend's Redis reused (a real
redis-server on loopback), and storage failures that let requests through."""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from conftest import ALL_VERSIONS, free_port, validate_message
from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

from flask_mcp import MCP
from flask_mcp.auth import Principal
from flask_mcp.config import ConfigError
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

PRINCIPALS = {"alice": Principal(subject="alice"), "bob": Principal(subject="bob")}


def build_app(*, auth: bool = False, before: Callable[[Flask], Any] | None = None, **config: Any) -> Flask:
    app = Flask("limited")
    app.config.update({"MCP_BACKEND": "memory://", "MCP_AUTH": auth, **config})
    app.testing = True
    if before is not None:
        before(app)
    mcp = MCP(app, name="limited")
    mcp.token_verifier(PRINCIPALS.get)

    @mcp.tool
    def echo(text: str) -> str:
        return text

    @mcp.tool(rate_limit="2/minute")
    def expensive() -> str:
        return "done"

    return app


def client_for(make_client: MakeClient, app: Flask, version: str = "2026-07-28", *, token: str | None = None,
               address: str = "127.0.0.1") -> MCPTestClient:
    client = make_client(app, version, headers={"Authorization": f"Bearer {token}"} if token else {})
    client.client.environ_base["REMOTE_ADDR"] = address
    return client


def test_the_endpoint_limit_answers_429_with_retry_after(make_client: MakeClient) -> None:
    app = build_app(MCP_RATE_LIMIT="3/minute")
    client = client_for(make_client, app)

    statuses = [client.discover().status_code for _ in range(4)]

    assert statuses == [200, 200, 200, 429]
    response = client.discover()
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    body = response.http.get_json()
    for version in ALL_VERSIONS:
        validate_message(version, None, body)
    assert body["error"]["data"]["limit"] == "3 per 1 minute"
    assert "Rate limit exceeded" in body["error"]["message"]


def test_the_endpoint_limit_is_per_principal(make_client: MakeClient) -> None:
    app = build_app(auth=True, MCP_RATE_LIMIT="2/minute")
    alice = client_for(make_client, app, token="alice")
    bob = client_for(make_client, app, token="bob")

    assert [alice.discover().status_code for _ in range(3)] == [200, 200, 429]
    assert [bob.discover().status_code for _ in range(2)] == [200, 200]  # same address, own budget


def test_refused_tokens_count_against_the_address(make_client: MakeClient) -> None:
    app = build_app(auth=True, MCP_RATE_LIMIT="2/minute")
    guesser = client_for(make_client, app, token="guess", address="10.9.9.9")

    assert [guesser.discover().status_code for _ in range(3)] == [401, 401, 429]
    assert client_for(make_client, app, token="alice", address="10.9.9.9").discover().status_code == 200


def test_anonymous_callers_are_limited_by_remote_address(make_client: MakeClient) -> None:
    app = build_app(MCP_RATE_LIMIT="1/minute")

    assert client_for(make_client, app, address="10.0.0.1").discover().status_code == 200
    assert client_for(make_client, app, address="10.0.0.1").discover().status_code == 429
    assert client_for(make_client, app, address="10.0.0.2").discover().status_code == 200


def test_the_health_endpoint_is_not_limited(make_client: MakeClient) -> None:
    app = build_app(MCP_RATE_LIMIT="1/minute")
    client_for(make_client, app).discover()

    assert all(app.test_client().get("/mcp/health").status_code == 200 for _ in range(3))


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_a_tool_limit_answers_429_with_a_jsonrpc_error_for_that_call(make_client: MakeClient, version: str) -> None:
    app = build_app(auth=True)
    alice = client_for(make_client, app, version, token="alice")
    bob = client_for(make_client, app, version, token="bob")
    for client in (alice, bob):
        if version != "2026-07-28":
            client.initialize()

    assert [alice.call_tool("expensive").status_code for _ in range(2)] == [200, 200]
    refused = alice.call_tool("expensive", id="third")

    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.message["id"] == "third"
    assert "'expensive' may be called at most 2 per 1 minute" in refused.error["message"]
    assert alice.call_tool("echo", {"text": "still fine"}).status_code == 200  # other tools are not limited
    assert bob.call_tool("expensive").status_code == 200  # other callers neither


def test_limits_are_validated_when_declared() -> None:
    with pytest.raises(ConfigError, match="MCP_RATE_LIMIT"):
        build_app(MCP_RATE_LIMIT="lots")
    with pytest.raises(ConfigError, match="MCP_RATE_LIMIT"):
        build_app(MCP_RATE_LIMIT=120)
    with pytest.raises(ValueError, match="Tool 'x': invalid rate limit"):
        MCP().tool(name="x", rate_limit="often")(lambda: None)


# ---------------------------------------------------------------------- sharing the app's Flask-Limiter


def test_the_apps_flask_limiter_is_shared(make_client: MakeClient) -> None:
    limiters: list[Limiter] = []

    def with_limiter(app: Flask) -> None:
        app.config["RATELIMIT_STORAGE_URI"] = "memory://"
        limiters.append(Limiter(get_remote_address, app=app, default_limits=["1/minute"]))

    app = build_app(before=with_limiter, MCP_RATE_LIMIT="3/minute")

    @app.post("/form")
    def form() -> str:
        return "ok"

    limiter = limiters[0]
    client = client_for(make_client, app)
    # MCP's own limit applies to the endpoint instead of the app's default one...
    assert [client.discover().status_code for _ in range(4)] == [200, 200, 200, 429]
    # ...whose counters live in the app limiter's storage and strategy.
    assert app.extensions["mcp"].rate_limits.strategy() is limiter.limiter
    assert any("flask-mcp" in key for key in limiter.storage.storage)  # type: ignore[attr-defined]
    # The app's default limit still guards its own routes.
    web = app.test_client()
    assert [web.post("/form").status_code for _ in range(2)] == [200, 429]


# ---------------------------------------------------------------------- Redis


class RedisServer:
    """A throw-away redis-server on a free port (no persistence), stopped by its PID."""

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                try:
                    client.ping()
                    return
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
        finally:
            client.close()
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


def test_the_session_backends_redis_holds_the_counters_for_every_worker(
    make_client: MakeClient, redis_server: RedisServer
) -> None:
    # Two apps on one Redis stand for two gunicorn workers (or hosts).
    first = build_app(auth=True, MCP_BACKEND=redis_server.url, MCP_RATE_LIMIT="3/minute")
    second = build_app(auth=True, MCP_BACKEND=redis_server.url, MCP_RATE_LIMIT="3/minute")

    statuses = [client_for(make_client, app, token="alice").discover().status_code
                for app in (first, second, first, second)]

    assert statuses == [200, 200, 200, 429]
    assert "redis" in first.extensions["mcp"].rate_limits.description
    keys = redis.Redis.from_url(redis_server.url).keys("flask-mcp-ratelimit*")
    assert keys and all(b"principal:alice" in key for key in keys)


def test_a_failed_limit_storage_lets_requests_through_with_a_warning(
    make_client: MakeClient, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    app = build_app(MCP_RATE_LIMIT_STORAGE=redis_server.url, MCP_RATE_LIMIT="2/minute")
    client = client_for(make_client, app)
    assert client.discover().status_code == 200

    redis_server.stop()
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        statuses = [client.discover().status_code for _ in range(4)]

    assert statuses == [200] * 4  # stateless 2026-07-28 requests need nothing else from Redis
    warnings = [r.getMessage() for r in caplog.records if "Rate limits not enforced" in r.getMessage()]
    assert len(warnings) == 1  # once a minute, not once a request
