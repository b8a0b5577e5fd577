"""A tiny MCP server for the two-host end-to-end tests (tests/e2e/test_e2e_multihost.py):
two gunicorn masters on two loopback addresses run it against one Redis.

    FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 gunicorn -b 127.0.0.2:8000 tests.multihost_app:app
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from flask import Flask

from flask_mcp import MCP, Context

app = Flask(__name__)
app.config["SECRET_KEY"] = "multihost-e2e-secret"
app.config.from_prefixed_env()

mcp = MCP(app, name="multihost", version="1.0")

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
HOST = os.environ.get("MULTIHOST_NAME", "?")


@mcp.tool
def whoami() -> dict[str, Any]:
    """Which host (and worker) ran this call."""
    return {"host": HOST, "pid": os.getpid()}


@mcp.tool
def ask_name(ctx: Context) -> dict[str, Any]:
    """Asks for a name and greets its owner."""
    answer = ctx.elicit("What is your name?", NAME_SCHEMA)
    name = answer.content.get("name") if answer.accepted and answer.content else None
    return {"greeting": f"Hello, {name}!", "host": HOST}


@mcp.tool
def relay(n: int, ctx: Context) -> dict[str, Any]:
    """Reports progress ``n`` times, 50 ms apart, letting its connection go after the first third."""
    for i in range(1, n + 1):
        ctx.report_progress(i, n, f"host {HOST}")
        if i == n // 3:
            ctx.close_stream(retry_ms=100)
        time.sleep(0.05)
    return {"counted": n, "host": HOST}


@mcp.tool
def slow(ctx: Context) -> dict[str, Any]:
    """Reports progress every 50 ms for 10 s; records in MULTIHOST_MARKERS how it stopped."""
    started = time.time()
    steps = 0
    outcome = "finished"
    try:
        while time.time() - started < 10:
            steps += 1
            ctx.report_progress(steps, message=f"host {HOST}")
            time.sleep(0.05)
    except BaseException as exc:  # RequestCancelled is a BaseException
        outcome = type(exc).__name__
        raise
    finally:
        folder = os.environ.get("MULTIHOST_MARKERS")
        if folder:
            path = Path(folder) / (re.sub(r"[^A-Za-z0-9_.-]", "_", str(ctx.request_id)) + ".json")
            path.with_suffix(".tmp").write_text(json.dumps({"outcome": outcome, "host": HOST, "stopped": time.time()}))
            path.with_suffix(".tmp").replace(path)
    return {"steps": steps, "host": HOST}


@mcp.tool(task="optional")
def tasked(seconds: float, ctx: Context) -> dict[str, Any]:
    """Works for ``seconds`` as a task (stopping when cancelled)."""
    ctx.set_task_status(f"running on {HOST}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    return {"host": HOST, "task": ctx.task_id}


@mcp.tool(rate_limit="4/minute")
def limited() -> dict[str, Any]:
    """At most four calls a minute, counted across every host (in Redis)."""
    return {"host": HOST}
