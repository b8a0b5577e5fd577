#!/usr/bin/env python3
"""Where a flask-mcp request spends its time: the benchmark app, driven in
process through its WSGI callable (no HTTP server, no sockets), sampled by
pyinstrument.

    bench/.venv/bin/python bench/profile_app.py                  # all workloads
    bench/.venv/bin/python bench/profile_app.py call-2026 --requests 5000 --top 8
    bench/.venv/bin/python bench/profile_app.py --floor call-2026 discover   # the floor app first

For each workload: the unprofiled cost per request (µs), then the functions
with the most self time and the flask-mcp / Flask / Werkzeug functions with
the most inclusive time, both in µs per request. Gunicorn's own work (socket,
HTTP parsing) is not in these figures; the wrk runs include it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}

WORKLOADS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    # name: (wire, params, tool name)
    "call-2026": ("2026", {"name": "echo", "arguments": {"text": "hello"}}, "echo"),
    "list-2026": ("2026", {}, None),
    "discover": ("2026", {}, None),
    "call-legacy": ("session", {"name": "echo", "arguments": {"text": "hello"}}, None),
    "list-legacy": ("session", {}, None),
    "initialize": ("init", {}, None),
}
METHODS = {"call": "tools/call", "list": "tools/list", "discover": "server/discover", "initialize": "initialize"}


def build(workload: str, session_id: str | None) -> tuple[bytes, dict[str, str]]:
    wire, params, name = WORKLOADS[workload]
    method = METHODS[workload.split("-")[0]]
    params = dict(params)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if wire == "2026":
        params["_meta"] = META
        headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if name:
            headers["Mcp-Name"] = name
    elif wire == "session":
        headers |= {"MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": session_id or ""}
    else:
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1.0"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    return body, headers


class Driver:
    """Calls the WSGI app the way gunicorn does, with a prebuilt environ."""

    def __init__(self, app: Any, body: bytes, headers: dict[str, str]) -> None:
        from werkzeug.test import EnvironBuilder

        self.app = app
        self.body = body
        builder = EnvironBuilder(path="/mcp", method="POST", headers=headers, data=body,
                                 base_url="http://127.0.0.1:8000")
        self.environ = builder.get_environ()
        builder.close()
        self.status = ""
        self.response_headers: list[tuple[str, str]] = []

    def _start(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        self.status = status
        self.response_headers = headers
        return lambda data: None

    def once(self) -> bytes:
        environ = dict(self.environ)
        environ["wsgi.input"] = io.BytesIO(self.body)
        result = self.app(environ, self._start)
        try:
            return b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close:
                close()


def aggregate(
    root: Any, n: int, top: int, factor: float
) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """(self time, inclusive time) per function, µs per request, biggest first;
    ``factor`` rescales the profiled times to the unprofiled request time."""
    self_time: dict[str, float] = defaultdict(float)
    incl: dict[str, float] = defaultdict(float)

    def label(frame: Any) -> str:
        path = frame.file_path_short or frame.file_path or ""
        return f"{frame.function}  ({path}:{frame.line_no})"

    def walk(frame: Any, parent: str, on_stack: frozenset[str]) -> None:
        if frame.is_synthetic:  # [self] / [await] leaves: already in the parent's total_self_time
            return
        key = label(frame)
        self_time[key] += frame.total_self_time
        if key not in on_stack:  # recursion counts once
            incl[key] += frame.time
        for child in frame.children:
            walk(child, key, on_stack | {key})

    walk(root, "<root>", frozenset())
    scale = 1e6 / n * factor
    selfs = sorted(((v * scale, k) for k, v in self_time.items()), reverse=True)[:top]
    ours = ("flask_mcp", "flask/", "werkzeug", "pydantic")
    incls = sorted(((v * scale, k) for k, v in incl.items() if any(o in k for o in ours)), reverse=True)[:top]
    return selfs, incls


def breakdown(root: Any, function: str, path_part: str) -> tuple[float, dict[str, float]]:
    """Total time in frames of ``function`` (a file containing ``path_part``), and
    how it splits among their children (plus ``(self)``), summed over the profile."""
    total = 0.0
    parts: dict[str, float] = defaultdict(float)

    def walk(frame: Any, inside: bool) -> None:
        nonlocal total
        hit = (not inside and frame.function == function and path_part in (frame.file_path or "")
               and not frame.is_synthetic)
        if hit:
            total += frame.time
            for child in frame.children:
                name = "(self)" if child.is_synthetic else f"{child.function} ({child.file_path_short}:{child.line_no})"
                parts[name] += child.time
            parts["(self)"] += frame.total_self_time - sum(c.time for c in frame.children if c.is_synthetic)
        for child in frame.children:
            walk(child, inside or hit)

    walk(root, False)
    return total, parts


def print_breakdown(root: Any, function: str, path_part: str, scale: float, top: int) -> None:
    total, parts = breakdown(root, function, path_part)
    if not total:
        return
    print(f"   inside {function} ({total * scale:.0f} µs/request):")
    for name, t in sorted(parts.items(), key=lambda kv: -kv[1])[:top]:
        if t * scale >= 0.5:
            print(f"     {t * scale:7.1f}  {name}")


def timed(driver: Driver, requests: int) -> float:
    """µs per request, unprofiled, after a short warm-up."""
    for _ in range(200):
        driver.once()
    t0 = time.perf_counter()
    for _ in range(requests):
        driver.once()
    return (time.perf_counter() - t0) / requests * 1e6


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", default=list(WORKLOADS), help=", ".join(WORKLOADS))
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--backend", default=None, help="MCP_BACKEND (default: a fresh SQLite file)")
    p.add_argument("--floor", action="store_true",
                   help="first time the floor app (bench/apps/floor_app.py) the same way, for the in-process gap")
    args = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="flask-mcp-profile-")
    os.environ["FLASK_MCP_BACKEND"] = args.backend or f"sqlite:///{tmp}/sessions.sqlite3"
    redis_keys = None
    if args.backend and args.backend.startswith(("redis://", "rediss://")):
        from bench.run import RedisKeys

        redis_keys = RedisKeys(args.backend)  # the sessions made here are deleted at the end
    try:
        return profile(args)
    finally:
        if redis_keys is not None:
            print(f"(removed the {redis_keys.cleanup()} Redis session keys this run created)")


def profile(args: argparse.Namespace) -> int:
    """Time, then profile, each workload named in ``args``."""
    from pyinstrument import Profiler

    from bench.apps.flask_mcp_app import app

    body, headers = build("initialize", None)
    init = Driver(app, body, headers)
    init.once()
    session_id = dict(init.response_headers).get("Mcp-Session-Id")
    print(f"MCP_BACKEND={os.environ['FLASK_MCP_BACKEND']}  ({args.requests} requests per workload)\n")
    if args.floor:
        from bench.apps.floor_app import app as floor

        print(f"== floor: {timed(Driver(floor, *build('call-2026', None)), args.requests):.0f} µs per request "
              "(bare Flask, the call-2026 request)\n")

    for workload in args.workloads:
        body, headers = build(workload, session_id)
        driver = Driver(app, body, headers)
        answer = driver.once()
        if not driver.status.startswith("200") or b'"result"' not in answer:
            print(f"{workload}: unexpected answer {driver.status} {answer[:200]!r}")
            continue
        plain = timed(driver, args.requests)
        profiler = Profiler(interval=0.0002)
        profiler.start()
        for _ in range(args.requests):
            driver.once()
        profiler.stop()
        session = profiler.last_session
        root = session.root_frame()
        sampled = session.duration / args.requests * 1e6
        print(f"== {workload}: {plain:.0f} µs per request unprofiled ({sampled:.0f} µs profiled; "
              f"the figures below are rescaled to the unprofiled time)")
        selfs, incls = aggregate(root, args.requests, args.top, plain / sampled)
        scale = 1e6 / args.requests * plain / sampled
        for function, where in (("wsgi_app", "flask/app.py"), ("full_dispatch_request", "flask/app.py"),
                                ("_post", "flask_mcp/http/blueprint.py"), ("_handle_post", "flask_mcp/protocol/"),
                                ("_handle_stateless", "flask_mcp/protocol/"), ("_handle_legacy", "flask_mcp/protocol/"),
                                ("_answer", "flask_mcp/protocol/")):
            print_breakdown(root, function, where, scale, args.top)
        print("   most self time (µs/request):")
        for us, name in selfs:
            print(f"     {us:7.1f}  {name}")
        print("   most inclusive time in flask_mcp / Flask / Werkzeug / pydantic (µs/request):")
        for us, name in incls:
            print(f"     {us:7.1f}  {name}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
