#!/usr/bin/env python3
"""What a request costs when the CPU caches are cold: the floor's and
flask-mcp's 2026 ``tools/call`` run in this process (``app.wsgi_app``, no
server, no socket), first back to back (warm caches), then with a walk over
``--evict`` bytes between requests, which pushes the request's code and data
out of the core's caches as the kernel and gunicorn do between two requests
of a real server. The walk's own time is measured alone and taken off.

    bench/.venv/bin/python bench/footprint.py
    bench/.venv/bin/python bench/footprint.py --evict 1000000,4000000 --requests 3000

The difference between the two columns is what a request pays for the code
and data it touches (its footprint), which callgrind's instruction counts do
not show (bench/README.md, "issue 35: what instructions do not count").
Pin it to one core (``taskset -c 1``) on a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _environ(body: bytes, headers: dict[str, str]) -> dict[str, Any]:
    """A WSGI environ as gunicorn builds it for a POST /mcp over loopback."""
    return {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/mcp", "SCRIPT_NAME": "", "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
        "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
        "wsgi.input_terminated": True, "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": "application/json",
        "HTTP_HOST": "127.0.0.1:8000", "HTTP_ACCEPT": "application/json, text/event-stream",
        "REMOTE_ADDR": "127.0.0.1", **headers,
    }


def _client(app: Any) -> Callable[[], bytes]:
    """One 2026-07-28 ``tools/call echo`` per call, a new id each time (as from wrk)."""
    counter = iter(range(1, 1 << 62))
    headers = {"HTTP_MCP_PROTOCOL_VERSION": "2026-07-28", "HTTP_MCP_METHOD": "tools/call", "HTTP_MCP_NAME": "echo"}

    def start_response(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        if not status.startswith("200"):
            raise SystemExit(f"unexpected answer: {status}")

    def call() -> bytes:
        message = {"jsonrpc": "2.0", "id": next(counter), "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": META}}
        out = app.wsgi_app(_environ(json.dumps(message, separators=(",", ":")).encode(), headers), start_response)
        data = b"".join(out)
        getattr(out, "close", lambda: None)()
        return data

    return call


def _per_request(call: Callable[[], bytes], evict: bytearray | None, requests: int, repeats: int) -> float:
    """Best of ``repeats``: CPU µs per request (with the walk, its own time taken off)."""

    def run(with_request: bool) -> float:
        started = time.process_time()
        for _ in range(requests):
            if with_request:
                call()
            if evict is not None:
                evict[::64]  # one byte of every cache line
        return (time.process_time() - started) / requests * 1e6

    best = min(run(True) for _ in range(repeats))
    return best - (min(run(False) for _ in range(repeats)) if evict is not None else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evict", default="1000000",
                        help="sizes in bytes of the walk between requests (comma-separated)")
    parser.add_argument("--requests", type=int, default=3000, help="requests per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per figure (the best is kept)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.evict.split(",")]
    os.environ["FLASK_MCP_BACKEND"] = f"sqlite:///{tempfile.mkdtemp(prefix='footprint-')}/sessions.sqlite3"
    from bench.apps.flask_mcp_app import app as mcp_app
    from bench.apps.floor_app import app as floor_app

    calls = {"floor": _client(floor_app), "call-2026": _client(mcp_app)}
    for call in calls.values():
        for _ in range(2000):  # warm: specialized bytecode, caches filled
            call()
    gc.freeze()
    print("| evicted between requests | floor µs | call-2026 µs | floor / call-2026 |")
    print("| --: | --: | --: | --: |")
    for size in [0, *sizes]:
        evict = bytearray(size) if size else None
        floor, call = (_per_request(c, evict, args.requests, args.repeats) for c in calls.values())
        print(f"| {size:,} bytes | {floor:.1f} | {call:.1f} | {floor / call:.2f} |")


if __name__ == "__main__":
    main()
