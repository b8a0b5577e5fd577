"""The Celery worker's entry point: the bookshop app with its task tools on Celery.

    FLASK_MCP_TASK_RUNNER=celery celery -A example.celery_worker worker --loglevel INFO
"""

from __future__ import annotations

import os

os.environ.setdefault("FLASK_MCP_TASK_RUNNER", "celery")

from example import app as bookshop  # noqa: E402 - after the runner is chosen

celery_app = bookshop.app.extensions["celery"]
