"""``flask mcp call TOOL key=value ...``: one ``tools/call`` through the real
protocol path, its result printed, the exit status telling a script how it went.

How a ``key=value`` argument is typed: by the tool's input schema. A value
for a property that only takes strings is the string as typed (so
``isbn=9780141439518`` stays a string); for any other property the value is
read as JSON when it parses as a JSON value the property accepts (``limit=3``,
``tags='["a","b"]'``, ``draft=true``), else kept as a string, and the tool's
own validation says what is wrong with it. ``--json '{...}'`` gives the
arguments as one JSON object; ``key=value`` pairs then override its keys.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click
from flask.cli import with_appcontext

from ..protocol.meta import LOG_LEVEL_KEY, LOG_LEVELS
from ..protocol.task_records import INPUT_REQUIRED, TASKS_EXTENSION, TERMINAL
from ..testing import MCPResponse, MCPTestClient
from .answering import CAPABILITY, answer_all
from .endpoint import Caller, Endpoint, ProtocolFailure, caller_options
from .progress import Reporter

#: Exit status when the tool answered with an error result (``isError``).
TOOL_ERROR_EXIT = 1
#: The progress token the command's calls carry (it runs one call at a time).
PROGRESS_TOKEN = "flask-mcp-call"
#: How many times a call is sent again with answers before the command gives up.
MAX_ROUNDS = 20

_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}


def accepted_types(schema: dict[str, Any]) -> set[str] | None:
    """The JSON types a property's schema allows; ``None``: any (not stated)."""
    if "const" in schema:
        return {_json_type(schema["const"])}
    if "enum" in schema and isinstance(schema["enum"], list):
        return {_json_type(value) for value in schema["enum"]}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind, "integer"} if kind == "number" else {kind}
    if isinstance(kind, list):
        kinds = {str(k) for k in kind}
        return kinds | {"integer"} if "number" in kinds else kinds
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list):
            found: set[str] = set()
            for option in options:
                kinds_of_option = accepted_types(option) if isinstance(option, dict) else None
                if kinds_of_option is None:
                    return None
                found |= kinds_of_option
            return found
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), "string")


def typed_value(raw: str, schema: dict[str, Any] | None) -> Any:
    """``raw`` typed for a property with ``schema`` (see the module docstring)."""
    kinds = accepted_types(schema) if schema is not None else None
    if kinds == {"string"}:
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if kinds is None or _json_type(value) in kinds:
        return value
    return raw


def parse_arguments(pairs: tuple[str, ...], json_text: str | None, input_schema: dict[str, Any]) -> dict[str, Any]:
    """The ``arguments`` object from ``--json`` and ``key=value`` pairs."""
    arguments: dict[str, Any] = {}
    if json_text is not None:
        text = sys.stdin.read() if json_text == "-" else json_text
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--json") from None
        if not isinstance(loaded, dict):
            raise click.BadParameter("must be a JSON object of arguments", param_hint="--json")
        arguments.update(loaded)
    properties = input_schema.get("properties") or {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="ARGUMENTS")
        prop = properties.get(key)
        arguments[key] = typed_value(raw, prop if isinstance(prop, dict) else None)
    return arguments


def arguments_options(fn: Any) -> Any:
    """``KEY=VALUE...`` and ``--json``, shared by ``call`` and ``preview``."""
    fn = click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")(fn)
    return click.option(
        "--json", "json_text", metavar="OBJECT",
        help="The arguments as one JSON object ('-': read it from standard input); KEY=VALUE pairs override its keys.",
    )(fn)


def find_tool(name: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The listed tool named ``name``; one the caller is not shown (unknown, or
    hidden for want of a scope) is still called, for the server to answer."""
    return next((tool for tool in tools if tool.get("name") == name), {})


@click.command("call")
@click.argument("tool_name", metavar="TOOL")
@arguments_options
@click.option("--raw", is_flag=True, help="Print the whole result as JSON, as the client received it.")
@click.option("--task", "as_task", is_flag=True,
              help="Declare the tasks extension, so a tool that may run as a task does (it is polled to the end).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default="info", show_default=True,
              help="The least severe log message the tool should send (shown on standard error).")
@caller_options
@with_appcontext
def call_command(tool_name: str, pairs: tuple[str, ...], json_text: str | None, raw: bool, as_task: bool,
                 log_level: str, caller: Caller) -> None:
    """Call a tool and print its result.

    Arguments are KEY=VALUE pairs, typed by the tool's input schema, or a JSON
    object (--json). Progress and log messages go to standard error; a
    question the tool asks is asked at the terminal. A tool that must run as
    a task is run as one and polled to its end. Exit status: 0 for a result,
    1 for an error result (isError), 2 for bad usage, 3 when the endpoint
    refused the request or the tool asked a question that could not be asked.
    """
    endpoint = Endpoint(caller=caller)
    client = endpoint.client()
    tools = endpoint.list_all("tools/list", "tools", client)
    # The client learns the tool's schema (for its Mcp-Param-* headers), like a real one.
    client.list_tools()
    tool = find_tool(tool_name, tools)
    arguments = parse_arguments(pairs, json_text, tool.get("inputSchema") or {})
    reporter = Reporter()
    client.on_notification = reporter
    client.capabilities = {"elicitation": CAPABILITY}
    if as_task:
        client.capabilities["extensions"] = {TASKS_EXTENSION: {}}
    meta = {"progressToken": PROGRESS_TOKEN, LOG_LEVEL_KEY: log_level}
    params: dict[str, Any] = {"name": tool_name, "arguments": arguments}
    for _ in range(MAX_ROUNDS):
        try:
            response = client.request("tools/call", params, meta=meta)
            if not as_task and _needs_tasks(response):
                as_task = True
                client.capabilities["extensions"] = {TASKS_EXTENSION: {}}
                response = client.request("tools/call", params, meta=meta)
        finally:
            reporter.clear()
        result = endpoint.result(response, f"tools/call {tool_name}")
        if result.get("resultType") == "task":
            result = _await_task(endpoint, client, result, tool_name)
        if result.get("resultType") != "input_required":
            break
        # A multi round-trip request: the answers go with the same call, sent again.
        params = {"name": tool_name, "arguments": arguments,
                  "inputResponses": answer_all(tool_name, result.get("inputRequests") or {})}
        if result.get("requestState") is not None:
            params["requestState"] = result["requestState"]
    else:
        raise ProtocolFailure(f"tools/call {tool_name}: still asking after {MAX_ROUNDS} rounds of answers; stopped")
    if raw:
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_result(result)
    if result.get("isError"):
        click.echo(f"Error: the tool {tool_name!r} returned an error result.", err=True)
        sys.exit(TOOL_ERROR_EXIT)


def _needs_tasks(response: MCPResponse) -> bool:
    """Whether the call was refused for want of the tasks extension (a tool
    declared with ``task="required"``): ``-32021`` naming it."""
    if response.status_code != 400 or response.http.mimetype != "application/json":
        return False
    error = (response.http.get_json(silent=True) or {}).get("error") or {}
    required = (error.get("data") or {}).get("requiredCapabilities") or {}
    return isinstance(required, dict) and TASKS_EXTENSION in (required.get("extensions") or {})


def _await_task(endpoint: Endpoint, client: MCPTestClient, created: dict[str, Any], tool_name: str) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task ends; its result (or a failure). A
    task waiting for input is answered (``tasks/update``) when a person can be
    asked, else cancelled. Ctrl-C cancels the task before giving up."""
    task_id = created["taskId"]
    seen: tuple[str, str | None] | None = None
    try:
        while True:
            task = endpoint.request("tasks/get", {"taskId": task_id}, client)
            status = (task["status"], task.get("statusMessage"))
            if status != seen:
                seen = status
                click.echo(f"[task {task_id}: {status[0]}{': ' + status[1] if status[1] else ''}]", err=True)
            if task["status"] == INPUT_REQUIRED:
                answers = answer_all(tool_name, task.get("inputRequests") or {})
                endpoint.request("tasks/update", {"taskId": task_id, "inputResponses": answers}, client)
                continue
            if task["status"] in TERMINAL:
                break
            interval = task.get("pollIntervalMs") or created.get("pollIntervalMs") or 1000
            time.sleep(min(max(interval, 20), 5000) / 1000)
    except (KeyboardInterrupt, click.ClickException):
        endpoint.request("tasks/cancel", {"taskId": task_id}, client)
        raise
    if "result" in task:
        result: dict[str, Any] = task["result"]
        return result
    error = task.get("error") or {}
    raise ProtocolFailure(f"task {task_id} {task['status']}: {error.get('message', 'no result')}")


def print_result(result: dict[str, Any]) -> None:
    """Each content block (text as is, others as a one-line summary), then
    the structured content as JSON, unless a text block already is exactly it."""
    structured = result.get("structuredContent")
    for block in result.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text", "")
            if structured is not None and _parses_to(text, structured):
                continue
            click.echo(text)
        elif kind in ("image", "audio"):
            size = len(block.get("data", "")) * 3 // 4
            click.echo(f"[{kind} {block.get('mimeType', '?')}, {size} bytes]")
        elif kind == "resource_link":
            click.echo(f"[link {block.get('uri')} {block.get('mimeType') or ''}]".replace(" ]", "]"))
        elif kind == "resource":
            resource = block.get("resource") or {}
            click.echo(f"[resource {resource.get('uri')} {resource.get('mimeType') or ''}]".replace(" ]", "]"))
            if "text" in resource:
                click.echo(resource["text"])
        else:
            click.echo(json.dumps(block, ensure_ascii=False))
    if structured is not None:
        click.echo(json.dumps(structured, indent=2, ensure_ascii=False))


def _parses_to(text: str, value: Any) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False
