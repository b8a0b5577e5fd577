"""The MCP server of tests/e2e/test_e2e_durable.py: durable tool calls run on
Celery workers while two gunicorn hosts relay their events, and every answer
says which host and which web worker served it (``X-Served-By: <host>/<pid>``),
so the test knows whose worker to kill.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 \\
        DURABLE_HOST=a gunicorn -b 127.0.0.3:8000 tests.durable_app:app
    ... celery -A tests.durable_app:celery_app worker --pool threads --concurrency 12
"""

from __future__ import annotations

import os
import time
from typing import Any

from flask import Flask, Response

from flask_mcp import MCP, Context
from tests.celery_setup import celery_init_app

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
#: Which host this process belongs to ("a", "b"), or which Celery worker it is.
HOST = os.environ.get("DURABLE_HOST", "?")

app = Flask(__name__)
app.config["SECRET_KEY"] = "durable-e2e-secret"
app.config["MCP_TASK_RUNNER"] = "celery"
app.config.from_prefixed_env()
celery_app = celery_init_app(app)
mcp = MCP(app, name="durable", version="1.0")


@app.after_request
def served_by(response: Response) -> Response:
    """Name the host and the web worker: the stream a test cuts is the one this worker holds."""
    response.headers["X-Served-By"] = f"{HOST}/{os.getpid()}"
    return response


@mcp.tool(durable=True)
def long_call(steps: int, ask_at: int, ctx: Context) -> dict[str, Any]:
    """Works ``steps`` seconds, reporting progress every second; after step
    ``ask_at`` (0: never) asks for a name and greets its owner at the end."""
    name = None
    for step in range(1, steps + 1):
        time.sleep(1)
        ctx.report_progress(step, steps, f"step {step}")
        if step == ask_at:
            answer = ctx.elicit("What is your name?", NAME_SCHEMA)
            name = answer.content.get("name") if answer.accepted and answer.content else None
    return {"steps": steps, "greeting": f"Hello, {name}!" if name else None, "ran_on": HOST}


@mcp.tool
def relay_call(steps: int, let_go_at: int, ctx: Context) -> dict[str, Any]:
    """Not durable (the default thread runner): ``steps`` progress reports
    300 ms apart, letting the connection go after step ``let_go_at`` (0: never)."""
    for step in range(1, steps + 1):
        time.sleep(0.3)
        ctx.report_progress(step, steps, f"step {step}")
        if step == let_go_at:
            ctx.close_stream(retry_ms=200)
    return {"steps": steps, "ran_on": HOST}
