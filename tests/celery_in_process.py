"""An app whose durable calls run on a Celery worker inside the test process
(kombu's in-memory broker, the solo pool), for the unit tests of calls that run
on Celery; tests/e2e runs real worker processes on Redis instead.

Import it after ``pytest.importorskip("celery")``."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from celery.contrib.testing.worker import start_worker
from flask import Flask

# By its basename (pytest puts tests/ on the path; tox runs the installed wheel, where no
# `tests` package is importable), and dynamically: the Celery apps import it as
# tests.celery_setup, and mypy would see one file under two module names.
celery_init_app = importlib.import_module("celery_setup").celery_init_app


def memory_celery_app(import_name: str) -> Flask:
    """A testing app with ``MCP_TASK_RUNNER = "celery"`` on the memory backend and
    broker, its Celery app in ``app.extensions["celery"]``; add MCP and tools."""
    app = Flask(import_name)
    app.config.update({
        "TESTING": True, "MCP_BACKEND": "memory://", "MCP_TASK_RUNNER": "celery",
        "MCP_SSE_PROBE_INTERVAL": 0.05,
        "CELERY": {"broker_url": "memory://", "task_ignore_result": True, "worker_prefetch_multiplier": 1,
                   "broker_transport_options": {"polling_interval": 0.01}},
    })
    celery_init_app(app)
    return app


def app_without_a_queue(import_name: str) -> Flask:
    """A Celery-runner app that keeps no Celery app: a durable call's hand-off
    fails. Its one durable tool, ``slow``, never runs."""
    from flask_mcp import MCP

    app = Flask(import_name)
    app.config.update({"TESTING": True, "MCP_BACKEND": "memory://", "MCP_TASK_RUNNER": "celery"})
    mcp = MCP(app, name="no-queue", version="1.0")

    @mcp.tool(durable=True)
    def slow() -> str:
        """Never runs here."""
        return "ran"

    return app


@contextmanager
def celery_worker(app: Flask) -> Iterator[Flask]:
    """``app`` with a Celery worker running its calls in this process meanwhile.
    The worker sets the root logger's level (to ERROR) and handlers for the whole
    process; they are put back after it, or later tests would no longer see
    warnings in their logs."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        with start_worker(app.extensions["celery"], pool="solo", perform_ping_check=False, shutdown_timeout=5):
            yield app
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
