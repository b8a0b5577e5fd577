"""``flask mcp check``, run with click's runner against real backends
(SQLite files, the Redis server on 127.0.0.1:6379 under keys of each test's
own, a cachelib cache) and a real authorization server on loopback
(tests/auth_servers.py: JWKS and introspection)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import redis
from auth_servers import AuthServer
from cli_app import auth_app, create_app, redis_test_backend, runner_for
from conftest import REDIS_URL, ROOT, free_port
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.backends.contracts import Backend


@pytest.fixture
def redis_backend() -> Iterator[tuple[Backend, redis.Redis, str]]:
    with redis_test_backend() as found:
        yield found


def _findings(result: Any) -> dict[str, list[tuple[str, str]]]:
    report = json.loads(result.stdout)
    found: dict[str, list[tuple[str, str]]] = {}
    for finding in report["findings"]:
        found.setdefault(finding["topic"], []).append((finding["status"], finding["detail"]))
    return found


def test_check_passes_on_a_sqlite_backend_and_says_what_it_did(tmp_path: Path) -> None:
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", SECRET_KEY="s")
    result = runner_for(app)("check")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "ok    configuration   MCP_* settings valid: endpoint /mcp, server cli-test 2.0.0"
    assert any(line.startswith(f"ok    backend         sqlite:///{tmp_path}/mcp.sqlite3 reachable") for line in lines)
    assert any(line.startswith("ok    sessions        probe session written, read back and deleted") for line in lines)
    assert any(line.startswith("ok    tasks           probe task written and read back") for line in lines)
    assert any(line.startswith("ok    message bus     probe message published and received") for line in lines)
    assert "skip  authentication  MCP_AUTH is off" in lines
    assert "ok    endpoint        /mcp answered server/discover and tools/list (10 tools)" in lines
    assert lines[-1] == "All checks passed."
    # The probe session was deleted again.
    counted = json.loads(runner_for(app)("sessions", "--json").stdout)
    assert counted["sessions"]["live"] == 0
    assert counted["tasks"]["live"] == 1  # the probe task, until it expires


def test_check_fails_when_the_backend_is_unreachable(tmp_path: Path) -> None:
    app = create_app(MCP_BACKEND=f"redis://127.0.0.1:{free_port()}/0")
    result = runner_for(app)("check")
    assert result.exit_code == 1
    assert "FAIL  backend         redis://127.0.0.1:" in result.stdout
    assert "is unreachable" in result.stdout
    assert "1 check failed." in result.stderr


def test_check_fails_when_the_sqlite_file_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the database's folder should be")
    app = create_app(MCP_BACKEND=f"sqlite:///{blocker}/mcp.sqlite3")
    result = runner_for(app)("check", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["ok"] is False
    [(status, detail)] = _findings(result)["backend"]
    assert status == "FAIL" and "is unreachable" in detail


def test_check_probes_a_real_redis_backend(redis_backend: tuple[Backend, redis.Redis, str]) -> None:
    backend, client, prefix = redis_backend
    result = runner_for(create_app(MCP_BACKEND=backend, SECRET_KEY="s"))("check", "--json")
    assert result.exit_code == 0, result.output
    found = _findings(result)
    assert [status for status, _ in found["sessions"]] == ["ok"]
    assert [status for status, _ in found["tasks"]] == ["ok"]
    assert [status for status, _ in found["message bus"]] == ["ok"]
    # The probe task is in Redis, under this backend's prefix, expiring in ten seconds.
    [task_key] = client.scan_iter(match=prefix + "task:*")
    assert 0 < client.pttl(task_key) <= 10_000
    assert list(client.scan_iter(match=prefix + "session:*")) == []


def test_check_on_a_cachelib_backend_says_what_it_lacks(tmp_path: Path) -> None:
    from cachelib import FileSystemCache

    app = create_app(MCP_BACKEND=FileSystemCache(str(tmp_path / "cache")), SECRET_KEY="s")
    result = runner_for(app)("check", "--json")
    assert result.exit_code == 0, result.output
    found = _findings(result)
    assert found["sessions"][0][0] == "ok"
    assert found["tasks"] == [("skip", "this backend keeps no tasks: the tasks extension is not offered")]
    assert found["message bus"][0][0] == "warn"
    assert runner_for(app)("check", "--strict").exit_code == 1


def test_check_reaches_the_rate_limit_storage(redis_backend: tuple[Backend, redis.Redis, str]) -> None:
    # (redis_backend: skips, or fails in CI, when the Redis server is not there)
    good = create_app(MCP_RATE_LIMIT="100/minute", MCP_RATE_LIMIT_STORAGE=REDIS_URL, SECRET_KEY="s")
    result = runner_for(good)("check")
    assert result.exit_code == 0, result.output
    assert "ok    rate limits     counters in redis:// reachable" in result.stdout
    down = create_app(MCP_RATE_LIMIT="100/minute", MCP_RATE_LIMIT_STORAGE=f"redis://127.0.0.1:{free_port()}/0",
                      SECRET_KEY="s")
    failed = runner_for(down)("check")
    assert failed.exit_code == 1
    assert "FAIL  rate limits     counters in redis:// unreachable: limits would not be enforced" in failed.stdout


def test_check_warns_about_unknown_settings_and_strict_fails_on_warnings() -> None:
    app = create_app(MCP_SESION_TIMEOUT=5)
    result = runner_for(app)("check")
    assert result.exit_code == 0, result.output
    assert ("warn  configuration   MCP_SESION_TIMEOUT is not a flask-mcp setting and is ignored "
            "(did you mean MCP_SESSION_TIMEOUT?)") in result.stdout
    assert result.stdout.count("MCP_SESION_TIMEOUT") == 1
    assert "SECRET_KEY is not set, and tool 'ask_first', tool 'whoami'" in result.stdout  # they take a Context
    strict = runner_for(app)("check", "--strict")
    assert strict.exit_code == 1
    assert "checks failed." in strict.stderr


def test_check_fails_when_auth_is_on_without_a_verifier() -> None:
    app = create_app(MCP_AUTH=True, SECRET_KEY="s")
    result = runner_for(app)("check", "--json")
    assert result.exit_code == 1
    statuses = dict((status, detail) for status, detail in _findings(result)["authentication"])
    assert "MCP_AUTH is on but no token verifier is set" in statuses["FAIL"]
    assert "MCP_RESOURCE_URL is not set" in statuses["warn"]


def test_check_probes_the_endpoint_with_the_token_given() -> None:
    run = runner_for(auth_app())
    skipped = _findings(run("check", "--json"))["endpoint"]
    assert skipped == [("skip", "MCP_AUTH is on: pass --token (or --as) to probe the endpoint")]
    refused = run("check", "--json", "--token", "bad-token")
    assert refused.exit_code == 1
    assert "HTTP 401" in _findings(refused)["endpoint"][0][1]
    assert _findings(run("check", "--json"))["authentication"] == [
        ("ok", "token verifier FunctionVerifier: not probed (it reaches nothing flask-mcp knows of)")]
    probed = _findings(run("check", "--json", "--token", "good-token"))["endpoint"]
    assert probed[0][0] == "ok"
    assert _findings(run("check", "--json", "--as", "ops"))["endpoint"][0][0] == "ok"


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[AuthServer]:
    server = AuthServer(tmp_path / "as-state.json").start()
    yield server
    server.stop()


def _jwk(kid: str) -> dict[str, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": kid, "use": "sig"}


def _jwt_app(server: AuthServer) -> Flask:
    return create_app(MCP_AUTH=True, MCP_JWKS_URL=server.jwks_url, MCP_RESOURCE_URL="https://cli.example.com/mcp",
                      MCP_AUTH_TIMEOUT=2, SECRET_KEY="s")


def test_check_reads_the_jwks_and_fails_when_it_is_empty_or_unreachable(auth_server: AuthServer) -> None:
    auth_server.set_jwks({"keys": [_jwk("key-1"), _jwk("key-2")]})
    auth_server.reset_stats()
    run = runner_for(_jwt_app(auth_server))
    result = run("check")
    assert result.exit_code == 0, result.output
    assert f"ok    JWKS            {auth_server.jwks_url} reached: 2 usable key(s) (key-1, key-2)" in result.stdout
    assert auth_server.stats()["jwks"] == 1  # it really went there

    auth_server.set_jwks({"keys": []})
    empty = run("check")
    assert empty.exit_code == 1
    assert f"FAIL  JWKS            {auth_server.jwks_url} holds no keys" in empty.stdout

    auth_server.stop()
    down = run("check")
    assert down.exit_code == 1
    assert f"FAIL  JWKS            {auth_server.jwks_url} could not be read" in down.stdout


def test_check_introspects_a_made_up_token(auth_server: AuthServer) -> None:
    auth_server.require_client("cli-client", "right-secret")
    config = {"MCP_AUTH": True, "MCP_INTROSPECTION_URL": auth_server.introspection_url,
              "MCP_INTROSPECTION_CLIENT_ID": "cli-client", "MCP_RESOURCE_URL": "https://cli.example.com/mcp",
              "SECRET_KEY": "s"}
    auth_server.reset_stats()
    good = runner_for(create_app(MCP_INTROSPECTION_CLIENT_SECRET="right-secret", **config))("check")
    assert good.exit_code == 0, good.output
    assert f"ok    introspection   {auth_server.introspection_url} reached: a made-up token was reported inactive" in (
        good.stdout)
    assert auth_server.stats()["introspect"] == 1

    wrong = runner_for(create_app(MCP_INTROSPECTION_CLIENT_SECRET="wrong-secret", **config))("check")
    assert wrong.exit_code == 1
    assert "FAIL  introspection   introspection endpoint" in wrong.stdout
    assert "answered HTTP 401" in wrong.stdout




# ---------------------------------------------------------------------- no noise on a correct app


@pytest.fixture
def no_mcp_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FLASK_MCP_* variable of the shell running the tests reaches these apps."""
    for name in list(os.environ):
        if name.startswith("FLASK_MCP_"):
            monkeypatch.delenv(name)


def _app_with(tmp_path: Path, takes_context: str | None) -> Flask:
    app = Flask("quiet", instance_path=str(tmp_path))
    mcp = MCP(app)

    @mcp.tool
    def add(a: int, b: int) -> int:
        return a + b

    if takes_context == "tool":
        @mcp.tool
        def confirm(ctx: Context) -> str:
            return str(ctx.elicit("Sure?", {"type": "object", "properties": {}}))
    elif takes_context == "prompt":
        @mcp.prompt
        def greet(name: str, ctx: Context) -> str:
            return f"Hello {name}"
    return app


@pytest.mark.usefixtures("no_mcp_variables")
def test_secret_key_is_asked_for_only_when_something_may_ask_the_client(tmp_path: Path) -> None:
    """Flask asks for no SECRET_KEY until a session needs one; flask-mcp needs it only to
    seal requestState, i.e. when a tool or prompt that takes a Context asks the client."""
    quiet = runner_for(_app_with(tmp_path / "a", None))("check", "--strict")
    assert quiet.exit_code == 0, quiet.output
    assert "SECRET_KEY" not in quiet.output
    for kind, name in (("tool", "confirm"), ("prompt", "greet")):
        asking = runner_for(_app_with(tmp_path / kind, kind))("check", "--json")
        [(status, detail)] = [f for f in _findings(asking)["configuration"] if "SECRET_KEY" in f[1]]
        assert status == "warn" and f"SECRET_KEY is not set, and {kind} {name!r} take a Context" in detail


def _flask_check(app: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``flask --app APP mcp check --strict`` in a child process, as a deploy pipeline runs it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "flask", "--app", app, "mcp", "check", "--strict"],
                          cwd=cwd, env={**environ, **env}, capture_output=True, text=True, timeout=120)


def test_check_strict_passes_on_the_oauth_example(tmp_path: Path) -> None:
    pytest.importorskip("authlib")
    done = _flask_check("example.oauth_app", ROOT,
                        FLASK_MCP_BACKEND=f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
                        FLASK_MCP_OAUTH_STORE=f"sqlite:///{tmp_path / 'oauth.sqlite3'}",
                        # what a deployment sets (or ProxyFix): the URL clients use, for the metadata
                        FLASK_MCP_RESOURCE_URL="https://members.example.com/mcp")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warn" not in done.stdout and "All checks passed." in done.stdout
    assert "ok    authentication  token verifier OAuthTokenVerifier" in done.stdout


def test_check_strict_passes_on_the_readme_app(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "calculator.py").write_text(first_block)
    done = _flask_check("calculator", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warn" not in done.stdout and "All checks passed." in done.stdout
    assert "server calculator 1.0.0" in done.stdout


@pytest.mark.usefixtures("no_mcp_variables")
def test_check_reports_what_init_app_warned_it_ignores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same findings as init_app's warnings, read before init_app filled app.config in."""
    monkeypatch.setenv("FLASK_MCP_BACKEND", "memory://")  # a setting, never loaded
    monkeypatch.setenv("FLASK_MCP_PAGESIZE", "20")  # no setting at all
    app = _app_with(tmp_path, None)
    found = [detail for status, detail in _findings(runner_for(app)("check", "--json"))["configuration"]
             if status == "warn"]
    assert found == [
        "FLASK_MCP_BACKEND is set in the environment, but app.config has no such key, so flask-mcp ignores it. "
        "Flask loads prefixed variables only on request: call app.config.from_prefixed_env() before MCP(app) "
        "(or mcp.init_app(app)).",
        "FLASK_MCP_PAGESIZE is set in the environment, but MCP_PAGESIZE is not a flask-mcp setting "
        "(did you mean FLASK_MCP_PAGE_SIZE?)",
    ]


# ---------------------------------------------------------------------- the Celery task queue
# (with real workers: tests/e2e/test_e2e_celery_ops.py)


def celery_app_for(app: Flask, broker_url: str) -> Any:
    """A Celery app on ``broker_url`` kept where Flask's pattern keeps it (not the process's default app)."""
    from celery import Celery

    celery = Celery(app.name, broker=broker_url, set_as_current=False)
    app.extensions["celery"] = celery
    return celery


def test_check_says_nothing_of_celery_with_the_thread_runner(tmp_path: Path) -> None:
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", SECRET_KEY="s")
    celery_app_for(app, f"redis://127.0.0.1:{free_port()}/0")  # never asked: the tasks run in threads
    result = runner_for(app)("check", "--json")
    assert result.exit_code == 0, result.output
    assert "task queue" not in _findings(result)


def test_check_fails_when_the_app_keeps_no_celery_app(tmp_path: Path) -> None:
    pytest.importorskip("celery")
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", SECRET_KEY="s", MCP_TASK_RUNNER="celery")
    result = runner_for(app)("check", "--json")
    assert result.exit_code == 1
    [(status, detail)] = _findings(result)["task queue"]
    assert status == "FAIL" and 'app.extensions["celery"] holds no Celery app' in detail


def test_check_fails_at_once_when_the_celery_broker_refuses(tmp_path: Path) -> None:
    pytest.importorskip("celery")
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", SECRET_KEY="s", MCP_TASK_RUNNER="celery")
    port = free_port()  # nothing listens there: the connection is refused
    celery_app_for(app, f"redis://:hunter2@127.0.0.1:{port}/0")
    started = time.monotonic()
    result = runner_for(app)("check")
    assert time.monotonic() - started < 10  # one attempt, no retry loop
    assert result.exit_code == 1
    line = next(line for line in result.stdout.splitlines() if "task queue" in line)
    assert line.startswith(f"FAIL  task queue      the Celery broker redis://:***@127.0.0.1:{port}/0 is unreachable: ")
    assert "Connection refused" in line and line.endswith("(every task tool call would get 503)")
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_check_warns_when_no_celery_worker_answers_and_fails_in_strict(tmp_path: Path) -> None:
    pytest.importorskip("celery")
    from redis_server import start_redis_server, stop_redis_server

    port = free_port()
    server = start_redis_server(port)  # a broker of our own: no worker of another test answers
    try:
        app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", SECRET_KEY="s", MCP_TASK_RUNNER="celery")
        celery_app_for(app, f"redis://127.0.0.1:{port}/0")
        result = runner_for(app)("check", "--celery-timeout", "0.3")
        assert result.exit_code == 0, result.output
        lines = [line for line in result.stdout.splitlines() if "task queue" in line]
        assert lines[0].startswith(f"ok    task queue      Celery broker redis://127.0.0.1:{port}/0 reachable (")
        assert lines[1:] == ["warn  task queue      no Celery worker answered a ping within 0.3 s: task tool calls "
                             "would wait in the queue until one starts (celery -A your_module worker)"]
        strict = runner_for(app)("check", "--strict", "--celery-timeout", "0.3")
        assert strict.exit_code == 1 and "1 check failed." in strict.stderr
    finally:
        stop_redis_server(server)
