"""``flask mcp sessions``, run with click's runner against every backend:
SQLite files, the Redis server on 127.0.0.1:6379 under keys of each test's
own, a cachelib cache, memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cli_app import create_app, redis_test_backend, runner_for
from conftest import FakeClock, free_port
from flask import Flask

from flask_mcp.backends.contracts import Backend
from flask_mcp.testing import MCPTestClient


@pytest.fixture
def redis_backend() -> Iterator[tuple[Backend, redis.Redis, str]]:
    with redis_test_backend() as found:
        yield found


def _open_legacy_sessions(app: Flask, how_many: int) -> None:
    for _ in range(how_many):
        MCPTestClient(app, protocol_version="2025-11-25").initialize()


def test_sessions_counts_and_prunes_a_sqlite_backend(tmp_path: Path) -> None:
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", MCP_SESSION_TIMEOUT=60)
    _open_legacy_sessions(app, 3)
    run = runner_for(app)
    result = run("sessions")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"Backend: sqlite:///{tmp_path}/mcp.sqlite3",
        "Legacy sessions: 3 live",
        "Tasks: 0 live",
    ]
    store = app.extensions["mcp"].backend.sessions
    clock = FakeClock()
    store.clock = clock
    clock.advance(61)  # the three are idle past the timeout
    assert "Legacy sessions: 0 live, 3 expired awaiting pruning (flask mcp sessions --prune)" in run("sessions").stdout
    pruned = run("sessions", "--prune")
    assert "Legacy sessions: 0 live; pruned 3 expired sessions" in pruned.stdout
    _open_legacy_sessions(app, 1)
    report = json.loads(run("sessions", "--json").stdout)
    assert report["sessions"] == {"countable": True, "live": 1, "expired": 0}


def test_sessions_counts_a_real_redis_backend(redis_backend: tuple[Backend, redis.Redis, str]) -> None:
    backend = redis_backend[0]
    app = create_app(MCP_BACKEND=backend)
    _open_legacy_sessions(app, 2)
    result = runner_for(app)("sessions", "--prune", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sessions"] == {"countable": True, "live": 2, "expired": 0, "pruned": 0}
    assert report["tasks"] == {"countable": True, "live": 0, "expired": 0, "pruned": 0}


def test_sessions_says_a_cachelib_backend_cannot_be_counted() -> None:
    from cachelib import SimpleCache

    app = create_app(MCP_BACKEND=SimpleCache())
    _open_legacy_sessions(app, 1)
    result = runner_for(app)("sessions", "--prune")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == ("Legacy sessions: not counted: the cache SimpleCache cannot list its keys, so expired "
                        "sessions cannot be pruned from here; the cache drops them itself")
    assert lines[2] == "Tasks: not counted: this backend keeps no tasks"
    counted = runner_for(app)("sessions").stdout.splitlines()[1]
    assert counted.startswith("Legacy sessions: not counted: the cache SimpleCache cannot list its keys, so its "
                              "sessions cannot be counted")


def test_sessions_on_memory_says_it_cannot_see_the_servers_processes() -> None:
    result = runner_for(create_app())("sessions")
    assert result.exit_code == 0
    assert "Note: memory:// keeps sessions and tasks inside each server process" in result.stdout


def test_sessions_fails_cleanly_when_the_backend_is_down() -> None:
    app = create_app(MCP_BACKEND=f"redis://127.0.0.1:{free_port()}/0")
    result = runner_for(app)("sessions")
    assert result.exit_code == 1
    assert "Error: the backend redis://127.0.0.1:" in result.stderr
    assert "Traceback" not in result.output


