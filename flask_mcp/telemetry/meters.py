"""The metrics side of :mod:`flask_mcp.telemetry.otel`: the instruments made
from a meter, the operator gauges' callbacks, and the labels the operation
histogram may carry (low cardinality: no ids, no URIs, no name a client made up)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import metrics

from ..protocol.errors import InvalidParams, InvalidRequest, MethodNotFound, ParseError
from ..protocol.task_methods import TASK_METHODS
from ..protocol.task_records import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING
from ..protocol.versions import REVISIONS
from .gauges import GaugeSources
from .names import (
    DURATION_BUCKETS,
    OPERATION_DURATION,
    SESSION_DURATION,
    SESSIONS_LIVE,
    STREAM_KIND,
    STREAMS_OPEN,
    TASK_STATUS,
    TASKS_ENDED,
    TASKS_LIVE,
    TASKS_RUNNING,
)


def make_instruments(meter: metrics.Meter) -> tuple[metrics.Histogram, metrics.Histogram, metrics.Counter]:
    """The operation and session histograms and the ended-tasks counter."""
    operation = meter.create_histogram(
        OPERATION_DURATION, unit="s",
        description="MCP request or notification duration as observed on the receiver.",
        explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
    )
    session = meter.create_histogram(
        SESSION_DURATION, unit="s",
        description="The duration of the MCP session as observed on the server.",
        explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
    )
    tasks_ended = meter.create_counter(
        TASKS_ENDED, unit="{task}", description="Task runs this process ended, by final status.")
    return operation, session, tasks_ended


def observe(meter: metrics.Meter, sources: GaugeSources) -> None:
    """The operator gauges, read from ``sources`` at each collection (never on a request)."""

    def reading(read: Callable[[], int | None], attributes: dict[str, str] | None = None) -> Callable[..., Any]:
        def callback(options: metrics.CallbackOptions) -> list[metrics.Observation]:
            value = read()
            return [] if value is None else [metrics.Observation(value, attributes)]

        return callback

    if sources.sessions is not None:
        meter.create_observable_gauge(SESSIONS_LIVE, [reading(sources.sessions.value)], unit="{session}",
                                      description="Live legacy sessions in the session store (store-wide).")
    if sources.task_statuses is not None:
        meter.create_observable_gauge(TASKS_LIVE, [_by_status(sources.task_statuses.value)], unit="{task}",
                                      description="Live task records in the task store by status (store-wide).")
    elif sources.tasks is not None:
        meter.create_observable_gauge(TASKS_LIVE, [reading(sources.tasks.value)], unit="{task}",
                                      description="Live task records in the task store (store-wide).")
    if sources.running_tasks is not None:
        meter.create_observable_up_down_counter(TASKS_RUNNING, [reading(sources.running_tasks)], unit="{task}",
                                                description="Task tools running in this process.")
    streams = [reading(read, {STREAM_KIND: kind}) for kind, read in
               (("response", sources.response_streams), ("long_lived", sources.long_lived_streams))
               if read is not None]
    if streams:
        meter.create_observable_up_down_counter(STREAMS_OPEN, streams, unit="{stream}",
                                                description="Event streams this process holds open.")


def _by_status(read: Callable[[], dict[str, int] | None]) -> Callable[..., Any]:
    """A callback observing one value per task status (every known status, 0 when none has it)."""

    def callback(options: metrics.CallbackOptions) -> list[metrics.Observation]:
        counts = read()
        if counts is None:
            return []
        statuses = dict.fromkeys(_STATUSES, 0) | counts
        return [metrics.Observation(n, {TASK_STATUS: status}) for status, n in statuses.items()]

    return callback


#: The statuses ``flask_mcp.tasks.live`` always reports (a series that drops to 0 stays).
_STATUSES = (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED)


#: The span attributes the operation histogram keeps (low cardinality: no ids, no URIs).
_METRIC_KEYS = frozenset({
    "mcp.method.name", "mcp.protocol.version", "gen_ai.tool.name", "gen_ai.prompt.name", "gen_ai.operation.name",
    "error.type", "rpc.response.status_code", "network.transport", "network.protocol.name",
})
#: Outcomes whose method, tool or prompt name is the client's word only (never
#: served, or refused before anything checked it): kept out of the metric's
#: labels, or any client could mint new time series at will.
_UNCHECKED_NAME = frozenset({"401", "403", "429", str(MethodNotFound.code), str(InvalidParams.code),
                             str(InvalidRequest.code), str(ParseError.code)})
#: What stands for such a name (the conventions' value for an unknown one).
OTHER = "_OTHER"


def metric_attributes(attributes: dict[str, Any], error_type: str | None) -> dict[str, Any]:
    """The span's attributes the operation histogram may carry: low cardinality,
    so no ids or URIs, and no name a client made up."""
    kept = {key: value for key, value in attributes.items() if key in _METRIC_KEYS}
    if error_type in _UNCHECKED_NAME:
        for key in ("gen_ai.tool.name", "gen_ai.prompt.name"):
            if key in kept:
                kept[key] = OTHER
        if kept.get("mcp.method.name") not in _KNOWN_METHODS:
            kept["mcp.method.name"] = OTHER
    return kept


#: Every method some revision or extension serves: a refused request keeps its
#: method's name on the metric only when it is one of these.
_KNOWN_METHODS = frozenset().union(*(revision.core_methods for revision in REVISIONS.values())) | TASK_METHODS
