"""The conformance fixture server: the tools, resources and prompts that the
official MCP conformance suite calls (by the names its scenarios use; the
official Python SDK's everything-server is the reference), built only with
flask-mcp's public API. tests/conformance/runner.py runs the suite against it;
other checks start it by this path:

    gunicorn -k gthread --threads 8 --keep-alive 5 -b 127.0.0.1:PORT tests.conformance.app:app

(``--keep-alive 5``: see docs/deploying.md; the tasks-* scenarios poll tasks.)
"""

from __future__ import annotations

import io
import json
import struct
import time
import wave
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from flask import Flask

from flask_mcp import MCP, Audio, Context, EmbeddedResource, Header, Image, MCPError, ToolError, UserMessage

app = Flask(__name__)
# Seals the 2026-07-28 requestState; a real deployment sets its own secret.
app.config["SECRET_KEY"] = "conformance-fixture-not-a-secret"
# The skills extension's optional resources/directory/read (sep-2640-skills-directory).
app.config["MCP_SKILLS_DIRECTORY_READ"] = True
app.config.from_prefixed_env()
mcp = MCP(app, name="flask-mcp-conformance", version="1.0.0")


def _png_1x1() -> bytes:
    """A valid 1x1 red PNG, built here rather than shipped as a blob."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return buffer.getvalue()


PNG = _png_1x1()
WAV = _wav_silence()


# The first tool listed takes no arguments: http-header-validation calls it with {}.
@mcp.tool
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@mcp.tool
def test_image_content() -> Image:
    """Returns an image (a 1x1 PNG)."""
    return Image(PNG, "image/png")


@mcp.tool
def test_audio_content() -> Audio:
    """Returns an audio clip (a short WAV)."""
    return Audio(WAV, "audio/wav")


@mcp.tool
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@mcp.tool
def test_multiple_content_types() -> list[str | Image | EmbeddedResource]:
    """Returns text, an image and an embedded resource."""
    return [
        "Multiple content types test:",
        Image(PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource",
            text='{"test": "data", "value": 123}',
            mime_type="application/json",
        ),
    ]


@mcp.tool
def test_error_handling() -> str:
    """Always fails with a tool error (isError: true)."""
    raise ToolError("This tool intentionally returns an error for testing")


@mcp.tool
def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability; refuses without it."""
    ctx.require_client_capability(sampling={})
    return "The client declared sampling."


@mcp.tool
def test_x_mcp_header(region: Annotated[str, Header("Region")]) -> str:
    """Echoes a region that is mirrored in the Mcp-Param-Region header."""
    return f"Region: {region}"


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "address",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "kind": {"type": "string", "enum": ["person", "company"]},
        "vat": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
    "if": {"properties": {"kind": {"const": "company"}}, "required": ["kind"]},
    "then": {"required": ["vat"]},
    "else": {},
    "additionalProperties": False,
}


@mcp.tool(input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    kind: str | None = None,
    vat: str | None = None,
) -> str:
    """Has an input schema that uses JSON Schema 2020-12 keywords."""
    return f"Received: name={name}, address={address}, kind={kind}, vat={vat}"


@mcp.tool
def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 when the client asks for progress."""
    for step in (0, 50, 100):
        ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            time.sleep(0.05)
    return "Progress test completed"


@mcp.tool
def test_tool_with_logging(ctx: Context) -> str:
    """Logs three info messages while it runs."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        ctx.info(text)
        time.sleep(0.05)
    return "Logging test completed"


@mcp.tool
def test_reconnection(ctx: Context) -> str:
    """Logs, lets its response connection go mid-call (2025-11-25: the client
    resumes with GET + Last-Event-ID), then finishes."""
    ctx.info("Before the reconnection")
    ctx.close_stream(retry_ms=100)
    time.sleep(0.2)
    return "Reconnection test completed"


@mcp.tool
def test_logging_tool(ctx: Context) -> str:
    """Logs at several levels; a 2026-07-28 client only gets them with a logLevel in _meta."""
    ctx.debug("debug detail")
    ctx.info("Tool execution started")
    ctx.warning("a warning")
    return "Logging tool completed"


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcp.tool
def test_streaming_elicitation(ctx: Context) -> str:
    """Asks the person for their name (an input_required result on 2026-07-28)."""
    answer = ctx.elicit("Please provide your name", NAME_SCHEMA)
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@mcp.tool
def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for the user's name, then greets them."""
    answer = ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@mcp.tool
def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question and returns its answer."""
    result = ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    content = result.get("content") or {}
    return f"The model said: {content.get('text', '') if isinstance(content, dict) else content}"


@mcp.tool
def test_input_required_result_list_roots(ctx: Context) -> str:
    """Lists the client's roots."""
    roots = ctx.list_roots(key="client_roots")
    return "Client roots: " + ", ".join(str(root.get("uri")) for root in roots)


@mcp.tool
def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the sealed requestState carries the round."""
    answer = ctx.elicit(
        "Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"state-ok: confirmed={(answer.content or {}).get('ok')}"


@mcp.tool
def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for a name, a model greeting and the roots in one round."""
    name, greeting, roots = ctx.ask(
        ctx.elicitation("What is your name?", NAME_SCHEMA, key="user_name"),
        ctx.sampling("Write a one-line greeting.", max_tokens=50, key="greeting"),
        ctx.roots(key="client_roots"),
    )
    text = (greeting.get("content") or {}).get("text", "")
    return f"name={(name.content or {}).get('name')}; greeting={text}; roots={len(roots)}"


@mcp.tool
def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions, one round each."""
    first = ctx.elicit("What is your name?", NAME_SCHEMA, key="step1")
    colour_schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    second = ctx.elicit("What is your favourite colour?", colour_schema, key="step2")
    return f"{(first.content or {}).get('name')} likes {(second.content or {}).get('color')}"


@mcp.tool
def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; an altered requestState is refused."""
    answer = ctx.elicit(
        "Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"confirmed={(answer.content or {}).get('ok')}"


@mcp.tool
def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared: elicitation if it can, else sampling."""
    if ctx.has_client_capability("elicitation"):
        answer = ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        return f"elicited: {answer.action}"
    result = ctx.sample("What is your name?", max_tokens=50, key="capital_question")
    return f"sampled: {(result.get('content') or {}).get('text', '')}"


@mcp.tool
def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model to answer the prompt (sampling)."""
    result = ctx.sample(prompt, max_tokens=100)
    content = result.get("content") or {}
    return f"LLM response: {content.get('text', '') if isinstance(content, dict) else content}"


@mcp.tool
def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the person for a username and an email (elicitation)."""
    schema = {
        "type": "object",
        "properties": {"username": {"type": "string"}, "email": {"type": "string", "format": "email"}},
        "required": ["username", "email"],
    }
    answer = ctx.elicit(message, schema)
    return f"User response: action={answer.action}, content={answer.content}"


@mcp.tool
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks with a form whose every field has a default (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    answer = ctx.elicit("Please review your details", schema)
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


@mcp.tool
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks with the five enum styles of SEP-1330."""
    colours = ["red", "green", "blue"]
    titled = [{"const": c, "title": c.title()} for c in colours]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": colours},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {"type": "string", "enum": colours, "enumNames": [c.title() for c in colours]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": colours}},
            "titledMulti": {"type": "array", "items": {"anyOf": titled}},
        },
    }
    answer = ctx.elicit("Pick some colours", schema)
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


def _temporary_tool() -> str:
    """Exists for a moment, to change the tool list."""
    return "temporary"


@mcp.tool
def test_trigger_tool_change() -> str:
    """Changes the tool list (adds and removes a tool), which listen streams hear about."""
    mcp.add_tool(_temporary_tool, name="test_temporary_tool")
    mcp.remove_tool("test_temporary_tool")
    return "Tool list changed"


# ---------------------------------------------------------------------- tasks (io.modelcontextprotocol/tasks)


@mcp.tool
def greet(name: str) -> str:
    """Greets someone at once (never a task)."""
    return f"Hello, {name}!"


def _work(ctx: Context, seconds: float) -> None:
    """Sleep for ``seconds``, stopping early when the task is cancelled."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
    ctx.check_cancelled()


@mcp.tool(task="optional")
def slow_compute(seconds: float, ctx: Context, label: str = "") -> str:
    """Works for `seconds` seconds, then reports; a task when the client takes tasks."""
    _work(ctx, seconds)
    return f"Computed {label or 'result'} after {seconds:g} s"


@mcp.tool(task="optional")
def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks the person to confirm before deleting a file (nothing is deleted)."""
    answer = ctx.elicit(
        f"Delete {filename}?",
        {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
    )
    confirmed = answer.accepted and bool((answer.content or {}).get("confirm"))
    return f"{'Deleted' if confirmed else 'Kept'} {filename}"


@mcp.tool(task="optional")
def multi_input(ctx: Context) -> str:
    """Asks two questions at once."""
    name, confirm = ctx.ask(
        ctx.elicitation("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
        ctx.elicitation("Proceed?", {"type": "object", "properties": {"confirm": {"type": "boolean"}}}),
    )
    return f"Got name={name.action}, confirm={confirm.action}"


@mcp.tool(task="required")
def failing_job(ctx: Context) -> str:
    """Always a task; ends with a tool error after about a second."""
    _work(ctx, 1)
    raise ToolError("The job failed (as it always does).")


@mcp.tool(task="optional")
def protocol_error_job(ctx: Context) -> str:
    """Always a task when possible; ends with a JSON-RPC (protocol) error."""
    _work(ctx, 0.2)
    raise MCPError("The job hit an internal protocol error.")


@mcp.tool(task="required", task_start="explicit")
def test_tool_with_task(ctx: Context) -> str:
    """Asks for the person's name in the tools/call itself, then continues as a task."""
    answer = ctx.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        key="user_name",
    )
    ctx.start_task("Greeting")
    _work(ctx, 0.2)
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


# ---------------------------------------------------------------------- resources


@mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return PNG


@mcp.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients subscribe to."""
    return "This resource is watched for changes."


@mcp.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    """Data for an id, from a URI template."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


# ---------------------------------------------------------------------- prompts


@mcp.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments.

    Args:
        arg1: First test argument
        arg2: Second test argument
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:  # noqa: N803 - the wire name
    """A prompt that embeds a resource.

    Args:
        resourceUri: URI of the resource to embed
    """
    embedded = EmbeddedResource(resourceUri, text="Embedded resource content for testing.", mime_type="text/plain")
    return [UserMessage(embedded), UserMessage("Please process the embedded resource above.")]


@mcp.prompt
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    return [UserMessage(Image(PNG, "image/png")), UserMessage("Please analyze the image above.")]


@mcp.prompt
def test_input_required_result_prompt(ctx: Context) -> str:
    """Asks the user for context (an input_required result on 2026-07-28), then returns the prompt."""
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    answer = ctx.elicit("What context should the prompt use?", schema, key="user_context")
    return f"Use this context: {(answer.content or {}).get('context', 'none')}"


@mcp.completion(prompt="test_prompt_with_arguments", argument="arg1")
def complete_arg1(value: str) -> list[str]:
    """Suggestions for arg1, by prefix."""
    return [word for word in ("paris", "park", "party", "test", "testValue1") if word.startswith(value)]


@mcp.completion(resource="test://template/{id}/data", argument="id")
def complete_template_id(value: str) -> list[str]:
    return [str(n) for n in range(1, 200) if str(n).startswith(value)]


def _temporary_prompt() -> str:
    """Exists for a moment, to change the prompt list."""
    return "temporary"


@mcp.tool
def test_trigger_prompt_change() -> str:
    """Changes the prompt list (adds and removes a prompt), which listen streams hear about."""
    mcp.add_prompt(_temporary_prompt, name="test_temporary_prompt")
    mcp.remove_prompt("test_temporary_prompt")
    return "Prompt list changed"


# ---------------------------------------------------------------------- skills (SEP-2640)
# The sep-2640-* scenarios list skills, get the first one, read its SKILL.md and
# its root directory (which must have a subdirectory: references/).
mcp.skills_from_directory(Path(__file__).parent / "skills")


@mcp.skill(frontmatter={"license": "MIT"})
def server_clock() -> dict[str, str]:
    """Tell the time as this server sees it (a generated skill: its manifest is dynamic)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return {"SKILL.md": "# Server clock\n\nSee [now.txt](now.txt).\n", "now.txt": now + "\n"}


if app.config["MCP_TASK_RUNNER"] == "celery":  # FLASK_MCP_TASK_RUNNER=celery: tests/e2e/test_e2e_celery.py
    from tests.celery_setup import celery_init_app

    celery_app = celery_init_app(app)
