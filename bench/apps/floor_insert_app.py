"""The floor plus the least a durable session costs: each POST also inserts one
session-shaped row (an id led by the time, as flask-mcp's are, then 192 random
bits; a 200-byte JSON record) into a
SQLite file in WAL mode with ``synchronous=NORMAL``, the settings and table of
flask-mcp's default store, on one connection opened at the first request. It
reads no body and checks nothing.

Its ratio to the floor is the ceiling for ``initialize`` on any server that
keeps its sessions in that file, flask-mcp or not: ``bench/run.py --servers
floor+insert/sync`` measures it (see bench/README.md, "What a durable session
costs").

    FLASK_MCP_BACKEND=sqlite:////tmp/x.sqlite3 gunicorn -w 1 -k sync bench.apps.floor_insert_app:app
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import sqlite3
import time

from flask import Flask, Response

from .floor_app import BODY

app = Flask(__name__)

#: The database file, from the same variable the flask-mcp app reads (``sqlite:///`` + absolute path).
PATH = os.environ.get("FLASK_MCP_BACKEND", "sqlite:////tmp/floor-insert.sqlite3").removeprefix("sqlite:///")

RECORD = json.dumps(
    {
        "protocol_version": "2025-11-25",
        "client_info": {"name": "bench", "version": "1.0"},
        "client_capabilities": {},
        "principal": None,
        "created_at": 0.0,
        "last_seen": 0.0,
        "log_level": None,
        "initialized": False,
        "data": {},
    },
    separators=(",", ":"),
)

_connection: sqlite3.Connection | None = None


def _database() -> sqlite3.Connection:
    """Opened in the worker (after gunicorn's fork), once."""
    global _connection
    if _connection is None:
        _connection = sqlite3.connect(PATH, isolation_level=None, check_same_thread=False)
        _connection.execute("PRAGMA journal_mode=WAL")
        _connection.execute("PRAGMA synchronous=NORMAL")
        _connection.execute(
            "CREATE TABLE IF NOT EXISTS mcp_sessions"
            " (id TEXT PRIMARY KEY, record TEXT NOT NULL, last_seen REAL NOT NULL)"
        )
    return _connection


@app.post("/mcp")
def mcp() -> Response:
    _database().execute(
        "INSERT INTO mcp_sessions (id, record, last_seen) VALUES (?, ?, ?)",
        (f"{time.time_ns() // 1_000_000:012x}{secrets.token_urlsafe(24)}", RECORD, time.time()),
    )
    return Response(BODY, mimetype="application/json")


@app.get("/mcp/health")
def health() -> Response:
    return Response(b'{"status":"ok"}', mimetype="application/json")


gc.freeze()
