#!/usr/bin/env python3
"""What a durable call's start costs (docs/celery.md): the time from sending
the ``tools/call`` POST to receiving its priming event, against a real
gunicorn worker (gthread) and a redis-server of its own (event log, session
store and Celery broker). No Celery worker runs: the calls wait in the queue,
which is all the start needs. For scale, the same client's ``ping`` on the
same session.

    .venv/bin/python bench/durable_start.py            # 200 of each
    .venv/bin/python bench/durable_start.py --calls 500

Prints the median and 90th percentile of each, in milliseconds. Wall-clock
figures move with whatever else the machine runs: compare them within a run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
LEGACY = "2025-11-25"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("gunicorn exited")
        try:
            if requests.get(url, timeout=1).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError("gunicorn did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="flask-mcp-durable-start-"))
    redis_port, port = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(folder)], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{redis_port}/0"
    env = {**os.environ, "CELERY_BROKER_URL": url, "FLASK_MCP_BACKEND": url}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "tests.celery_app:app", "-b", f"127.0.0.1:{port}",
                               "-w", "1", "-k", "gthread", "--threads", "32", "--log-level", "warning"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}/mcp"
    try:
        wait(endpoint + "/health", server)
        http = requests.Session()
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        init = http.post(endpoint, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        headers |= {"Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY}
        http.post(endpoint, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        starts, pings = [], []
        for n in range(1, args.calls + 1):
            began = time.perf_counter()
            http.post(endpoint, headers=headers, json={"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"})
            pings.append(time.perf_counter() - began)
        for n in range(1, args.calls + 1):
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                "name": "durable_steps", "arguments": {"steps": 1, "interval": 0}}}
            began = time.perf_counter()
            with http.post(endpoint, headers=headers, json=body, stream=True) as response:
                first = next(response.iter_content(chunk_size=None))
                starts.append(time.perf_counter() - began)
                assert first.startswith(b"id: ") and b"data: \n" in first, first
            # The stream left holds its worker thread until the worker sees the client gone
            # (MCP_SSE_PROBE_INTERVAL, 0.5 s): pause so that the next call finds a free thread.
            time.sleep(0.05)
        for name, values in (("POST to priming event (durable call)", starts), ("ping round trip", pings)):
            values.sort()
            print(f"{name}: median {statistics.median(values) * 1000:.2f} ms, "
                  f"p90 {values[int(len(values) * 0.9)] * 1000:.2f} ms ({len(values)} calls)")
    finally:
        server.terminate()
        server.wait(timeout=15)
        redis.terminate()
        redis.wait(timeout=15)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
