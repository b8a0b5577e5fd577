"""How many subscriptions/listen streams one gunicorn worker holds while
ordinary POSTs still get through: opens streams one by one against the example
app (one worker) and times five tools/call POSTs after each.

    bench/.venv/bin/python bench/streams.py [THREADS ...]     (default: 8 32)
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = str(Path(__file__).resolve().parents[1])
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def headers(method):
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }


def run(threads, worker_class="gthread"):
    port = free_port()
    env = {**os.environ, "FLASK_MCP_BACKEND": "memory://", "FLASK_MCP_SSE_HEARTBEAT": "5"}
    proc = subprocess.Popen(
        [
            GUNICORN,
            "example.app:app",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "-k",
            worker_class,
            "--threads",
            str(threads),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    for _ in range(100):
        try:
            requests.get(url + "/health", timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.1)
    streams = []
    results = []

    def post_latency():
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "opening_hours", "arguments": {}, "_meta": META},
        }
        h = {**headers("tools/call"), "Mcp-Name": "opening_hours"}
        t = time.monotonic()
        try:
            r = requests.post(url, json=body, headers=h, timeout=3)
            return (time.monotonic() - t) * 1000 if r.status_code == 200 else None
        except requests.RequestException:
            return None

    try:
        for k in list(range(0, threads + 2)):
            while len(streams) < k:
                body = {
                    "jsonrpc": "2.0",
                    "id": f"l{len(streams)}",
                    "method": "subscriptions/listen",
                    "params": {"notifications": {"toolsListChanged": True}, "_meta": META},
                }
                s = requests.Session()
                try:
                    r = s.post(url, json=body, headers=headers("subscriptions/listen"), stream=True, timeout=3)
                    it = r.iter_lines()
                    next(it)  # the ack arrived: the stream is open
                    streams.append((s, r))
                except requests.RequestException:
                    streams.append((s, None))
            lat = [post_latency() for _ in range(5)]
            ok = [x for x in lat if x is not None]
            results.append((k, len(ok), sorted(ok)[len(ok) // 2] if ok else None))
    finally:
        for s, r in streams:
            if r is not None:
                r.close()
            s.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    return results


if __name__ == "__main__":
    for threads in [int(a) for a in sys.argv[1:]] or [8, 32]:
        for k, ok, med in run(threads):
            print(
                f"gthread threads={threads} open_listen_streams={k} posts_ok={ok}/5 median_ms={med and round(med, 1)}"
            )
