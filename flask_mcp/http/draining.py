"""A worker that is shutting down lets its durable streams go at once.

A durable call (docs/celery.md) runs on Celery and its events wait in the
event log, so the web worker streaming it is only a window onto it: on a
graceful shutdown (gunicorn sends its workers SIGTERM on ``kill -HUP``, a
rolling restart or ``max_requests``), the stream is closed with an SSE
``retry`` hint instead of holding the worker until ``graceful_timeout``, and
the client resumes on another worker. Streams of calls that run here finish
as before.

``flask_mcp.gunicorn_conf`` installs the signal handler in ``post_worker_init``;
an app with its own gunicorn configuration adds the one line::

    def post_worker_init(worker):
        flask_mcp.http.draining.install()
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

_DRAINING = threading.Event()


def draining() -> bool:
    """Whether this process is shutting down (its durable streams let go)."""
    return _DRAINING.is_set()


def begin() -> None:
    """Let this process's durable streams go from their next wake-up on."""
    _DRAINING.set()


def install(signum: int = signal.SIGTERM) -> None:
    """Begin draining on ``signum`` (SIGTERM), then run the handler that was
    there (gunicorn's, which stops the worker gracefully). Call it in the
    worker process after the server installed its own handlers."""
    previous = signal.getsignal(signum)

    def handler(number: int, frame: FrameType | None) -> Any:
        begin()
        if callable(previous):
            return previous(number, frame)
        if previous == signal.SIG_DFL:
            signal.signal(number, signal.SIG_DFL)
            signal.raise_signal(number)
        return None

    signal.signal(signum, handler)


def end() -> None:
    """Stop draining (a worker that stays up after all, and tests)."""
    _DRAINING.clear()
