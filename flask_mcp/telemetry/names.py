"""The names telemetry uses, importable without any OpenTelemetry package."""

#: The conventions' histograms.
OPERATION_DURATION = "mcp.server.operation.duration"
SESSION_DURATION = "mcp.server.session.duration"

#: Bucket boundaries in seconds, as the conventions advise for both histograms.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

#: The logger of the access log.
ACCESS_LOGGER = "flask_mcp.access"

#: The attribute marking a retry's span link to the first round of its
#: multi round-trip call (2026-07-28 ``input_required``).
FIRST_ROUND_LINK = "flask_mcp.first_round"
#: The attribute marking a ``tasks/*`` span's link to the call that created the task.
TASK_CALL_LINK = "flask_mcp.task_call"
#: The task's id, on the spans of ``tasks/*`` requests and of the task's run.
TASK_ID = "flask_mcp.task.id"
#: How the task's run ended (``completed``, ``failed``, ``cancelled``), on its span.
TASK_STATUS = "flask_mcp.task.status"
#: The span of a client's answer to a request the server sent (legacy sessions).
RESPONSE_SPAN = "response"
#: The span of a durable call's run on its queue worker (``durable {tool}``).
DURABLE_SPAN = "durable"
#: The span of a ``GET`` with ``Last-Event-ID`` that picks a stream up again.
RESUME_SPAN = "resume"
#: The ``Last-Event-ID`` a resumed stream picked up after, on its span.
STREAM_LAST_EVENT_ID = "flask_mcp.stream.last_event_id"
#: How many events a resumed stream relayed, on its span.
STREAM_EVENTS = "flask_mcp.stream.events"

#: The operator gauges and counters (the conventions have none of these).
SESSIONS_LIVE = "flask_mcp.sessions.live"
TASKS_LIVE = "flask_mcp.tasks.live"
TASKS_RUNNING = "flask_mcp.tasks.running"
TASKS_ENDED = "flask_mcp.tasks.ended"
STREAMS_OPEN = "flask_mcp.streams.open"
#: ``response`` (a request's event stream) or ``long_lived`` (listen, resumed GET), on ``flask_mcp.streams.open``.
STREAM_KIND = "flask_mcp.stream.kind"
