"""``flask mcp list|call|check|sessions``, run with click's runner against
real apps and real backends: SQLite files, the Redis server on
127.0.0.1:6379 under keys of each test's own, and a real authorization
server (JWKS, introspection) on loopback (tests/auth_servers.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import jwt
import pytest
import redis
from auth_servers import AuthServer
from cli_app import create_app
from conftest import REDIS_URL, FakeClock, unavailable, validate_message
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask
from flask.testing import FlaskCliRunner

from flask_mcp import MCP
from flask_mcp.auth import Principal
from flask_mcp.backends.base import Backend
from flask_mcp.backends.redis import RedisMessageBus, RedisSessionStore, RedisTaskStore, client_from_url
from flask_mcp.testing import MCPTestClient

Run = Callable[..., Any]
ROOT = Path(__file__).resolve().parents[1]


def runner_for(app: Flask) -> Run:
    runner: FlaskCliRunner = app.test_cli_runner()

    def run(*args: str, input: str | None = None) -> Any:
        return runner.invoke(args=["mcp", *args], input=input)

    return run


@pytest.fixture
def run() -> Run:
    return runner_for(create_app())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------- registration


def test_the_group_is_added_to_every_app_the_extension_initialises_and_acts_on_its_own_app() -> None:
    mcp = MCP()

    @mcp.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    apps = []
    for name in ("first", "second"):
        app = Flask(name)
        app.config.update(TESTING=True, MCP_BACKEND="memory://", MCP_NAME=f"{name}-server")
        mcp.init_app(app)
        apps.append(app)

    for app in apps:
        assert "mcp" in app.cli.commands
        result = runner_for(app)("list")
        assert result.exit_code == 0, result.output
        assert f"({app.name}-server 0.0.0)" in result.stdout
        assert "ping()" in result.stdout
    # One group per app: nothing of one app's command line is shared with the other's.
    assert apps[0].cli.commands["mcp"] is not apps[1].cli.commands["mcp"]


def test_adding_the_group_imports_none_of_the_commands_modules() -> None:
    code = (
        "import sys\n"
        "from flask import Flask\n"
        "from flask_mcp import MCP\n"
        "app = Flask('lazy'); app.config.update(TESTING=True, MCP_BACKEND='memory://'); MCP(app)\n"
        "assert 'mcp' in app.cli.commands\n"
        "print(sorted(m for m in sys.modules if m.startswith('flask_mcp.cli')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['flask_mcp.cli']\n"


def test_an_app_command_named_mcp_is_left_alone() -> None:
    app = Flask("own")
    app.config.update(TESTING=True, MCP_BACKEND="memory://")

    @app.cli.command("mcp")
    def own() -> None:
        click.echo("the app's own mcp command")

    MCP(app)
    result = app.test_cli_runner().invoke(args=["mcp"])
    assert result.stdout == "the app's own mcp command\n"


def test_the_group_lists_its_commands(run: Run) -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("list", "call", "check", "sessions", "preview"):
        assert f"\n  {command} " in result.stdout


# ---------------------------------------------------------------------- list


def test_list_shows_every_feature_on_a_line(run: Run) -> None:
    result = run("list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("CLI test server (cli-test 2.0.0), protocol revisions 2026-07-28, 2025-11-25")
    assert ("  echo(code: string, limit?: integer = 5, ratio?: number|null = null, flag?: boolean = false, "
            "tags?: string[]|null = null, anything?: any = null) -> object  [read-only]") in lines
    assert "      Return the arguments as the tool received them." in lines
    assert "A second line" not in result.stdout
    assert "  count(start?: integer = 0) -> object  [view ui://cli/counter]" in lines
    assert "Tools (10)" in lines
    assert "  cli://notes  text/plain  Notes" in lines
    assert "  ui://cli/counter  text/html;profile=mcp-app  Counter" in lines
    assert "Resource templates (1)" in lines
    assert "  cli://items/{item}  application/json" in lines
    assert "  summarise(text, style?)  Summarise" in lines


def test_list_json_holds_the_definitions_a_2026_client_reads() -> None:
    app = create_app()
    result = runner_for(app)("list", "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    client = MCPTestClient(app)
    assert listed["tools"] == client.list_tools().result["tools"]
    assert listed["resources"] == client.list_resources().result["resources"]
    assert listed["resourceTemplates"] == client.list_resource_templates().result["resourceTemplates"]
    assert listed["prompts"] == client.list_prompts().result["prompts"]
    validate_message("2026-07-28", "server/discover", {"jsonrpc": "2.0", "id": 1, "result": listed["discover"]})
    for tool in listed["tools"]:
        validate_message("2026-07-28", "tools/list", {"jsonrpc": "2.0", "id": 1, "result": {
            "tools": [tool], "ttlMs": 0, "cacheScope": "public", "resultType": "complete"}})
    echo = next(t for t in listed["tools"] if t["name"] == "echo")
    assert echo["inputSchema"]["required"] == ["code"]
    assert echo["outputSchema"]["properties"]["arguments"]["type"] == "object"


def test_list_follows_every_page() -> None:
    app = create_app(MCP_PAGE_SIZE=2)
    listed = json.loads(runner_for(app)("list", "--json").stdout)
    assert len(listed["tools"]) == 10
    assert len(listed["resources"]) == 2


def _auth_app() -> Flask:
    app = create_app(MCP_AUTH=True, MCP_RESOURCE_URL="https://cli.example.com/mcp")

    @app.extensions["mcp"].extension.token_verifier
    def verify(token: str) -> Principal | None:
        return Principal(subject="alice") if token == "good-token" else None

    return app


def test_list_on_an_app_with_auth_sends_the_token_given() -> None:
    run = runner_for(_auth_app())
    refused = run("list")
    assert refused.exit_code == 3
    assert "Error: server/discover: HTTP 401: Authentication required" in refused.stderr
    wrong = run("list", "--token", "bad-token")
    assert wrong.exit_code == 3
    assert "HTTP 401: The access token is not valid." in wrong.stderr
    allowed = run("list", "--token", "good-token")
    assert allowed.exit_code == 0, allowed.output
    assert "Tools (9)" in allowed.stdout  # whoami needs a scope this token does not grant


# ---------------------------------------------------------------------- call


def _structured(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_call_types_each_value_by_the_tools_schema(run: Run) -> None:
    echoed = _structured(run("call", "echo", "code=0123", "limit=3", "ratio=0.5", "flag=true",
                             'tags=["a", "b"]', "anything=null"))
    assert echoed == {"arguments": {"code": "0123", "limit": 3, "ratio": 0.5, "flag": True, "tags": ["a", "b"],
                                    "anything": None}}
    # A string property keeps JSON-looking text as typed; an untyped one keeps what is not JSON.
    echoed = _structured(run("call", "echo", "code=true", "anything=plain words", "ratio=null"))
    assert echoed["arguments"]["code"] == "true"
    assert echoed["arguments"]["anything"] == "plain words"
    assert echoed["arguments"]["ratio"] is None


def test_call_takes_a_json_object_that_pairs_override(run: Run) -> None:
    echoed = _structured(run("call", "echo", "--json", '{"code": "x", "limit": 7, "tags": ["t"]}', "code=y"))
    assert echoed["arguments"] == {"code": "y", "limit": 7, "ratio": None, "flag": False, "tags": ["t"],
                                   "anything": None}
    from_stdin = _structured(run("call", "echo", "--json", "-", input='{"code": "stdin"}'))
    assert from_stdin["arguments"]["code"] == "stdin"


def test_call_prints_text_then_structured_content(run: Run) -> None:
    result = run("call", "mixed")
    assert result.exit_code == 0, result.output
    assert result.stdout == 'a note for the model\n{\n  "answer": 42\n}\n'
    greeted = run("call", "greet", "name=Ann")
    assert greeted.stdout == "Hello, Ann!\n"


def test_call_raw_prints_the_whole_result(run: Run) -> None:
    result = run("call", "mixed", "--raw")
    raw = json.loads(result.stdout)
    assert raw["structuredContent"] == {"answer": 42}
    assert raw["content"] == [{"type": "text", "text": "a note for the model"}]
    validate_message("2026-07-28", "tools/call", {"jsonrpc": "2.0", "id": 1, "result": raw})


def test_an_error_result_is_printed_and_exits_1(run: Run) -> None:
    result = run("call", "fail", "reason=testing")
    assert result.exit_code == 1
    assert result.stdout == "failed on purpose: testing\n"
    assert "Error: the tool 'fail' returned an error result." in result.stderr
    invalid = run("call", "greet", "name=")
    assert invalid.exit_code == 1
    assert "String should have at least 1 character" in invalid.stdout


def test_an_unknown_tool_is_called_all_the_same_and_the_server_says_so(run: Run) -> None:
    unknown = run("call", "nope", "x=1")
    assert unknown.exit_code == 3
    assert ("Error: tools/call nope: error -32602: Unknown tool 'nope': call tools/list for the tools this server "
            "offers.") in unknown.stderr


def test_a_refused_request_exits_3_with_the_servers_message(run: Run) -> None:
    result = run("call", "ask_first")
    assert result.exit_code == 3
    assert "Error: tools/call ask_first: HTTP 400: This request needs the client capability elicitation" in (
        result.stderr)


def test_a_tool_that_must_run_as_a_task_is_run_as_one_and_polled(run: Run) -> None:
    result = run("call", "add_later", "a=1", "b=2")
    assert result.exit_code == 0, result.output
    assert result.stdout == '3\n{\n  "result": 3\n}\n'
    assert re.search(r"^\[task [\w-]+: completed\]$", result.stderr, re.MULTILINE), result.stderr


def test_task_declares_the_extension_so_an_optional_task_tool_runs_as_a_task(run: Run) -> None:
    assert run("call", "maybe_task").stdout == "task id: None\n"
    as_task = run("call", "maybe_task", "--task")
    assert as_task.exit_code == 0, as_task.output
    [task_id] = re.findall(r"^\[task ([\w-]+): completed\]$", as_task.stderr, re.MULTILINE)
    assert as_task.stdout == f"task id: {task_id}\n"


def test_call_usage_errors_exit_2(run: Run) -> None:
    assert run("call", "echo", "no-equals-sign").exit_code == 2
    assert "is not KEY=VALUE" in run("call", "echo", "no-equals-sign").stderr
    not_json = run("call", "echo", "--json", "{oops")
    assert not_json.exit_code == 2 and "not JSON" in not_json.stderr
    not_object = run("call", "echo", "--json", "[1]")
    assert not_object.exit_code == 2 and "must be a JSON object" in not_object.stderr


def test_call_with_a_token_reaches_a_protected_tool() -> None:
    run = runner_for(_auth_app())
    assert run("call", "greet", "name=Ann").exit_code == 3
    result = run("call", "greet", "name=Ann", "--token", "good-token")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hello, Ann!\n"


def test_call_as_a_principal_with_scopes_needs_no_token_from_the_authorization_server() -> None:
    app = _auth_app()
    run = runner_for(app)
    result = run("call", "whoami", "--as", "bob", "--scope", "admin", "--scope", "files:read")
    assert result.exit_code == 0, result.output
    assert result.stdout == "bob ['admin', 'files:read']\n"
    without_scope = run("call", "whoami", "--as", "bob")  # not listed for bob: called all the same
    assert without_scope.exit_code == 3
    assert "HTTP 403" in without_scope.stderr
    assert "admin" in without_scope.stderr
    # The token made for --as worked for that command only.
    assert app.extensions["mcp"].authenticator._acting == {}
    listed = run("list", "--as", "carol")
    assert listed.exit_code == 0 and "Tools (" in listed.stdout


def test_an_acting_as_token_authenticates_only_inside_its_block() -> None:
    app = _auth_app()
    authenticator = app.extensions["mcp"].authenticator
    with authenticator.acting_as(Principal(subject="dora", scopes=frozenset({"admin"}))) as token:
        inside = MCPTestClient(app, headers={"Authorization": f"Bearer {token}"})
        assert inside.call_tool("whoami").result["content"][0]["text"] == "dora ['admin']"
        other = MCPTestClient(app, headers={"Authorization": f"Bearer {token}x"})
        assert other.call_tool("whoami").status_code == 401
    after = MCPTestClient(app, headers={"Authorization": f"Bearer {token}"})
    assert after.call_tool("whoami").status_code == 401


def test_as_is_refused_where_it_cannot_apply(run: Run) -> None:
    off = run("call", "greet", "name=x", "--as", "bob")
    assert off.exit_code == 2 and "MCP_AUTH is off" in off.stderr
    assert "goes with --as SUBJECT" in run("call", "greet", "--scope", "admin").stderr
    assert "give --token or --as, not both" in run("list", "--token", "t", "--as", "bob").stderr


# ---------------------------------------------------------------------- check


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


@pytest.fixture
def redis_backend() -> Iterator[tuple[Backend, redis.Redis, str]]:
    """A real Redis backend under keys (and channels) of this test's own."""
    client = client_from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        client.close()
        unavailable(f"Redis at {REDIS_URL} is unreachable ({exc})")
    prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"
    clock = FakeClock()
    backend = Backend(
        sessions=RedisSessionStore(client, timeout=3600, key_prefix=prefix + "session:", clock=clock),
        bus=RedisMessageBus(client, channel_prefix=prefix + "bus:"),
        tasks=RedisTaskStore(client, key_prefix=prefix + "task:"),
        description="redis (test keys)",
        check=client.ping,
    )
    try:
        yield backend, client, prefix
    finally:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()


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
    assert "SECRET_KEY is not set" in result.stdout
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
    run = runner_for(_auth_app())
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


# ---------------------------------------------------------------------- sessions


def _open_legacy_sessions(app: Flask, how_many: int) -> None:
    for _ in range(how_many):
        MCPTestClient(app, protocol_version="2025-11-25").initialize()


def test_sessions_counts_and_prunes_a_sqlite_backend(tmp_path: Path) -> None:
    app = create_app(MCP_BACKEND=f"sqlite:///{tmp_path}/mcp.sqlite3", MCP_SESSION_TIMEOUT=60)
    _open_legacy_sessions(app, 3)
    run = runner_for(app)
    result = run("sessions")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"Backend: sqlite:///{tmp_path}/mcp.sqlite3",
        "Legacy sessions: 3 live",
        "Tasks: 0 live",
    ]
    store = app.extensions["mcp"].backend.sessions
    clock = FakeClock()
    store.clock = clock
    clock.advance(61)  # the three are idle past the timeout
    assert "Legacy sessions: 0 live, 3 expired awaiting pruning (flask mcp sessions --prune)" in run("sessions").stdout
    pruned = run("sessions", "--prune")
    assert "Legacy sessions: 0 live; pruned 3 expired sessions" in pruned.stdout
    _open_legacy_sessions(app, 1)
    report = json.loads(run("sessions", "--json").stdout)
    assert report["sessions"] == {"countable": True, "live": 1, "expired": 0}


def test_sessions_counts_a_real_redis_backend(redis_backend: tuple[Backend, redis.Redis, str]) -> None:
    backend = redis_backend[0]
    app = create_app(MCP_BACKEND=backend)
    _open_legacy_sessions(app, 2)
    result = runner_for(app)("sessions", "--prune", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sessions"] == {"countable": True, "live": 2, "expired": 0, "pruned": 0}
    assert report["tasks"] == {"countable": True, "live": 0, "expired": 0, "pruned": 0}


def test_sessions_says_a_cachelib_backend_cannot_be_counted() -> None:
    from cachelib import SimpleCache

    app = create_app(MCP_BACKEND=SimpleCache())
    _open_legacy_sessions(app, 1)
    result = runner_for(app)("sessions", "--prune")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == ("Legacy sessions: not counted: the cache SimpleCache cannot list its keys, so expired "
                        "sessions cannot be pruned from here; the cache drops them itself")
    assert lines[2] == "Tasks: not counted: this backend keeps no tasks"
    counted = runner_for(app)("sessions").stdout.splitlines()[1]
    assert counted.startswith("Legacy sessions: not counted: the cache SimpleCache cannot list its keys, so its "
                              "sessions cannot be counted")


def test_sessions_on_memory_says_it_cannot_see_the_servers_processes(run: Run) -> None:
    result = run("sessions")
    assert result.exit_code == 0
    assert "Note: memory:// keeps sessions and tasks inside each server process" in result.stdout


def test_sessions_fails_cleanly_when_the_backend_is_down() -> None:
    app = create_app(MCP_BACKEND=f"redis://127.0.0.1:{free_port()}/0")
    result = runner_for(app)("sessions")
    assert result.exit_code == 1
    assert "Error: the backend redis://127.0.0.1:" in result.stderr
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------- the example, as docs/cli.md shows it


def _documented_output(command: str) -> str:
    """What docs/cli.md shows ``command`` printing (the console block lines after ``$ command``)."""
    text = (ROOT / "docs" / "cli.md").read_text()
    start = text.index(f"$ {command}\n") + len(f"$ {command}\n")
    return text[start:text.index("```", start)]


def _example(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLASK_MCP_BACKEND": f"sqlite:///{tmp_path}/example.sqlite3", "FLASK_SECRET_KEY": "s"}
    flask = Path(sys.executable).with_name("flask")  # the script a developer runs, beside this Python
    return subprocess.run([str(flask), "--app", "example.app", "mcp", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_example_apps_commands_print_what_the_docs_show(tmp_path: Path) -> None:
    listed = _example("list", tmp_path=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == _documented_output("flask --app example.app mcp list")
    helped = _example("--help", tmp_path=tmp_path)
    assert helped.stdout == _documented_output("flask --app example.app mcp --help")

    called = _example("call", "search_books", "query=tolkien", "limit=1", tmp_path=tmp_path)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["books"][0]["title"] == "The Hobbit"
    missing = _example("call", "get_book", "isbn=9780000000000", tmp_path=tmp_path)
    assert missing.returncode == 1
    assert missing.stdout == "No book with ISBN 9780000000000; use search_books to find one.\n"

    checked = _example("check", tmp_path=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.endswith("\nAll checks passed.\n")

    counted = _example("sessions", tmp_path=tmp_path)
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.splitlines()[1:] == ["Legacy sessions: 0 live", "Tasks: 1 live"]  # check's probe task
