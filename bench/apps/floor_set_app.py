"""The floor plus the least a session in Redis costs: each POST also stores one
session-shaped record (an id led by the time, as flask-mcp's are, then 192
random bits; the same 200-byte JSON record as ``floor_insert_app``) with
``SET key value PX ttl`` through redis-py's own ``client.set``, as any Flask app
would, waiting for Redis's reply before answering. It reads no body and checks
nothing.

Its ratio to the floor is what one confirmed Redis write costs a Flask route
written the usual way: the reference for ``initialize`` on Redis (a ceiling
only for servers that go through ``client.set``; flask-mcp's own write path is
shorter). ``bench/run.py --servers floor+set/sync`` measures it (see
bench/README.md, "the reply read when the response leaves").

    FLASK_MCP_BACKEND=redis://127.0.0.1:6379/14 gunicorn -w 1 -k sync bench.apps.floor_set_app:app
"""

from __future__ import annotations

import gc
import os
import secrets
import time

import redis
from flask import Flask, Response

from .floor_app import BODY
from .floor_insert_app import RECORD

app = Flask(__name__)

#: The same variable, and database, the flask-mcp app reads.
URL = os.environ.get("FLASK_MCP_BACKEND", "redis://127.0.0.1:6379/14")
#: The prefix ``bench/run.py`` removes after the run, and flask-mcp's idle timer.
PREFIX = "flask-mcp:session:"
TTL_MS = 3_600_000

#: redis-py connects lazily, at the first command: in the worker, after gunicorn's fork.
client = redis.Redis.from_url(URL)


@app.post("/mcp")
def mcp() -> Response:
    client.set(f"{PREFIX}{time.time_ns() // 1_000_000:012x}{secrets.token_urlsafe(24)}", RECORD, px=TTL_MS)
    return Response(BODY, mimetype="application/json")


@app.get("/mcp/health")
def health() -> Response:
    return Response(b'{"status":"ok"}', mimetype="application/json")


gc.freeze()
