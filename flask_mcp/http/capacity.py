"""A reserve of worker threads for ordinary requests.

A long-lived stream (``subscriptions/listen``, a resumed ``GET`` stream) holds
one of its worker's threads for as long as it is open. Past ``MCP_STREAM_SHARE``
of the worker's threads held by such streams, a new one is refused with ``503``
and ``Retry-After`` (its client retries, perhaps on another worker), so the
remaining threads always answer tool calls and health checks. The thread count
is ``MCP_WORKER_THREADS``, else what gunicorn runs the worker with (gthread:
``--threads``; sync: 1; gevent and other async workers: ``--worker-connections``);
when neither is known (Flask's test client, other servers) streams are not limited.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
from typing import Any

from ..protocol import jsonrpc
from ..protocol.errors import InternalError
from ..protocol.jsonrpc import RequestId
from ..protocol.transport import Reply

logger = logging.getLogger("flask_mcp")

#: Seconds a refused stream's client is told to wait: streams free their
#: threads within about a second of their clients leaving.
RETRY_AFTER = 1


def gunicorn_worker_threads() -> int | None:
    """How many requests the current gunicorn worker serves at once, or
    ``None`` outside gunicorn. Gunicorn gives the application no handle on its
    configuration, but a worker installs its own methods as signal handlers,
    and they lead to the worker's ``cfg``."""
    worker = _gunicorn_worker()
    kinds = {cls.__name__ for cls in type(worker).__mro__ if cls.__module__.startswith("gunicorn.workers.")}
    cfg = getattr(worker, "cfg", None)
    if "ThreadWorker" in kinds:
        return _positive(getattr(cfg, "threads", None))
    if "AsyncWorker" in kinds:  # gevent, eventlet: one greenlet per connection
        return _positive(getattr(cfg, "worker_connections", None))
    if "SyncWorker" in kinds:
        return 1
    return None


def gunicorn_workers() -> int | None:
    """How many worker processes the gunicorn running this one starts, or
    ``None`` when unknown (outside gunicorn; in its master, with ``--preload``)."""
    worker = _gunicorn_worker()
    if not any(cls.__module__.startswith("gunicorn.workers.") for cls in type(worker).__mro__):
        return None
    return _positive(getattr(getattr(worker, "cfg", None), "workers", None))


def _gunicorn_worker() -> Any:
    """The object whose method handles SIGTERM: a gunicorn worker, in one."""
    try:
        handler = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):
        return None
    return getattr(handler, "__self__", None)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class StreamSlots:
    """The long-lived streams this process holds, against its share of threads."""

    def __init__(self, share: float, threads: int | None = None) -> None:
        self.share = share
        self._configured = threads
        self._lock = threading.Lock()
        self._held = 0
        self._pid: int | None = None
        self._threads: int | None = None
        #: Whether this process logged that it can take no stream at all.
        self._told = False

    @property
    def threads(self) -> int | None:
        """The worker's thread count (configured, else gunicorn's; ``None``: unknown)."""
        if self._configured is not None:
            return self._configured
        if self._pid != os.getpid():  # learned once per process (gunicorn forks its workers)
            self._threads, self._pid = gunicorn_worker_threads(), os.getpid()
        return self._threads

    @property
    def limit(self) -> int | None:
        """How many long-lived streams this worker may hold (``None``: no limit)."""
        threads = self.threads
        return None if threads is None else math.floor(self.share * threads + 1e-9)

    @property
    def held(self) -> int:
        return self._held

    def take(self) -> bool:
        """Take a slot for a new stream; ``False`` when the share is used up."""
        limit = self.limit
        with self._lock:
            if limit is not None and self._held >= limit:
                return False
            self._held += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._held = max(0, self._held - 1)

    def refusal(self, request_id: RequestId | None) -> Reply:
        """The ``503`` for a stream past the share: retry shortly. A worker whose
        share is no thread at all (gunicorn's sync worker) will never take one:
        its refusal invites no retry, and says what to change."""
        if self.limit == 0:
            if not self._told:
                self._told = True
                logger.warning(
                    "Long-lived MCP streams are refused: %s of %s thread(s) per worker is none; "
                    "run gunicorn with -k gthread --threads N (or -k gevent), or raise MCP_STREAM_SHARE",
                    f"MCP_STREAM_SHARE={self.share:g}", self.threads,
                )
            refused = InternalError(
                f"This server takes no long-lived streams: its workers have {self.threads} thread(s) and "
                f"MCP_STREAM_SHARE={self.share:g} leaves none for them (run gunicorn with "
                f"-k gthread --threads N, or -k gevent)."
            )
            return Reply(503, jsonrpc.error_message(request_id, refused))
        error = InternalError(
            f"This worker already holds {self._held} long-lived streams, its share of {self.threads} threads "
            f"(MCP_STREAM_SHARE={self.share:g}); the rest are kept for other requests. "
            f"Retry in {RETRY_AFTER} s."
        )
        return Reply(503, jsonrpc.error_message(request_id, error), {"Retry-After": str(RETRY_AFTER)})
