"""How many subscriptions/listen streams a gunicorn host holds while ordinary
POSTs still get through, what the idle streams cost, and (on a server
backend) how many connections they hold on the server.

Starts the example app under gunicorn (``-w 1`` unless ``--workers``; pinned to
core 1 when ``taskset`` exists, unless ``--cores``), opens listen streams up to
each step's count (each read up to its acknowledgement, eight at a time, then
left idle), and at every step measures:

* the workers' CPU use over ``--idle`` seconds while nothing but the open streams
  exist (their heartbeats and, on SQLite, their polling), their RSS and open files;
* then ``--posts`` ordinary ``tools/call`` POSTs, one after the other, each on a
  new connection with a 3 s timeout: how many answered, p50, p99 and max latency;
* on Redis, the server's side: its clients (``INFO clients``), the subscribed ones
  (``CLIENT LIST`` flag ``P``) and the most any one worker holds (each worker's
  sockets matched to ``CLIENT LIST`` by port), and the events channel's
  subscribers (``PUBSUB NUMSUB``);
* on PostgreSQL, the database's connections (``pg_stat_activity``), the
  listening ones (the bus names its LISTEN connection ``flask-mcp-listener``)
  and the most of those any one worker holds (matched by port).

It stops after the first step where a stream could not be opened or a POST
did not answer (``--keep-going``: it goes on). Loopback only; every server is started here and stopped by its PID.

    bench/.venv/bin/python bench/streams.py                          # gthread, 8 and 32 threads
    bench/.venv/bin/python bench/streams.py --worker-class gevent --worker-connections 1000
    bench/.venv/bin/python bench/streams.py --worker-class gevent --backend redis --workers 2 \\
        --worker-connections 10001 --steps 0,1000,5000,10000 --posts 50
    bench/.venv/bin/python bench/streams.py --worker-class gevent --backend postgresql --workers 2 \\
        --worker-connections 10001 --steps 0,1000,5000,10000 --posts 50

``--backend``: ``sqlite`` (default: a fresh file, the example's default store),
``redis`` (a private ``redis-server`` on a free port, so that its client counts
are this run's alone; ``--redis-url`` to use another server instead),
``postgresql`` (a private cluster of Debian's binaries, bench/postgres.py, and
a fresh database in it) or ``memory``. A backend is a :class:`Store` in
``STORES``: its URI, and the columns its server reports. Defaults for ``--steps``: gthread ``0, N/2, N-1, N``
(N threads), gevent ``0,10,100,500,999,1000``.

The open streams need file descriptors on both sides (one each in this process
and in the workers, one more per stream on SQLite): the script raises its soft
``ulimit -n`` to the hard limit (the server inherits it) and says so.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = str(Path(__file__).resolve().parents[1])
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
SERVER_CORES = "1"
POST_TIMEOUT = 3.0
#: Streams opened at once (each waits for its acknowledgement).
OPENERS = 8
TICKS = os.sysconf("SC_CLK_TCK")
#: The bus channel every listen stream subscribes to (its default prefix and name).
EVENTS_CHANNEL = "flask-mcp:bus:flask-mcp:events"
#: The ``application_name`` the PostgreSQL bus gives its listening connection.
LISTENER_NAME = "flask-mcp-listener"

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raise_open_files_limit() -> int:
    """The soft ``RLIMIT_NOFILE`` raised to the hard one (children inherit it); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def headers(method: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }


def local_ports_to(pid: int, remote_port: int) -> set[int]:
    """The local ports of ``pid``'s TCP connections to ``remote_port`` (its
    socket inodes matched in ``/proc/<pid>/net/tcp``)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == remote_port:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class Store:
    """A backend the server runs on: its ``MCP_BACKEND`` and what its server
    says about the connections (no columns for a store in the workers' files or memory)."""

    name = "memory"
    columns: tuple[str, ...] = ()

    def uri(self, folder: Path) -> str:
        return "memory://"

    def connections(self, workers: list[int]) -> dict[str, object]:
        return {}

    def stop(self) -> None:
        pass


class SqliteStore(Store):
    name = "sqlite"

    def uri(self, folder: Path) -> str:
        return f"sqlite:///{folder / 'sessions.sqlite3'}"


class RedisStore(Store):
    """A private ``redis-server`` on a free loopback port (or ``url``'s server,
    whose other clients are then counted too)."""

    name = "redis"
    columns = ("redis clients", "pub/sub clients", "pub/sub per worker (max)", "events channel subscribers")

    def __init__(self, url: str | None) -> None:
        import redis

        self.process: subprocess.Popen[bytes] | None = None
        if url is None:
            port = free_port()
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--maxclients", "20000"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            url = f"redis://127.0.0.1:{port}/0"
        self.url = url
        self.admin = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5)
        self.port = int(self.admin.connection_pool.connection_kwargs.get("port", 6379))
        for _ in range(100):
            try:
                self.admin.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)

    def uri(self, folder: Path) -> str:
        return self.url

    def connections(self, workers: list[int]) -> dict[str, object]:
        clients = self.admin.client_list()
        pubsub = [c for c in clients if "P" in c["flags"]]
        by_port = {int(c["addr"].rsplit(":", 1)[1]): c for c in pubsub}
        per_worker = [sum(1 for p in local_ports_to(pid, self.port) if p in by_port) for pid in workers]
        return {
            "redis clients": int(self.admin.info("clients")["connected_clients"]) - 1,  # not this admin's
            "pub/sub clients": len(pubsub),
            "pub/sub per worker (max)": max(per_worker, default=0),
            "events channel subscribers": int(self.admin.pubsub_numsub(EVENTS_CHANNEL)[0][1]),
        }

    def stop(self) -> None:
        self.admin.close()
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


class PostgresStore(Store):
    """A private PostgreSQL (bench/postgres.py) and a fresh database in it;
    the connections of that database from ``pg_stat_activity``: all of them,
    the listening ones (``application_name`` ``flask-mcp-listener``, which the
    bus gives its LISTEN connection) and the most of those any one worker
    holds (each worker's sockets matched to ``client_port``)."""

    name = "postgresql"
    columns = ("pg connections", "LISTEN connections", "LISTEN per worker (max)")

    def __init__(self) -> None:
        import psycopg
        from postgres import BenchPostgres  # bench/postgres.py

        self.server = BenchPostgres().start()
        self.url: str = self.server.database()
        self.database = self.url.rsplit("/", 1)[1]
        self.port = self.server.port
        self.admin = psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True)

    def uri(self, folder: Path) -> str:
        return self.url

    def connections(self, workers: list[int]) -> dict[str, object]:
        rows = self.admin.execute(
            "SELECT client_port, application_name LIKE %s FROM pg_stat_activity "
            "WHERE datname = %s AND backend_type = 'client backend'",
            (f"%{LISTENER_NAME}%", self.database),
        ).fetchall()
        listening = {int(port) for port, listener in rows if listener and port is not None}
        per_worker = [len(local_ports_to(pid, self.port) & listening) for pid in workers]
        return {
            "pg connections": len(rows),
            "LISTEN connections": sum(1 for _, listener in rows if listener),
            "LISTEN per worker (max)": max(per_worker, default=0),
        }

    def stop(self) -> None:
        self.admin.close()
        self.server.stop()


STORES = {"sqlite": SqliteStore, "memory": Store, "redis": RedisStore, "postgresql": PostgresStore}


class Server:
    """``gunicorn example.app:app`` of one worker class, started and stopped by PID."""

    def __init__(self, worker_class: str, size: int, store: Store, heartbeat: float | None, workers: int,
                 cores: str, probe: float | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.dir = Path(tempfile.mkdtemp(prefix="flask-mcp-streams-"))
        # The whole worker, not the share MCP_STREAM_SHARE leaves to streams: this
        # measures how many streams a worker can hold at all.
        env = {**os.environ, "FLASK_MCP_BACKEND": store.uri(self.dir), "FLASK_MCP_STREAM_SHARE": "1.0"}
        if heartbeat is not None:
            env["FLASK_MCP_SSE_HEARTBEAT"] = str(heartbeat)
        if probe is not None:
            env["FLASK_MCP_SSE_PROBE_INTERVAL"] = str(probe)
        size_option = ["--threads", str(size)] if worker_class == "gthread" else ["--worker-connections", str(size)]
        pin = ["taskset", "-c", cores] if cores and shutil.which("taskset") else []
        cmd = [*pin, GUNICORN, "example.app:app", "-b", f"127.0.0.1:{self.port}", "-w", str(workers),
               "-k", worker_class, *size_option, "--timeout", "120", "--log-level", "warning",
               "--backlog", "4096"]
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
        self.workers = self._workers(workers)

    def _workers(self, count: int) -> list[int]:
        for _ in range(100):
            children = [int(p) for task in Path(f"/proc/{self.process.pid}/task").iterdir()
                        for p in (task / "children").read_text().split()]
            if len(children) == count:
                return children
            time.sleep(0.1)
        raise RuntimeError(f"expected {count} gunicorn workers")

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.workers:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        return total

    def rss_mb(self) -> float:
        total = 0.0
        for pid in self.workers:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        return total

    def open_files(self) -> int:
        return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in self.workers)

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


def percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending list."""
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


def run(worker_class: str, size: int, steps: list[int], store: Store, heartbeat: float | None,
        idle: float, posts: int, workers: int, cores: str, probe: float | None,
        keep_going: bool = False) -> list[dict[str, object]]:
    server = Server(worker_class, size, store, heartbeat, workers, cores, probe)
    streams: list[http.client.HTTPConnection] = []
    rows: list[dict[str, object]] = []
    failed_opens = 0
    try:
        for step in steps:
            started, before = time.monotonic(), len(streams)
            with ThreadPoolExecutor(OPENERS) as pool:
                for stream in pool.map(lambda n: open_listen(server.port, n), range(before, step)):
                    if stream is None:
                        failed_opens += 1
                    else:
                        streams.append(stream)
            opening = time.monotonic() - started
            time.sleep(1.0)  # let the openings settle
            cpu, wall = server.cpu_seconds(), time.monotonic()
            time.sleep(idle)
            cpu_pct = (server.cpu_seconds() - cpu) / (time.monotonic() - wall) * 100
            latencies = [post_latency(server.url) for _ in range(posts)]
            ok = sorted(x for x in latencies if x is not None)
            row: dict[str, object] = {
                "worker": f"{workers} x gevent worker_connections={size}" if worker_class == "gevent"
                else f"{workers} x gthread threads={size}",
                "backend": store.name, "probe_s": probe if probe is not None else 0.5,
                "streams": len(streams), "failed_opens": failed_opens,
                "opened_per_s": round((len(streams) - before) / opening) if opening > 0.5 else None,
                "posts_ok": len(ok), "posts": posts,
                "p50_ms": statistics.median(ok) if ok else None, "p99_ms": percentile(ok, 0.99) if ok else None,
                "max_ms": ok[-1] if ok else None,
                "idle_cpu_pct": cpu_pct, "rss_mb": server.rss_mb(), "open_files": server.open_files(),
                **store.connections(server.workers),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if (failed_opens or len(ok) < posts) and not keep_going:
                break
    finally:
        for stream in streams:
            stream.close()
        server.stop()
    return rows


def table(rows: list[dict[str, object]], store: Store) -> str:
    def ms(x: object) -> str:
        return f"{x:.1f}" if isinstance(x, float) else "-"

    lines = ["| workers | backend | probe s | open streams | failed opens | POSTs ok | p50 ms | p99 ms | max ms "
             "| idle CPU % | RSS MB | open fds |" + "".join(f" {c} |" for c in store.columns),
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|" + "--:|" * len(store.columns)]
    for r in rows:
        lines.append(f"| {r['worker']} | {r['backend']} | {r['probe_s']} | {r['streams']} | {r['failed_opens']} | "
                     f"{r['posts_ok']}/{r['posts']} | {ms(r['p50_ms'])} | {ms(r['p99_ms'])} | {ms(r['max_ms'])} | "
                     f"{r['idle_cpu_pct']:.1f} | {r['rss_mb']:.0f} | {r['open_files']} |"
                     + "".join(f" {r.get(c, '-')} |" for c in store.columns))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("threads", nargs="*", type=int, help="gthread: thread counts to measure (default 8 32)")
    p.add_argument("--worker-class", choices=["gthread", "gevent"], default="gthread")
    p.add_argument("--worker-connections", type=int, default=1000, help="gevent: gunicorn --worker-connections")
    p.add_argument("--workers", type=int, default=1, help="gunicorn -w (default 1)")
    p.add_argument("--cores", default=SERVER_CORES,
                   help=f"taskset -c for the server (default {SERVER_CORES}; '' for no pinning)")
    p.add_argument("--backend", choices=sorted(STORES), default="sqlite")
    p.add_argument("--redis-url", help="redis: use this server instead of starting one (its other clients count too)")
    p.add_argument("--steps", help="comma-separated stream counts (see above for the defaults)")
    p.add_argument("--posts", type=int, default=5, help="POSTs timed per step (default 5)")
    p.add_argument("--keep-going", action="store_true",
                   help="measure every step even after a failed open or POST (a loaded machine times some out)")
    p.add_argument("--idle", type=float, default=3.0, help="seconds of idle CPU measurement per step (default 3)")
    p.add_argument("--heartbeat", type=float, help="FLASK_MCP_SSE_HEARTBEAT (default: the app's, 15 s)")
    p.add_argument("--probe", type=float,
                   help="FLASK_MCP_SSE_PROBE_INTERVAL: how often an idle stream looks at its client (default 0.5 s)")
    args = p.parse_args(argv)
    limit = raise_open_files_limit()
    print(f"open files limit (soft, raised to the hard one): {limit}", flush=True)
    sizes = (args.threads or [8, 32]) if args.worker_class == "gthread" else [args.worker_connections]
    store = RedisStore(args.redis_url) if args.backend == "redis" else STORES[args.backend]()
    rows = []
    try:
        for size in sizes:
            if args.steps:
                steps = [int(s) for s in args.steps.split(",")]
            elif args.worker_class == "gthread":
                steps = [0, size // 2, size - 1, size]
            else:
                steps = [s for s in (0, 10, 100, 500, size - 1, size) if s <= size]
            rows += run(args.worker_class, size, sorted(set(steps)), store, args.heartbeat, args.idle, args.posts,
                        args.workers, args.cores, args.probe, args.keep_going)
    finally:
        store.stop()
    print("\n" + table(rows, store))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
