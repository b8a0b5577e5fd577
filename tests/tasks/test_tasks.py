"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on 2026-07-28:
task tools, CreateTaskResult, tasks/get, tasks/update and tasks/cancel, the
capability gates, questions asked by a running task, the multi round-trip
before a task begins, cancellation and expiry (spec digest section 5.15).

Tools coordinate with the tests through threading events; a test waits for a
task's status with bounded polling of tasks/get, as a client does."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import ALL_VERSIONS, FakeClock, connect
from flask import Flask, g, request
from test_subscriptions import SUB_KEY, _messages, _next_notification, _open

from flask_mcp import MCP, Context, MCPError, ToolError
from flask_mcp.backends import Backend
from flask_mcp.backends.memory import MemoryMessageBus, MemorySessionStore, MemoryTaskStore
from flask_mcp.config import ConfigError
from flask_mcp.features.tools import Tool
from flask_mcp.protocol.request_info import RequestInfo
from flask_mcp.protocol.subscriptions import TASK_STATUS, Listen
from flask_mcp.protocol.task_methods import Tasks, task_event
from flask_mcp.protocol.task_records import TaskRecord
from flask_mcp.protocol.versions import REVISIONS
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}
LEGACY = ALL_VERSIONS[1:]
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
TERMINAL = {"completed", "failed", "cancelled"}
#: The longest a test waits for a task to reach a status (seconds).
DEADLINE = 5.0
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set by a test to let a waiting tool finish (set at teardown, so no thread lingers)."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mcp(release: threading.Event) -> MCP:
    mcp = MCP(name="tasks-server", version="1.0")

    @mcp.tool
    def greet(name: str) -> str:
        """Greets at once."""
        return f"Hello, {name}!"

    @mcp.tool(task="optional")
    def wait(ctx: Context) -> dict[str, Any]:
        """Waits for the test's release, checking for cancellation."""
        ctx.set_task_status("waiting for the test")
        while not release.wait(0.01):
            ctx.check_cancelled()
        return {"task": ctx.task_id, "host": request.host, "g": hasattr(g, "leak")}

    @mcp.tool(task="required")
    def must_be_task(n: int) -> int:
        """Always a task on 2026-07-28."""
        return n * 2

    @mcp.tool(task="optional")
    def fails_as_tool() -> str:
        """A tool error: the task completes with isError."""
        raise ToolError("no luck")

    @mcp.tool(task="optional")
    def fails_as_protocol() -> str:
        """A JSON-RPC error: the task fails."""
        raise MCPError("the upstream refused", data={"upstream": 503})

    @mcp.tool(task="optional")
    def ask_two(ctx: Context) -> str:
        """Asks two questions at once, then once more."""
        first, second = ctx.ask(ctx.elicitation("Name?", NAME_SCHEMA, key="name"),
                                ctx.elicitation("Other name?", NAME_SCHEMA, key="other"))
        third = ctx.elicit("Name once more?", NAME_SCHEMA, key="name")
        names = [a.content["name"] if a.content else a.action for a in (first, second, third)]
        return " / ".join(names)

    @mcp.tool(task="required", task_start="explicit")
    def confirm_first(item: str, ctx: Context) -> str:
        """Asks in the tools/call itself, then continues as a task."""
        answer = ctx.elicit(f"Really process {item}?", NAME_SCHEMA, key="who")
        assert ctx.task_id is None
        ctx.start_task("processing")
        return f"{item} processed for {answer.content['name'] if answer.content else answer.action} in {ctx.task_id}"

    @mcp.tool(task="optional", task_start="explicit")
    def maybe_task(quick: bool, ctx: Context) -> str:
        """Answers at once when quick, else becomes a task."""
        if not quick:
            ctx.start_task()
        return "quick" if quick else "slow"

    return mcp


@pytest.fixture
def app(app: Flask, mcp: MCP) -> Flask:
    """The root conftest's app, serving this module's ``mcp``."""
    app.config["SECRET_KEY"] = "tasks-tests"
    app.config["MCP_BACKEND"] = "memory://"
    app.config["MCP_TASK_POLL_INTERVAL_MS"] = 250
    mcp.init_app(app)

    @app.before_request
    def mark() -> None:
        g.leak = "the request's g"  # a task gets its own app context, so its own g

    return app


def tasks_client(make_client: MakeClient, app: Flask, capabilities: dict[str, Any] | None = None) -> MCPTestClient:
    return make_client(app, "2026-07-28", capabilities=WITH_TASKS if capabilities is None else capabilities)


def wait_for(client: MCPTestClient, task_id: str, statuses: set[str]) -> dict[str, Any]:
    """Poll tasks/get until the task reaches one of ``statuses`` (bounded)."""
    until = time.monotonic() + DEADLINE
    while True:
        task = client.get_task(task_id).result
        if task["status"] in statuses:
            return task
        assert time.monotonic() < until, f"task stayed {task['status']}"
        time.sleep(0.01)


def assert_task_shape(task: dict[str, Any]) -> None:
    """The Task fields of SEP-2663: wire names, ISO timestamps, integer milliseconds."""
    assert isinstance(task["taskId"], str) and task["taskId"]
    assert task["status"] in {"working", "input_required", "completed", "failed", "cancelled"}
    assert ISO.match(task["createdAt"]) and ISO.match(task["lastUpdatedAt"])
    assert task["ttlMs"] is None or (isinstance(task["ttlMs"], int) and task["ttlMs"] > 0)
    assert isinstance(task.get("pollIntervalMs", 1), int)
    assert not {"ttl", "pollInterval", "task", "requestState"} & set(task)


# ---------------------------------------------------------------------- negotiation


def test_discover_declares_the_extension_once_a_task_tool_exists(make_client: MakeClient) -> None:
    mcp = MCP(name="plain")
    app = Flask("plain")
    app.config["MCP_BACKEND"] = "memory://"
    mcp.init_app(app)
    client = tasks_client(make_client, app)
    assert "extensions" not in client.discover().result["capabilities"]
    mcp.tool(task="optional", name="later")(lambda: "x")
    capabilities = client.discover().result["capabilities"]
    assert capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in capabilities


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_sessions_neither_hear_of_tasks_nor_get_them(make_client: MakeClient, app: Flask,
                                                            version: str) -> None:
    client = connect(make_client, app, version)
    assert "extensions" not in client.initialize().result["capabilities"]
    client = connect(make_client, app, version)
    result = client.call_tool("must_be_task", {"n": 21}).result
    assert result["content"] == [{"type": "text", "text": "42"}]
    assert client.request("tasks/get", {"taskId": "x"}).error["code"] == -32601


def test_a_task_tool_called_without_the_extension_answers_at_once(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app, {})
    response = client.call_tool("maybe_task", {"quick": False})
    assert response.result["resultType"] == "complete"
    assert response.result["content"] == [{"type": "text", "text": "slow"}]
    assert "taskId" not in response.result


def test_a_required_task_without_the_extension_is_refused_with_32021(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app, {"elicitation": {}})
    response = client.call_tool("must_be_task", {"n": 1})
    assert response.status_code == 400
    assert response.error["code"] == -32021
    assert response.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_without_the_extension_are_refused_with_32021(make_client: MakeClient, app: Flask,
                                                                   method: str) -> None:
    created = tasks_client(make_client, app).call_tool("must_be_task", {"n": 1}).result
    client = tasks_client(make_client, app, {})
    response = client.request(method, {"taskId": created["taskId"], "inputResponses": {}})
    assert (response.status_code, response.error["code"]) == (400, -32021)


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_the_removed_v1_methods_are_unknown(make_client: MakeClient, app: Flask, method: str) -> None:
    response = tasks_client(make_client, app).request(method, {"taskId": "x"})
    assert (response.status_code, response.error["code"]) == (404, -32601)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_an_unknown_task_id_is_invalid_params(make_client: MakeClient, app: Flask, method: str) -> None:
    response = tasks_client(make_client, app).request(method, {"taskId": "nope", "inputResponses": {}})
    assert response.error["code"] == -32602
    assert "nope" in response.error["message"]


def test_mcp_name_must_repeat_the_task_id(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("must_be_task", {"n": 1}).result["taskId"]
    assert client.get_task(task_id).status_code == 200
    response = client.get_task(task_id, headers={"Mcp-Name": "another-task"})
    assert (response.status_code, response.error["code"]) == (400, -32020)


# ---------------------------------------------------------------------- lifecycle


def test_a_task_tool_answers_with_a_flat_create_task_result_readable_at_once(
    make_client: MakeClient, app: Flask, release: threading.Event
) -> None:
    client = tasks_client(make_client, app)
    response = client.call_tool("wait")
    created = response.result
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 250
    assert not {"result", "error", "inputRequests"} & set(created)
    assert_task_shape(created)
    got = client.get_task(created["taskId"]).result
    assert got["taskId"] == created["taskId"] and got["resultType"] == "complete"
    assert got["status"] == "working" and "result" not in got
    release.set()
    done = wait_for(client, created["taskId"], TERMINAL)
    assert_task_shape(done)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"task": created["taskId"], "host": "localhost", "g": False}
    assert done["result"]["resultType"] == "complete"
    assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})


def test_the_tool_sets_the_status_message(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("wait").result["taskId"]
    until = time.monotonic() + DEADLINE
    while client.get_task(task_id).result.get("statusMessage") != "waiting for the test":
        assert time.monotonic() < until
        time.sleep(0.01)


def test_a_tool_error_completes_the_task_with_is_error(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    done = wait_for(client, client.call_tool("fails_as_tool").result["taskId"], TERMINAL)
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["content"] == [{"type": "text", "text": "no luck"}]


def test_a_protocol_error_fails_the_task_with_the_error(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    done = wait_for(client, client.call_tool("fails_as_protocol").result["taskId"], TERMINAL)
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32603, "message": "the upstream refused", "data": {"upstream": 503}}
    assert "result" not in done


def test_invalid_arguments_are_a_tool_error_at_once_and_no_task(make_client: MakeClient, app: Flask) -> None:
    result = tasks_client(make_client, app).call_tool("must_be_task", {"n": "many"}).result
    assert result["resultType"] == "complete" and result["isError"] is True
    assert "taskId" not in result


def test_a_legacy_task_param_does_not_make_a_plain_tool_a_task(make_client: MakeClient, app: Flask) -> None:
    response = tasks_client(make_client, app).request(
        "tools/call", {"name": "greet", "arguments": {"name": "v1"}, "task": {"ttl": 1000}}
    )
    assert response.result["content"] == [{"type": "text", "text": "Hello, v1!"}]
    assert response.result["resultType"] == "complete"


def test_a_task_started_while_progress_is_streamed_still_answers_with_its_handle(
    make_client: MakeClient, app: Flask, release: threading.Event
) -> None:
    client = tasks_client(make_client, app)
    response = client.call_tool("wait", meta={"progressToken": "p1"})
    assert response.result["resultType"] == "task"
    release.set()
    assert wait_for(client, response.result["taskId"], TERMINAL)["status"] == "completed"


# ---------------------------------------------------------------------- cancellation


def test_cancel_acknowledges_and_the_tool_stops_at_its_next_check(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("wait").result["taskId"]
    ack = client.cancel_task(task_id).result
    assert ack["resultType"] == "complete"
    assert not {"taskId", "status", "result", "error", "inputRequests"} & set(ack)
    ended = wait_for(client, task_id, TERMINAL)
    assert ended["status"] == "cancelled"
    assert "result" not in ended and "error" not in ended


def test_cancelling_an_ended_task_is_the_same_ack_and_changes_nothing(
    make_client: MakeClient, app: Flask
) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("must_be_task", {"n": 4}).result["taskId"]
    done = wait_for(client, task_id, TERMINAL)
    assert client.cancel_task(task_id).result["resultType"] == "complete"
    after = client.get_task(task_id).result
    assert after["status"] == "completed" and after["result"] == done["result"]


def test_cancel_reaches_a_task_waiting_for_answers(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("ask_two").result["taskId"]
    wait_for(client, task_id, {"input_required"})
    client.cancel_task(task_id)
    ended = wait_for(client, task_id, TERMINAL)
    assert ended["status"] == "cancelled" and "inputRequests" not in ended


# ---------------------------------------------------------------------- questions


def test_questions_park_the_task_and_partial_answers_leave_the_rest(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("ask_two").result["taskId"]
    waiting = wait_for(client, task_id, {"input_required"})
    assert set(waiting["inputRequests"]) == {"name", "other"}
    assert waiting["inputRequests"]["name"] == {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Name?", "requestedSchema": NAME_SCHEMA},
    }
    ack = client.update_task(task_id, {"name": {"action": "accept", "content": {"name": "Ada"}},
                                       "never-asked": {"action": "accept"}}).result
    assert ack["resultType"] == "complete" and "status" not in ack
    partial = client.get_task(task_id).result
    assert partial["status"] == "input_required" and set(partial["inputRequests"]) == {"other"}
    client.update_task(task_id, {"other": {"action": "maybe"}})  # malformed: ignored, still asked
    assert set(client.get_task(task_id).result["inputRequests"]) == {"other"}
    client.update_task(task_id, {"other": {"action": "decline"}})
    # The tool asks again under the same name: a key is never reused within a task.
    again = wait_for(client, task_id, {"input_required"})
    assert set(again["inputRequests"]) == {"name-2"}
    client.update_task(task_id, {"name": {"action": "accept", "content": {"name": "stale"}}})  # ignored
    assert client.get_task(task_id).result["status"] == "input_required"
    client.update_task(task_id, {"name-2": {"action": "accept", "content": {"name": "Bob"}}})
    done = wait_for(client, task_id, TERMINAL)
    assert done["result"]["content"] == [{"type": "text", "text": "Ada / decline / Bob"}]


def test_a_task_asks_only_what_the_client_declared(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app, {"extensions": {TASKS: {}}})  # no elicitation
    done = wait_for(client, client.call_tool("ask_two").result["taskId"], TERMINAL)
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32021
    assert done["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}


def test_a_tool_asks_in_the_call_first_then_continues_as_a_task(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    first = client.call_tool("confirm_first", {"item": "invoice"}).result
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["who"]
    second = client.request("tools/call", {
        "name": "confirm_first", "arguments": {"item": "invoice"},
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": first["requestState"],
    }).result
    assert second["resultType"] == "task" and second["statusMessage"] == "processing"
    assert "requestState" not in second and "inputRequests" not in second
    done = wait_for(client, second["taskId"], TERMINAL)
    assert done["result"]["content"] == [
        {"type": "text", "text": f"invoice processed for Ada in {second['taskId']}"}
    ]


def test_an_explicit_start_tool_that_finishes_first_answers_plainly(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    assert client.call_tool("maybe_task", {"quick": True}).result["content"] == [{"type": "text", "text": "quick"}]
    slow = client.call_tool("maybe_task", {"quick": False}).result
    assert slow["resultType"] == "task"
    assert wait_for(client, slow["taskId"], TERMINAL)["result"]["content"] == [{"type": "text", "text": "slow"}]


# ---------------------------------------------------------------------- expiry, ownership, configuration


def test_a_task_is_forgotten_after_its_ttl(make_client: MakeClient, clock: FakeClock) -> None:
    mcp = MCP(name="ttl")
    mcp.tool(task="required", name="done")(lambda: "done")
    app = Flask("ttl")
    app.config["MCP_BACKEND"] = Backend(MemorySessionStore(), MemoryMessageBus(), tasks=MemoryTaskStore(clock=clock))
    app.config["MCP_TASK_TTL"] = 60
    mcp.init_app(app)
    client = tasks_client(make_client, app)
    created = client.call_tool("done").result
    assert created["ttlMs"] == 60_000
    wait_for(client, created["taskId"], TERMINAL)
    clock.now += 59
    assert client.get_task(created["taskId"]).result["status"] == "completed"
    clock.now += 2
    assert client.get_task(created["taskId"]).error["code"] == -32602


def test_a_task_belongs_to_the_principal_that_created_it() -> None:
    store = MemoryTaskStore()
    tasks = Tasks(store, spawn=lambda work: threading.Thread(target=work).is_alive)  # never started
    record = tasks.new_record("alice")
    store.create(record)

    def get(principal: str | None) -> dict[str, Any]:
        caps: dict[str, Any] = {"extensions": {TASKS: {}}}
        request = RequestInfo(REVISIONS["2026-07-28"], "tasks/get", {"taskId": record.task_id}, {},
                              client_capabilities=caps, principal=principal)
        return tasks.get(request)

    assert get("alice")["taskId"] == record.task_id
    for other in ("mallory", None):
        with pytest.raises(MCPError) as refused:
            get(other)
        assert refused.value.code == -32602


def test_a_backend_without_task_store_offers_no_tasks_and_runs_optional_ones_plainly(
    make_client: MakeClient,
) -> None:
    mcp = MCP(name="no-tasks")
    mcp.tool(task="optional", name="plain")(lambda: "plain")
    mcp.tool(task="required", name="needs_task")(lambda: "never")
    app = Flask("no-tasks")
    app.config["MCP_BACKEND"] = Backend(MemorySessionStore(), MemoryMessageBus())
    mcp.init_app(app)
    client = tasks_client(make_client, app)
    assert "extensions" not in client.discover().result["capabilities"]
    assert client.call_tool("plain").result["content"] == [{"type": "text", "text": "plain"}]
    assert client.call_tool("needs_task").error["code"] == -32603
    assert client.get_task("x").error["code"] == -32601


@pytest.mark.parametrize(("options", "message"), [
    ({"task": "always"}, "task= must be one of"),
    ({"task": "optional", "task_start": "later"}, "task_start= must be one of"),
])
def test_bad_task_options_fail_at_decoration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCP().tool(name="bad", **options)(lambda: None)


def test_the_decorated_function_stays_callable(mcp: MCP) -> None:
    assert mcp.tools.find("must_be_task").fn(n=3) == 6  # type: ignore[union-attr]


def test_task_records_round_trip_through_their_dict_form() -> None:
    record = TaskRecord("t1", "alice", "input_required", "why", 1.5, 2.5, 1000, 50,
                        {"k": {"method": "roots/list"}}, {"a": {"roots": []}}, ["k", "a"], None, None, True)
    assert TaskRecord.from_dict({**record.to_dict(), "unknown": 1}) == record
    assert record.detailed()["inputRequests"] == {"k": {"method": "roots/list"}}
    assert record.created()["resultType"] == "task"


# ---------------------------------------------------------------------- notifications/tasks


def test_a_listen_stream_naming_a_task_hears_each_of_its_changes(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    task_id = client.call_tool("ask_two").result["taskId"]
    wait_for(client, task_id, {"input_required"})
    http = _open(client, {"taskIds": [task_id, "someone-elses"]}, request_id=5)
    try:
        stream = _messages(http)
        ack = _next_notification(stream)
        assert ack is not None and ack["params"]["notifications"] == {"taskIds": [task_id, "someone-elses"]}
        client.update_task(task_id, {"name": {"action": "decline"}, "other": {"action": "decline"}})
        notes = [_next_notification(stream), _next_notification(stream)]
        assert [n["params"]["status"] for n in notes if n] == ["working", "input_required"]
        asking = notes[1]
        assert asking is not None and asking["method"] == "notifications/tasks"
        assert asking["params"]["taskId"] == task_id and list(asking["params"]["inputRequests"]) == ["name-2"]
        assert asking["params"]["_meta"] == {SUB_KEY: 5}
        assert_task_shape(asking["params"])
        client.update_task(task_id, {"name-2": {"action": "decline"}})
        notes = [_next_notification(stream), _next_notification(stream)]
        assert [n["params"]["status"] for n in notes if n] == ["working", "completed"]
        done = notes[1]
        assert done is not None
        assert done["params"]["result"]["content"] == [{"type": "text", "text": "decline / decline / decline"}]
        got = client.get_task(task_id).result
        assert done["params"] == {**{k: v for k, v in got.items() if k != "resultType"}, "_meta": {SUB_KEY: 5}}
    finally:
        http.close()


def test_task_notifications_need_the_extension(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app, {})
    response = client.request("subscriptions/listen", {"notifications": {"taskIds": ["t"]}})
    assert (response.status_code, response.error["code"]) == (400, -32021)
    assert response.error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def test_a_listen_stream_hears_only_its_own_principals_tasks() -> None:
    record = TaskRecord("t1", "alice", "working", None, 1.0, 1.0, None, None)
    listen = Listen.from_request("l", {"notifications": {"taskIds": ["t1"]}}, frozenset({TASK_STATUS}),
                                 principal="alice", client_capabilities={"extensions": {TASKS: {}}})
    assert listen.notification_for(task_event(record))["params"]["taskId"] == "t1"  # type: ignore[index]
    record.principal = "mallory"
    assert listen.notification_for(task_event(record)) is None
    unoffered = Listen.from_request("l", {"notifications": {"taskIds": ["t1"]}}, frozenset(),
                                    client_capabilities={"extensions": {TASKS: {}}})
    assert unoffered.task_ids == () and "taskIds" not in unoffered.acknowledgement()["params"]["notifications"]


def test_tasks_still_running_when_the_process_exits_are_failed(make_client: MakeClient, app: Flask) -> None:
    client = tasks_client(make_client, app)
    running = client.call_tool("wait").result["taskId"]
    finished = client.call_tool("must_be_task", {"n": 1}).result["taskId"]
    wait_for(client, finished, TERMINAL)
    tasks = app.extensions["mcp"].server.methods.tasks
    assert tasks.abandon_running() == 1  # what the exit hook does
    failed = client.get_task(running).result
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32603 and "stopped" in failed["error"]["message"]
    assert client.get_task(finished).result["status"] == "completed"


def test_a_call_whose_thread_never_answers_is_an_internal_error() -> None:
    tasks = Tasks(MemoryTaskStore(), spawn=lambda work: threading.Thread(target=work).is_alive)  # never started
    tool = Tool.from_function(lambda: "never", name="never", task="required")
    request = RequestInfo(REVISIONS["2026-07-28"], "tools/call", {"name": "never"}, {},
                          client_capabilities={"extensions": {TASKS: {}}})
    call = tasks.tool_call(request, tool, {}, lambda outcome: {})
    with pytest.raises(MCPError) as failed:
        call()
    assert failed.value.code == -32603


def test_past_the_running_limit_a_task_call_is_refused_until_one_ends(
    make_client: MakeClient, mcp: MCP, release: threading.Event
) -> None:
    app = Flask("limited")
    app.config.update(MCP_BACKEND="memory://", MCP_TASK_MAX_RUNNING=2, TESTING=True)
    mcp.init_app(app)
    client = tasks_client(make_client, app)
    running = [client.call_tool("wait").result["taskId"] for _ in range(2)]
    refused = client.call_tool("wait")
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
    assert refused.error["code"] == -32603 and "2 tasks" in refused.error["message"]
    assert client.call_tool("greet", {"name": "x"}).result["content"]  # ordinary calls go on
    client.cancel_task(running[0])
    wait_for(client, running[0], TERMINAL)
    until = time.monotonic() + DEADLINE
    while (again := client.call_tool("wait")).status_code == 503:  # the thread ends just after the status
        assert time.monotonic() < until
        time.sleep(0.01)
    assert again.result["resultType"] == "task"


def test_without_a_ttl_a_task_says_ttl_null(make_client: MakeClient, mcp: MCP) -> None:
    app = Flask("forever")
    app.config.update(MCP_BACKEND="memory://", MCP_TASK_TTL=None, TESTING=True)
    mcp.init_app(app)
    created = tasks_client(make_client, app).call_tool("must_be_task", {"n": 1}).result
    assert created["ttlMs"] is None


@pytest.mark.parametrize(("key", "value"), [
    ("MCP_TASK_TTL", 0), ("MCP_TASK_POLL_INTERVAL_MS", "fast"), ("MCP_TASK_MAX_RUNNING", 0),
])
def test_bad_task_settings_fail_at_init_app(key: str, value: Any) -> None:
    app = Flask("bad")
    app.config.update({"MCP_BACKEND": "memory://", key: value})
    with pytest.raises(ConfigError, match=key):
        MCP(app)
