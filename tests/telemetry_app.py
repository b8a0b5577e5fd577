"""An app for tests/e2e/test_e2e_telemetry.py: each gunicorn worker configures the
OpenTelemetry SDK at import (no --preload: after the fork) and writes every
finished span as one JSON line to ``$TELEMETRY_SPANS`` (a file per worker)."""

from __future__ import annotations

import logging
import os
import time

from flask import Flask
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from flask_mcp import MCP, Context, ToolError

_spans = open(f"{os.environ['TELEMETRY_SPANS']}.{os.getpid()}", "a", buffering=1)  # noqa: SIM115
# process.pid in the resource tells the two workers' spans apart.
_provider = TracerProvider(resource=Resource.create({"service.name": "telemetry-app", "process.pid": os.getpid()}))
_provider.add_span_processor(
    SimpleSpanProcessor(ConsoleSpanExporter(out=_spans, formatter=lambda span: span.to_json(indent=None) + "\n"))
)
trace.set_tracer_provider(_provider)

# The access log, one JSON-ish line per request, next to the spans.
_access = logging.FileHandler(f"{os.environ['TELEMETRY_SPANS']}.access.{os.getpid()}")
_access.setFormatter(logging.Formatter("%(mcp_method)s|%(mcp_target)s|%(mcp_outcome)s|%(trace_id)s|%(mcp_subject)s"))
logging.getLogger("flask_mcp.access").addHandler(_access)
logging.getLogger("flask_mcp.access").setLevel(logging.INFO)

app = Flask(__name__)
app.config.update(SECRET_KEY="telemetry-e2e", MCP_AUTH=True, MCP_TOKEN_VERIFIER="presence",
                  MCP_RESOURCE_URL="http://127.0.0.1/mcp")
app.config.from_prefixed_env()  # FLASK_MCP_BACKEND: the test's own SQLite file, shared by both workers
mcp = MCP(app)
tracer = trace.get_tracer("telemetry_app")


@mcp.tool
def whoami() -> dict[str, int]:
    """The process id of the worker that ran this call."""
    return {"pid": os.getpid()}


@mcp.tool
def get_weather(city: str) -> str:
    """The weather, looked up inside a span of the tool's own."""
    with tracer.start_as_current_span("lookup") as span:
        span.set_attribute("city", city)
        return f"sunny in {city}"


@mcp.tool
def broken() -> str:
    """Fails as a tool error."""
    raise ToolError("the weather service is down")


@mcp.tool
def slow(ctx: Context) -> str:
    """Reports progress while it works."""
    for step in range(1, 4):
        ctx.report_progress(step, 3)
        time.sleep(0.01)
    return "done"



NAME = {"type": "object", "properties": {"name": {"type": "string"}}}


@mcp.tool
def ask_name(ctx: Context) -> str:
    """Asks the user for a name (elicitation), saying which worker waits for the answer."""
    answer = ctx.elicit(f"Your name? (worker {os.getpid()})", NAME)
    return f"hello {answer.content}"


@mcp.tool
def two_questions(ctx: Context) -> str:
    """Asks twice: on 2026-07-28, three rounds of one call."""
    first = ctx.elicit("First name?", NAME)
    second = ctx.elicit("Last name?", NAME)
    return f"hello {first.content} {second.content}"


@mcp.tool(task="optional")
def background() -> str:
    """Runs as a task when the client asks, with a span of its own inside."""
    with tracer.start_as_current_span("background work"):
        time.sleep(0.05)
        return "finished"
