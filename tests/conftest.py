"""Shared fixtures: schema validation of every server message, MCP test
clients for both eras, and real gunicorn servers on loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import jsonschema
import pytest
import redis
import requests
from flask import Flask

from flask_mcp.backends.redis import client_from_url
from flask_mcp.testing import MCPTestClient

ROOT = Path(__file__).resolve().parents[1]
#: The official JSON schema of each revision (vendored: tests/spec/README.md).
SPEC = ROOT / "tests" / "spec"

ALL_VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26")
LEGACY_VERSIONS = ALL_VERSIONS[1:]
#: The Redis the tests share (each test uses keys or channels of its own).
REDIS_URL = os.environ.get("MCP_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
#: What every MCP client sends on a POST.
JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

# Which definition a result of each method must satisfy.
RESULT_DEFINITIONS = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "server/discover": "DiscoverResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
}

NOTIFICATION_DEFINITIONS = {
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
}


@cache
def _schema(version: str) -> dict[str, Any]:
    return json.loads((SPEC / version / "schema.json").read_text())  # type: ignore[no-any-return]


@cache
def _validator(version: str, definition: str) -> jsonschema.protocols.Validator:
    schema = _schema(version)
    where = "$defs" if "$defs" in schema else "definitions"
    if definition not in schema[where]:
        raise KeyError(f"{definition} is not defined in the {version} schema")
    root = {**schema, "$ref": f"#/{where}/{definition}"}
    cls = jsonschema.validators.validator_for(schema)
    return cls(root)


def validate_message(version: str, method: str | None, message: dict[str, Any]) -> None:
    """Validate one server message against ``tests/spec/<version>/schema.json``."""
    if "error" in message:
        name = "JSONRPCError" if version in ("2025-03-26", "2025-06-18") else "JSONRPCErrorResponse"
        if "id" not in message and version in ("2025-03-26", "2025-06-18"):
            # Those schemas require an id, yet an unreadable request has none
            # (spec digest section 0): check the rest of the shape.
            message = {**message, "id": 0}
        _validator(version, name).validate(message)
        return
    if "method" in message:
        _validator(version, "JSONRPCNotification").validate(message)
        definition = NOTIFICATION_DEFINITIONS.get(message["method"])
        if definition is not None:
            _validator(version, definition).validate(message)
        return
    envelope = "JSONRPCResponse" if version in ("2025-03-26", "2025-06-18") else "JSONRPCResultResponse"
    _validator(version, envelope).validate(message)
    definition = RESULT_DEFINITIONS.get(method or "")
    if message["result"].get("resultType") == "input_required":
        definition = "InputRequiredResult"
    if definition is not None:
        _validator(version, definition).validate(message["result"])


def connect(make_client: Callable[..., MCPTestClient], app: Flask, version: str, **kwargs: Any) -> MCPTestClient:
    """A validating test client of ``version``; legacy ones are initialized."""
    client = make_client(app, version, **kwargs)
    if version != "2026-07-28":
        client.initialize()
    return client


@pytest.fixture
def no_shell_flask_mcp_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``FLASK_MCP_*`` variable of the shell running the suite reaches this test:
    one that expects a start without a single warning must not meet the warning a
    stray variable (a developer's, or CI's) rightly gets."""
    for key in [key for key in os.environ if key.startswith("FLASK_MCP_")]:
        monkeypatch.delenv(key)


@pytest.fixture(autouse=True)
def instance_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary instance folder for every Flask app a test builds without
    naming one, so the default session store (``sqlite://``, a file in the
    instance folder) never lands in the checkout and no test sees another's
    sessions. ``auto_find_instance_path`` is the method Flask documents for
    choosing that folder."""
    folder = tmp_path_factory.mktemp("instance")
    monkeypatch.setattr(Flask, "auto_find_instance_path", lambda self: str(folder))
    return folder


@pytest.fixture
def app(instance_folder: Path) -> Flask:
    """A bare Flask app in testing mode with a temporary instance folder (a
    module that serves tools on it overrides the fixture, asking for this one:
    ``def app(app: Flask, mcp: MCP)``)."""
    # root_path given: once a test imported tests.celery_setup, "tests" is a namespace
    # package, and Flask cannot find a root path for it (this is what it found before).
    flask_app = Flask("tests", instance_path=str(instance_folder), root_path=os.getcwd())
    flask_app.config["TESTING"] = True
    return flask_app


@pytest.fixture
def validated() -> list[tuple[str, str | None, dict[str, Any]]]:
    """Every message the test clients received (each already validated)."""
    return []


@pytest.fixture
def make_client(validated: list[Any]) -> Callable[..., MCPTestClient]:
    """``make_client(app, "2025-11-25")``: a test client whose every received
    message is validated against its revision's schema."""

    def make(app: Flask, protocol_version: str = "2026-07-28", **kwargs: Any) -> MCPTestClient:
        client = MCPTestClient(app, protocol_version=protocol_version, **kwargs)

        def observe(version: str, method: str | None, message: dict[str, Any]) -> None:
            validate_message(version, method, message)
            validated.append((version, method, message))

        client.observers.append(observe)
        return client

    return make


# ---------------------------------------------------------------------- real servers


class FakeClock:
    """A clock a test moves by hand. It starts at the real time, so that a
    child process (on the real clock) agrees with it about idle timeouts."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def worker_pids(server: GunicornServer) -> set[int]:
    """The current workers: the children of the gunicorn master."""
    children: set[int] = set()
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        try:
            children.update(int(pid) for pid in (task / "children").read_text().split())
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return children


class GunicornServer:
    """A gunicorn master we started, stopped by its PID."""

    def __init__(self, app_spec: str, *, workers: int = 1, threads: int = 8, env: dict[str, str] | None = None,
                 extra_args: list[str] | None = None, worker_class: str = "gthread") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"flask-mcp-gunicorn-{self.port}.log"
        cmd = [
            sys.executable, "-m", "gunicorn", app_spec,
            "--bind", f"127.0.0.1:{self.port}",
            "--workers", str(workers),
            "--worker-class", worker_class,
            # gunicorn silently turns a sync worker with threads > 1 into gthread.
            *(["--threads", str(threads)] if worker_class == "gthread" else []),
            "--timeout", "60",
            "--graceful-timeout", "5",
            *(extra_args or []),
        ]
        env = {**os.environ, **(env or {})}
        # Unless the test chose a backend, the default SQLite file goes to a
        # temporary folder, not into the checkout's instance folder.
        self.folder = tempfile.mkdtemp(prefix="flask-mcp-gunicorn-")
        env.setdefault("FLASK_MCP_BACKEND", f"sqlite:///{self.folder}/sessions.sqlite3")
        self.log = self.log_path.open("wb")
        self.process = subprocess.Popen(cmd, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.close()
                raise RuntimeError(f"gunicorn exited early:\n{self.log_path.read_text()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not become ready:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def gunicorn_server() -> Iterator[Callable[..., GunicornServer]]:
    """Start gunicorn servers for this test; each is stopped afterwards."""
    started: list[GunicornServer] = []

    def start(app_spec: str, **kwargs: Any) -> GunicornServer:
        server = GunicornServer(app_spec, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def example_server() -> Iterator[GunicornServer]:
    """The example app under real gunicorn (gthread), shared by a module's tests."""
    server = GunicornServer("example.app:app")
    yield server
    server.stop()


@contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make files and folders unwritable for real: ``chmod`` for a normal user;
    root ignores modes, so for root the immutable attribute (``chattr +i``)."""
    if os.geteuid() != 0:
        modes = {path: path.stat().st_mode for path in paths}
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", *map(str, paths)], capture_output=True).returncode != 0:
        subprocess.run([chattr or "chattr", "-i", *map(str, paths)], capture_output=True)
        pytest.skip("running as root on a file system without chattr +i: cannot make a file read-only")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", *map(str, paths)], check=True)


# ---------------------------------------------------------------- infrastructure


def load_file(name: str, path: Path) -> ModuleType:
    """A file of the repository that is in no package (bench/, example/,
    docs/_ext/, the conformance runner), imported as module ``name``; it stays
    in ``sys.modules``, where its dataclasses look their module up."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def unavailable(reason: str) -> NoReturn:
    """Missing infrastructure is a skip on a laptop and a failure in CI."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def wait_for_health(process: subprocess.Popen[bytes], port: int, log: Path, *, within: float) -> requests.Response:
    """The first answer of ``/mcp/health`` from a server just started as
    ``process`` on ``port``; fails with its ``log`` if it exits or is still
    silent after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        assert process.poll() is None, log.read_text()
        try:
            return requests.get(f"http://127.0.0.1:{port}/mcp/health", timeout=2)
        except requests.RequestException:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)


def backend_uri(backend: str, folder: Path) -> str:
    """``MCP_BACKEND`` for a real server: a fresh SQLite file in ``folder``, or
    the shared Redis (checked reachable first)."""
    if backend == "sqlite":
        return f"sqlite:///{folder / 'sessions.sqlite3'}"  # the folder is absolute: four slashes
    shared_redis().close()  # reachable, or the test skips (fails in CI)
    return REDIS_URL


def shared_redis() -> redis.Redis:
    """A client of the Redis the tests share; unreachable is a skip on a laptop
    and a failure in CI."""
    client = client_from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        client.close()
        unavailable(f"Redis at {REDIS_URL} is unreachable ({exc}); start redis-server or set MCP_TEST_REDIS_URL")
    return client


@pytest.fixture
def redis_port() -> Iterator[int]:
    """The port of a ``redis-server`` of the test's own (no persistence) on
    loopback, stopped after the test: for tests that shut it down, pause it or
    change its settings."""
    from redis_server import start_redis_server, stop_redis_server

    port = free_port()
    process = start_redis_server(port, why="the test starts a redis-server of its own")
    try:
        yield port
    finally:
        stop_redis_server(process)


@pytest.fixture(scope="session")
def sentinel_deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private Sentinel deployment (a primary, a replica, a sentinel) the
    tests that only read and write share; a test that fails over starts its own."""
    from redis_server import SentinelDeployment

    deployment = SentinelDeployment(tmp_path_factory.mktemp("sentinel"))
    deployment.start()
    try:
        yield deployment
    finally:
        deployment.stop()
