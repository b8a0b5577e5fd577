"""``flask mcp sessions``, run with click's runner against every backend:
SQLite files, the Redis server on 127.0.0.1:6379 under keys of each test's
own, a cachelib cache, memory."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cli_app import create_app, redis_test_backend, runner_for
from conftest import FakeClock, free_port
from flask import Flask

from flask_mcp import MCP, Context
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
        "Running tasks: none",
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




def test_sessions_lists_the_tasks_still_running_with_their_tool_and_status(tmp_path: Path) -> None:
    """A task tool running in a thread of the app (the SQLite file is what the
    command reads, as it would from another process): listed while it runs,
    with its tool, status message and where it runs; gone once it ended."""
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3")
    release = threading.Event()
    mcp: MCP = app.extensions["mcp"].extension

    @mcp.tool(task="required")
    def slow_report(ctx: Context) -> str:
        ctx.set_task_status("page 3 of 7")
        release.wait(10)
        return "done"

    client = MCPTestClient(app, protocol_version="2026-07-28",
                           capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}})
    task_id = client.call_tool("slow_report").result["taskId"]
    try:
        run = runner_for(app)
        for _ in range(200):  # the status message is set as the tool starts
            report = json.loads(run("sessions", "--json").stdout)
            if report["running"]["tasks"] and report["running"]["tasks"][0]["status_message"]:
                break
            time.sleep(0.01)
        (task,) = report["running"]["tasks"]
        assert task["task_id"] == task_id and task["tool"] == "slow_report" and task["status"] == "working"
        assert task["status_message"] == "page 3 of 7" and task["celery_task_id"] is None
        assert task["session_id"] is None and report["running"]["more"] is False
        lines = run("sessions").stdout.splitlines()
        assert lines[3] == "Running tasks (1):"
        assert lines[4].startswith(f"  {task_id}  slow_report  working  since {task['created_at']} (")
        assert lines[4].endswith("in a web worker's thread")
        assert lines[5].startswith("      page 3 of 7 (updated ")
        client.call_tool("slow_report")  # a second one: --limit 1 shows the oldest and says so
        limited = run("sessions", "--limit", "1").stdout.splitlines()
        assert limited[3] == "Running tasks (the oldest 1):" and limited[4].startswith(f"  {task_id}  ")
    finally:
        release.set()
    for _ in range(500):
        if "Running tasks: none" in run("sessions").stdout:
            break
        time.sleep(0.01)
    assert "Running tasks: none" in run("sessions").stdout


def test_sessions_says_a_cachelib_backend_lists_no_running_tasks() -> None:
    from cachelib import SimpleCache

    report = json.loads(runner_for(create_app(MCP_BACKEND=SimpleCache()))("sessions", "--json").stdout)
    assert report["running"] == {"listable": False, "reason": "this backend keeps no tasks"}
