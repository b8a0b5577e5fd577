"""A protected MCP server for the authenticated end-to-end tests
(tests/e2e/test_auth_e2e.py), configured from the environment:

    FLASK_MCP_AUTH=true FLASK_MCP_INTROSPECTION_URL=http://127.0.0.1:8123/introspect \
    FLASK_MCP_AUTH_SERVERS='["http://127.0.0.1:8123"]' gunicorn -w 2 tests.auth_app:app
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask

from flask_mcp import MCP, Context

app = Flask(__name__)
app.config.from_prefixed_env()

mcp = MCP(app, name="protected", version="1.0")


@mcp.tool
def whoami(ctx: Context) -> dict[str, Any]:
    """Who is calling, for which account, served by which worker."""
    principal = ctx.principal
    return {
        "subject": principal.subject if principal else None,
        "scopes": sorted(principal.scopes) if principal else [],
        "account": ctx.account,
        "pid": os.getpid(),
    }


@mcp.tool(scopes=["files:read"])
def read_file(path: str) -> str:
    """Read a (pretend) file."""
    return f"contents of {path}"


@mcp.tool(scopes=["admin"])
def purge() -> str:
    """Something only administrators may do."""
    return "purged"
