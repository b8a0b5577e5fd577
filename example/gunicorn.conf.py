"""gunicorn settings for the example.

Worker class: MCP answers stream (progress, logs, questions to a legacy client,
``subscriptions/listen``), and a streaming answer holds its worker thread for as
long as it is open. ``gthread`` gives each worker ``threads`` of them, so
ordinary POSTs still get through while streams are open (measured with
bench/streams.py: a worker with 8 threads holds 7 listen streams and still
answers POSTs in ~2 ms; the 8th stream starves them). A request that streams
also runs its tool in a thread of its own. For many long-lived listen
streams, ``worker_class = "gevent"`` (``pip install "flask-mcp[gevent]"``) with
``worker_connections = 1000`` held 999 streams per worker with POSTs at 2-5 ms
(bench/streams.py --worker-class gevent); under gevent, CPU-bound tools stall
the whole worker.

Reserve: listen and resumed streams may hold at most ``MCP_STREAM_SHARE`` (half
by default) of a worker's threads, as gunicorn reports them; further ones get
503 + Retry-After, so the other threads always answer ordinary requests. A
client that leaves frees its stream's thread within ``MCP_SSE_PROBE_INTERVAL``
(0.5 s). Sizing: docs/streams.md.

Timeouts: idle streams send a keep-alive comment every ``MCP_SSE_HEARTBEAT``
seconds (15 by default); with gthread the worker timeout only guards the
master-worker heartbeat, so the default is fine (with gevent it must outlast
the longest stall of the worker's hub); behind a proxy, its read timeout must
outlive the heartbeat. On shutdown, open streams are cut after
``graceful_timeout``; clients reconnect (2025-11-25 ones resume their streams).

Garbage collection: ``post_worker_init`` freezes what the worker has loaded
(Flask, the app, its tools' schemas) once the app is imported, so that the
collector's full passes no longer walk it on every few thousand requests
(bench/README.md: about 16 000 instructions less per request, a few per cent
of a small call).
"""

import gc

bind = "127.0.0.1:8000"
worker_class = "gthread"
# Sessions live in the SQLite file of the instance folder by default, which all
# workers of this machine share; set FLASK_MCP_BACKEND=redis://... for several hosts.
workers = 2
threads = 16
timeout = 120
graceful_timeout = 30
# Longer than clients keep idle connections for reuse (Node's fetch: 4 s): with
# gunicorn's default of 2 s, a client may send a request on a connection the
# worker is closing and see "other side closed" (e.g. while it polls a task).
keepalive = 5
accesslog = "-"


def post_worker_init(worker: object) -> None:
    gc.freeze()
