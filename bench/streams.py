"""How many subscriptions/listen streams one gunicorn worker holds while
ordinary POSTs still get through, and what the idle streams cost.

Starts the example app under gunicorn with one worker (pinned to core 1 when
``taskset`` exists), opens listen streams up to each step's count (each stream
read up to its acknowledgement, then left idle), and at every step measures:

* the worker's CPU use over ``--idle`` seconds while nothing but the open streams
  exist (their heartbeats and, on SQLite, their polling), its RSS and open files;
* then five ordinary ``tools/call`` POSTs, one after the other, each on a new
  connection with a 3 s timeout: how many answered, p50 and max latency.

It stops after the first step where a stream could not be opened or a POST
did not answer. Loopback only; the server is started here and stopped by its PID.

    bench/.venv/bin/python bench/streams.py                          # gthread, 8 and 32 threads
    bench/.venv/bin/python bench/streams.py --worker-class gevent --worker-connections 1000
    bench/.venv/bin/python bench/streams.py --worker-class gevent --backend redis --steps 0,100,999,1000

``--backend``: ``sqlite`` (default: a fresh file, the example's default store),
``redis`` (db 14 on 127.0.0.1:6379) or ``memory``. Defaults for ``--steps``:
gthread ``0, N/2, N-1, N`` (N threads), gevent ``0,10,100,500,999,1000``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = str(Path(__file__).resolve().parents[1])
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
SERVER_CORE = "1"
REDIS_URL = "redis://127.0.0.1:6379/14"
POSTS = 5
POST_TIMEOUT = 3.0
TICKS = os.sysconf("SC_CLK_TCK")

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def headers(method: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }


class Server:
    """``gunicorn example.app:app -w 1`` of one worker class, started and stopped by PID."""

    def __init__(self, worker_class: str, size: int, backend: str, heartbeat: float | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.dir = Path(tempfile.mkdtemp(prefix="flask-mcp-streams-"))
        store = {"sqlite": f"sqlite:///{self.dir / 'sessions.sqlite3'}", "redis": REDIS_URL, "memory": "memory://"}
        # The whole worker, not the share MCP_STREAM_SHARE leaves to streams: this
        # measures how many streams a worker can hold at all.
        env = {**os.environ, "FLASK_MCP_BACKEND": store[backend], "FLASK_MCP_STREAM_SHARE": "1.0"}
        if heartbeat is not None:
            env["FLASK_MCP_SSE_HEARTBEAT"] = str(heartbeat)
        size_option = ["--threads", str(size)] if worker_class == "gthread" else ["--worker-connections", str(size)]
        pin = ["taskset", "-c", SERVER_CORE] if shutil.which("taskset") else []
        cmd = [*pin, GUNICORN, "example.app:app", "-b", f"127.0.0.1:{self.port}", "-w", "1", "-k", worker_class,
               *size_option, "--timeout", "120", "--log-level", "warning"]
        self.log = (self.dir / "gunicorn.log").open("wb")
        self.process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        else:
            log = (self.dir / "gunicorn.log").read_text()
            self.stop()
            raise RuntimeError(f"gunicorn did not start:\n{log}")
        self.worker = self._worker()

    def _worker(self) -> int:
        for _ in range(100):
            children = [int(p) for task in Path(f"/proc/{self.process.pid}/task").iterdir()
                        for p in (task / "children").read_text().split()]
            if len(children) == 1:
                return children[0]
            time.sleep(0.1)
        raise RuntimeError("expected one gunicorn worker")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.worker}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.worker}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.worker}/fd"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def open_listen(port: int, number: int) -> http.client.HTTPConnection | None:
    """A listen stream read up to its acknowledgement, or ``None`` if that took over 10 s."""
    body = {
        "jsonrpc": "2.0",
        "id": f"l{number}",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": META},
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/mcp", body=json.dumps(body), headers=headers("subscriptions/listen"))
        response = connection.getresponse()
        if response.status != 200:
            raise OSError(f"HTTP {response.status}")
        while b"subscriptions/acknowledged" not in response.readline():
            pass
        return connection
    except OSError:
        connection.close()
        return None


def post_latency(url: str) -> float | None:
    """Milliseconds for one ordinary tools/call on a new connection; ``None`` if it failed."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "opening_hours", "arguments": {}, "_meta": META}}
    started = time.monotonic()
    try:
        r = requests.post(url, json=body, headers={**headers("tools/call"), "Mcp-Name": "opening_hours"},
                          timeout=POST_TIMEOUT)
        ok = r.status_code == 200 and '"result"' in r.text
    except requests.RequestException:
        return None
    return (time.monotonic() - started) * 1000 if ok else None


def run(worker_class: str, size: int, steps: list[int], backend: str, heartbeat: float | None,
        idle: float) -> list[dict[str, object]]:
    server = Server(worker_class, size, backend, heartbeat)
    streams: list[http.client.HTTPConnection] = []
    rows: list[dict[str, object]] = []
    failed_opens = 0
    try:
        for step in steps:
            while len(streams) + failed_opens < step:
                stream = open_listen(server.port, len(streams))
                if stream is None:
                    failed_opens += 1
                else:
                    streams.append(stream)
            time.sleep(1.0)  # let the openings settle
            cpu, wall = server.cpu_seconds(), time.monotonic()
            time.sleep(idle)
            cpu_pct = (server.cpu_seconds() - cpu) / (time.monotonic() - wall) * 100
            latencies = [post_latency(server.url) for _ in range(POSTS)]
            ok = sorted(x for x in latencies if x is not None)
            row = {
                "worker": f"{worker_class} {'threads' if worker_class == 'gthread' else 'worker_connections'}={size}",
                "backend": backend, "streams": len(streams), "failed_opens": failed_opens,
                "posts_ok": len(ok), "p50_ms": statistics.median(ok) if ok else None, "max_ms": ok[-1] if ok else None,
                "idle_cpu_pct": cpu_pct, "rss_mb": server.rss_mb(), "open_files": server.open_files(),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if failed_opens or len(ok) < POSTS:
                break
    finally:
        for stream in streams:
            stream.close()
        server.stop()
    return rows


def table(rows: list[dict[str, object]]) -> str:
    def ms(x: object) -> str:
        return f"{x:.1f}" if isinstance(x, float) else "-"

    lines = ["| worker | backend | open streams | failed opens | POSTs ok | p50 ms | max ms | idle CPU % | RSS MB "
             "| open fds |", "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(f"| {r['worker']} | {r['backend']} | {r['streams']} | {r['failed_opens']} | "
                     f"{r['posts_ok']}/{POSTS} | {ms(r['p50_ms'])} | {ms(r['max_ms'])} | "
                     f"{r['idle_cpu_pct']:.1f} | {r['rss_mb']:.0f} | {r['open_files']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("threads", nargs="*", type=int, help="gthread: thread counts to measure (default 8 32)")
    p.add_argument("--worker-class", choices=["gthread", "gevent"], default="gthread")
    p.add_argument("--worker-connections", type=int, default=1000, help="gevent: gunicorn --worker-connections")
    p.add_argument("--backend", choices=["sqlite", "redis", "memory"], default="sqlite")
    p.add_argument("--steps", help="comma-separated stream counts (see above for the defaults)")
    p.add_argument("--idle", type=float, default=3.0, help="seconds of idle CPU measurement per step (default 3)")
    p.add_argument("--heartbeat", type=float, help="FLASK_MCP_SSE_HEARTBEAT (default: the app's, 15 s)")
    args = p.parse_args(argv)
    sizes = (args.threads or [8, 32]) if args.worker_class == "gthread" else [args.worker_connections]
    rows = []
    for size in sizes:
        if args.steps:
            steps = [int(s) for s in args.steps.split(",")]
        elif args.worker_class == "gthread":
            steps = [0, size // 2, size - 1, size]
        else:
            steps = [s for s in (0, 10, 100, 500, size - 1, size) if s <= size]
        rows += run(args.worker_class, size, sorted(set(steps)), args.backend, args.heartbeat, args.idle)
    print("\n" + table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
