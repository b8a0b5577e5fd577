"""The floor plus the cheapest confirmed Redis write there is: each POST also
stores the same session-shaped record as ``floor_set_app`` with one
``SET key value PX ttl`` written on a plain socket (no client library: the
command packed by hand, one ``sendall``, one ``recv`` of ``+OK``), before
answering. It reads no body and checks nothing.

Its ratio to the floor is the ceiling, on the machine at hand, for any server
that confirms one Redis write per request: the round trip's own cost (two
system calls, Redis's CPU woken and waking the worker back) and nothing else.
``bench/run.py --servers floor+rawset/sync`` measures it (bench/README.md,
"what one Redis round trip costs here").

    FLASK_MCP_BACKEND=redis://127.0.0.1:6379/14 gunicorn -w 1 -k sync bench.apps.floor_rawset_app:app
"""

from __future__ import annotations

import gc
import os
import secrets
import socket
import time
from urllib.parse import urlsplit

from flask import Flask, Response

from .floor_app import BODY
from .floor_insert_app import RECORD as RECORD_TEXT
from .floor_set_app import PREFIX, TTL_MS

app = Flask(__name__)

URL = urlsplit(os.environ.get("FLASK_MCP_BACKEND", "redis://127.0.0.1:6379/14"))
DB = (URL.path.strip("/") or "0").encode()

_connection: list[socket.socket] = []  # made at the first request: in the worker, after gunicorn's fork


def _socket() -> socket.socket:
    if not _connection:
        sock = socket.create_connection((URL.hostname or "127.0.0.1", URL.port or 6379), timeout=2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking: no poll() before each send and receive
        sock.sendall(b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%b\r\n" % (len(DB), DB))
        if sock.recv(64) != b"+OK\r\n":
            raise RuntimeError("SELECT failed")
        _connection.append(sock)
    return _connection[0]


TTL = b"%d" % TTL_MS
RECORD = RECORD_TEXT.encode()


@app.post("/mcp")
def mcp() -> Response:
    key = f"{PREFIX}{time.time_ns() // 1_000_000:012x}{secrets.token_urlsafe(24)}".encode()
    sock = _socket()
    sock.sendall(b"*5\r\n$3\r\nSET\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$2\r\nPX\r\n$%d\r\n%b\r\n" % (
        len(key), key, len(RECORD), RECORD, len(TTL), TTL))
    reply = sock.recv(64)
    if reply != b"+OK\r\n":
        raise RuntimeError(f"SET failed: {reply!r}")
    return Response(BODY, mimetype="application/json")


@app.get("/mcp/health")
def health() -> Response:
    return Response(b'{"status":"ok"}', mimetype="application/json")


gc.freeze()
