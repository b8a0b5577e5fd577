#!/usr/bin/env python3
"""Instructions per request through the whole stack: a real gunicorn sync
worker (as ``bench/run.py`` starts it) under ``valgrind --tool=callgrind``, fed
one request per connection over loopback by a Python client.

    bench/.venv/bin/python bench/instructions.py                        # floor + every flask-mcp workload
    bench/.venv/bin/python bench/instructions.py call-2026 initialize --requests 300
    bench/.venv/bin/python bench/instructions.py --backend redis call-legacy
    bench/.venv/bin/python bench/instructions.py --backend postgresql call-legacy initialize
    bench/.venv/bin/python bench/instructions.py call-2026 --threads 4 --connections 8,64 --requests 512

Wall-clock figures move with whatever else the machine runs; instruction
counts do not (to within a fraction of a percent), so this is the way to A/B a
change on a busy machine. Per workload: warm the worker up, zero callgrind's
counters, send ``--requests`` requests, dump, and divide. The ratio to the
floor is instructions(floor) / instructions(workload), which is what the wrk
ratio comes to when the server core is the bottleneck and kernel time is equal
(it is a little above it: both pay the same socket work, which callgrind does
not count). ``--keep`` leaves the callgrind files for ``callgrind_annotate``.

With ``--threads N`` the worker is gunicorn's gthread one (``--threads N``, a
long keep-alive), fed by ``--connections`` keep-alive connections at once (one
client thread each, ``--requests`` spread over them): what a request costs as
concurrency grows, where the wall clock on a shared machine cannot tell.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import REDIS_URL, ROOT, VBIN, WORKLOADS, RedisKeys, children, free_port, open_session  # noqa: E402

FLOOR_APP = "bench.apps.floor_app:app"
MCP_APP = "bench.apps.flask_mcp_app:app"
DEFAULT_WORKLOADS = ["call-2026", "discover", "call-legacy", "initialize", "list-2026"]


class CallgrindWorker:
    """gunicorn -w 1 -k sync under callgrind; the worker's counters are zeroed
    and dumped with ``callgrind_control`` around each measured batch."""

    def __init__(self, app: str, env: dict[str, str], out_dir: Path, threads: int | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.out_dir = out_dir
        # gthread: a keep-alive long enough for the pauses valgrind and callgrind_control make
        worker = ["-k", "sync"] if threads is None else ["-k", "gthread", "--threads", str(threads),
                                                         "--keep-alive", "120"]
        cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out_dir}/cg.%p",
               str(VBIN / "python"), str(VBIN / "gunicorn"), "-w", "1", *worker,
               "-b", f"127.0.0.1:{self.port}", "--no-control-socket", "--log-level", "warning",
               "--timeout", "600", "--chdir", str(ROOT), app]
        full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0",
                    "PYTHONDONTWRITEBYTECODE": "1"}
        self.log = open(out_dir / "server.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.worker = self._wait_worker()

    def _wait_worker(self) -> int:
        # Generous: under valgrind, on a loaded machine, importing SQLAlchemy alone
        # (the PostgreSQL rows) took longer than the three minutes this once allowed.
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {self.out_dir}/server.log")
            kids = children(self.proc.pid)
            if kids and _answers(self.port):
                return kids[0]
            time.sleep(0.5)
        raise RuntimeError("the worker did not come up under valgrind within 900 s")

    def measure(self, send: Any, count: int) -> int:
        """Instructions the worker executed for ``count`` calls of ``send``."""
        before = set(self.out_dir.glob(f"cg.{self.worker}*"))
        subprocess.run(["callgrind_control", "-z", str(self.worker)], check=True, capture_output=True)
        for _ in range(count):
            send()
        subprocess.run(["callgrind_control", "-d", str(self.worker)], check=True, capture_output=True)
        dumps = sorted(set(self.out_dir.glob(f"cg.{self.worker}*")) - before, key=lambda p: p.stat().st_mtime)
        if not dumps:
            raise RuntimeError("callgrind wrote no dump")
        text = dumps[-1].read_text(errors="replace")
        match = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
        if match is None:
            raise RuntimeError(f"no instruction total in {dumps[-1]}")
        return int(match.group(1))

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/mcp/health")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def sender(port: int, body: bytes, headers: dict[str, str]) -> Any:
    """One POST per connection, as wrk sees a sync worker (it closes after each answer)."""

    def send() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/mcp", body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        if response.status != 200 or b'"result"' not in data:
            raise RuntimeError(f"HTTP {response.status}: {data[:300]!r}")

    return send


def concurrent_sender(port: int, body: bytes, headers: dict[str, str], connections: int, count: int) -> Any:
    """``connections`` keep-alive connections at once, ``count`` POSTs in all
    (rounded down to a multiple of ``connections``), as wrk drives a gthread worker."""
    per_connection = max(1, count // connections)

    def client(failures: list[str]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            for _ in range(per_connection):
                conn.request("POST", "/mcp", body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                if response.status != 200 or b'"result"' not in data:
                    failures.append(f"HTTP {response.status}: {data[:300]!r}")
                    return
        finally:
            conn.close()

    def send() -> None:
        failures: list[str] = []
        clients = [threading.Thread(target=client, args=(failures,)) for _ in range(connections)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        if failures:
            raise RuntimeError(failures[0])

    return send, per_connection * connections


def measure(app: str, env: dict[str, str], workloads: list[str], count: int, warmup: int, out_dir: Path,
            threads: int | None = None, connections: list[int] | None = None) -> dict[str, float]:
    worker = CallgrindWorker(app, env, out_dir, threads)
    try:
        figures = {}
        for key in workloads:
            workload = WORKLOADS[key]
            session_id = open_session(worker.url) if workload.wire == "session" else None
            body = json.dumps(workload.body(), separators=(",", ":")).encode()
            headers = workload.headers(session_id)
            if threads is None:
                send = sender(worker.port, body, headers)
                for _ in range(warmup):
                    send()
                figures[key] = worker.measure(send, count) / count
                print(f"  {key:<12} {figures[key]:>12,.0f} instructions/request", flush=True)
                continue
            for conns in connections or [8]:
                send, sent = concurrent_sender(worker.port, body, headers, conns, count)
                concurrent_sender(worker.port, body, headers, conns, conns * 2)[0]()  # warm-up, every connection
                label = f"{key} c={conns}"
                figures[label] = worker.measure(send, 1) / sent  # one batch of `sent` requests
                print(f"  {label:<16} {figures[label]:>12,.0f} instructions/request", flush=True)
        return figures
    finally:
        worker.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workloads", nargs="*", default=DEFAULT_WORKLOADS, help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--requests", type=int, default=200, help="measured requests per workload (default 200)")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--backend", choices=["sqlite", "redis", "postgresql", "memory"], default="sqlite")
    parser.add_argument("--keep", action="store_true", help="keep the callgrind files (the path is printed)")
    parser.add_argument("--threads", type=int, help="a gthread worker of this many threads (default: sync)")
    parser.add_argument("--connections", default="8,64",
                        help="with --threads: keep-alive connections at once, per measurement (default 8,64)")
    args = parser.parse_args(argv)
    conns = [int(c) for c in args.connections.split(",") if c.strip()]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads: {unknown}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind (with callgrind_control) is needed: apt-get install -y valgrind")
    out_dir = Path(tempfile.mkdtemp(prefix="flask-mcp-callgrind-"))
    postgres = None
    if args.backend == "postgresql":  # a PostgreSQL of its own (bench/postgres.py), stopped at the end
        from postgres import BenchPostgres

        postgres = BenchPostgres().start()
    backend = {"sqlite": f"sqlite:///{out_dir}/sessions.sqlite3", "redis": f"{REDIS_URL}/14",
               "memory": "memory://", "postgresql": postgres.database() if postgres else ""}[args.backend]
    redis_keys = RedisKeys(backend) if args.backend == "redis" else None  # the sessions made here, deleted after
    try:
        print(f"floor ({FLOOR_APP})", flush=True)
        floors = measure(FLOOR_APP, {}, ["call-2026"], args.requests, args.warmup, out_dir, args.threads, conns)
        print(f"flask-mcp ({MCP_APP}, {args.backend})", flush=True)
        ours = measure(MCP_APP, {"FLASK_MCP_BACKEND": backend}, args.workloads, args.requests, args.warmup, out_dir,
                       args.threads, conns)
    finally:
        if redis_keys is not None:
            print(f"(removed the {redis_keys.cleanup()} Redis session keys this run created in db 14)", flush=True)
        if postgres is not None:
            postgres.stop()
    print("\n| workload | instructions/request | above the floor | floor / workload |\n|---|--:|--:|--:|")
    for key, value in floors.items():
        print(f"| floor{key.removeprefix('call-2026')} | {value:,.0f} | | 1.00 |")
    for key, value in ours.items():
        floor = floors.get("call-2026" + key[len(key.split(" ")[0]):], next(iter(floors.values())))
        print(f"| {key} | {value:,.0f} | {value - floor:,.0f} | {floor / value:.2f} |")
    if args.keep:
        print(f"\ncallgrind files: {out_dir}")
    else:
        shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
