"""``flask mcp`` (registration), ``list`` and ``call``, run with click's
runner against real apps; ``--token`` and ``--as`` against an app with
MCP_AUTH on; and the example app's commands run as a developer runs them,
printing what docs/cli.md shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from cli_app import auth_app, create_app, runner_for
from conftest import validate_message
from flask import Flask

from flask_mcp import MCP
from flask_mcp.auth import Principal
from flask_mcp.testing import MCPTestClient

Run = Callable[..., Any]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run() -> Run:
    return runner_for(create_app())


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


def test_list_on_an_app_with_auth_sends_the_token_given() -> None:
    run = runner_for(auth_app())
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
    # The command answers questions, but this app cannot ask one: it has no SECRET_KEY to seal requestState.
    result = run("call", "ask_first")
    assert result.exit_code == 3
    assert ("Error: tools/call ask_first: error -32603: This tool asks the client for input, which needs the "
            "app's SECRET_KEY") in result.stderr


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
    run = runner_for(auth_app())
    assert run("call", "greet", "name=Ann").exit_code == 3
    result = run("call", "greet", "name=Ann", "--token", "good-token")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hello, Ann!\n"


def test_call_as_a_principal_with_scopes_needs_no_token_from_the_authorization_server() -> None:
    app = auth_app()
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
    app = auth_app()
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
    assert counted.stdout.splitlines()[1:] == ["Legacy sessions: 0 live", "Tasks: 1 live",  # check's probe task
                                               "Running tasks: none"]  # written as ended: not listed

