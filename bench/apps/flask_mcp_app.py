"""flask-mcp with the 52 benchmark tools.

    gunicorn -w 1 -k sync bench.apps.flask_mcp_app:app

The session backend comes from the environment (``FLASK_MCP_BACKEND``), like
every other ``MCP_*`` key, through ``app.config.from_prefixed_env()``.
``BENCH_OTEL=sampled`` or ``unsampled`` configures the OpenTelemetry SDK in the
worker (spans dropped by a processor that keeps nothing; metrics kept in
memory), to measure the cost of tracing (bench/README.md, "Telemetry"). ``BENCH_NO_EXPRESS=1``
sends every request the general way (the express lane off: bench/README.md,
"issue 35: the express lane").
"""

from __future__ import annotations

import gc
import os

from flask import Flask

from flask_mcp import MCP

from .tools_def import all_tools


def _configure_otel(mode: str) -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

    provider = TracerProvider(sampler=ALWAYS_ON if mode == "sampled" else ALWAYS_OFF)
    provider.add_span_processor(SpanProcessor())  # the base class keeps nothing: no export cost measured
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


if os.environ.get("BENCH_OTEL"):
    _configure_otel(os.environ["BENCH_OTEL"])

app = Flask(__name__)
app.config.from_prefixed_env()

mcp = MCP(app, name="bench", version="1.0.0")
for fn in all_tools():
    mcp.add_tool(fn)

if os.environ.get("BENCH_NO_EXPRESS"):  # every request on the general path (the express lane's A/B)
    app.extensions["mcp"].server.express = None

# Like every app in this benchmark (floor, flask-mcp, SDK): once loaded, its objects are
# moved out of the garbage collector's reach, as example/gunicorn.conf.py advises (see
# bench/README.md, "Garbage collection").
gc.freeze()
