#!/usr/bin/env python3
"""Throughput and latency of flask-mcp against a bare-Flask floor and the
official MCP Python SDK, all on one pinned core.

    python3 bench/run.py                      # the full run (about 20 minutes on 2 cores)
    python3 bench/run.py --quick              # a smoke run (about 5 minutes)
    python3 bench/run.py --only call-2026,call-legacy --connections 8
    python3 bench/run.py --servers flask-mcp --rounds 5 --duration 8

On first use it creates bench/.venv (pinned versions, flask-mcp installed
editable from this checkout) and installs Debian's wrk if it is missing; it
then re-runs itself inside that environment. Every server runs under
``taskset -c 1``, wrk under ``taskset -c 0``, on loopback only; each server is
started and stopped by this script (by PID) once per round, and the rounds
visit the servers in a rotated order. The floors run through each round, and
every other server is measured interleaved with its floor (one-second slices),
which the ratios are taken against. See bench/README.md for reading the table.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from postgres import BenchPostgres

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
VENV = BENCH / ".venv"
VBIN = VENV / "bin"
LUA = BENCH / "lua"
RESULTS = BENCH / "results"

#: Everything the benchmark runs, pinned; flask-mcp itself comes from this checkout.
PINS = [
    "mcp==2.3.0",
    "mcp-types==2.3.0",
    "uvicorn==0.54.0",
    "uvloop==0.23.0",
    "httptools==0.9.0",
    "starlette==1.10.0",
    "gunicorn==27.0.1",
    # gunicorn -k gevent, for bench/streams.py: gunicorn[gevent], as its worker also imports packaging
    "gevent==26.9.0",
    "greenlet==3.5.6",
    "packaging==26.4",
    "flask==3.1.3",
    "werkzeug==3.1.9",
    "pydantic==2.14.4",
    "redis==8.1.0",
    "requests==2.34.2",
    "pyinstrument==5.1.3",
    "orjson==3.13.0",  # flask-mcp's "fast" extra, as a production install would have it
    # flask-mcp's "sql" extra, for the PostgreSQL rows (a PostgreSQL of the bench's own, bench/postgres.py)
    "sqlalchemy==2.1.9",
    "psycopg==3.3.9",
    "psycopg-binary==3.3.9",
]

#: A row whose server core spent more than this share elsewhere is marked as disturbed.
DISTURBED_PCT = 20
SERVER_CORE = "1"
CLIENT_CORE = "0"
#: Where a server of several workers runs (one per core), and its wrk with it.
BOTH_CORES = f"{CLIENT_CORE},{SERVER_CORE}"
#: The gthread worker as the README's production setting runs it (``--threads``, ``--keepalive``).
THREADS = 4
KEEPALIVE = 5
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
#: The Redis the Redis rows use (``--redis-url``), without its database number (``--redis-db``).
REDIS_URL = "redis://127.0.0.1:6379"
SESSION_PREFIX = "flask-mcp:session:"  # flask-mcp's default Redis key prefix


# --------------------------------------------------------------------------- environment


def ensure_environment() -> None:
    """bench/.venv with the pinned packages (re-created when the pins or
    flask-mcp's pyproject change), and wrk."""
    stamp = VENV / ".bench-installed"
    wanted = "\n".join(PINS) + "\n" + hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == wanted):
        if not (VBIN / "python").exists():
            print(f"creating {VENV.relative_to(ROOT)} ...", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        print("installing the pinned packages into bench/.venv ...", flush=True)
        subprocess.run(
            [str(VBIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *PINS, "-e", str(ROOT)],
            check=True,
        )
        stamp.write_text(wanted)
    if shutil.which("wrk") is None:
        print("installing wrk (apt-get install -y wrk) ...", flush=True)
        install = ["apt-get", "install", "-y", "-qq", "wrk"]
        if subprocess.run(install, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], check=True)
            subprocess.run(install, check=True, stdout=subprocess.DEVNULL)
    if shutil.which("taskset") is None:
        sys.exit("taskset (util-linux) is needed to pin the server and wrk to cores")


def in_bench_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


# --------------------------------------------------------------------------- what is measured


@dataclass(frozen=True)
class Workload:
    key: str
    op: str  # the MCP operation, for the ratios: call, list, discover, initialize
    lua: str
    wire: str  # "2026", "session", "none" (legacy wire without a session), "init"
    text: str

    def body(self) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        params: dict[str, Any]
        if self.op == "call":
            params = {"name": "echo", "arguments": {"text": "hello"}}
        elif self.op == "initialize":
            params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1.0"}}
        else:
            params = {}
        if self.wire == "2026":
            params["_meta"] = meta
        method = {"call": "tools/call", "list": "tools/list", "discover": "server/discover",
                  "initialize": "initialize"}[self.op]
        return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}

    def headers(self, session_id: str | None) -> dict[str, str]:
        """The same headers the Lua script sends."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        method = self.body()["method"]
        if self.wire == "2026":
            headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
            if self.op == "call":
                headers["Mcp-Name"] = "echo"
        elif self.wire in ("session", "none"):
            headers["MCP-Protocol-Version"] = LEGACY
            if session_id:
                headers["Mcp-Session-Id"] = session_id
        return headers


WORKLOADS = {
    w.key: w
    for w in [
        Workload("call-2026", "call", "call_2026.lua", "2026", "tools/call echo, 2026-07-28 (stateless)"),
        Workload("call-legacy", "call", "call_legacy.lua", "session", "tools/call echo, 2025-11-25 session"),
        Workload("call-nosession", "call", "call_legacy.lua", "none", "tools/call echo, 2025-11-25, no session"),
        Workload("list-2026", "list", "list_2026.lua", "2026", "tools/list (52 tools), 2026-07-28"),
        Workload("list-legacy", "list", "list_legacy.lua", "session", "tools/list (52 tools), 2025-11-25 session"),
        Workload("list-nosession", "list", "list_legacy.lua", "none", "tools/list (52 tools), 2025-11-25, no session"),
        Workload("discover", "discover", "discover.lua", "2026", "server/discover, 2026-07-28"),
        Workload("initialize", "initialize", "initialize.lua", "init", "initialize (a new session per request)"),
    ]
}


@dataclass(frozen=True)
class ServerSpec:
    key: str
    kind: str  # gunicorn or uvicorn
    app: str
    workloads: tuple[str, ...]
    worker_class: str = "sync"
    env: dict[str, str] = field(default_factory=dict)
    backend: str = ""  # "sqlite", "redis", "postgresql", "memory" or "" (placeholders, filled per start)
    role: str = "flask-mcp"  # flask-mcp, floor, sdk, reference (a bare app that shows a ceiling)
    optional: bool = False  # skipped by --quick
    on_request: bool = False  # run only when --servers names it in full
    note: str = ""
    workers: int = 1  # gunicorn -w; one worker runs on SERVER_CORE, several on BOTH_CORES (wrk with them)

    @property
    def layout(self) -> str:
        """What a server is paired with its floor by: the worker class, and the worker count when above 1."""
        kind = self.worker_class if self.kind == "gunicorn" else "sync"
        return kind if self.workers == 1 else f"{kind}-w{self.workers}"

    @property
    def cores(self) -> str:
        """The cores the server is pinned to (``taskset -c``)."""
        return SERVER_CORE if self.workers == 1 else BOTH_CORES

    @property
    def client_cores(self) -> str:
        """The cores its wrk is pinned to: the other one, or both with a server on both."""
        return CLIENT_CORE if self.workers == 1 else BOTH_CORES


SERVERS = [
    ServerSpec("floor/sync", "gunicorn", "bench.apps.floor_app:app", ("call-2026",), role="floor",
               note="bare Flask, fixed JSON-RPC answer"),
    ServerSpec("floor/gthread", "gunicorn", "bench.apps.floor_app:app", ("call-2026",), worker_class="gthread",
               role="floor", optional=True, note="bare Flask, fixed JSON-RPC answer"),
    ServerSpec("floor/gthread-w2", "gunicorn", "bench.apps.floor_app:app", ("call-2026",), worker_class="gthread",
               role="floor", optional=True, workers=2, note="bare Flask, fixed JSON-RPC answer; 2 workers on 2 cores"),
    ServerSpec("flask-mcp/sync/sqlite", "gunicorn", "bench.apps.flask_mcp_app:app",
               ("call-2026", "call-legacy", "list-2026", "list-legacy", "discover", "initialize"),
               backend="sqlite", note="MCP_BACKEND sqlite (the default store, file in a temp dir)"),
    ServerSpec("flask-mcp/sync/redis", "gunicorn", "bench.apps.flask_mcp_app:app",
               ("call-legacy", "initialize"), backend="redis", note="MCP_BACKEND redis://127.0.0.1:6379/<db>"),
    ServerSpec("flask-mcp/sync/postgresql", "gunicorn", "bench.apps.flask_mcp_app:app",
               ("call-legacy", "initialize"), backend="postgresql",
               note="MCP_BACKEND postgresql+psycopg://... (a fresh database per start on the bench's own PostgreSQL)"),
    ServerSpec("flask-mcp/sync/memory", "gunicorn", "bench.apps.flask_mcp_app:app", ("call-legacy", "initialize"),
               backend="memory", on_request=True,
               note="MCP_BACKEND memory:// (one worker's dict): what the session store costs, by contrast"),
    ServerSpec("floor+insert/sync", "gunicorn", "bench.apps.floor_insert_app:app", ("initialize",),
               backend="sqlite", role="reference", on_request=True,
               note="the floor plus one SQLite session insert: the ceiling for initialize on that store"),
    ServerSpec("floor+set/sync", "gunicorn", "bench.apps.floor_set_app:app", ("initialize",),
               backend="redis", role="reference", on_request=True,
               note="the floor plus one Redis SET (redis-py's client.set): the reference for initialize on Redis"),
    ServerSpec("floor+rawset/sync", "gunicorn", "bench.apps.floor_rawset_app:app", ("initialize",),
               backend="redis", role="reference", on_request=True,
               note="the floor plus one Redis SET on a plain socket: the ceiling for one confirmed write"),
    ServerSpec("flask-mcp/gthread/sqlite", "gunicorn", "bench.apps.flask_mcp_app:app",
               ("call-2026", "call-legacy"), worker_class="gthread", backend="sqlite", optional=True,
               note="gthread (--threads, default 4; --keepalive, default 5)"),
    ServerSpec("flask-mcp/gthread-w2/sqlite", "gunicorn", "bench.apps.flask_mcp_app:app",
               ("call-2026", "call-legacy"), worker_class="gthread", backend="sqlite", optional=True, workers=2,
               note="2 gthread workers on 2 cores, wrk on the same 2 cores"),
    ServerSpec("flask-mcp/gthread/redis", "gunicorn", "bench.apps.flask_mcp_app:app",
               ("call-legacy", "initialize"), worker_class="gthread", backend="redis", optional=True,
               on_request=True, note="gthread; MCP_BACKEND redis://127.0.0.1:6379/<db>"),
    ServerSpec("sdk/stateless-json", "uvicorn", "bench.apps.sdk_app:app",
               ("call-2026", "list-2026", "discover", "call-nosession", "list-nosession", "initialize"),
               env={"BENCH_SDK_MODE": "json"}, role="sdk",
               note="stateless_http=True, json_response=True; 2026-07-28 requests take the SDK's 2026 path"),
    ServerSpec("sdk/stateful", "uvicorn", "bench.apps.sdk_app:app",
               ("call-legacy", "list-legacy", "call-2026", "initialize"),
               env={"BENCH_SDK_MODE": "stateful"}, role="sdk",
               note="the defaults (sessions, SSE answers; max_sessions=None)"),
]

#: What the floors answer (their only workload), and what each interleaved slice measures on them.
FLOOR_WORKLOAD = "call-2026"

#: The SDK reference each ratio column compares with: (server, workload wire).
#: A flask-mcp row is compared with the SDK row of the same operation.
SDK_REFS = {
    "sdk-json": ("sdk/stateless-json", ("none", "init")),
    "sdk-stateful": ("sdk/stateful", ("session", "init")),
    "sdk-2026": ("sdk/stateless-json", ("2026",)),
}


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def vm_rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


TICK = os.sysconf("SC_CLK_TCK")


def core_ticks(cores: str) -> tuple[int, int]:
    """(busy, steal) clock ticks since boot of the comma-separated ``cores``, from /proc/stat."""
    wanted = {f"cpu{core} " for core in cores.split(",")}
    busy = steal = 0
    for line in Path("/proc/stat").read_text().splitlines():
        if line[:line.find(" ") + 1] in wanted:
            f = [int(x) for x in line.split()[1:]]
            user, nice, system, _idle, _iowait, irq, softirq, stolen = f[:8]
            busy += user + nice + system + irq + softirq
            steal += stolen
    return busy, steal


def process_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


class CoreMeter:
    """How busy the server's cores were during a measurement, and how much of that
    was not the server: other processes on this machine disturb the figures
    (and, on a server of several workers, wrk shares its cores). Percentages
    are of one core: two busy cores make 200."""

    def __init__(self, pids: list[int], cores: str = SERVER_CORE) -> None:
        self.pids = pids
        self.cores = cores
        self.t0 = time.monotonic()
        self.core0 = core_ticks(cores)
        self.proc0 = process_ticks(pids)

    def read(self) -> dict[str, float]:
        elapsed = (time.monotonic() - self.t0) * TICK
        busy, steal = core_ticks(self.cores)
        server = process_ticks(self.pids) - self.proc0
        busy -= self.core0[0]
        steal -= self.core0[1]
        return {
            "server_cpu_pct": round(100 * server / elapsed, 1),
            "core_busy_pct": round(100 * busy / elapsed, 1),
            "other_on_core_pct": round(max(0.0, 100 * (busy - server) / elapsed), 1),
            "steal_pct": round(100 * steal / elapsed, 1),
        }


def server_command(spec: ServerSpec, port: int, log: Path, threads: int = THREADS,
                   keepalive: int = KEEPALIVE) -> list[str]:
    """The pinned command line of one server: gunicorn (its workers, and for
    gthread its threads and keep-alive) or uvicorn."""
    if spec.kind == "gunicorn":
        cmd = [str(VBIN / "gunicorn"), "-w", str(spec.workers), "-k", spec.worker_class, "-b", f"127.0.0.1:{port}",
               "--no-control-socket", "--log-level", "warning", "--error-logfile", str(log),
               "--graceful-timeout", "5", "--timeout", "60", "--chdir", str(ROOT)]
        if spec.worker_class == "gthread":
            cmd += ["--threads", str(threads), "--keep-alive", str(keepalive)]
        cmd.append(spec.app)
    else:
        cmd = [str(VBIN / "python"), "-m", "uvicorn", spec.app, "--host", "127.0.0.1", "--port", str(port),
               "--no-access-log", "--log-level", "warning", "--loop", "uvloop", "--http", "httptools",
               "--timeout-graceful-shutdown", "3", "--app-dir", str(ROOT)]
    return ["taskset", "-c", spec.cores, *cmd]


class Server:
    """One running server process (pinned), started and stopped by PID."""

    def __init__(self, spec: ServerSpec, tmp: Path, redis: str, postgres: BenchPostgres | None = None,
                 threads: int = THREADS, keepalive: int = KEEPALIVE) -> None:
        self.spec = spec
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.dir = Path(tempfile.mkdtemp(prefix="srv-", dir=tmp))
        self.log = self.dir / "server.log"
        env = {**os.environ, **spec.env, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        if spec.backend == "sqlite":
            env["FLASK_MCP_BACKEND"] = f"sqlite:///{self.dir}/sessions.sqlite3"  # four slashes: absolute
        elif spec.backend == "redis":
            env["FLASK_MCP_BACKEND"] = redis
        elif spec.backend == "memory":
            env["FLASK_MCP_BACKEND"] = "memory://"
        elif spec.backend == "postgresql":
            assert postgres is not None
            env["FLASK_MCP_BACKEND"] = postgres.database()
        self.cmd = server_command(spec, self.port, self.log, threads, keepalive)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.worker_pids: list[int] = []

    def wait_ready(self, timeout: float = 30.0) -> None:
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.spec.key} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                # Any HTTP answer means the app is loaded (a POST of "{}" is refused by all of
                # them; a GET could open the SDK's never-ending event stream).
                requests.post(self.url, data=b"{}", timeout=2,
                              headers={"Content-Type": "application/json", "Accept": "application/json"})
            except requests.RequestException:
                time.sleep(0.1)
                continue
            if self.spec.kind == "gunicorn":
                kids = children(self.proc.pid)
                if len(kids) < self.spec.workers:
                    time.sleep(0.1)
                    continue
                self.worker_pids = kids
            else:
                self.worker_pids = [self.proc.pid]
            return
        raise RuntimeError(f"{self.spec.key} did not answer within {timeout:.0f}s:\n{self.log_tail()}")

    def pids(self) -> list[int]:
        return sorted({self.proc.pid, *self.worker_pids})

    def rss_kb(self) -> int | None:
        """The worker's ``VmRSS`` (the largest one's, with several)."""
        sizes = [kb for kb in map(vm_rss_kb, self.worker_pids) if kb]
        return max(sizes) if sizes else None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        pids = [self.proc.pid] + [pid for pid in self.worker_pids if pid != self.proc.pid]
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for pid in pids[1:]:
            deadline = time.monotonic() + 5
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- checks in Python


def parse_answer(response: Any) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or an SSE answer (the last ``data:`` event with an id)."""
    ctype = response.headers.get("Content-Type", "")
    if ctype.startswith("text/event-stream"):
        message = None
        for block in response.text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
            if data:
                candidate = json.loads(data)
                if isinstance(candidate, dict) and "id" in candidate:
                    message = candidate
        if message is None:
            raise ValueError(f"no JSON-RPC answer in the event stream: {response.text[:200]!r}")
        return message
    return response.json()  # type: ignore[no-any-return]


def open_session(url: str) -> str:
    """initialize + notifications/initialized, as a legacy client does; the session id."""
    import requests

    init = WORKLOADS["initialize"]
    r = requests.post(url, json=init.body(), headers=init.headers(None), timeout=10)
    r.raise_for_status()
    if "result" not in parse_answer(r):
        raise ValueError(f"initialize failed: {r.text[:300]}")
    sid = r.headers.get("Mcp-Session-Id")
    if not sid:
        raise ValueError("initialize answered no Mcp-Session-Id")
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": sid}
    n = requests.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=10)
    if n.status_code != 202:
        raise ValueError(f"notifications/initialized answered {n.status_code}: {n.text[:200]}")
    return sid


def check_workload(url: str, workload: Workload, session_id: str | None, floor: bool) -> dict[str, Any]:
    """One request as wrk will send it: HTTP 200 and a JSON-RPC result of the right shape."""
    import requests

    r = requests.post(url, json=workload.body(), headers=workload.headers(session_id), timeout=10)
    if r.status_code != 200:
        raise ValueError(f"HTTP {r.status_code}: {r.text[:300]}")
    message = parse_answer(r)
    result = message.get("result")
    if not isinstance(result, dict) or "error" in message:
        raise ValueError(f"no JSON-RPC result: {r.text[:300]}")
    if not floor:
        if workload.op == "call" and (result.get("isError") or result["content"][0].get("text") != "hello"):
            raise ValueError(f"echo did not echo: {result}")
        if workload.op == "list" and (len(result.get("tools", [])) != 52 or result.get("nextCursor")):
            raise ValueError(f"expected the 52 tools on one page, got {len(result.get('tools', []))}")
        if workload.op == "discover" and MODERN not in result.get("supportedVersions", []):
            raise ValueError(f"discover does not list {MODERN}: {result}")
    return {"status": r.status_code, "content_type": r.headers.get("Content-Type", ""), "bytes": len(r.content)}


# --------------------------------------------------------------------------- wrk


def run_wrk(
    url: str, workload: Workload, connections: int, seconds: int, session_id: str | None, bad_dir: Path | None = None,
    cores: str = CLIENT_CORE,
) -> dict[str, Any]:
    env = {**os.environ, "BENCH_LUA_DIR": str(LUA), "BENCH_SESSION_ID": session_id or "",
           "BENCH_LEGACY_VERSION": LEGACY}
    if bad_dir:
        env["BENCH_BAD_DIR"] = str(bad_dir)
    cmd = ["taskset", "-c", cores, "wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s",
           "--timeout", "10s", "-s", str(LUA / workload.lua), url]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            data: dict[str, Any] = json.loads(line[len("BENCH_JSON "):])
            data["rps"] = data["requests"] / (data["duration_us"] / 1e6) if data["duration_us"] else 0.0
            data["socket_errors"] = data["connect"] + data["read"] + data["write"] + data["timeout"]
            return data
    raise RuntimeError(f"wrk printed no result (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")


# --------------------------------------------------------------------------- redis hygiene


class RedisKeys:
    """Deletes, at the end, the session keys this run added to its Redis database."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
        self.client.ping()
        self.before = set(self.client.scan_iter(match=SESSION_PREFIX + "*", count=1000))

    def cleanup(self) -> int:
        removed = 0
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=SESSION_PREFIX + "*", count=1000):
            if key not in self.before:
                batch.append(key)
            if len(batch) >= 1000:
                removed += self.client.delete(*batch)
                batch = []
        if batch:
            removed += self.client.delete(*batch)
        self.client.close()
        return removed


# --------------------------------------------------------------------------- one run


@dataclass
class Cell:
    server: str
    workload: str
    connections: int
    rounds: list[dict[str, Any]] = field(default_factory=list)
    check: dict[str, Any] | None = None
    failure: str | None = None
    failure_log: str | None = None


def pair_floor(spec: ServerSpec, floors: dict[str, Server]) -> Server | None:
    """The floor a server's measurements are paired with: the same gunicorn
    worker class and worker count when that floor runs (``ServerSpec.layout``),
    else the sync one (the SDK's uvicorn too)."""
    if spec.role == "floor":
        return None
    return floors.get(spec.layout) or floors.get("sync")


#: wrk's counters that add up over the slices of an interleaved measurement.
_SUMMED = ("requests", "duration_us", "bytes", "connect", "read", "write", "status", "timeout", "bad_body",
           "socket_errors")


def measure_paired(server: Server, floor: Server, workload: Workload, connections: int, seconds: int,
                   session_id: str | None) -> dict[str, Any]:
    """``seconds`` one-second slices of the server, each followed by one of
    its floor (the floor's call-2026), so the ratio compares runs a second
    apart: a shared VM's speed drifts by more than the gaps measured here, over
    seconds as well as over the minutes a round takes. Returns the server's
    slices merged (counts summed, percentiles the median of the slices', core
    figures averaged) with the floor's rate as ``paired_floor_rps``."""
    slices: list[dict[str, Any]] = []
    floor_slices: list[dict[str, Any]] = []
    for _ in range(seconds):
        meter = CoreMeter(server.pids(), server.spec.cores)
        part = run_wrk(server.url, workload, connections, 1, session_id, server.dir, server.spec.client_cores)
        slices.append(part | meter.read())
        floor_slices.append(run_wrk(floor.url, WORKLOADS[FLOOR_WORKLOAD], connections, 1, None,
                                    cores=floor.spec.client_cores))
    return merge_slices(slices) | paired_floor_figures(floor.spec.key, floor_slices)


def paired_floor_figures(floor: str, slices: list[dict[str, Any]]) -> dict[str, Any]:
    """What a measurement keeps of its floor's interleaved slices: the rate
    over their summed time, and the median of their p99s (as ``merge_slices``
    takes the server's), for the p99 against the floor's."""
    requests = sum(part["requests"] for part in slices)
    elapsed_us = sum(part["duration_us"] for part in slices)
    return {
        "paired_floor": floor,
        "paired_floor_rps": requests / (elapsed_us / 1e6) if elapsed_us else 0.0,
        "paired_floor_p99_us": statistics.median(part["p99_us"] for part in slices) if slices else 0.0,
    }


def merge_slices(slices: list[dict[str, Any]]) -> dict[str, Any]:
    """One measurement from its slices: wrk's counts summed, latency percentiles
    the median of the slices', the mean weighted by requests, the core figures
    (``CoreMeter``) averaged, and the rate over the summed time."""
    result: dict[str, Any] = {key: sum(part[key] for part in slices) for key in _SUMMED}
    for key in ("p50_us", "p90_us", "p99_us"):
        result[key] = statistics.median(part[key] for part in slices)
    result["max_us"] = max(part["max_us"] for part in slices)
    result["mean_us"] = (sum(part["mean_us"] * part["requests"] for part in slices) / result["requests"]
                         if result["requests"] else 0.0)
    for key in ("server_cpu_pct", "core_busy_pct", "other_on_core_pct", "steal_pct"):
        result[key] = round(statistics.fmean(part[key] for part in slices), 1)
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6) if result["duration_us"] else 0.0
    return result


def _serve(
    spec: ServerSpec,
    loads: list[Workload],
    args: argparse.Namespace,
    cells: dict[tuple[str, str, int], Cell],
    tmp: Path,
    round_no: int,
    running: list[Server],
    floors: dict[str, Server],
    postgres: BenchPostgres | None = None,
) -> Server | None:
    """Start one server, check and measure its workloads; the server is left
    running (``None`` if it did not start). A non-floor server is measured
    interleaved with its floor (``measure_paired``)."""
    server = Server(spec, tmp, f"{args.redis_url.rstrip('/')}/{args.redis_db}", postgres, args.threads,
                    args.keepalive)
    running.append(server)
    try:
        server.wait_ready()
        session_id = open_session(server.url) if any(w.wire == "session" for w in loads) else None
    except Exception as exc:  # noqa: BLE001 - report and go on with the other servers
        print(f"!! {spec.key} failed to start or to open a session: {exc}", flush=True)
        for w in loads:
            for c in args.conns:
                cells[(spec.key, w.key, c)].failure = str(exc)[:300]
        server.stop()
        running.remove(server)
        return None
    floor = pair_floor(spec, floors)
    for w in loads:
        sid = session_id if w.wire == "session" else None
        try:
            check = check_workload(server.url, w, sid, spec.role == "floor")
        except Exception as exc:  # noqa: BLE001
            log = server.log_tail(40)
            print(f"!! {spec.key} {w.key}: the check request failed: {exc}\n"
                  f"   server log:\n{log}", flush=True)
            for c in args.conns:
                cell = cells[(spec.key, w.key, c)]
                cell.failure = f"check failed (round {round_no + 1}): {exc}"[:300]
                cell.failure_log = log
            continue
        # warm-up, discarded: at the most connections measured, so every thread has served
        run_wrk(server.url, w, max(args.conns), args.warmup, sid, cores=spec.client_cores)
        for c in args.conns:
            if floor is None:
                meter = CoreMeter(server.pids(), spec.cores)
                result = run_wrk(server.url, w, c, args.duration, sid, server.dir, spec.client_cores)
                result |= meter.read()
            else:
                result = measure_paired(server, floor, w, c, args.duration, sid)
            result["rss_kb"] = server.rss_kb()
            result["round"] = round_no + 1
            cell = cells[(spec.key, w.key, c)]
            cell.rounds.append(result)
            cell.check = check
            flag = _error_text(result)
            if result["bad_body"]:
                sample = server.dir / "bad-1.txt"
                if sample.exists():
                    result["bad_body_sample"] = sample.read_text(errors="replace")[:2000]
                    flag += f" (first: {result['bad_body_sample'][:120]!r})"
            vs_floor = (f"  x floor {result['rps'] / result['paired_floor_rps']:.2f}"
                        if result.get("paired_floor_rps") else "")
            print(f"   {spec.key:28} {w.key:15} c={c:<3} {result['rps']:9.1f} req/s  "
                  f"p50 {result['p50_us'] / 1000:7.2f} ms  p99 {result['p99_us'] / 1000:7.2f} ms  "
                  f"rss {_mb(result['rss_kb'])}  cpu {result['server_cpu_pct']:3.0f}%  "
                  f"other {result['other_on_core_pct']:3.0f}%{vs_floor}{'  ' + flag if flag else ''}", flush=True)
    return server


def chosen_servers(servers: str | None, no_gthread: bool) -> list[ServerSpec]:
    """The servers a run starts: the others whose names contain one of the
    comma-separated ``servers`` (all when none is given), except the gthread
    ones with ``no_gthread``, and the ``on_request`` ones unless named in full;
    then the floors they are paired with (the sync floor always)."""
    wanted = [w.strip() for w in (servers or "").split(",") if w.strip()]
    specs = [s for s in SERVERS if not (s.optional and no_gthread) and (not s.on_request or s.key in wanted)]
    if wanted:
        specs = [s for s in specs if any(w in s.key for w in wanted) or s.role == "floor"]
    layouts = {s.layout for s in specs if s.role != "floor"}
    if layouts:  # a floor without a server of its layout would only take time
        specs = [s for s in specs if s.role != "floor" or s.layout == "sync" or s.layout in layouts]
    return specs


def measure(args: argparse.Namespace) -> dict[str, Any]:
    specs = chosen_servers(args.servers, args.no_gthread)
    only = {w.strip() for w in args.only.split(",")} if args.only else None
    if only:
        unknown = only - set(WORKLOADS)
        if unknown:
            sys.exit(f"unknown workload(s) {sorted(unknown)}; choose from {sorted(WORKLOADS)}")
    plan: list[tuple[ServerSpec, list[Workload]]] = []
    for spec in specs:
        loads = [WORKLOADS[w] for w in spec.workloads if only is None or w in only or spec.role == "floor"]
        if loads:
            plan.append((spec, loads))

    redis_keys: RedisKeys | None = None
    if any(spec.backend == "redis" for spec, _ in plan):
        try:
            redis_keys = RedisKeys(f"{args.redis_url.rstrip('/')}/{args.redis_db}")
        except Exception as exc:  # noqa: BLE001 - any failure means "no Redis here"
            print(f"!! Redis at {args.redis_url} unavailable ({exc}); skipping the Redis servers", flush=True)
            plan = [(s, w) for s, w in plan if s.backend != "redis"]

    postgres: BenchPostgres | None = None
    if any(spec.backend == "postgresql" for spec, _ in plan):
        sys.path.insert(0, str(BENCH))
        from postgres import BenchPostgres  # bench/postgres.py

        try:
            postgres = BenchPostgres().start()
        except Exception as exc:  # noqa: BLE001 - no PostgreSQL here: skip its rows
            print(f"!! PostgreSQL could not be started ({exc}); skipping the PostgreSQL servers", flush=True)
            plan = [(s, w) for s, w in plan if s.backend != "postgresql"]

    cells: dict[tuple[str, str, int], Cell] = {}
    for spec, loads in plan:
        for w in loads:
            for c in args.conns:
                cells[(spec.key, w.key, c)] = Cell(spec.key, w.key, c)

    per_cell = args.warmup + args.duration * len(args.conns)
    paired = sum(len(w) for s, w in plan if s.role != "floor") * args.duration * len(args.conns)
    total = (sum(len(w) for _, w in plan) * per_cell + paired) * args.rounds
    print(f"{len(plan)} servers, {sum(len(w) for _, w in plan)} (server, workload) pairs x "
          f"{len(args.conns)} connection counts x {args.rounds} rounds; "
          f"{args.warmup}s warm-up + {args.duration}s per measurement: about {total / 60:.1f} min of load", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="flask-mcp-bench-"))
    running: list[Server] = []
    started = time.monotonic()
    floor_plan = [(spec, loads) for spec, loads in plan if spec.role == "floor"]
    other_plan = [(spec, loads) for spec, loads in plan if spec.role != "floor"]
    try:
        for round_no in range(args.rounds):
            shift = round_no % len(other_plan) if other_plan else 0
            order = other_plan[shift:] + other_plan[:shift]
            print(f"\n== round {round_no + 1}/{args.rounds}", flush=True)
            # The floors run for the whole round: every other server is measured
            # interleaved with its floor (pair_floor, measure_paired).
            floors: dict[str, Server] = {}
            for spec, loads in floor_plan:
                server = _serve(spec, loads, args, cells, tmp, round_no, running, floors)
                if server is not None:
                    floors[spec.layout] = server
            for spec, loads in order:
                server = _serve(spec, loads, args, cells, tmp, round_no, running, floors, postgres)
                if server is not None:
                    server.stop()
                    running.remove(server)
            for server in floors.values():
                server.stop()
                running.remove(server)
    finally:
        for server in running:
            server.stop()
        removed = redis_keys.cleanup() if redis_keys else 0
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if redis_keys:
        print(f"\n(removed the {removed} Redis session keys this run created in db {args.redis_db})")
    return {
        "cells": [cell_summary(cell) for cell in cells.values()],
        "elapsed_s": round(time.monotonic() - started, 1),
        "servers": {spec.key: {"kind": spec.kind, "worker_class": spec.worker_class if spec.kind == "gunicorn"
                               else "uvicorn (uvloop, httptools)", "app": spec.app, "note": spec.note}
                    for spec, _ in plan},
    }


def _mb(kb: int | None) -> str:
    return f"{kb / 1024:.0f} MB" if kb else "?"


def _error_text(result: dict[str, Any]) -> str:
    parts = []
    if result["status"]:
        parts.append(f"{result['status']} non-2xx")
    if result["socket_errors"]:
        parts.append(f"{result['socket_errors']} socket errors")
    if result["bad_body"]:
        parts.append(f"{result['bad_body']} answers without a result")
    return "!! " + ", ".join(parts) if parts else ""


def cell_summary(cell: Cell) -> dict[str, Any]:
    out: dict[str, Any] = {"server": cell.server, "workload": cell.workload, "connections": cell.connections,
                           "check": cell.check, "failure": cell.failure, "failure_log": cell.failure_log,
                           "rounds": cell.rounds}
    if cell.rounds:
        rps = [r["rps"] for r in cell.rounds]
        rss = [r["rss_kb"] for r in cell.rounds if r["rss_kb"]]
        out |= {
            "rps_median": statistics.median(rps),
            "rps_min": min(rps),
            "rps_max": max(rps),
            "p50_ms_median": statistics.median(r["p50_us"] for r in cell.rounds) / 1000,
            "p99_ms_median": statistics.median(r["p99_us"] for r in cell.rounds) / 1000,
            "rss_mb_median": statistics.median(rss) / 1024 if rss else None,
            "errors": {k: sum(r[k] for r in cell.rounds) for k in ("status", "socket_errors", "bad_body")},
            "server_cpu_pct_median": statistics.median(r["server_cpu_pct"] for r in cell.rounds),
            "other_on_core_pct_max": max(r["other_on_core_pct"] for r in cell.rounds),
        }
        pairs = [r["rps"] / r["paired_floor_rps"] for r in cell.rounds if r.get("paired_floor_rps")]
        if pairs:
            out["paired_floor"] = cell.rounds[0]["paired_floor"]
            out["paired_ratio_median"] = statistics.median(pairs)
            out["paired_ratio_min"] = min(pairs)
            out["paired_ratio_max"] = max(pairs)
        p99s = [r["p99_us"] / r["paired_floor_p99_us"] for r in cell.rounds if r.get("paired_floor_p99_us")]
        if p99s:
            # The p99 over the interleaved floor's, per round: the "no p99 above the floor's by more than 50 %"
            out["paired_p99_ratio_median"] = statistics.median(p99s)
            out["paired_p99_ratio_max"] = max(p99s)
    return out


# --------------------------------------------------------------------------- the table


def ratios(cells: list[dict[str, Any]]) -> None:
    """Adds, to each cell, its req/s as a multiple of the floor's and of each SDK mode's
    for the same operation and connection count.

    ``floor`` is the median over the rounds of req/s over the paired floor
    measurement taken right after it. The SDK multiples go through the floor
    too: each cell's paired ratio times its floor's median req/s is its req/s
    with the machine's drift taken out, and those are divided. (A cell without
    pairs, from a run of an earlier version, falls back to its plain median.)"""
    by_key = {(c["server"], c["workload"], c["connections"]): c for c in cells if c.get("rps_median")}

    def steady(c: dict[str, Any]) -> float:
        floor = by_key.get((c.get("paired_floor", ""), FLOOR_WORKLOAD, c["connections"]))
        if c.get("paired_ratio_median") and floor:
            return float(c["paired_ratio_median"] * floor["rps_median"])
        return float(c["rps_median"])

    for c in cells:
        if not c.get("rps_median"):
            continue
        w = WORKLOADS[c["workload"]]
        n = c["connections"]
        out: dict[str, float | None] = {}
        if c.get("paired_ratio_median"):
            out["floor"] = c["paired_ratio_median"]
        else:
            spec = _SPECS.get(c["server"])
            layout = spec.layout if spec else ("gthread" if "/gthread" in c["server"] else "sync")
            floor = by_key.get((f"floor/{layout}", FLOOR_WORKLOAD, n)) or by_key.get(("floor/sync", FLOOR_WORKLOAD, n))
            out["floor"] = c["rps_median"] / floor["rps_median"] if floor else None
        for name, (server, wires) in SDK_REFS.items():
            ref = next((by_key[(server, k, n)] for k, v in WORKLOADS.items()
                        if v.op == w.op and v.wire in wires and (server, k, n) in by_key), None)
            out[name] = steady(c) / steady(ref) if ref else None
        c["ratios"] = out


_SPECS = {spec.key: spec for spec in SERVERS}


def render_ratio_table(cells: list[dict[str, Any]]) -> str:
    """x floor per connection count, a row per (server, workload), with the
    p99 over the floor's beside it: how a row holds up as connections grow."""
    conns = sorted({c["connections"] for c in cells})
    rows: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for c in cells:
        if c.get("ratios", {}).get("floor") and not c["server"].startswith("floor/"):
            rows.setdefault((c["server"], c["workload"]), {})[c["connections"]] = c
    if not rows:
        return ""
    head = " | ".join(f"x floor c={n} | p99/floor c={n}" for n in conns)
    lines = [f"| server | workload | {head} |", "|---|---|" + "--:|--:|" * len(conns)]
    for (server, workload), by_conns in rows.items():
        parts = []
        for n in conns:
            c = by_conns.get(n)
            if c is None:
                parts += ["-", "-"]
                continue
            spread = (f" ({c['paired_ratio_min']:.2f}-{c['paired_ratio_max']:.2f})"
                      if c.get("paired_ratio_median") and len(c["rounds"]) > 1 else "")
            parts.append(f"{c['ratios']['floor']:.2f}{spread}")
            parts.append(f"{c['paired_p99_ratio_median']:.2f}" if c.get("paired_p99_ratio_median") else "-")
        lines.append(f"| {server} | {workload} | {' | '.join(parts)} |")
    return "\n".join(lines)


def render_table(result: dict[str, Any]) -> str:
    cells = result["cells"]
    lines = [
        "| server | workload | conns | req/s (median) | min-max | p50 ms | p99 ms | RSS MB | resp bytes | srv CPU % "
        "| other % | errors | x floor | x floor min-max | x sdk-json | x sdk-stateful | x sdk-2026 |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|",
    ]
    for c in cells:
        if c.get("failure") and not c.get("rps_median"):
            reason = " ".join(c["failure"].split())[:80].replace("|", "/")
            lines.append(f"| {c['server']} | {c['workload']} | {c['connections']} | FAILED | | | | | | | | "
                         f"{reason} | | | | | |")
            continue
        if not c.get("rps_median"):
            continue
        e = c["errors"]
        errs = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in e.items() if v) or "0"
        if c.get("failure"):
            errs = (errs + ", " if errs != "0" else "") + " ".join(c["failure"].split())[:40].replace("|", "/")
        if errs != "0":
            errs = "**!! " + errs + "**"
        r = c.get("ratios", {})
        spec = _SPECS.get(c["server"])
        # A server on both cores shares them with its wrk: its "other" is not a disturbance.
        mark = " †" if c["other_on_core_pct_max"] > DISTURBED_PCT and (spec is None or spec.workers == 1) else ""

        def fmt(x: float | None) -> str:
            return f"{x:.2f}" if x else "-"

        spread = (f"{c['paired_ratio_min']:.2f}-{c['paired_ratio_max']:.2f}"
                  if c.get("paired_ratio_median") else "")

        lines.append(
            f"| {c['server']} | {c['workload']} | {c['connections']} | {c['rps_median']:.0f}{mark} | "
            f"{c['rps_min']:.0f}-{c['rps_max']:.0f} | {c['p50_ms_median']:.2f} | {c['p99_ms_median']:.2f} | "
            f"{c['rss_mb_median']:.0f} | {(c['check'] or {}).get('bytes', '')} | {c['server_cpu_pct_median']:.0f} | "
            f"{c['other_on_core_pct_max']:.0f} | {errs} | "
            f"{fmt(r.get('floor'))} | {spread} | {fmt(r.get('sdk-json'))} | {fmt(r.get('sdk-stateful'))} | "
            f"{fmt(r.get('sdk-2026'))} |"
        )
    if not any(" †" in line for line in lines):
        return "\n".join(lines)
    lines.append("")
    lines.append(f"† in at least one round, more than {DISTURBED_PCT}% of the server core's time went to "
                 "something other than the server (other processes, or kernel work such as the disk flushes "
                 "of the SQLite store).")
    return "\n".join(lines)


# --------------------------------------------------------------------------- machine facts


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break

    def git(*a: str) -> str:
        out = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
        return out.stdout.strip()

    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "wrk": wrk_version[0] if wrk_version else "",
        "commit": git("rev-parse", "--short", "HEAD"),
        "flask_mcp_dirty": bool(git("status", "--porcelain", "--", "flask_mcp")),
        "loadavg_start": os.getloadavg(),
        "pins": PINS,
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 round, 1 s warm-up, 3 s per measurement, no gthread, 2 000 sessions")
    p.add_argument("--duration", type=int, help="seconds per measurement (default 4; --quick 3)")
    p.add_argument("--warmup", type=int, help="seconds of warm-up per (server, workload) (default 2; --quick 1)")
    p.add_argument("--rounds", type=int, help="rounds, each restarting every server (default 3; --quick 1)")
    p.add_argument("--connections", default="1,8,64,256", help="wrk connection counts (default 1,8,64,256)")
    p.add_argument("--threads", type=int, default=THREADS,
                   help=f"threads of each gthread worker (default {THREADS}, the README's production setting)")
    p.add_argument("--keepalive", type=int, default=KEEPALIVE,
                   help=f"gunicorn --keep-alive of the gthread servers (default {KEEPALIVE}, "
                        "as flask_mcp.gunicorn_conf)")
    p.add_argument("--only", help=f"comma-separated workloads: {', '.join(WORKLOADS)}")
    named_only = ", ".join(s.key for s in SERVERS if s.on_request)
    p.add_argument("--servers", help="comma-separated substrings of server names (the floor always runs; "
                   f"{named_only} only when named in full)")
    p.add_argument("--no-gthread", action="store_true", help="skip the gthread servers")
    p.add_argument("--no-sessions", action="store_true", help="skip the session-store micro-benchmark")
    p.add_argument("--sessions", type=int, help="sessions per store in bench/sessions.py (default 10000)")
    p.add_argument("--redis-db", type=int, default=14, help="Redis database for the app runs (default 14)")
    p.add_argument("--redis-url", default=REDIS_URL,
                   help=f"the Redis for the Redis rows, without a database number (default {REDIS_URL}; "
                        "a loopback one you started, say pinned to a core with taskset)")
    p.add_argument("--json", default=str(RESULTS / "latest.json"), help="where to write the results")
    args = p.parse_args(argv)
    args.duration = args.duration or (3 if args.quick else 4)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.sessions = args.sessions or (2000 if args.quick else 10_000)
    args.no_gthread = args.no_gthread or args.quick
    args.conns = [int(c) for c in args.connections.split(",") if c.strip()]
    if args.warmup < 1 or args.duration < 1:
        p.error("--warmup and --duration are whole seconds, at least 1")
    host = urllib.parse.urlsplit(args.redis_url).hostname or ""
    if not (host == "localhost" or host.startswith("127.")):
        p.error(f"--redis-url must be on a loopback address (127.0.0.0/8), not {host!r}: the benchmark stays local")
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    if not in_bench_venv():
        if any(a in ("-h", "--help") for a in argv):
            parse_args(argv)
        ensure_environment()
        os.execv(str(VBIN / "python"), [str(VBIN / "python"), str(Path(__file__).resolve()), *argv])
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        ensure_environment()
    # A stop request (SIGTERM) unwinds like Ctrl-C, so the finally blocks stop the servers.
    signal.signal(signal.SIGTERM, _interrupt)

    facts = machine()
    print(f"flask-mcp benchmark: {facts['cores']} cores ({facts['cpu']}), commit {facts['commit']}"
          f"{' + uncommitted flask_mcp changes' if facts['flask_mcp_dirty'] else ''}; "
          f"servers on core {SERVER_CORE}, wrk on core {CLIENT_CORE} (servers of 2 workers and their wrk on "
          f"cores {BOTH_CORES})", flush=True)
    result = measure(args)
    ratios(result["cells"])
    result["machine"] = facts | {"loadavg_end": os.getloadavg()}
    result["settings"] = {"rounds": args.rounds, "warmup_s": args.warmup, "duration_s": args.duration,
                          "connections": args.conns, "quick": args.quick, "threads": args.threads,
                          "keepalive": args.keepalive}

    if not args.no_sessions:
        print("\n== session stores (bench/sessions.py, pinned to core 1)", flush=True)
        out = Path(tempfile.mkstemp(prefix="sessions-", suffix=".json")[1])
        try:
            subprocess.run(["taskset", "-c", SERVER_CORE, str(VBIN / "python"), str(BENCH / "sessions.py"),
                            "--count", str(args.sessions), "--json", str(out)], check=True, cwd=ROOT, timeout=600)
            result["sessions"] = json.loads(out.read_text())
        except (subprocess.SubprocessError, ValueError) as exc:
            print(f"!! sessions.py failed: {exc}", flush=True)
        finally:
            out.unlink(missing_ok=True)

    table = render_table(result)
    result["table_markdown"] = table
    print("\n" + table)
    by_conns = render_ratio_table(result["cells"])
    if by_conns:
        result["ratio_table_markdown"] = by_conns
        print(f"\nx floor by connections (gthread: {args.threads} threads, keep-alive {args.keepalive} s):\n"
              + by_conns)
    flagged = [c for c in result["cells"] if c.get("failure") or any((c.get("errors") or {}).values())]
    if flagged:
        print(f"\n!! {len(flagged)} row(s) had errors or failed: see the errors column")
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nresults: {path}  ({result['elapsed_s'] / 60:.1f} min of servers and load)")
    return 1 if flagged else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
