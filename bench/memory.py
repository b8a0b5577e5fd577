"""Whether a worker's memory stays flat under a long mixed workload.

Starts the conformance fixture app (tests/conformance/app.py) under
``gunicorn -w 2 -k gthread --threads 8`` on the default SQLite backend (a fresh
file), then sends ``--requests`` mixed requests from ``--clients`` keep-alive
connections: legacy sessions created, used (tools/list, tools/call, resources,
prompts, completions, ping, logging/setLevel) and deleted, 2026-07-28 stateless
calls, and a few requests that must fail (unknown session, bad JSON, unknown
method). Every answer's status is checked. It reads each worker's ``VmRSS``
after ``--warmup`` requests and at the end, and fails (exit status 1) when a
worker grew by more than ``--limit-mb``.

    python3 bench/memory.py                        # 50 000 requests, RSS after 5 000 vs. after 50 000
    python3 bench/memory.py --requests 20000 --warmup 2000
    python3 bench/memory.py --tracemalloc top.txt  # where the growth is allocated (slower)
    python3 bench/memory.py --mix hostile          # 100 000 hostile requests from 8 clients
    python3 bench/memory.py --mix hostile --bare   # gunicorn without flask_mcp/gunicorn_conf.py
    python3 bench/memory.py --mix hostile --env MALLOC_ARENA_MAX=2  # a variable for gunicorn

``--mix hostile`` sends, from ``--clients`` (8) threads on fresh connections, what
a black-box fuzzer sends: the requests of tests/hostile.py's strategies
(mutated seeds, damaged encodings, odd methods and headers, huge ids, dropped
connections), drawn once by hypothesis into a pool and sent with fresh ids,
header values and session ids; bodies nested up to 200 000 levels and bodies of
up to ``MCP_MAX_CONTENT_LENGTH`` (and past it); and many short legacy sessions,
initialized (some with a clientInfo of 20-200 kB), used once and abandoned. Every answer must pass
``hostile.check_answer`` (no 5xx, JSON-RPC, the id echoed).

The server runs with the shipped settings (flask_mcp/gunicorn_conf.py, the
access log off; ``--bare``: without them). ``--tracemalloc FILE`` starts
tracemalloc in each worker (a gunicorn config hook) and writes the allocation
sites that grew most between the warm-up and the end to FILE, with glibc's
``mallinfo2`` figures (arenas in use and free, blocks mapped on their own).
Loopback only; the server is started here and stopped by its PID.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import itertools
import json
import os
import pickle
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
APP = "tests.conformance.app:app"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench-memory", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}

#: The gunicorn config the benchmark runs: the shipped settings
#: (flask_mcp/gunicorn_conf.py: gc.freeze, the fixed mmap threshold), unless
#: ``--bare``; with ``--tracemalloc``, each worker traces its allocations and
#: writes a snapshot after its ``MEMBENCH_MARKS`` requests (comma-separated),
#: with glibc's ``mallinfo2`` figures beside it.
BENCH_CONF = '''
import ctypes, json, os, threading, tracemalloc
if os.environ.get("MEMBENCH_SHIPPED"):
    from flask_mcp.gunicorn_conf import *
    from flask_mcp.gunicorn_conf import post_worker_init as _shipped
    accesslog = None
else:
    _shipped = None
_count = 0
_lock = threading.Lock()
_marks = [int(m) for m in os.environ.get("MEMBENCH_MARKS", "").split(",") if m]

class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

def _mallinfo():
    try:
        function = ctypes.CDLL(None).mallinfo2
    except AttributeError:  # not glibc 2.33+
        return {}
    function.restype = _MallInfo2
    info = function()
    return {name: getattr(info, name) for name, _ in _MallInfo2._fields_}

def post_worker_init(worker):
    if _shipped is not None:
        _shipped(worker)
    if _marks:
        tracemalloc.start(int(os.environ.get("MEMBENCH_FRAMES", "8")))

def post_request(worker, req, environ, resp):
    global _count
    if not _marks:
        return
    with _lock:
        _count += 1
        count = _count
    if count in _marks:
        base = os.path.join(os.environ["MEMBENCH_DIR"], f"{os.getpid()}-{count}")
        tracemalloc.take_snapshot().dump(base + ".snap")
        with open(base + ".malloc", "w") as out:
            json.dump(_mallinfo(), out)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """gunicorn of the fixture app, two gthread workers, stopped by its PID."""

    def __init__(self, folder: Path, threads: int, trace_marks: list[int] | None,
                 extra_env: dict[str, str] | None = None, shipped: bool = True) -> None:
        self.port = free_port()
        self.folder = folder
        env = {**os.environ, "FLASK_MCP_BACKEND": f"sqlite:///{folder / 'sessions.sqlite3'}",
               "MEMBENCH_DIR": str(folder), **(extra_env or {})}
        args = [sys.executable, "-m", "gunicorn", APP, "-b", f"127.0.0.1:{self.port}", "-w", "2",
                "-k", "gthread", "--threads", str(threads), "--keep-alive", "30", "--log-level", "warning"]
        conf = folder / "bench_conf.py"
        conf.write_text(BENCH_CONF)
        args += ["-c", str(conf)]
        env["MEMBENCH_SHIPPED"] = "1" if shipped else ""
        if trace_marks is not None:
            env["MEMBENCH_MARKS"] = ",".join(map(str, trace_marks))
        self.log = (folder / "gunicorn.log").open("wb")
        self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                connection.request("GET", "/mcp/health")
                if connection.getresponse().status == 200:
                    break
            except OSError:
                pass
            finally:
                connection.close()
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("gunicorn did not start:\n" + (folder / "gunicorn.log").read_text())
            time.sleep(0.1)
        while len(self.workers()) != 2:
            time.sleep(0.05)

    def workers(self) -> list[int]:
        children: list[int] = []
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:
                children += [int(p) for p in (task / "children").read_text().split()]
            except FileNotFoundError:
                continue
        return sorted(children)

    def status(self, field: str) -> dict[int, int]:
        """One numeric field of each worker's /proc status (``VmRSS`` in kB, ``Threads``)."""
        values = {}
        for pid in self.workers():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    values[pid] = int(line.split()[1])
        return values

    def rss_mb(self) -> dict[int, float]:
        return {pid: kb / 1024 for pid, kb in self.status("VmRSS").items()}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class Client:
    """One keep-alive connection sending the mixed workload; every answer's status is checked."""

    def __init__(self, port: int, count: Callable[[], int], number: int, keep_sessions: bool = False) -> None:
        self.port = port
        self.count = count
        self.number = number
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.ids = itertools.count()
        #: Leave sessions to expire instead of deleting them (the session table grows).
        self.keep_sessions = keep_sessions

    def send(self, method: str, body: Any, headers: dict[str, str], expect: int) -> tuple[dict[str, str], bytes]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        for attempt in range(2):
            try:
                self.connection.request(method, "/mcp", body=data if method != "DELETE" else None, headers=headers)
                response = self.connection.getresponse()
                payload = response.read()
                break
            except (http.client.HTTPException, OSError):  # the server closed a kept-alive connection
                self.connection.close()
                if attempt:
                    raise
        if response.status != expect:
            raise AssertionError(f"{method} {body!r}: expected {expect}, got {response.status}: {payload[:300]!r}")
        self.count()
        return dict(response.getheaders()), payload

    def legacy(self, method: str, params: dict[str, Any], session: str, expect: int = 200) -> bytes:
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        headers = {**JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
        return self.send("POST", body, headers, expect)[1]

    def modern(self, method: str, params: dict[str, Any], name: str | None = None) -> bytes:
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": {**params, "_meta": META}}
        headers = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        return self.send("POST", body, headers, 200)[1]

    def round(self, n: int) -> None:
        """One legacy session from initialize to DELETE, stateless calls, and failures."""
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": LEGACY, "capabilities": {},
                           "clientInfo": {"name": f"bench-memory-{self.number}", "version": str(n)}}}
        headers, _ = self.send("POST", init, JSON_HEADERS, 200)
        session = headers["Mcp-Session-Id"]
        session_headers = {**JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
        self.send("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_headers, 202)
        self.legacy("tools/list", {}, session)
        self.legacy("tools/call", {"name": "greet", "arguments": {"name": f"user {n}"}}, session)
        self.legacy("tools/call", {"name": "test_simple_text", "arguments": {}}, session)
        self.legacy("resources/read", {"uri": f"test://template/{n}/data"}, session)
        self.legacy("prompts/get", {"name": "test_prompt_with_arguments",
                                    "arguments": {"arg1": str(n), "arg2": "b"}}, session)
        self.legacy("completion/complete", {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                                            "argument": {"name": "arg1", "value": "pa"}}, session)
        self.legacy("resources/subscribe", {"uri": "test://watched-resource"}, session)
        self.legacy("resources/unsubscribe", {"uri": "test://watched-resource"}, session)
        self.legacy("logging/setLevel", {"level": "warning"}, session)
        self.legacy("tools/call", {"name": "test_logging_tool", "arguments": {}}, session)  # an event stream
        self.legacy("nonexistent/method", {}, session)  # -32601
        self.legacy("ping", {}, session)
        if not self.keep_sessions:
            self.send("DELETE", None, session_headers, 200)
            self.legacy("ping", {}, session, expect=404)  # the session is gone
        self.modern("tools/call", {"name": "greet", "arguments": {"name": f"stateless {n}"}}, "greet")
        self.modern("tools/list", {})
        self.modern("resources/read", {"uri": f"test://template/s{n}/data"}, f"test://template/s{n}/data")
        self.modern("server/discover", {})
        self.modern("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}},
                    "test_input_required_result_elicitation")  # an input_required result
        if n % 10 == 0 and self.number == 0:  # one client: the fixture's tool adds and removes a fixed name
            self.modern("tools/call", {"name": "test_trigger_tool_change", "arguments": {}}, "test_trigger_tool_change")
        self.send("POST", b'{"jsonrpc": "2.0", "id": 1, "method": ', JSON_HEADERS, 400)  # a parse error
        if n % 5 == 0:
            self.abandon(n)

    def abandon(self, n: int) -> None:
        """A client that asks for a tool which questions it, reads the question,
        then goes away without answering and ends its session."""
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                           "clientInfo": {"name": f"bench-memory-abandon-{self.number}", "version": str(n)}}}
        headers, _ = self.send("POST", init, JSON_HEADERS, 200)
        session_headers = {**JSON_HEADERS, "Mcp-Session-Id": headers["Mcp-Session-Id"],
                           "MCP-Protocol-Version": "2025-06-18"}
        self.send("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session_headers, 202)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "test_elicitation", "arguments": {"message": f"Who are you, {n}?"}}}
        stream = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            stream.request("POST", "/mcp", body=json.dumps(call).encode(), headers=session_headers)
            response = stream.getresponse()
            assert response.status == 200, response.status
            while b"elicitation/create" not in response.readline():
                pass
        finally:
            stream.close()
        self.count()
        if not self.keep_sessions:
            self.send("DELETE", None, session_headers, 200)

    def close(self) -> None:
        self.connection.close()


# ---------------------------------------------------------------------- the hostile mix

#: Stand-ins for the legacy sessions in the drawn requests; each client puts its
#: current short-lived sessions in their place when it sends one.
PLACEHOLDERS = {version: f"SESSION-{version}" for version in ("2025-11-25", "2025-06-18", "2025-03-26")}
HOSTILE_ENV = {
    "FLASK_MCP_CLIENT_TIMEOUT": "2",  # a tool that asks a legacy client something waits at most 2 s
    "FLASK_MCP_SSE_HEARTBEAT": "0.5",  # dropped listen streams notice soon that the client left
}


@dataclass
class Hostile:
    """One drawn request: what tests/hostile.py's strategies make of a seed."""

    method: str
    path: str
    headers: dict[str, str]
    message: Any  # the JSON value, or None when ``body`` is all there is
    body: bytes
    drop: str | None


def hostile_pool(count: int) -> list[Hostile]:
    """``count`` requests drawn by hypothesis from the fuzz tests' strategies
    (tests/hostile.py), as tests/e2e/test_fuzz_gunicorn.py draws them. Drawing
    takes 10-130 s for 1 000 (hypothesis, on a loaded machine): the pool is
    kept in the temporary folder, under the strategies' own hash."""
    strategies = hashlib.sha256((ROOT / "tests" / "hostile.py").read_bytes()).hexdigest()[:16]
    cached = Path(tempfile.gettempdir()) / f"flask-mcp-hostile-pool-{count}-{strategies}.pickle"
    if cached.exists():  # written by this function (pickle: JSON would join the drawn lone surrogates)
        return [Hostile(*fields) for fields in pickle.loads(cached.read_bytes())]
    drawn = _draw_pool(count)
    # Plain tuples: the class's module is __main__ or another name, depending on who loaded this file.
    cached.write_bytes(pickle.dumps([tuple(vars(item).values()) for item in drawn]))
    return drawn


def _tests_importable() -> None:
    """tests/hostile.py (and the json_paths it imports) as top-level modules, as the tests import them."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))


def _draw_pool(count: int) -> list[Hostile]:
    _tests_importable()
    from hostile import DROPS, http_methods, mutated, seeds, serialized
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    drawn: list[Hostile] = []

    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        message, headers = data.draw(mutated(seeds(PLACEHOLDERS)))
        body = data.draw(serialized(message))
        method = data.draw(http_methods)
        drop = data.draw(st.sampled_from(DROPS) | st.none())
        if b"listen" in body and drop in (None, "mid-body"):
            drop = "mid-stream"  # a listen stream lasts until the client leaves
        path = data.draw(st.sampled_from(["/mcp", "/mcp", "/mcp", "/mcp/health"]))
        drawn.append(Hostile(method, path, headers, message, body, drop))

    draw()
    return drawn


class HostileClient:
    """One client of the hostile mix: each round opens two short legacy sessions
    (never deleted), sends drawn requests with fresh ids, header values and those
    sessions in them, one deeply nested body, now and then a body at or past the
    size limit, and leaves. Every answer must pass ``hostile.check_answer``."""

    #: Every how many rounds a client sends a body at or past the size limit (0: never).
    large_every = 25

    def __init__(self, port: int, count: Callable[[], int], number: int, pool: list[Hostile]) -> None:
        _tests_importable()
        from hostile import Stalled, check_answer, exchange

        self.port, self.count, self.number, self.pool = port, count, number, pool
        self.exchange, self.check, self.stalled = exchange, check_answer, Stalled
        self.random = random.Random(number)
        self.serial = itertools.count()
        self.statuses: dict[int, int] = {}

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes, drop: str | None = None) -> Any:
        try:
            answer = self.exchange(self.port, method, path, {**JSON_HEADERS, **headers}, body, drop=drop, timeout=10)
        except self.stalled as exc:
            if "text/event-stream" not in str(exc):
                raise
            answer = None  # a stream the drawn request opened without a way to tell: the client leaves it
        if answer is not None:
            self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
            if answer.status == 503 and b"Retry in" in answer.body:  # a worker's streams are all taken
                json.loads(answer.body)["error"]  # noqa: B018 - still a JSON-RPC error
            else:
                self.check(method, body, answer, dropped=drop == "mid-stream", path=path)
        self.count()
        return answer

    def session(self, version: str) -> str:
        params = {"protocolVersion": version, "capabilities": {"elicitation": {}},
                  "clientInfo": {"name": f"hostile-{self.number}-{next(self.serial)}", "version": "1"}}
        answer = self.send("POST", "/mcp", {}, json.dumps(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode())
        assert answer is not None and answer.status == 200, answer
        session: str = answer.headers["mcp-session-id"]
        self.send("POST", "/mcp", {"Mcp-Session-Id": session, "MCP-Protocol-Version": version},
                  b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        return session

    def fresh_id(self) -> Any:
        """A new id, as a fuzzer picks them: huge integers, long or odd strings."""
        n = next(self.serial)
        return self.random.choice([
            2**63 + n, 2**80 + n * 7919, -(2**70) - n, f"{n}-" + "x" * self.random.randint(200, 300),
            f"id-{self.number}-{n}\ud800", n * 1.5, f"{n:x}" * self.random.randint(1, 40),
        ])

    def fresh(self, request: Hostile, sessions: dict[str, str]) -> tuple[dict[str, str], bytes]:
        """The drawn request with this round's sessions, a fresh id and fresh header values."""
        headers = {name: sessions.get(value, value) for name, value in request.headers.items()}
        body = request.body
        for placeholder, session in sessions.items():
            body = body.replace(placeholder.encode(), session.encode())
        pick = self.random.random()
        if isinstance(request.message, dict) and "id" in request.message and pick < 0.5:
            message = dict(request.message)
            message["id"] = self.fresh_id()
            body = json.dumps(message).encode()
            for placeholder, session in sessions.items():
                body = body.replace(placeholder.encode(), session.encode())
        n = next(self.serial)
        if pick < 0.2:
            headers["Mcp-Name"] = f"tool-{self.number}-{n}-" + "n" * self.random.randint(0, 200)
        elif pick < 0.3:
            headers[f"Mcp-Param-P{n % 997}"] = "v" * self.random.randint(1, 300)
        elif pick < 0.4:
            headers["MCP-Protocol-Version"] = f"20{n % 100:02d}-{n % 12 + 1:02d}-{n % 28 + 1:02d}"
        elif pick < 0.45:
            headers["Mcp-Session-Id"] = f"{n:032x}"  # an unknown session
        elif pick < 0.5:
            headers[f"X-Odd-{n % 4093}"] = "o" * self.random.randint(1, 2000)
        return headers, body

    def deep(self, n: int) -> bytes:
        depth = self.random.choice([65, 1_000, 5_000, 50_000, 200_000])
        opening, closing = self.random.choice([("[", "]"), ('{"a":', "}")])
        inner = opening * depth + "1" + closing * depth
        head = f'{{"jsonrpc": "2.0", "id": {2**64 + n}, "method": "tools/call", "params": {{"name": "greet", '
        return (head + f'"arguments": {{"name": {inner}}}}}}}').encode()

    def large(self, n: int, limit: int) -> bytes:
        size = self.random.choice([200_000, 1_000_000, limit // 4, limit // 2, limit - 4096, limit + 1])
        text = "".join(self.random.choice("abcdefghij") for _ in range(64)) * (size // 64)
        return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                           "params": {"name": "greet", "arguments": {"name": text}}}).encode()

    def round(self, n: int) -> None:
        modern = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}
        versions = self.random.sample(sorted(PLACEHOLDERS), 2)
        sessions = {PLACEHOLDERS[version]: self.session(version) for version in versions}
        for version in set(PLACEHOLDERS) - set(versions):
            sessions[PLACEHOLDERS[version]] = f"gone-{n}"  # a session that never existed
        for _ in range(12):
            request = self.random.choice(self.pool)
            headers, body = self.fresh(request, sessions)
            self.send(request.method, request.path, headers, body, request.drop)
        self.send("POST", "/mcp", {"Mcp-Session-Id": next(iter(sessions.values())),
                                   "MCP-Protocol-Version": versions[0]}, self.deep(n))
        if n % 10 == 0:  # a clientInfo of 20-200 kB: kept up to MCP_MAX_CLIENT_INFO_BYTES, refused past it
            info = {"name": f"padded-{n}", "version": "1", "x-padding": "p" * self.random.randint(20_000, 200_000)}
            self.send("POST", "/mcp", {}, json.dumps({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
                "protocolVersion": versions[0], "capabilities": {}, "clientInfo": info}}).encode())
        if self.large_every and n % self.large_every == 0:
            try:
                self.send("POST", "/mcp", modern, self.large(n, 4 * 1024 * 1024))
            except (BrokenPipeError, ConnectionResetError):  # past the limit: a 413 before the body is read
                self.count()

    def close(self) -> None:
        pass


def drive(port: int, total: int, clients: int, marks: list[int], on_mark: Callable[[int], None],
          keep_sessions: bool = False, pool: list[Hostile] | None = None) -> float:
    """Send at least ``total`` requests; ``on_mark(n)`` runs (once) when ``n`` requests are done.
    With a ``pool`` (:func:`hostile_pool`), the clients send the hostile mix."""
    lock = threading.Lock()
    done = 0
    pending = sorted(marks)
    failures: list[BaseException] = []

    def count() -> int:
        nonlocal done
        with lock:
            done += 1
            while pending and done >= pending[0]:
                on_mark(pending.pop(0))
            return done

    def work(number: int) -> None:
        client: Client | HostileClient = (
            Client(port, count, number, keep_sessions) if pool is None else HostileClient(port, count, number, pool))
        try:
            for n in itertools.count():
                if done >= total or failures:
                    return
                client.round(n * clients + number)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
        finally:
            client.close()

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return time.monotonic() - started


def report_growth(folder: Path, first: int, last: int, out: Path) -> None:
    """The allocation sites that grew most in each worker between its two snapshots."""
    import tracemalloc

    lines = []
    for before_path in sorted(folder.glob(f"*-{first}.snap")):
        pid = before_path.name.split("-")[0]
        after_path = folder / f"{pid}-{last}.snap"
        if not after_path.exists():
            continue
        before = tracemalloc.Snapshot.load(str(before_path))
        after = tracemalloc.Snapshot.load(str(after_path))
        stats = after.compare_to(before, "traceback")
        lines.append(f"== worker {pid}: requests {first} -> {last}, "
                     f"traced {sum(s.size for s in before.statistics('filename')) / 1e6:.1f} MB -> "
                     f"{sum(s.size for s in after.statistics('filename')) / 1e6:.1f} MB")
        for count in (first, last):
            malloc = folder / f"{pid}-{count}.malloc"
            info = json.loads(malloc.read_text()) if malloc.exists() else {}
            if info:  # glibc: in its arenas (in use + free), and mapped on their own
                lines.append(f"   glibc after {count}: arenas {info['arena'] / 1e6:.1f} MB (in use "
                             f"{info['uordblks'] / 1e6:.1f}, free {info['fordblks'] / 1e6:.1f}), "
                             f"mapped blocks {info['hblkhd'] / 1e6:.1f} MB")
        for stat in stats[:25]:
            lines.append(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks")
            lines.extend("      " + line for line in stat.traceback.format()[-16:])
    out.write_text("\n".join(lines) + "\n")
    print(f"tracemalloc growth written to {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mix", choices=["ordinary", "hostile"], default="ordinary")
    parser.add_argument("--requests", type=int, help="default: 50 000 (ordinary), 100 000 (hostile)")
    parser.add_argument("--warmup", type=int, default=5_000)
    parser.add_argument("--clients", type=int, help="default: 4 (ordinary), 8 (hostile)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--limit-mb", type=float, help="default: 20 (ordinary), 30 (hostile)")
    parser.add_argument("--pool", type=int, default=1_000, help="hostile requests drawn by hypothesis")
    parser.add_argument("--large-every", type=int, default=25,
                        help="hostile: every how many rounds a client sends a body of megabytes (0: never)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for gunicorn (MALLOC_ARENA_MAX=2...)")
    parser.add_argument("--keep-sessions", action="store_true",
                        help="never DELETE sessions (they stay in the store until they expire)")
    parser.add_argument("--report-every", type=int, default=5_000, help="print RSS and threads every N requests")
    parser.add_argument("--tracemalloc", type=Path, metavar="FILE")
    parser.add_argument("--bare", action="store_true",
                        help="gunicorn without the shipped settings (flask_mcp/gunicorn_conf.py)")
    args = parser.parse_args()
    hostile = args.mix == "hostile"
    args.requests = args.requests or (100_000 if hostile else 50_000)
    args.clients = args.clients or (8 if hostile else 4)
    args.limit_mb = args.limit_mb if args.limit_mb is not None else (30.0 if hostile else 20.0)
    pool = None
    HostileClient.large_every = args.large_every
    if hostile:
        started = time.monotonic()
        pool = hostile_pool(args.pool)
        print(f"{len(pool)} hostile requests drawn in {time.monotonic() - started:.1f} s", flush=True)
    extra_env = dict(HOSTILE_ENV if hostile else {})
    extra_env.update(item.split("=", 1) for item in args.env)

    folder = Path(tempfile.mkdtemp(prefix="flask-mcp-memory-"))
    per_worker_marks = [args.warmup // 2, args.requests // 2 - 200] if args.tracemalloc else None
    server = Server(folder, args.threads, per_worker_marks, extra_env, shipped=not args.bare)
    readings: dict[int, dict[int, float]] = {}
    try:
        def mark(n: int) -> None:
            readings[n] = server.rss_mb()
            threads = server.status("Threads")
            print(f"after {n:6d} requests: " + ", ".join(
                f"worker {pid} {rss:.1f} MB {threads.get(pid)} threads" for pid, rss in sorted(readings[n].items())),
                flush=True)

        mark(0)
        marks = sorted({args.warmup, *range(args.report_every, args.requests, args.report_every)})
        elapsed = drive(server.port, args.requests, args.clients, marks, mark, args.keep_sessions, pool)
        time.sleep(0.5)
        readings[args.requests] = server.rss_mb()
    finally:
        server.stop()
    print(f"{args.requests} {args.mix} requests from {args.clients} clients in {elapsed:.1f} s "
          f"({args.requests / elapsed:.0f}/s), 2 gthread workers x {args.threads} threads, SQLite backend, "
          + ("bare gunicorn" if args.bare else "the shipped gunicorn_conf") + "".join(f", {item}" for item in args.env))
    grown = {}
    for pid in sorted(readings[args.requests]):
        start, end = readings[args.warmup].get(pid), readings[args.requests][pid]
        if start is None:
            continue
        grown[pid] = end - start
        print(f"worker {pid}: RSS {readings[0].get(pid, 0):.1f} MB started, {start:.1f} MB after {args.warmup} "
              f"requests, {end:.1f} MB after {args.requests} ({end - start:+.1f} MB)")
    if args.tracemalloc and per_worker_marks:
        report_growth(folder, per_worker_marks[0], per_worker_marks[1], args.tracemalloc)
    shutil.rmtree(folder, ignore_errors=True)
    worst = max(grown.values(), default=0.0)
    verdict = "flat" if worst <= args.limit_mb else "GREW"
    print(f"{verdict}: largest growth {worst:+.1f} MB (limit {args.limit_mb:.0f} MB)")
    sys.exit(0 if worst <= args.limit_mb else 1)


if __name__ == "__main__":
    main()
