"""Two hosts, one Redis: two gunicorn masters bound to 127.0.0.2 and 127.0.0.3
(two gthread workers each) share a Redis this module starts on free ports. A
session made on one host is served on the other; DELETE on either is 404
everywhere; an elicitation is answered, a stream resumed and a call
cancelled through the host not running the call; tasks are polled and
cancelled across hosts; a tool's rate limit is counted across hosts; after
a Redis crash losing its data every lost session answers 404, never a 5xx,
and the client starts a new one; after a crash of a Redis with an append-only
file (``appendfsync always``) every session is still served. Each runs on
every topology (the ``hosts`` fixture's): one redis-server, Sentinel (a
primary, a replica, a sentinel; ``redis+sentinel://``) and a three-primary
Redis Cluster (``redis+cluster://``). Loopback only; every process stopped here
was started here, by its PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import JSON_HEADERS, ROOT, free_port, validate_message
from mariadb_server import MariaDBServer
from postgres_server import PostgresCluster
from redis_server import DataNode, RedisClusterNodes, SentinelDeployment
from test_e2e_streaming import (
    LEGACY,
    MODERN,
    MODERN_META,
    SCENARIO,
    TIMEOUT,
    LegacySession,
    json_body,
    sse_messages,
    validate_as,
)

pytestmark = pytest.mark.e2e

APP = "tests.multihost_app:app"
TASKS = "io.modelcontextprotocol/tasks"
TASK_META = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
#: How long another host may keep serving its copy of a deleted session (docs/redis.md).
PROPAGATION = 1.0


@dataclass
class Host:
    """A gunicorn master bound to one loopback address, stopped by its PID."""

    name: str
    address: str
    process: subprocess.Popen[bytes]
    log_path: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/mcp"

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(5)


def start_host(name: str, address: str, redis_url: str, folder: Path) -> Host:
    port = free_port()
    log_path = folder / f"{name}.log"
    env = {
        **os.environ,
        "FLASK_MCP_BACKEND": redis_url,
        "FLASK_MCP_CLIENT_TIMEOUT": "20",
        "FLASK_MCP_TASK_POLL_INTERVAL_MS": "100",
        "MULTIHOST_NAME": name,
        "MULTIHOST_MARKERS": str(folder),
    }
    command = [sys.executable, "-m", "gunicorn", APP, "--bind", f"{address}:{port}", "--workers", "2",
               "--worker-class", "gthread", "--threads", "8", "--timeout", "60", "--graceful-timeout", "5"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    host = Host(name, address, process, log_path, port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"gunicorn on {address} exited:\n{host.output()}"
        try:
            if requests.get(host.url + "/health", timeout=1).status_code == 200:
                return host
        except requests.RequestException:
            pass
        time.sleep(0.1)
    host.stop()
    raise AssertionError(f"gunicorn on {address} never became ready:\n{host.output()}")


@dataclass
class Deployment:
    #: url(), crash(lose_data=...), recover(), stop(): tests/redis_server.py.
    redis: DataNode | SentinelDeployment | ClusterSide | PostgresCluster | MariaDBServer
    a: Host
    b: Host
    folder: Path


class ClusterSide:
    """A persistent three-primary Redis Cluster, driven as the other topologies are."""

    def __init__(self) -> None:
        self.nodes = RedisClusterNodes(persistent=True)

    def start(self) -> None:
        self.nodes.start()

    def url(self) -> str:
        return self.nodes.url

    def crash(self, *, lose_data: bool) -> None:
        self.nodes.crash(lose_data=lose_data)

    def recover(self) -> None:
        self.nodes.recover()

    def stop(self) -> None:
        self.nodes.remove()


def start_redis(
    topology: str, folder: Path
) -> DataNode | SentinelDeployment | ClusterSide | PostgresCluster | MariaDBServer:
    """The Redis side, persistent (``appendfsync always``): a crash loses
    nothing unless the test deletes its files. ``pgsql``: a PostgreSQL
    cluster of the module's own in Redis's place (the SQL backend, its
    LISTEN/NOTIFY bus): a crash of its processes loses nothing either.
    ``mariadb``: a MariaDB server of the module's own (the SQL backend
    through PyMySQL, its polling bus); a crash of its process loses no commit."""
    redis_side: DataNode | SentinelDeployment | ClusterSide | PostgresCluster | MariaDBServer
    if topology == "pgsql":
        return PostgresCluster().start()
    if topology == "mariadb":
        return MariaDBServer().start()
    if topology == "single":
        redis_side = DataNode(folder, persistent=True)
    elif topology == "sentinel":
        redis_side = SentinelDeployment(folder, persistent=True)
    else:
        redis_side = ClusterSide()
    redis_side.start()
    return redis_side


#: One redis-server; Sentinel (a primary, a replica, a sentinel); a three-primary Cluster;
#: PostgreSQL (``postgresql://``, tests/postgres_server.py); MariaDB (``mysql+pymysql://``,
#: tests/mariadb_server.py).
TOPOLOGIES = ["single", "sentinel", "cluster", "pgsql", "mariadb"]


@pytest.fixture(scope="module", params=TOPOLOGIES)
def hosts(request: pytest.FixtureRequest) -> Iterator[Deployment]:
    folder = Path(tempfile.mkdtemp(prefix="flask-mcp-multihost-"))
    redis_server = start_redis(request.param, folder)
    started: list[Host] = []
    try:
        started.append(start_host("a", "127.0.0.2", redis_server.url(), folder))
        started.append(start_host("b", "127.0.0.3", redis_server.url(), folder))
        yield Deployment(redis_server, started[0], started[1], folder)
    finally:
        for host in started:
            host.stop()
        redis_server.stop()


def assert_clean(deployment: Deployment) -> None:
    for host in (deployment.a, deployment.b):
        assert "Traceback" not in host.output(), host.output()


def whoami(session: LegacySession, url: str) -> str:
    response = requests.post(url, headers=session.headers, timeout=TIMEOUT, json={
        "jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}})
    assert response.status_code == 200, (response.status_code, response.text[:500])
    host: str = json_body(response, "tools/call", LEGACY)["result"]["structuredContent"]["host"]
    return host


def status_of_call(session: LegacySession, url: str) -> int:
    response = requests.post(url, headers=session.headers, timeout=TIMEOUT, json={
        "jsonrpc": "2.0", "id": "probe", "method": "tools/call", "params": {"name": "whoami", "arguments": {}}})
    if response.status_code == 404:
        body = json_body(response, None, LEGACY)
        assert "error" in body and "result" not in body
    return response.status_code


def eventually_404(session: LegacySession, url: str) -> float:
    """Seconds until ``url`` answered the session with 404 (never a 5xx meanwhile)."""
    start = time.monotonic()
    while (status := status_of_call(session, url)) != 404:
        assert status == 200, status
        assert time.monotonic() - start < PROPAGATION, "the other host kept serving a deleted session"
        time.sleep(0.005)
    return time.monotonic() - start


def test_a_session_made_on_one_host_is_served_on_the_other_and_a_delete_on_either_ends_it(hosts: Deployment) -> None:
    for deleter, other in ((hosts.b, hosts.a), (hosts.a, hosts.b)):
        session = LegacySession(hosts.a.url, {})
        served = [whoami(session, (hosts.a if i % 2 == 0 else hosts.b).url) for i in range(12)]
        assert served == ["a", "b"] * 6
        ended = requests.delete(deleter.url, headers=session.headers, timeout=TIMEOUT)
        assert ended.status_code == 200, (ended.status_code, ended.text[:500])
        # At once on the deleting host (both of its workers: four tries)...
        assert [status_of_call(session, deleter.url) for _ in range(4)] == [404] * 4
        # ...and on the other one within the propagation window (docs/redis.md).
        eventually_404(session, other.url)
        assert [status_of_call(session, other.url) for _ in range(4)] == [404] * 4
    assert_clean(hosts)


def test_an_elicitation_asked_on_one_host_is_answered_through_the_other(hosts: Deployment) -> None:
    session = LegacySession(hosts.a.url, {"elicitation": {}})
    until = time.monotonic() + SCENARIO
    stream = session.open("tools/call", {"name": "ask_name", "arguments": {}}, "ask-1")
    try:
        question = stream.next(until, "elicitation/create")
        assert question is not None
        validate_as(LEGACY, "ElicitRequest", question)
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        posted = requests.post(hosts.b.url, headers=session.headers, json=answer, timeout=TIMEOUT)
        assert posted.status_code == 202, (posted.status_code, posted.text[:500])
        result = stream.next(until, "result")
        assert result is not None
        validate_message(LEGACY, "tools/call", result)
        assert result["result"]["structuredContent"] == {"greeting": "Hello, Ada!", "host": "a"}
    finally:
        stream.close()
    session.end()
    assert_clean(hosts)


def test_a_stream_begun_on_one_host_is_resumed_on_the_other(hosts: Deployment) -> None:
    n = 15
    session = LegacySession(hosts.a.url, {})
    stream = session.open("tools/call", {"name": "relay", "arguments": {"n": n}, "_meta": {"progressToken": "r"}},
                          "relay-1")
    try:
        first = stream.rest(time.monotonic() + SCENARIO)  # the server lets this connection go
    finally:
        stream.close()
    assert [m["params"]["progress"] for m in first] == list(range(1, n // 3 + 1)), first
    assert stream.last_event_id is not None
    resumed = requests.get(hosts.b.url, timeout=SCENARIO, headers={
        "Accept": "text/event-stream", "Last-Event-ID": stream.last_event_id, "Mcp-Session-Id": session.id,
        "MCP-Protocol-Version": LEGACY})
    assert resumed.status_code == 200, (resumed.status_code, resumed.text[:300])
    *notes, (_, final) = sse_messages(resumed.content)
    assert [m["params"]["progress"] for _, m in notes] == list(range(n // 3 + 1, n + 1))
    validate_message(LEGACY, "tools/call", final)
    assert final["id"] == "relay-1" and final["result"]["structuredContent"] == {"counted": n, "host": "a"}
    session.end()
    assert_clean(hosts)


def test_a_call_running_on_one_host_is_cancelled_from_the_other(hosts: Deployment) -> None:
    session = LegacySession(hosts.a.url, {})
    request_id = f"slow-{uuid.uuid4().hex}"
    until = time.monotonic() + SCENARIO
    stream = session.open("tools/call", {"name": "slow", "arguments": {}, "_meta": {"progressToken": request_id}},
                          request_id)
    try:
        first = stream.next(until, "first progress report")
        assert first is not None and first["params"]["message"] == "host a"
        cancelled = requests.post(hosts.b.url, headers=session.headers, timeout=TIMEOUT, json={
            "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})
        assert cancelled.status_code == 202, (cancelled.status_code, cancelled.text[:500])
        rest = stream.rest(until)  # ends long before the call's 10 s
    finally:
        stream.close()
    assert all("id" not in message for message in rest), "a cancelled call must get no result"
    marker = hosts.folder / f"{request_id}.json"
    while not marker.exists():
        assert time.monotonic() < until, "the call never stopped"
        time.sleep(0.05)
    assert json.loads(marker.read_text())["outcome"] == "RequestCancelled"
    session.end()
    assert_clean(hosts)


def task_request(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, "Mcp-Name": str(name)}
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": {**params, "_meta": TASK_META}}
    response = requests.post(url, headers=headers, json=body, timeout=TIMEOUT)
    assert response.status_code == 200, (response.status_code, response.text[:500])
    message = json_body(response, method, MODERN)
    assert "result" in message, message
    result: dict[str, Any] = message["result"]
    return result


def wait_for_task(url: str, task_id: str, statuses: set[str], *, message: str | None = None) -> dict[str, Any]:
    until = time.monotonic() + SCENARIO
    while True:
        task = task_request(url, "tasks/get", {"taskId": task_id})
        if task["status"] in statuses and (message is None or task.get("statusMessage") == message):
            return task
        assert time.monotonic() < until, f"task {task_id} stayed {task['status']}"
        time.sleep(0.05)


def test_tasks_are_polled_and_cancelled_across_hosts(hosts: Deployment) -> None:
    short = task_request(hosts.a.url, "tools/call", {"name": "tasked", "arguments": {"seconds": 0.2}})
    assert short["resultType"] == "task"
    done = wait_for_task(hosts.b.url, short["taskId"], {"completed", "failed", "cancelled"})
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {"host": "a", "task": short["taskId"]}

    long = task_request(hosts.b.url, "tools/call", {"name": "tasked", "arguments": {"seconds": 60}})
    wait_for_task(hosts.a.url, long["taskId"], {"working"}, message="running on b")
    ack = task_request(hosts.a.url, "tasks/cancel", {"taskId": long["taskId"]})
    assert ack["resultType"] == "complete"
    ended = wait_for_task(hosts.b.url, long["taskId"], {"completed", "failed", "cancelled"})
    assert ended["status"] == "cancelled", ended
    assert_clean(hosts)


def test_a_tool_rate_limit_is_counted_across_hosts(hosts: Deployment) -> None:
    session = LegacySession(hosts.a.url, {})

    def call(url: str) -> requests.Response:
        return requests.post(url, headers=session.headers, timeout=TIMEOUT, json={
            "jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "tools/call",
            "params": {"name": "limited", "arguments": {}}})

    statuses = [call((hosts.a if i % 2 == 0 else hosts.b).url).status_code for i in range(4)]
    assert statuses == [200, 200, 200, 200]
    for host in (hosts.a, hosts.b):
        refused = call(host.url)
        assert refused.status_code == 429, (refused.status_code, refused.text[:500])
        body = refused.json()
        validate_message(LEGACY, None, body)
        assert "error" in body
    session.end()
    assert_clean(hosts)


def test_after_a_redis_restart_lost_sessions_answer_404_and_the_client_starts_again(hosts: Deployment) -> None:
    """No persistence (its files deleted): the restart loses every session. Once Redis is back,
    both hosts answer the old session with 404 (never a 5xx, never a copy
    kept from before) and a new session works across hosts."""
    sessions = [LegacySession(hosts.a.url, {}), LegacySession(hosts.b.url, {})]
    for session in sessions:
        assert {whoami(session, hosts.a.url), whoami(session, hosts.b.url)} == {"a", "b"}
    hosts.redis.crash(lose_data=True)
    hosts.redis.recover()  # the same ports, empty
    for session in sessions:
        for host in (hosts.a, hosts.b, hosts.a, hosts.b):
            assert status_of_call(session, host.url) == 404
    fresh = LegacySession(hosts.b.url, {})
    assert [whoami(fresh, host.url) for host in (hosts.a, hosts.b)] == ["a", "b"]
    fresh.end()
    assert_clean(hosts)


def test_after_a_crash_of_a_redis_with_an_append_only_file_every_session_is_still_served(hosts: Deployment) -> None:
    """``appendonly yes``, ``appendfsync always``: while Redis is down both
    hosts answer 503 (the client retries), and once it is back every session
    made before is served on both hosts; never another 5xx."""
    sessions = [LegacySession(hosts.a.url, {}), LegacySession(hosts.b.url, {})]
    for session in sessions:
        assert {whoami(session, hosts.a.url), whoami(session, hosts.b.url)} == {"a", "b"}
    hosts.redis.crash(lose_data=False)
    time.sleep(1.2)  # past the session cache's listener check: no copy is served once Redis is gone
    down = {status_of_call(session, host.url) for session in sessions for host in (hosts.a, hosts.b)}
    assert down == {503}
    hosts.redis.recover()
    deadline = time.monotonic() + 15
    while (statuses := {status_of_call(s, h.url) for s in sessions for h in (hosts.a, hosts.b)}) != {200}:
        assert statuses <= {200, 503}, statuses
        assert time.monotonic() < deadline, "sessions not served again after Redis came back"
        time.sleep(0.1)
    for session in sessions:
        assert [whoami(session, host.url) for host in (hosts.a, hosts.b)] == ["a", "b"]
        session.end()
    assert_clean(hosts)
