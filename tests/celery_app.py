"""A tiny MCP server whose task tools run on Celery workers, for
tests/e2e/test_e2e_celery.py. The Celery app is built the way Flask's documentation
shows (``celery_init_app``: tasks run in an app context, the app is kept in
``app.extensions["celery"]``).

    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 FLASK_MCP_BACKEND=redis://127.0.0.1:6379/0 \\
        gunicorn -w 2 tests.celery_app:app
    ... celery -A tests.celery_app:celery_app worker --concurrency 1

With ``TELEMETRY_SPANS`` set, each gunicorn worker (at import) and each Celery
pool process (as it starts: the SDK's threads do not survive a fork) configures
the OpenTelemetry SDK: finished spans go to ``$TELEMETRY_SPANS.<pid>`` and
metrics, every 100 ms, to ``$TELEMETRY_SPANS.metrics.<pid>``, one JSON line each.
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery.signals import worker_process_init
from flask import Flask

from flask_mcp import MCP, Context
from tests.celery_setup import celery_init_app

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

#: Which worker runs a tool (set in each worker's environment by the test).
WORKER = os.environ.get("WORKER_NAME", "web")


def configure_telemetry(**_: object) -> None:
    """The OpenTelemetry SDK of this process, exporting to files named after its pid."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    base, pid = os.environ["TELEMETRY_SPANS"], os.getpid()
    resource = Resource.create({"service.name": f"celery-app-{WORKER}", "process.pid": pid})
    spans = open(f"{base}.{pid}", "a", buffering=1)  # noqa: SIM115 - open for the process's life
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(ConsoleSpanExporter(out=spans, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(tracer_provider)
    points = open(f"{base}.metrics.{pid}", "a", buffering=1)  # noqa: SIM115
    exporter = ConsoleMetricExporter(out=points, formatter=lambda data: data.to_json(indent=None) + "\n")
    metrics.set_meter_provider(MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=100)]))


if os.environ.get("TELEMETRY_SPANS"):
    if WORKER == "web":
        configure_telemetry()  # a gunicorn worker (no --preload: after the fork)
    else:
        worker_process_init.connect(configure_telemetry, weak=False)  # each Celery pool process

app = Flask(__name__)
app.config["SECRET_KEY"] = "celery-e2e-secret"
app.config["MCP_TASK_RUNNER"] = "celery"
app.config.from_prefixed_env()
celery_app = celery_init_app(app)
mcp = MCP(app, name="celery-tasks", version="1.0")


@mcp.tool(task="optional")
def tasked(seconds: float, ctx: Context) -> dict[str, Any]:
    """Works for ``seconds`` (stopping when cancelled); says which worker ran it."""
    ctx.set_task_status(f"running on {WORKER}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    return {"worker": WORKER, "task": ctx.task_id}


@mcp.tool(task="optional", task_rerun=False)
def fragile(seconds: float, ctx: Context) -> dict[str, Any]:
    """Like ``tasked``, but not safe to repeat: failed when its worker dies."""
    return tasked(seconds, ctx)


@mcp.tool(task="required")
def tasked_question(seconds: float, ctx: Context) -> dict[str, Any]:
    """Asks for a name, works for ``seconds``, then greets its owner."""
    ctx.set_task_status(f"asking on {WORKER}")
    answer = ctx.elicit("What is your name?", NAME_SCHEMA)
    name = answer.content.get("name") if answer.accepted and answer.content else None
    ctx.set_task_status(f"greeting on {WORKER}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()
        time.sleep(0.02)
    return {"greeting": f"Hello, {name}!", "worker": WORKER}


@mcp.tool(durable=True)
def durable_steps(steps: int, interval: float, ctx: Context, ask: bool = False) -> dict[str, Any]:
    """A durable call (2025 sessions run it on Celery): reports progress ``steps``
    times, ``interval`` seconds apart, asking for a name halfway when ``ask``."""
    name = None
    for i in range(1, steps + 1):
        ctx.report_progress(i, steps)
        if ask and i == steps // 2:
            answer = ctx.elicit("What is your name?", NAME_SCHEMA)
            name = answer.content.get("name") if answer.accepted and answer.content else None
        time.sleep(interval)
    return {"steps": steps, "name": name, "worker": WORKER}
