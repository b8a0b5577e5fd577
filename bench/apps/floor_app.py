"""The floor: bare Flask, one POST route that answers a fixed JSON-RPC result
(shaped like flask-mcp's answer to ``tools/call echo``, without its ``_meta``). Whatever a real MCP
server costs above this is protocol work.

    gunicorn -w 1 -k sync bench.apps.floor_app:app
"""

from __future__ import annotations

import gc
import json

from flask import Flask, Response

app = Flask(__name__)

BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "hello"}], "resultType": "complete"},
    },
    separators=(",", ":"),
).encode()


@app.post("/mcp")
def mcp() -> Response:
    return Response(BODY, mimetype="application/json")


@app.get("/mcp/health")
def health() -> Response:
    return Response(b'{"status":"ok"}', mimetype="application/json")

# Like every app in this benchmark (floor, flask-mcp, SDK): once loaded, its objects are
# moved out of the garbage collector's reach, as example/gunicorn.conf.py advises (see
# bench/README.md, "Garbage collection").
gc.freeze()
