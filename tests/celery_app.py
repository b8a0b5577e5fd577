"""A tiny MCP server whose task tools run on Celery workers, for
tests/e2e/test_e2e_celery.py. The Celery app is built the way Flask's documentation
shows (``celery_init_app``: tasks run in an app context, the app is kept in
``app.extensions["celery"]``).

    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 \\
        gunicorn -w 2 tests.celery_app:app
    ... celery -A tests.celery_app:celery_app worker --concurrency 1
"""

from __future__ import annotations

import os
import time
from typing import Any

from flask import Flask

from flask_mcp import MCP, Context
from tests.celery_setup import celery_init_app

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

app = Flask(__name__)
app.config["SECRET_KEY"] = "celery-e2e-secret"
app.config["MCP_TASK_RUNNER"] = "celery"
app.config.from_prefixed_env()
celery_app = celery_init_app(app)
mcp = MCP(app, name="celery-tasks", version="1.0")

#: Which worker runs a tool (set in each worker's environment by the test).
WORKER = os.environ.get("WORKER_NAME", "web")


@mcp.tool(task="optional")
def tasked(seconds: float, ctx: Context) -> dict[str, Any]:
    """Works for ``seconds`` (stopping when cancelled); says which worker ran it."""
    ctx.set_task_status(f"running on {WORKER}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    return {"worker": WORKER, "task": ctx.task_id}


@mcp.tool(task="optional", task_rerun=False)
def fragile(seconds: float, ctx: Context) -> dict[str, Any]:
    """Like ``tasked``, but not safe to repeat: failed when its worker dies."""
    return tasked(seconds, ctx)


@mcp.tool(task="required")
def tasked_question(seconds: float, ctx: Context) -> dict[str, Any]:
    """Asks for a name, works for ``seconds``, then greets its owner."""
    ctx.set_task_status(f"asking on {WORKER}")
    answer = ctx.elicit("What is your name?", NAME_SCHEMA)
    name = answer.content.get("name") if answer.accepted and answer.content else None
    ctx.set_task_status(f"greeting on {WORKER}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    return {"greeting": f"Hello, {name}!", "worker": WORKER}
