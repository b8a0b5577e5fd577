"""The app ``flask mcp stdio`` serves and ``flask mcp call`` calls in the
tests that run them as a person or a host does: a tool that reports progress,
logs and asks a question, one that writes to standard output as careless code
does, one that waits to be cancelled, and one with an ``x-mcp-header``
argument (a 2026-07-28 call needs its ``Mcp-Param-*`` header), and a task
that asks a question.

    flask --app tests/stdio_app.py mcp stdio
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

from flask import Flask

from flask_mcp import MCP, Context, Header

#: What plan_trip asks: one field of each kind a form may hold.
TRIP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "title": "City", "minLength": 2},
        "nights": {"type": "integer", "minimum": 1, "maximum": 14, "default": 3},
        "fare": {"type": "string", "enum": ["economy", "business"]},
        "budget": {"type": "number", "description": "In euros"},
        "insured": {"type": "boolean"},
    },
    "required": ["city", "fare"],
}


def create_app(**config: Any) -> Flask:
    app = Flask("stdio_app")
    app.config.update({"TESTING": True, "SECRET_KEY": "stdio-tests", "MCP_BACKEND": "memory://", **config})
    mcp = MCP(app, name="stdio-test", version="1.0.0")

    @mcp.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool
    def plan_trip(ctx: Context) -> str:
        """Reports progress and logs, then asks the traveller where to."""
        ctx.report_progress(1, 3, "looking at the calendar")
        ctx.info("the calendar is free")
        ctx.report_progress(2, 3, "asking the traveller")
        answer = ctx.elicit("Where to?", TRIP_SCHEMA)
        if not answer.accepted:
            return f"no trip ({answer.action})"
        ctx.report_progress(3, 3, "booked")
        return "booked " + json.dumps(answer.content, sort_keys=True)

    @mcp.tool
    def noisy() -> str:
        """Writes to standard output as careless code does (print, the file
        descriptor, a child process), then answers."""
        print("chatter from print()")
        sys.stdout.flush()
        os.write(1, b"chatter from file descriptor 1\n")
        subprocess.run([sys.executable, "-c", "print('chatter from a child process')"], check=True)
        return "a quiet answer"

    @mcp.tool
    def wait_for_cancel(marker: str, ctx: Context) -> str:
        """Waits to be cancelled (up to 30 s); writes "cancelled" to the file ``marker`` when it is."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ctx.cancelled:
                Path(marker).write_text("cancelled")
                return "cancelled"
            time.sleep(0.05)
        return "never cancelled"

    @mcp.tool
    def shelve(region: Annotated[str, Header("Region")], book: str) -> str:
        """Shelve a book in a region (the region travels in a header too)."""
        return f"{book} shelved in {region}"

    @mcp.tool(task="required")
    def archive(ctx: Context) -> str:
        """Runs as a task, and asks before archiving (the task waits in input_required)."""
        answer = ctx.elicit("Archive everything?", {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"enum": ["old", "draft", "spam"]}, "minItems": 1}}})
        return f"archived {answer.content['tags'] if answer.accepted and answer.content else 'nothing'}"

    return app


app = create_app()
