"""A tiny MCP server for the streaming end-to-end tests (tests/e2e/test_e2e_streaming.py):
progress and logs ahead of a result, a question to the client (from a plain and
from an ``async def`` tool), a long call that can be cancelled, a call that lets
its connection go (a resumable stream), and a change of the tool list.

    FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 STREAM_MARKERS=/tmp/markers \\
        gunicorn -w 2 --threads 8 tests.streaming_app:app

``STREAM_MARKERS`` is a folder where ``slow`` writes ``<request id>.json`` when
it stops (how and when), for the tests to read.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from flask import Flask, g

from flask_mcp import MCP, Context

app = Flask(__name__)
app.config["SECRET_KEY"] = "streaming-e2e-secret"  # seals 2026-07-28 requestState
app.config.from_prefixed_env()

mcp = MCP(app, name="streaming", version="1.0")

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

#: How long ``slow`` runs when nobody cancels it (seconds), and its beat.
SLOW_SECONDS = 10.0
SLOW_BEAT = 0.05


@mcp.tool
def whoami() -> dict[str, int]:
    """The process id of the worker that ran this call."""
    return {"pid": os.getpid()}


@mcp.tool
def count(n: int, ctx: Context) -> dict[str, int]:
    """Counts to ``n``, reporting progress and logging each step."""
    for i in range(1, n + 1):
        ctx.report_progress(i, n, f"step {i}")
        ctx.info(f"step {i}")
    return {"counted": n, "pid": os.getpid()}


@mcp.tool
def ask_name(ctx: Context) -> dict[str, Any]:
    """Asks for a name and greets its owner (logging first which worker asks)."""
    ctx.info({"worker": os.getpid()})  # sent only when the client asked for logs
    answer = ctx.elicit("What is your name?", NAME_SCHEMA)
    name = answer.content.get("name") if answer.accepted and answer.content else None
    return {"greeting": f"Hello, {name}!" if name else "Hello, stranger!", "pid": os.getpid()}


@mcp.tool
async def count_then_ask(n: int, ctx: Context) -> dict[str, Any]:
    """Counts to ``n`` and asks for a name, awaiting both, as a coroutine
    (run as Flask runs async views: its own event loop, the request's context)."""
    g.asked_by = "count_then_ask"  # the request's g, seen from the coroutine
    for i in range(1, n + 1):
        await ctx.areport_progress(i, n, f"step {i}")
        await asyncio.sleep(0)
    answer = await ctx.aelicit("What is your name?", NAME_SCHEMA)
    name = answer.content.get("name") if answer.accepted and answer.content else None
    return {"greeting": f"Hello, {name}!" if name else "Hello, stranger!", "counted": n, "pid": os.getpid(),
            "in_a_coroutine": asyncio.current_task() is not None, "g": g.asked_by}


@mcp.tool
def relay(n: int, ctx: Context) -> dict[str, int]:
    """Reports progress ``n`` times, 50 ms apart, letting its connection go after
    the first third (2025-11-25: the client resumes, maybe on the other worker)."""
    for i in range(1, n + 1):
        ctx.report_progress(i, n, f"worker {os.getpid()}")
        if i == n // 3:
            ctx.close_stream(retry_ms=100)
        time.sleep(0.05)
    return {"counted": n, "pid": os.getpid()}


def _marker_path(request_id: str | int | None) -> Path | None:
    folder = os.environ.get("STREAM_MARKERS")
    if not folder:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(request_id))
    return Path(folder) / f"{safe}.json"


@mcp.tool
def slow(ctx: Context) -> dict[str, Any]:
    """Reports progress every 50 ms for 10 s; writes a marker when it stops."""
    started = time.time()
    steps = 0
    outcome = "finished"
    try:
        while time.time() - started < SLOW_SECONDS:
            steps += 1
            ctx.report_progress(steps, message=f"worker {os.getpid()}")
            time.sleep(SLOW_BEAT)
    except BaseException as exc:  # RequestCancelled is a BaseException
        outcome = type(exc).__name__
        raise
    finally:
        path = _marker_path(ctx.request_id)
        if path is not None:
            record = {"outcome": outcome, "steps": steps, "started": started, "stopped": time.time(),
                      "pid": os.getpid()}
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(record))
            partial.replace(path)  # atomic: a reader never sees half a marker
    return {"steps": steps, "pid": os.getpid()}


@mcp.tool
def quiet(ctx: Context) -> dict[str, Any]:
    """Works for 10 s without a word (looking for a cancellation every 50 ms);
    writes a marker when it stops."""
    started = time.time()
    outcome = "finished"
    try:
        while time.time() - started < SLOW_SECONDS:
            ctx.check_cancelled()
            time.sleep(SLOW_BEAT)
    except BaseException as exc:  # RequestCancelled is a BaseException
        outcome = type(exc).__name__
        raise
    finally:
        path = _marker_path(ctx.request_id)
        if path is not None:
            record = {"outcome": outcome, "started": started, "stopped": time.time(), "pid": os.getpid()}
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(record))
            partial.replace(path)
    return {"pid": os.getpid()}


def _temporary() -> str:
    """A tool that exists for a moment only."""
    return "temporary"


@mcp.tool
def change_tools() -> dict[str, int]:
    """Adds a temporary tool and removes it again (two tool-list changes)."""
    name = f"temporary_{uuid.uuid4().hex[:12]}"
    mcp.add_tool(_temporary, name=name)
    mcp.remove_tool(name)
    return {"pid": os.getpid()}
