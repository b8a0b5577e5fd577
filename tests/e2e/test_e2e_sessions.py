"""Legacy (Mcp-Session-Id) sessions under real gunicorn masters with several
workers, for the backends that share sessions between processes (SQLite,
Redis): any worker serves any session, DELETE ends it everywhere, a killed
worker loses nothing, two masters share one Redis, and a backend outage is a
quick 503 that heals by itself. Only loopback traffic; every process stopped
here was started here, and is stopped by its PID."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import (
    JSON_HEADERS,
    GunicornServer,
    backend_uri,
    free_port,
    read_only,
    unavailable,
    worker_pids,
)
from test_e2e_streaming import json_body

pytestmark = pytest.mark.e2e

APP = "tests.e2e_app:app"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
TIMEOUT = 10.0
#: A down backend must be reported well before a client gives up.
OUTAGE_BUDGET = 5.0
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}

StartServer = Callable[..., GunicornServer]

#: One shared cluster (a master with four workers) per backend and worker class.
CLUSTERS = [(backend, worker_class) for backend in ("sqlite", "redis") for worker_class in ("sync", "gthread")]


# ---------------------------------------------------------------- helpers


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_for_workers(
    server: GunicornServer, count: int, *, excluding: int | None = None, timeout: float = 15.0
) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = worker_pids(server)
        if len(pids) == count and excluding not in pids:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"expected {count} workers (not {excluding}), have {worker_pids(server)}")


def stateless_whoami(url: str) -> int:
    """The pid of the worker that answered a 2026-07-28 call (which needs no session)."""
    response = requests.post(
        url,
        headers={**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "whoami"},
        json={
            "jsonrpc": "2.0",
            "id": "warm-up",
            "method": "tools/call",
            "params": {"name": "whoami", "arguments": {}, "_meta": MODERN_META},
        },
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, (response.status_code, response.text[:500])
    body = json_body(response, "tools/call", MODERN)
    return int(body["result"]["structuredContent"]["pid"])


def warm_up(server: GunicornServer, workers: int) -> None:
    """Return once every worker has loaded the app and answered (gunicorn is
    ready when the first one is: the others would get no share of early requests)."""
    pids = wait_for_workers(server, workers)
    answered: set[int] = set()
    deadline = time.monotonic() + 15
    with ThreadPoolExecutor(8) as pool:
        while answered != pids:
            assert time.monotonic() < deadline, f"workers {pids - answered} never answered"
            answered.update(pool.map(lambda _: stateless_whoami(server.url), range(16)))


def start_cluster(
    start: StartServer, backend_url: str, *, workers: int = 4, worker_class: str = "gthread"
) -> GunicornServer:
    """A gunicorn master on ``backend_url`` whose workers are all warm."""
    server = start(APP, workers=workers, worker_class=worker_class, env={"FLASK_MCP_BACKEND": backend_url})
    assert f"Using worker: {worker_class}" in server.output()
    warm_up(server, workers)
    return server


@pytest.fixture(scope="module", params=CLUSTERS, ids=["-".join(p) for p in CLUSTERS])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GunicornServer]:
    """``gunicorn -w 4`` on one backend and worker class, shared by the tests
    of one parameter (each uses its own session)."""
    backend, worker_class = request.param
    started: list[GunicornServer] = []

    def start(*args: Any, **kwargs: Any) -> GunicornServer:
        server = GunicornServer(*args, **kwargs)
        started.append(server)
        return server

    try:
        yield start_cluster(start, backend_uri(backend, tmp_path_factory.mktemp(backend)), worker_class=worker_class)
    finally:
        for server in started:
            server.stop()


def assert_clean_log(server: GunicornServer) -> None:
    assert "Traceback" not in server.output(), server.output()


def assert_session_gone(response: requests.Response) -> None:
    assert response.status_code == 404, (response.status_code, response.text[:500])
    body = json_body(response, None, LEGACY)
    assert "error" in body and "result" not in body


def assertunavailable(response: requests.Response) -> None:
    """A 503 whose body is a JSON-RPC error, never a traceback or an HTML page."""
    assert response.status_code == 503, (response.status_code, response.text[:500])
    assert "Traceback" not in response.text
    body = json_body(response, None, LEGACY)
    assert "error" in body and "result" not in body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


class LegacyClient:
    """A 2025-11-25 client over plain ``requests`` calls: every request is a
    new connection, so gunicorn hands them to whichever worker is free."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session_id: str | None = None
        self._next_id = 0

    @property
    def headers(self) -> dict[str, str]:
        assert self.session_id is not None
        return {**JSON_HEADERS, "Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": LEGACY}

    def initialize_request(self, url: str | None = None) -> requests.Response:
        return requests.post(
            url or self.url,
            headers=JSON_HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "e2e-sessions", "version": "1.0"},
                },
            },
            timeout=TIMEOUT,
        )

    def initialize(self, url: str | None = None) -> str:
        response = self.initialize_request(url)
        assert response.status_code == 200, (response.status_code, response.text[:500])
        body = json_body(response, "initialize", LEGACY)
        assert body["result"]["protocolVersion"] == LEGACY
        assert body["result"]["serverInfo"]["name"] == "e2e"
        self.session_id = response.headers["Mcp-Session-Id"]
        initialized = requests.post(
            url or self.url,
            headers=self.headers,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            timeout=TIMEOUT,
        )
        assert initialized.status_code == 202, (initialized.status_code, initialized.text[:500])
        return self.session_id

    def call(
        self, tool: str, arguments: dict[str, Any] | None = None, *, url: str | None = None, timeout: float = TIMEOUT
    ) -> requests.Response:
        self._next_id += 1
        return requests.post(
            url or self.url,
            headers=self.headers,
            json={
                "jsonrpc": "2.0",
                "id": self._next_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments or {}},
            },
            timeout=timeout,
        )

    def whoami(self, url: str | None = None) -> int:
        """The pid of the worker that answered (asserting a valid 200)."""
        response = self.call("whoami", url=url)
        assert response.status_code == 200, (response.status_code, response.text[:500])
        return pid_of(response)

    def delete(self, url: str | None = None) -> requests.Response:
        return requests.delete(url or self.url, headers=self.headers, timeout=TIMEOUT)


def pid_of(response: requests.Response) -> int:
    body = json_body(response, "tools/call", LEGACY)
    result = body["result"]
    assert not result.get("isError"), result
    pid = result["structuredContent"]["pid"]
    assert isinstance(pid, int)
    return pid


def call_many(client: LegacyClient, count: int, *, threads: int = 8) -> list[requests.Response]:
    """``count`` calls (whoami and echo alternating), several at a time so
    that they spread over the workers; each is a new connection."""

    def one(i: int) -> requests.Response:
        return client.call("whoami") if i % 2 == 0 else client.call("echo", {"text": f"message {i}"})

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(count)))


def outcome(response: requests.Response | Exception) -> str:
    return type(response).__name__ if isinstance(response, Exception) else str(response.status_code)


# ---------------------------------------------------------------- one master, four workers


def test_every_worker_serves_a_session_that_one_worker_started(cluster: GunicornServer) -> None:
    server = cluster
    workers = worker_pids(server)
    client = LegacyClient(server.url)
    client.initialize()

    responses = call_many(client, 200)

    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: 200}, statuses
    pids = set()
    for i, response in enumerate(responses):
        if i % 2 == 0:
            pids.add(pid_of(response))
        else:
            result = json_body(response, "tools/call", LEGACY)["result"]
            assert result["content"] == [{"type": "text", "text": f"message {i}"}]
    assert pids <= workers
    assert len(pids) >= 2, f"only worker(s) {pids} answered; the test did not spread over workers"
    assert client.delete().status_code == 200
    assert_clean_log(server)


def test_deleting_a_session_through_one_worker_ends_it_for_every_worker(cluster: GunicornServer) -> None:
    server = cluster
    client = LegacyClient(server.url)
    client.initialize()
    # Every worker that will be asked afterwards has seen the session alive
    # (a worker that cached it would keep answering after the DELETE).
    before = call_many(client, 40)
    assert Counter(r.status_code for r in before) == {200: 40}
    seen = {pid_of(r) for r in before[::2]}  # the even calls are whoami
    assert len(seen) >= 2, seen

    ended = client.delete()
    assert ended.status_code == 200, (ended.status_code, ended.text[:500])

    after = call_many(client, 20)
    for response in after:
        assert_session_gone(response)
    assert_session_gone(client.delete())
    assert_clean_log(server)


def test_a_session_outlives_a_worker_killed_with_sigkill(cluster: GunicornServer) -> None:
    server = cluster
    client = LegacyClient(server.url)
    client.initialize()

    def attempt(_: int) -> requests.Response | Exception:
        try:
            return client.call("whoami")
        # The killed worker's own connections break (refused, reset or cut mid-body).
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            return exc

    with ThreadPoolExecutor(8) as pool:
        running = [pool.submit(attempt, i) for i in range(80)]
        first = running[0].result()
        assert not isinstance(first, Exception) and first.status_code == 200, outcome(first)
        victim = pid_of(first)  # a worker that has served this session
        os.kill(victim, signal.SIGKILL)  # mid-run: most requests are still to come
        during = [future.result() for future in running]
    seen = Counter(outcome(r) for r in during)
    assert "404" not in seen, f"the session was lost when a worker died: {seen}"

    # Until gunicorn has replaced the worker a request may fail; afterwards 50 in a row must work.
    deadline = time.monotonic() + 20
    history: list[Counter[str]] = []
    while True:
        with ThreadPoolExecutor(8) as pool:
            batch = list(pool.map(attempt, range(50)))
        counts = Counter(outcome(r) for r in batch)
        history.append(counts)
        assert "404" not in counts, f"the session was lost after a worker died: {history}"
        if counts == {"200": 50}:
            break
        assert time.monotonic() < deadline, f"requests still failing 20 s after the kill: {history}"
        time.sleep(0.2)
    answered = {pid_of(r) for r in batch if isinstance(r, requests.Response)}
    assert victim not in answered
    workers = wait_for_workers(server, 4, excluding=victim)
    assert answered <= workers
    assert client.delete().status_code == 200
    warm_up(server, 4)  # leave the shared cluster whole


# ---------------------------------------------------------------- two masters, one Redis


def test_two_masters_sharing_redis_serve_one_session_and_a_delete_on_either_ends_it(
    tmp_path: Path, gunicorn_server: StartServer
) -> None:
    backend_url = backend_uri("redis", tmp_path)
    a = start_cluster(gunicorn_server, backend_url, workers=2)
    b = start_cluster(gunicorn_server, backend_url, workers=2)
    assert a.port != b.port
    client = LegacyClient(a.url)
    client.initialize()

    served: dict[str, set[int]] = {"a": set(), "b": set()}
    for i in range(20):
        name, server = ("a", a) if i % 2 == 0 else ("b", b)
        served[name].add(client.whoami(server.url))
        echoed = client.call("echo", {"text": f"hop {i}"}, url=server.url)
        assert echoed.status_code == 200, (echoed.status_code, echoed.text[:500])
        assert json_body(echoed, "tools/call", LEGACY)["result"]["content"][0]["text"] == f"hop {i}"
    assert served["a"] <= worker_pids(a)
    assert served["b"] <= worker_pids(b)

    ended = client.delete(b.url)
    assert ended.status_code == 200, (ended.status_code, ended.text[:500])
    assert_session_gone(client.call("whoami", url=a.url))
    assert_session_gone(client.call("whoami", url=b.url))
    assert_clean_log(a)
    assert_clean_log(b)


# ---------------------------------------------------------------- outages


def modern_discover(url: str) -> requests.Response:
    return requests.post(
        url,
        headers={**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"},
        json={
            "jsonrpc": "2.0",
            "id": "discover",
            "method": "server/discover",
            "params": {"_meta": MODERN_META},
        },
        timeout=TIMEOUT,
    )


def assert_discover_works(url: str) -> None:
    response = modern_discover(url)
    assert response.status_code == 200, (response.status_code, response.text[:500])
    body = json_body(response, "server/discover", MODERN)
    assert MODERN in body["result"]["supportedVersions"]


def timed(request: Callable[[], requests.Response]) -> tuple[requests.Response, float]:
    started = time.monotonic()
    response = request()  # each request has a client timeout: a hang fails, it does not block
    return response, time.monotonic() - started


class PrivateRedis:
    """A throw-away redis-server on a free port (no persistence), stopped by its PID."""

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            unavailable("redis-server is not installed (needed to stop and restart a private server)")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if _port_open(self.port):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(5)
        self.process = None


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_redis_outage_is_a_quick_503_for_legacy_requests_and_heals_without_a_restart(
    private_redis: PrivateRedis, gunicorn_server: StartServer
) -> None:
    server = start_cluster(gunicorn_server, private_redis.url, workers=2)
    client = LegacyClient(server.url)
    client.initialize()
    client.whoami()

    private_redis.stop()
    assert not _port_open(private_redis.port)
    timings: list[float] = []
    for _ in range(4):  # several workers and connections, each must answer in time
        response, elapsed = timed(lambda: client.call("whoami"))
        timings.append(elapsed)
        assertunavailable(response)
    new, elapsed = timed(client.initialize_request)
    timings.append(elapsed)
    assertunavailable(new)
    assert "Mcp-Session-Id" not in new.headers
    assert max(timings) < OUTAGE_BUDGET, timings
    assert_discover_works(server.url)  # a 2026-07-28 request never reads the session store

    private_redis.start()  # same port, empty: the old session is gone with the data
    fresh = LegacyClient(server.url)
    fresh.initialize()
    responses = call_many(fresh, 20)
    assert Counter(r.status_code for r in responses) == {200: 20}
    assert_session_gone(client.call("whoami"))
    assert fresh.delete().status_code == 200
    assert_clean_log(server)


def test_a_frozen_redis_is_a_503_within_five_seconds_not_a_hang(
    private_redis: PrivateRedis, gunicorn_server: StartServer
) -> None:
    """A Redis whose socket accepts but never answers (SIGSTOP): only the I/O
    timeouts of the backend stand between the client and a hung request.
    Several requests at once, as in a real outage: some land on a thread whose
    Redis connection must be (re)opened, not only on a connected one."""
    server = start_cluster(gunicorn_server, private_redis.url, workers=2)
    client = LegacyClient(server.url)
    client.initialize()
    assert private_redis.process is not None
    os.kill(private_redis.process.pid, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: timed(lambda: client.call("whoami")), range(8)))
        for response, _ in answers:
            assertunavailable(response)
        timings = sorted(round(elapsed, 2) for _, elapsed in answers)
        assert timings[-1] < OUTAGE_BUDGET, f"503 after {timings} s"
        # initialize's write goes out at once; its reply is awaited only when
        # gunicorn asks for the first bytes (held_response.py): still a 503, in time.
        new, elapsed = timed(client.initialize_request)
        assertunavailable(new)
        assert "Mcp-Session-Id" not in new.headers
        assert elapsed < OUTAGE_BUDGET, elapsed
        assert_discover_works(server.url)
    finally:
        os.kill(private_redis.process.pid, signal.SIGCONT)
    client.whoami()  # the same session, as soon as Redis answers again
    assert client.delete().status_code == 200
    assert_clean_log(server)


def test_sqlite_in_an_unwritable_folder_is_a_503_until_the_folder_is_writable_again(
    tmp_path: Path, gunicorn_server: StartServer
) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    database = folder / "sessions.sqlite3"
    server = start_cluster(gunicorn_server, f"sqlite:///{database}", workers=2)
    client = LegacyClient(server.url)

    with read_only(folder):  # the file cannot even be created
        timings = []
        for _ in range(3):
            response, elapsed = timed(client.initialize_request)
            timings.append(elapsed)
            assertunavailable(response)
            assert "Mcp-Session-Id" not in response.headers
        assert max(timings) < OUTAGE_BUDGET, timings
        assert_discover_works(server.url)
    assert not database.exists()

    client.initialize()  # writable again: no restart needed
    client.whoami()

    # The database frozen with its folder and its WAL files (workers keep their
    # connections open, so a writable WAL alone would keep sessions working).
    frozen = [p for p in (database, Path(f"{database}-wal"), Path(f"{database}-shm")) if p.exists()]
    with read_only(*frozen, folder):
        # Reading a session needs no write (its idle timer is refreshed only
        # when stale), so workers with an open connection may still serve it.
        response, elapsed = timed(lambda: client.call("whoami"))
        if response.status_code != 200:
            assertunavailable(response)
        response, elapsed2 = timed(client.initialize_request)
        assertunavailable(response)
        assert max(elapsed, elapsed2) < OUTAGE_BUDGET, (elapsed, elapsed2)
        assert_discover_works(server.url)

    # Recovery needs no restart: workers reconnect after the fault, so within a
    # few seconds every call succeeds again.
    deadline = time.monotonic() + 10
    while Counter(r.status_code for r in call_many(client, 10)) != {200: 10}:
        assert time.monotonic() < deadline, "SQLite did not recover within 10 s of the fix"
    assert client.delete().status_code == 200
    assert_clean_log(server)
