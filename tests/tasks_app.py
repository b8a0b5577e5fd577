"""A tiny MCP server for the end-to-end tests of tasks (tests/e2e/test_e2e_tasks.py):
tools that run as tasks and say which worker runs them.

    FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 gunicorn -w 2 --threads 8 tests.tasks_app:app
"""

from __future__ import annotations

import os
import time
from typing import Any

from flask import Flask

from flask_mcp import MCP, Context

app = Flask(__name__)
app.config["SECRET_KEY"] = "tasks-e2e-secret"
app.config.from_prefixed_env()

mcp = MCP(app, name="tasks", version="1.0")

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcp.tool
def whoami() -> dict[str, int]:
    """The process id of the worker that ran this call."""
    return {"pid": os.getpid()}


@mcp.tool(task="optional")
def tasked(seconds: float, ctx: Context) -> dict[str, Any]:
    """Works for ``seconds`` (stopping when cancelled); says which worker ran it."""
    ctx.set_task_status(f"running in {os.getpid()}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    return {"pid": os.getpid(), "task": ctx.task_id}


@mcp.tool(task="required")
def tasked_question(ctx: Context) -> dict[str, Any]:
    """Asks for a name while running as a task, then greets its owner."""
    ctx.set_task_status(f"running in {os.getpid()}")
    answer = ctx.elicit("What is your name?", NAME_SCHEMA)
    name = answer.content.get("name") if answer.accepted and answer.content else None
    return {"greeting": f"Hello, {name}!", "pid": os.getpid()}
