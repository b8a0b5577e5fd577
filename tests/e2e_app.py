"""A tiny MCP server for the session end-to-end tests (tests/e2e/test_e2e_sessions.py):
``whoami`` tells which gunicorn worker answered, ``echo`` is a plain call.

    FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 gunicorn -w 4 tests.e2e_app:app
"""

from __future__ import annotations

import os

from flask import Flask

from flask_mcp import MCP

app = Flask(__name__)
app.config.from_prefixed_env()

mcp = MCP(app, name="e2e", version="1.0")


@mcp.tool
def whoami() -> dict[str, int]:
    """The process id of the worker that ran this call."""
    return {"pid": os.getpid()}


@mcp.tool
def echo(text: str) -> str:
    """Return ``text`` unchanged."""
    return text
