"""The bookshop's long job, a stock report, run as a task on Celery workers
(docs/celery.md). Loaded by example/app.py when ``MCP_TASK_RUNNER`` is
``"celery"`` (``FLASK_MCP_TASK_RUNNER=celery``); the worker's entry point is
example/celery_worker.py.
"""

from __future__ import annotations

import os
import time

from celery import Celery, Task
from flask import Flask

from flask_mcp import MCP, Context


def celery_init_app(app: Flask) -> Celery:
    """Flask's Celery pattern: tasks run in the app's context, and the Celery
    app is kept in ``app.extensions["celery"]`` (where flask-mcp sends task tools)."""

    class FlaskTask(Task):  # type: ignore[misc]
        def __call__(self, *args: object, **kwargs: object) -> object:
            with app.app_context():
                return self.run(*args, **kwargs)

    celery_app = Celery(app.name, task_cls=FlaskTask)
    celery_app.config_from_object(app.config["CELERY"])
    celery_app.set_default()
    app.extensions["celery"] = celery_app
    return celery_app


def init_reports(app: Flask, mcp: MCP, catalogue: dict[str, object]) -> Celery:
    app.config.setdefault("CELERY", {
        "broker_url": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"),
        "task_ignore_result": True,  # results go to the MCP task store, not Celery's
        "worker_prefetch_multiplier": 1,  # a busy worker does not hold the next report back
        # Redis gives an unacknowledged task to another worker after this long:
        # keep it above the longest report, or a slow one would run twice.
        "broker_transport_options": {"visibility_timeout": 3600},
    })

    @mcp.tool(task="optional", annotations={"readOnlyHint": True})
    def stock_report(ctx: Context, seconds_per_book: float = 1.0) -> dict[str, int]:
        """Count every book's copies, slowly (a stand-in for a long export)."""
        counted: dict[str, int] = {}
        for n, (isbn, book) in enumerate(catalogue.items(), 1):
            ctx.check_cancelled()  # a tasks/cancel stops the report here
            ctx.set_task_status(f"Counting book {n} of {len(catalogue)}")
            time.sleep(seconds_per_book)
            counted[isbn] = int(getattr(book, "in_stock", 0))
        return counted

    return celery_init_app(app)
