"""flask-mcp with the 52 benchmark tools.

    gunicorn -w 1 -k sync bench.apps.flask_mcp_app:app

The session backend comes from the environment (``FLASK_MCP_BACKEND``), like
every other ``MCP_*`` key, through ``app.config.from_prefixed_env()``.
"""

from __future__ import annotations

import gc

from flask import Flask

from flask_mcp import MCP

from .tools_def import all_tools

app = Flask(__name__)
app.config.from_prefixed_env()

mcp = MCP(app, name="bench", version="1.0.0")
for fn in all_tools():
    mcp.add_tool(fn)

# Like every app in this benchmark (floor, flask-mcp, SDK): once loaded, its objects are
# moved out of the garbage collector's reach, as example/gunicorn.conf.py advises (see
# bench/README.md, "Garbage collection").
gc.freeze()
