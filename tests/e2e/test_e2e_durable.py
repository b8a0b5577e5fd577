"""Long tool calls that survive a deploy (issue #33), with real processes on
loopback, all started here and stopped by their PID: a redis-server of our own
(event store, session store, Celery broker), two gunicorn hosts on 127.0.0.3
and 127.0.0.4 (each a master and two gthread workers, with the shipped
``flask_mcp.gunicorn_conf``), two Celery workers, and in front of the hosts a
TCP round-robin balancer of the test's own (tests/round_robin.py) that skips a
host refusing connections, so a client's reconnection reaches "any host". A
byte-copying balancer rather than nginx: it needs nothing installed, shows the
clients exactly what gunicorn sent, and can sever every connection on demand
(a network fault); nginx in front of gunicorn is tested in test_e2e_nginx.py.
Every answer names the host and web worker that served it (``X-Served-By``,
tests/durable_app.py), which is how the test knows whose worker to kill.

The official Python client (legacy mode, 2025-11-25) and the official
TypeScript client (tests/ts_client/) each make a 30-second durable call that
reports progress every second and asks one question, one client after the
other. During each call the test (a) SIGKILLs the web worker holding the
call's stream, (b) sends HUP to that host's master while the question waits
for its answer (answered once the stream is resumed), (c) stops the host then
holding the stream (SIGTERM to its master; started again two seconds after it
exited), each at a different moment (``PLANS``), the next only once the client
has resumed after the previous one.
Each call must complete with every progress report exactly once and in order,
the question answered, the right result, and no 5xx anywhere.

A rolling restart of both hosts (SIGTERM the master, start it again, then the
other host) during 20 concurrent durable calls loses none of them; it prints
how long each step took (docs/deploying.md quotes the figures).

Each client's own resumption, on a tool that is not durable (it runs in the
web worker, as every call does with the default thread runner): a POST stream
cut by the network and one the server lets go with ``retry:`` are resumed with
``Last-Event-ID``; a resumed stream cut again must be resumed from the last
event the client got (the official Python client does not: a strict xfail).

Runtime: about 2 minutes on a quiet 2-core machine (each client's call 32 s,
the rolling restart 26 s, the client checks about 20 s; under load up to
3 min); the newest-Flask tox env only (tox.ini).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
import requests
from conftest import ROOT, unavailable
from mcp import Client, types
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from redis_server import start_redis_server, stop_redis_server
from round_robin import RoundRobin

pytestmark = pytest.mark.e2e

APP = "tests.durable_app"
TS_CLIENT = ROOT / "tests" / "ts_client"
#: The long call of the issue: 30 one-second steps, a question after step ``ASK_AT``.
STEPS, ASK_AT = 30, 12
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


# ---------------------------------------------------------------- processes


def free_port_on(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def children(pid: int) -> set[int]:
    """The child processes of ``pid`` (a gunicorn master's: its workers)."""
    found: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except FileNotFoundError:
            continue
    return found


class Host:
    """A gunicorn master on one loopback address (its own process group), with
    the shipped settings; started again on the same address and port."""

    def __init__(self, name: str, address: str, env: dict[str, str], folder: Path) -> None:
        self.name, self.address, self.env, self.folder = name, address, env, folder
        self.port = free_port_on(address)
        self.process: subprocess.Popen[bytes] | None = None
        #: Started and answering (False from the moment it is told to stop).
        self.ready = False
        self.logs: list[Path] = []
        self.start()

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/mcp"

    def start(self, within: float = 60) -> float:
        """Start the master; seconds until it answered its health check."""
        log = self.folder / f"host-{self.name}-{len(self.logs)}.log"
        self.logs.append(log)
        command = [sys.executable, "-m", "gunicorn", "-c", "python:flask_mcp.gunicorn_conf", f"{APP}:app",
                   "--bind", f"{self.address}:{self.port}", "--workers", "2", "--threads", "32"]
        begun = time.monotonic()
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                            env={**self.env, "DURABLE_HOST": self.name}, start_new_session=True)
        while True:
            assert self.process.poll() is None, f"host {self.name} exited:\n{self.output()}"
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200 and len(self.workers()) == 2:
                    self.ready = True
                    return time.monotonic() - begun
            except requests.RequestException:
                pass
            assert time.monotonic() - begun < within, f"host {self.name} not ready:\n{self.output()}"
            time.sleep(0.1)

    def workers(self) -> set[int]:
        return children(self.process.pid) if self.process is not None else set()

    @property
    def up(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def hup(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGHUP)

    def stop(self, within: float = 60) -> float:
        """SIGTERM to the master (a deploy's stop); seconds until it exited."""
        self.ready = False
        begun = time.monotonic()
        if self.up:
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(within)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
                raise AssertionError(f"host {self.name} took more than {within} s to stop") from None
        with_stragglers = [pid for pid in self._group() if pid != os.getpid()]
        for pid in with_stragglers:  # a worker the master left behind
            os.kill(pid, signal.SIGKILL)
        return time.monotonic() - begun

    def _group(self) -> list[int]:
        if self.process is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getpgid(int(entry.name)) == self.process.pid:
                        found.append(int(entry.name))
                except ProcessLookupError:
                    continue
        return found

    def output(self) -> str:
        return "".join(log.read_text(errors="replace") for log in self.logs if log.exists())


class CeleryWorker:
    """A ``celery worker`` with a thread pool (the tools sleep; 12 calls at once), its own process group."""

    def __init__(self, name: str, env: dict[str, str], folder: Path) -> None:
        self.log_path = folder / f"celery-{name}.log"
        command = [sys.executable, "-m", "celery", "-A", f"{APP}:celery_app", "worker", "--hostname", f"{name}@%h",
                   "--pool", "threads", "--concurrency", "12", "--without-gossip", "--without-mingle",
                   "--loglevel", "INFO"]
        with self.log_path.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                            env={**env, "DURABLE_HOST": f"celery-{name}"}, start_new_session=True)
        deadline = time.monotonic() + 60
        while " ready." not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, f"celery worker {name} not ready:\n{self.output()}"
            time.sleep(0.2)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)


@dataclass
class Deployment:
    hosts: dict[str, Host]
    balancer: RoundRobin
    workers: list[CeleryWorker]
    folder: Path
    #: Serialises what the scenarios do to the hosts (they may run at once).
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return self.balancer.url()

    def holding(self, served_by: str) -> tuple[Host, int]:
        name, pid = served_by.split("/")
        return self.hosts[name], int(pid)

    def five_hundreds(self) -> list[str]:
        """Access-log lines of any host with a 5xx status."""
        lines = []
        for host in self.hosts.values():
            lines += [line for line in host.output().splitlines() if '" 5' in line and "HTTP/1.1" in line]
        return lines

    def tracebacks(self) -> str:
        return "\n".join(text for text in [host.output() for host in self.hosts.values()] if "Traceback" in text)


def needs_the_stack() -> None:
    for tool in ("redis-server", "node", "npm"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed (tests/e2e/test_e2e_durable.py needs it)")


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    needs_the_stack()
    folder = Path(tempfile.mkdtemp(prefix="flask-mcp-durable-"))
    port = free_port_on("127.0.0.1")
    redis_process = start_redis_server(port, why="the durable-call tests start their own")
    url = f"redis://127.0.0.1:{port}/0"
    env = {**os.environ, "CELERY_BROKER_URL": url, "FLASK_MCP_BACKEND": url, "FLASK_MCP_TASK_POLL_INTERVAL_MS": "100",
           "VISIBILITY_TIMEOUT": "3600", "PYTHONUNBUFFERED": "1"}
    hosts: dict[str, Host] = {}
    workers: list[CeleryWorker] = []
    balancer: RoundRobin | None = None
    try:
        with ThreadPoolExecutor(4) as starting:  # the four start at once: they take a while each
            host_futures = {name: starting.submit(Host, name, address, env, folder)
                            for name, address in (("a", "127.0.0.3"), ("b", "127.0.0.4"))}
            worker_futures = [starting.submit(CeleryWorker, name, env, folder) for name in ("c1", "c2")]
            for name, host_future in host_futures.items():
                with contextlib.suppress(Exception):
                    hosts[name] = host_future.result()
            for worker_future in worker_futures:
                with contextlib.suppress(Exception):
                    workers.append(worker_future.result())
            everything: list[Future[Any]] = [*host_futures.values(), *worker_futures]
            for started in everything:
                started.result()  # the first failure, once everything started is known (and stopped below)
        balancer = RoundRobin([(host.address, host.port) for host in hosts.values()])
        yield Deployment(hosts, balancer, workers, folder)
    finally:
        for process in NODE_PROCESSES:
            if process.poll() is None:
                process.kill()
                process.wait(5)
        if balancer is not None:
            balancer.stop()
        for host in hosts.values():
            host.stop()
        for worker in workers:
            worker.stop()
        stop_redis_server(redis_process)
        if not os.environ.get("DURABLE_E2E_KEEP"):  # set it to read the hosts' logs afterwards
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"logs kept in {folder}")


# ---------------------------------------------------------------- what a client saw


@dataclass
class Exchange:
    """One HTTP answer the client got."""

    method: str
    rpc: str | None
    status: int | None
    served_by: str | None
    last_event_id: str | None
    at: float


@dataclass
class Seen:
    """Everything one client saw of its one call (filled from the client's thread)."""

    client: str
    http: list[Exchange] = field(default_factory=list)
    progress: list[float] = field(default_factory=list)
    #: When each progress report arrived (seconds since the client started).
    progress_at: list[float] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None
    transport_errors: list[str] = field(default_factory=list)
    #: The SSE ids the client kept as its resumption point (the TypeScript client reports them).
    event_ids: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    began: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        return round(time.monotonic() - self.began, 2)

    def streams(self) -> list[Exchange]:
        """The answers that carried the call's stream: its POST and every resumption."""
        return [x for x in self.http if x.status == 200 and (x.rpc == "tools/call" or x.last_event_id)]

    def holder(self) -> str:
        streams = self.streams()
        assert streams and streams[-1].served_by, (self.client, self.http)
        return streams[-1].served_by

    def resumptions(self) -> list[Exchange]:
        return [x for x in self.http if x.method == "GET" and x.last_event_id]

    def wait(self, test: Callable[[], bool], what: str, within: float = 40) -> None:
        deadline = time.monotonic() + within
        while not test():
            assert not self.done.is_set() or test(), f"{self.client}: the call ended before {what}: {self.summary()}"
            assert time.monotonic() < deadline, f"{self.client}: no {what} within {within} s: {self.summary()}"
            time.sleep(0.05)

    def summary(self) -> str:
        return json.dumps({"progress": self.progress, "asked": self.asked, "result": self.result,
                           "event_ids": self.event_ids,
                           "error": self.error, "transport_errors": self.transport_errors,
                           "http": [x.__dict__ for x in self.http]}, indent=None, default=str)


def python_client(url: str, tool: str, arguments: dict[str, Any], seen: Seen, name: str = "Ada") -> threading.Thread:
    """The official Python client (``mcp``, legacy mode) making the call in a thread of its own."""

    async def record(response: httpx2.Response) -> None:
        request = response.request
        rpc = None
        if request.content:
            sent = json.loads(request.content)
            rpc = sent.get("method", "response") if isinstance(sent, dict) else None
        seen.http.append(Exchange(request.method, rpc, response.status_code, response.headers.get("x-served-by"),
                                  request.headers.get("last-event-id"), seen.now()))

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.progress.append(progress)  # first thing in the callback: in the order the client got them
        seen.progress_at.append(seen.now())

    async def answer(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        seen.asked.append(params.message)
        await asyncio.to_thread(seen.release.wait, 60)
        return types.ElicitResult(action="accept", content={"name": name})

    async def call() -> None:
        timeout = httpx2.Timeout(10, read=60)
        async with httpx2.AsyncClient(event_hooks={"response": [record]}, timeout=timeout) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy",
                              elicitation_callback=answer, read_timeout_seconds=120) as client:
                result = await client.call_tool(tool, arguments, progress_callback=progress)
                seen.result = result.model_dump(mode="json", by_alias=True, exclude_none=True)

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(call(), 150))
        except BaseException as exc:  # reported by the test
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            seen.error = f"{type(exc).__name__}: {exc}"
        finally:
            seen.done.set()

    thread = threading.Thread(target=run, name=f"client-{seen.client}", daemon=True)
    thread.start()
    return thread


def ts_client_home() -> Path:
    """The pinned TypeScript SDK, installed with ``npm ci`` once per lock file (in the user's cache)."""
    lock = (TS_CLIENT / "package-lock.json").read_bytes() + (TS_CLIENT / "package.json").read_bytes()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    home = Path(cache) / "flask-mcp" / "ts-client" / hashlib.sha256(lock).hexdigest()[:16]
    if not (home / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        home.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(TS_CLIENT / name, staging)
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            unavailable(f"npm ci of the TypeScript MCP SDK failed:\n{done.stdout}{done.stderr}")
        try:
            staging.rename(home)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    script = home / "durable_call.mjs"
    shutil.copy2(TS_CLIENT / "durable_call.mjs", script)  # beside its node_modules, where node resolves imports
    return script


def ts_client(url: str, tool: str, arguments: dict[str, Any], seen: Seen, name: str = "Grace") -> threading.Thread:
    """The official TypeScript client (tests/ts_client/durable_call.mjs) making the call."""
    script = ts_client_home()
    process = subprocess.Popen(["node", str(script), url, tool, json.dumps(arguments), name], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    NODE_PROCESSES.append(process)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def answer_when_released() -> None:
        if seen.release.wait(150) and process.poll() is None:
            try:
                stdin.write("answer\n")
                stdin.flush()
            except OSError:
                pass

    def read() -> None:
        try:
            for line in stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    seen.transport_errors.append(line.strip())
                    continue
                kind = event["kind"]
                if kind == "http":
                    seen.http.append(Exchange(event["method"], event["rpc"], event["status"], event.get("servedBy"),
                                              event.get("lastEventId"), seen.now()))
                elif kind == "progress":
                    seen.progress.append(event["progress"])
                    seen.progress_at.append(seen.now())
                elif kind == "asked":
                    seen.asked.append(event["message"])
                elif kind == "result":
                    seen.result = event["result"]
                elif kind == "error":
                    seen.error = event["message"]
                elif kind == "event-id":
                    seen.event_ids.append(event["id"])
                elif kind == "transport-error":
                    seen.transport_errors.append(event["message"])
            try:
                process.wait(150)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                seen.error = seen.error or "the TypeScript client did not finish"
        finally:
            stdin.close()
            stdout.close()
            seen.done.set()

    threading.Thread(target=answer_when_released, daemon=True).start()
    thread = threading.Thread(target=read, name=f"client-{seen.client}", daemon=True)
    thread.start()
    return thread


CLIENTS = {"python": python_client, "typescript": ts_client}
#: The node processes this module started (each stopped by its PID at the end).
NODE_PROCESSES: list[subprocess.Popen[str]] = []


def assert_complete(seen: Seen, steps: int, greeting: str | None) -> None:
    assert seen.done.wait(120), f"{seen.client}: the call never ended: {seen.summary()}"
    assert seen.error is None, f"{seen.client}: {seen.error}: {seen.summary()}"
    assert seen.result is not None and not seen.result.get("isError"), seen.summary()
    content = seen.result.get("structuredContent") or {}
    assert content.get("steps") == steps and content.get("greeting") == greeting, seen.summary()
    assert seen.progress == [float(i) for i in range(1, steps + 1)], seen.summary()  # each once, in order
    statuses = [x.status for x in seen.http]
    assert all(status is None or status < 500 for status in statuses), seen.summary()


def report(seen: Seen) -> str:
    """One line for the test's output: what the client saw."""
    resumed = [f"{x.last_event_id}->{x.served_by}@{x.at}s" for x in seen.resumptions()]
    return (f"{seen.client}: {len(seen.progress)} progress reports, questions {len(seen.asked)}, "
            f"stream on {seen.streams()[0].served_by if seen.streams() else None}, "
            f"resumed {len(resumed)}x: {resumed}; statuses {sorted({str(x.status) for x in seen.http})}")


# ---------------------------------------------------------------- the scenarios


@contextlib.contextmanager
def holding_live(deployment: Deployment, seen: Seen) -> Iterator[tuple[Host, int]]:
    """The host and live web worker holding the call's stream, under the
    deployment's lock (the other scenario may just have stopped its host)."""
    deadline = time.monotonic() + 30
    while True:
        with deployment.lock:
            host, pid = deployment.holding(seen.holder())
            if pid in host.workers():
                yield host, pid
                return
        assert time.monotonic() < deadline, f"{seen.client}: its stream never settled on a live worker"
        time.sleep(0.1)


def kill_worker(deployment: Deployment, seen: Seen, log: list[str]) -> None:
    """(a) SIGKILL the web worker holding the call's stream."""
    with holding_live(deployment, seen) as (host, pid):
        os.kill(pid, signal.SIGKILL)
        log.append(f"{seen.client} (a) at progress {len(seen.progress)}: SIGKILL worker {host.name}/{pid}")


def reload_while_asked(deployment: Deployment, seen: Seen, log: list[str]) -> None:
    """(b) HUP the master of the host holding the stream while the question
    waits; answer once the client has resumed the stream."""
    with holding_live(deployment, seen) as (host, pid):
        before = len(seen.resumptions())
        host.hup()
        log.append(f"{seen.client} (b) question pending: HUP master of {host.name} (stream on {pid})")
    seen.wait(lambda: len(seen.resumptions()) > before, "resumption after the HUP", within=20)
    seen.release.set()


def stop_host(deployment: Deployment, seen: Seen, log: list[str]) -> None:
    """(c) Stop the host holding the stream (SIGTERM to its master, as a
    deploy does), keep it down two seconds, then start it again."""
    # Never both hosts down: wait until the other scenario's host is serving again.
    seen.wait(lambda: all(h.ready for h in deployment.hosts.values()), "both hosts serving", within=60)
    with deployment.lock:
        assert seen.result is None, f"{seen.client}: the call ended before (c): {seen.summary()}"
        host, _ = deployment.holding(seen.holder())
        stopped = host.stop()
        log.append(f"{seen.client} (c) at progress {len(seen.progress)}: stopped host {host.name} "
                   f"(SIGTERM to its master, exited in {stopped:.1f} s)")
    time.sleep(2)  # down for a while: the client resumes on the other host
    took = host.start()
    log.append(f"{seen.client} host {host.name} started again in {took:.1f} s")


#: What each scenario does, in order: (progress count or "asked", disruption). Each client
#: meets all three, at moments of its own.
PLANS: dict[str, list[tuple[int | str, Callable[[Deployment, Seen, list[str]], None]]]] = {
    "python": [(4, kill_worker), ("asked", reload_while_asked), (24, stop_host)],
    "typescript": [(5, stop_host), (9, kill_worker), ("asked", reload_while_asked)],
}


def disrupt(deployment: Deployment, seen: Seen, log: list[str]) -> None:
    """Each step of the client's plan at its moment; the next step only once the
    client has resumed after this one. Without that wait a loaded machine made
    the test race itself: the TypeScript question came with progress 12, just
    as its worker was killed, and the HUP went to the host of the killed worker
    (the newest stream the test knew of) instead of the one the client resumed
    on, so the call never met (b)."""
    for moment, step in PLANS[seen.client]:
        if moment == "asked":
            seen.wait(lambda: len(seen.asked) == 1, "question", within=ASK_AT + 40)
        else:
            seen.wait(lambda moment=moment: len(seen.progress) >= moment, f"progress {moment}")  # type: ignore[misc]
        before = len(seen.resumptions())
        step(deployment, seen, log)
        seen.wait(lambda before=before: len(seen.resumptions()) > before,  # type: ignore[misc]
                  f"resumption after {step.__name__}")


@pytest.mark.parametrize("client", CLIENTS)
def test_the_long_call_of_each_client_survives_a_killed_worker_a_reload_and_a_stopped_host(
    deployment: Deployment, client: str
) -> None:
    """Each client's 30-second call meets its own three disruptions, one client
    at a time. Both at once, one client's disruptions also hit the other's
    stream when the two shared a worker or a host: in one CI run the Python
    call met the TypeScript call's host stop and then its SIGKILL, a stream cut
    mid-way and a reconnection refused in a row, and the official Python SDK
    (2.3.0) gives up after two such (docs/celery.md, "Two cuts in a row")."""
    seen = Seen(client)
    log: list[str] = []
    started = time.monotonic()
    CLIENTS[client](deployment.url, "long_call", {"steps": STEPS, "ask_at": ASK_AT}, seen)
    try:
        disrupt(deployment, seen, log)
    finally:
        seen.release.set()
        print(*log, sep="\n")
    seen.done.wait(60)
    print(report(seen))
    print(f"call done in {time.monotonic() - started:.1f} s")
    assert_complete(seen, STEPS, {"python": "Hello, Ada!", "typescript": "Hello, Grace!"}[client])
    assert seen.asked == ["What is your name?"]
    assert len(seen.resumptions()) >= 3, seen.summary()  # after (a), (b) and (c) at least
    assert deployment.five_hundreds() == []


def test_a_rolling_restart_of_both_hosts_loses_none_of_20_concurrent_calls(deployment: Deployment) -> None:
    """20 official Python clients (legacy mode) each make a 24-step durable call;
    each host in turn gets SIGTERM and is started again once it exited. Prints
    the figures docs/deploying.md quotes."""
    steps, n = 24, 20
    arguments = {"steps": steps, "ask_at": 0}
    seen = [Seen(f"python-{i}") for i in range(n)]
    for one in seen:
        one.release.set()
        python_client(deployment.url, "long_call", arguments, one)
    for one in seen:
        one.wait(lambda one=one: len(one.progress) >= 2, "progress 2")  # type: ignore[misc]
    figures = []
    rolling = time.monotonic()
    with deployment.lock:
        for host in deployment.hosts.values():
            stopped = host.stop()
            started = host.start()
            figures.append(f"host {host.name}: stopped in {stopped:.1f} s, serving again {started:.1f} s later")
    rolled = time.monotonic() - rolling
    for one in seen:
        assert one.done.wait(90), one.summary()
    gaps = [max(b - a for a, b in zip(one.progress_at, one.progress_at[1:], strict=False)) for one in seen
            if len(one.progress_at) > 1]
    print(*figures, sep="\n")
    print(f"rolling restart of both hosts with {n} calls in flight: {rolled:.1f} s; "
          f"resumptions per call: {sorted(len(one.resumptions()) for one in seen)}; "
          f"longest wait between two progress reports (1 s apart on Celery): {max(gaps):.1f} s")
    for one in seen:
        assert_complete(one, steps, None)
    assert deployment.five_hundreds() == []


# ---------------------------------------------------------------- the clients' own resumption (thread runner)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_each_client_resumes_a_post_stream_cut_by_the_network_with_last_event_id(
    deployment: Deployment, client: str
) -> None:
    """A non-durable call on the default thread runner: the balancer severs
    every connection at progress 3; the call goes on in its web worker and the
    client resumes the stream (GET with Last-Event-ID) and gets the rest."""
    seen = Seen(client)
    CLIENTS[client](deployment.url, "relay_call", {"steps": 8, "let_go_at": 0}, seen)
    seen.wait(lambda: len(seen.progress) >= 3, "progress 3", within=30)
    assert deployment.balancer.cut() >= 1
    assert seen.done.wait(40), seen.summary()
    print(report(seen))
    print(seen.summary())
    assert seen.error is None, seen.summary()
    assert seen.progress == [float(i) for i in range(1, 9)], seen.summary()
    assert (seen.result or {}).get("structuredContent", {}).get("steps") == 8, seen.summary()
    resumed = seen.resumptions()
    assert resumed and resumed[0].last_event_id and "/" in resumed[0].last_event_id, seen.summary()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_each_client_resumes_a_post_stream_the_server_lets_go_with_retry(deployment: Deployment, client: str) -> None:
    """The tool lets its connection go after step 3 (``ctx.close_stream``: an
    SSE ``retry:`` and the end of the response); the client comes back with
    Last-Event-ID and gets the rest, each report once."""
    seen = Seen(client)
    CLIENTS[client](deployment.url, "relay_call", {"steps": 8, "let_go_at": 3}, seen)
    assert seen.done.wait(40), seen.summary()
    print(report(seen))
    assert seen.error is None, seen.summary()
    assert seen.progress == [float(i) for i in range(1, 9)], seen.summary()
    assert (seen.result or {}).get("structuredContent", {}).get("steps") == 8, seen.summary()
    assert len(seen.resumptions()) == 1, seen.summary()


#: What the official Python client (mcp 2.3.0) does wrong, found by the test below.
PYTHON_CLIENT_REPLAYS = (
    "mcp 2.3.0: when a resumed stream (GET with Last-Event-ID) breaks with a network error, "
    "StreamableHTTPTransport._handle_reconnection's except branch reconnects with the Last-Event-ID it had "
    "resumed from (last_event_id), not the last one it received (reconnect_last_event_id): the server rightly "
    "replays everything after that id (flask-mcp no longer sends progress a stream already delivered, but log "
    "lines and questions are sent again); two such breaks in a row also count as its two reconnection attempts"
)


#: What the server does wrong since branch durable's 29c358e, found by the test below.


@pytest.mark.parametrize("client", [
    pytest.param("python", marks=pytest.mark.xfail(strict=True, reason=PYTHON_CLIENT_REPLAYS)),
    "typescript",
])
def test_each_client_resumes_a_cut_resumed_stream_from_its_last_event(deployment: Deployment, client: str) -> None:
    """The balancer severs the call's POST stream at progress 3, then its
    resumed stream at progress 8 (as a host lost mid-stream does): the second
    resumption must start after the last event the client got, so every report
    arrives once."""
    steps = 14
    seen = Seen(client)
    CLIENTS[client](deployment.url, "relay_call", {"steps": steps, "let_go_at": 0}, seen)
    seen.wait(lambda: len(seen.progress) >= 3, "progress 3", within=30)
    deployment.balancer.cut()
    seen.wait(lambda: len(seen.resumptions()) == 1 and len(seen.progress) >= 8, "progress 8 after a resumption")
    deployment.balancer.cut()
    assert seen.done.wait(40), seen.summary()
    print(report(seen))
    assert seen.error is None, seen.summary()
    first, second = (int(str(x.last_event_id).rpartition("/")[2]) for x in seen.resumptions()[:2])
    assert seen.progress == [float(i) for i in range(1, steps + 1)], (first, second, seen.summary())
    assert second > first, seen.summary()  # from the last event it got, not from where it resumed before
