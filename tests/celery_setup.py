"""Flask's Celery pattern for the test servers that run task tools on Celery
(tests/celery_app.py, and tests/conformance/app.py with
FLASK_MCP_TASK_RUNNER=celery): tasks run in an app context, the Celery app is
kept in ``app.extensions["celery"]``; the broker comes from CELERY_BROKER_URL."""

from __future__ import annotations

import os

from celery import Celery, Task
from flask import Flask


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):  # type: ignore[misc]
        def __call__(self, *args: object, **kwargs: object) -> object:
            with app.app_context():
                return self.run(*args, **kwargs)

    app.config.setdefault("CELERY", {
        "broker_url": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"),
        "task_ignore_result": True,
        "worker_prefetch_multiplier": 1,  # a busy worker does not hold the next task back
        # Redis hands an unacknowledged task to another worker after this many
        # seconds: longer than any task here runs, short enough for the tests.
        "broker_transport_options": {
            "visibility_timeout": float(os.environ.get("VISIBILITY_TIMEOUT", "3600")),
            "unacked_restore_interval": 1,  # look for such tasks every second (kombu >= 5.6)
            "unacked_restore_throttle": 1,
        },
        "broker_connection_retry_on_startup": True,
    })
    celery = Celery(app.name, task_cls=FlaskTask)
    celery.config_from_object(app.config["CELERY"])
    celery.set_default()
    app.extensions["celery"] = celery
    return celery
