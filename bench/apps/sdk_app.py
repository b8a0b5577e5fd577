"""The official MCP Python SDK (``mcp`` 2.3.0) with the same 52 tools, as a
Streamable HTTP ASGI app for uvicorn.

    BENCH_SDK_MODE=json      stateless_http=True, json_response=True
    BENCH_SDK_MODE=stateful  the defaults: sessions, SSE answers

In either mode a request whose ``MCP-Protocol-Version`` header names
2026-07-28 takes the SDK's single-exchange 2026-07-28 path (the header
decides; see mcp/server/streamable_http_manager.py).

``max_sessions=None``: the default cap (10 000 open sessions) answers 503
within seconds of the ``initialize`` workload, which opens a session per
request; flask-mcp has no such cap, so neither does the benchmarked SDK.
"""

from __future__ import annotations

import gc
import os

from mcp.server.mcpserver import MCPServer

from .tools_def import all_tools

MODE = os.environ.get("BENCH_SDK_MODE", "stateful")
if MODE not in ("json", "stateful"):
    raise SystemExit(f"BENCH_SDK_MODE must be 'json' or 'stateful' (got {MODE!r})")

server = MCPServer(name="bench", version="1.0.0", log_level="WARNING")
for fn in all_tools():
    server.add_tool(fn, structured_output=False if fn.__annotations__.get("return") in (str, "str") else None)

app = server.streamable_http_app(
    json_response=MODE == "json",
    stateless_http=MODE == "json",
    max_sessions=None,
)

# Like every app in this benchmark (floor, flask-mcp, SDK): once loaded, its objects are
# moved out of the garbage collector's reach, as example/gunicorn.conf.py advises (see
# bench/README.md, "Garbage collection").
gc.freeze()
