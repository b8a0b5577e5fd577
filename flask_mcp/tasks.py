"""Running task tools in the background (the tasks extension; the protocol
side is :mod:`flask_mcp.protocol.tasks`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from flask import copy_current_request_context, current_app, has_request_context


def in_background(work: Callable[[], None]) -> None:
    """Run ``work`` in a daemon thread of this worker, inside a copy of the
    current request's context (so ``current_app``, ``request`` and the app's
    extensions work in the tool as they do in a call answered at once)."""
    if has_request_context():
        target = copy_current_request_context(work)
    else:
        app = current_app._get_current_object()  # type: ignore[attr-defined]

        def target() -> None:
            with app.app_context():
                work()

    threading.Thread(target=target, name="flask-mcp-task", daemon=True).start()
