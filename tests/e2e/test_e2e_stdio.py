"""End to end: the official Python client (``mcp`` 2.3.0) launches
``flask --app tests/stdio_app.py mcp stdio`` as a host does and talks to it
over the child's standard input and output (``StdioServerParameters``).

Its stdio transport runs in both of the client's modes: the default
("auto": ``server/discover``, then 2026-07-28 requests with ``_meta``, a
question as an ``input_required`` result answered on a retried call) and
"legacy" (``initialize``, then a 2025-11-25 session: the question is an
``elicitation/create`` request on the stream, the answer a message back).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from conftest import unavailable
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def flask_command() -> str:
    """The venv's ``flask`` script (what a host's config names)."""
    found = shutil.which("flask", path=str(Path(sys.executable).parent)) or shutil.which("flask")
    if found is None:
        unavailable("the flask command is not installed beside this Python")
    return found


def server(*extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=flask_command(),
        args=["--app", str(TESTS / "stdio_app.py"), "mcp", "stdio", *extra],
        env={"PYTHONPATH": str(TESTS)},
        cwd=str(ROOT),
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_client_lists_and_calls_tools_with_progress_logs_and_a_question(mode: str) -> None:
    reports: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []
    asked: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def on_elicit(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"city": "Lyon", "fare": "economy"})

    async def scenario() -> tuple[str, list[str], Any, Any]:
        async with Client(server(), mode=mode, elicitation_callback=on_elicit, logging_callback=on_log,
                          log_level="info", read_timeout_seconds=20) as client:
            if mode == "legacy":  # a session's log level, set once (log_level= is the 2026-07-28 opt-in)
                with pytest.warns(MCPDeprecationWarning, match="logging capability is deprecated"):
                    await client.set_logging_level("info")
            tools = await client.list_tools()
            added = await client.call_tool("add", {"a": 2, "b": 40})
            trip = await client.call_tool("plan_trip", {}, progress_callback=on_progress)
            for _ in range(100):  # progress callbacks run as tasks of their own: let the last ones land
                if reports and reports[-1][0] == 3:
                    break
                await asyncio.sleep(0.02)
            return str(client.protocol_version), [tool.name for tool in tools.tools], added, trip

    version, names, added, trip = asyncio.run(asyncio.wait_for(scenario(), 60))

    assert version == (MODERN if mode == "auto" else LEGACY)
    assert {"add", "plan_trip", "noisy", "wait_for_cancel", "shelve"} <= set(names)
    assert added.structured_content == {"result": 42}
    assert trip.is_error is False, trip
    assert trip.content[0].text == 'booked {"city": "Lyon", "fare": "economy"}'
    assert [a.message for a in asked] == ["Where to?"]
    assert asked[0].requested_schema["required"] == ["city", "fare"]
    if mode == "legacy":  # one run: the answer came back on the same call
        assert reports == [(1.0, 3.0, "looking at the calendar"), (2.0, 3.0, "asking the traveller"),
                           (3.0, 3.0, "booked")]
    else:  # 2026-07-28: the call runs again with the answer, and reports again
        assert reports[:2] == [(1.0, 3.0, "looking at the calendar"), (2.0, 3.0, "asking the traveller")]
        assert reports[-1] == (3.0, 3.0, "booked")
    assert "the calendar is free" in logs


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_what_a_tool_prints_goes_to_standard_error_not_into_the_stream(mode: str, tmp_path: Path) -> None:
    """print(), a write to file descriptor 1 and a child process's output all
    land on standard error; the client reads nothing but JSON-RPC (its
    transport would surface a stray line as an error)."""
    errors = tmp_path / "stderr.txt"

    async def scenario() -> tuple[Any, Any]:
        with errors.open("w") as errlog:
            async with Client(stdio_client(server(), errlog=errlog), mode=mode, read_timeout_seconds=20) as client:
                noisy = await client.call_tool("noisy", {})
                shelved = await client.call_tool("shelve", {"region": "Zürich", "book": "Emma"})
                return noisy, shelved

    noisy, shelved = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert noisy.content[0].text == "a quiet answer"
    assert shelved.content[0].text == "Emma shelved in Zürich"  # Mcp-Param-Region sent for it (2026-07-28)
    logged = errors.read_text()
    for chatter in ("chatter from print()", "chatter from file descriptor 1", "chatter from a child process"):
        assert chatter in logged
    assert "flask-mcp: serving stdio-test over stdio" in logged


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_call_the_client_abandons_is_cancelled_in_the_server(mode: str, tmp_path: Path) -> None:
    """The client gives up on a call (a timeout of its own): it sends
    ``notifications/cancelled``, and the tool sees ``ctx.cancelled``
    (2026-07-28: the relay closes the call's connection; legacy: the
    notification reaches the call through the session's message bus)."""
    marker = tmp_path / "cancelled.txt"

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    async def scenario() -> tuple[bool, Any]:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            async with Client(stdio_client(server(), errlog=errlog), mode=mode, read_timeout_seconds=20) as client:
                with anyio.move_on_after(1.5) as scope:
                    await client.call_tool("wait_for_cancel", {"marker": str(marker)}, progress_callback=on_progress)
                for _ in range(100):  # the tool polls every 50 ms
                    if marker.exists():
                        break
                    await asyncio.sleep(0.05)
                after = await client.call_tool("add", {"a": 1, "b": 1})  # the connection is still good
                return scope.cancelled_caught, after

    gave_up, after = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert gave_up
    assert marker.read_text() == "cancelled"
    assert after.structured_content == {"result": 2}


@pytest.mark.parametrize("ending", ["end of input", "SIGTERM"])
def test_the_legacy_session_ends_with_the_process_however_the_host_stops_it(ending: str, tmp_path: Path) -> None:
    """A host closes the server's standard input, or sends SIGTERM: either
    way the command ends its session (DELETE) before it exits."""
    app = f"stdio_app:create_app(MCP_BACKEND='sqlite:///{tmp_path}/mcp.sqlite3')"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    process = subprocess.Popen([flask_command(), "--app", app, "mcp", "stdio"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert process.stdin is not None and process.stdout is not None
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": LEGACY, "capabilities": {},
                             "clientInfo": {"name": "host", "version": "1"}}}
    process.stdin.write(json.dumps(initialize).encode() + b"\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    assert answer["result"]["protocolVersion"] == LEGACY

    def count() -> dict[str, Any]:
        done = subprocess.run([flask_command(), "--app", app, "mcp", "sessions", "--json"], capture_output=True,
                              text=True, cwd=ROOT, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout)["sessions"])

    assert count()["live"] == 1
    started = time.monotonic()
    if ending == "SIGTERM":
        process.send_signal(signal.SIGTERM)
    else:
        process.stdin.close()
    assert process.wait(timeout=20) == 0
    assert time.monotonic() - started < 5  # nothing was running: no grace period to wait out
    assert process.stdout.read() == b""  # nothing after the answers
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()
    assert count()["live"] == 0
