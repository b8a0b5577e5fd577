"""Recommended gunicorn settings for a flask-mcp server, shipped with the package:

    gunicorn -c python:flask_mcp.gunicorn_conf -b 0.0.0.0:8000 app:app

Command-line options win over these (``-w 4``, ``--threads 32``, ``-k gevent``).
``WEB_CONCURRENCY`` sets the number of workers (default 2), as on most hosts.

Worker class: MCP answers stream (progress, logs, questions to a legacy client,
``subscriptions/listen``), and a streaming answer holds its worker thread for as
long as it is open. ``gthread`` gives each worker ``threads`` of them, so
ordinary POSTs still get through while streams are open (bench/streams.py: a
worker with 8 threads holds 7 listen streams and still answers POSTs in ~2 ms;
the 8th stream starves them). For many long-lived listen streams use
``-k gevent --worker-connections 1000`` (``pip install "flask-mcp[gevent]"``),
where CPU-bound tools stall the whole worker.

Reserve: listen and resumed streams may hold at most ``MCP_STREAM_SHARE`` (half
by default) of a worker's threads; further ones get 503 + Retry-After, so the
other threads always answer ordinary requests. A client that leaves frees its
stream's thread within ``MCP_SSE_PROBE_INTERVAL`` (0.5 s). Sizing:
docs/streams.md.

Timeouts: idle streams send a keep-alive comment every ``MCP_SSE_HEARTBEAT``
seconds; with gthread the worker timeout only guards the master-worker
heartbeat. On shutdown, open streams are cut after ``graceful_timeout``;
clients reconnect (2025-11-25 ones resume their streams).

Keep-alive above the time clients keep an idle connection for reuse (Node's
fetch: 4 s): with gunicorn's default of 2 s a client may send a request on a
connection the worker is closing and see "other side closed".

Deploys: ``post_worker_init`` also makes SIGTERM (which gunicorn sends its
workers on ``kill -HUP``, ``USR2`` upgrades, ``max_requests`` and rolling
restarts) close the streams of durable calls (docs/celery.md) at once with a
``retry`` hint: their calls run on Celery, and the clients resume on another
worker instead of holding this one until ``graceful_timeout``.

Garbage collection: ``post_worker_init`` freezes what the worker has loaded
(Flask, the app, its tools' schemas), so the collector's full passes no longer
walk it every few thousand requests (bench/README.md: about 16 000
instructions less per request).
"""

from __future__ import annotations

import gc
import os

from .http import draining

__all__ = ["accesslog", "graceful_timeout", "keepalive", "post_worker_init", "threads", "timeout", "worker_class",
           "workers"]

worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = 16
timeout = 120
graceful_timeout = 30
keepalive = 5
accesslog = "-"


def post_worker_init(worker: object) -> None:
    """Let durable streams go on SIGTERM (after gunicorn installed its handler,
    which still runs); freeze the loaded app out of the garbage collector's reach."""
    draining.install()
    gc.freeze()
