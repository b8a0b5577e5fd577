"""Running task tools in the background (the tasks extension; the protocol
side is :mod:`flask_mcp.protocol.task_methods`)."""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable

from flask import copy_current_request_context, current_app, has_request_context

from ..auth import login
from ..protocol.task_methods import Tasks
from ..telemetry.observer import carry_trace_context

#: Every app's tasks in this process, failed as the process exits (see :func:`watch`).
_WATCHED: weakref.WeakSet[Tasks] = weakref.WeakSet()


def in_background(work: Callable[[], None]) -> Callable[[], bool]:
    """Run ``work`` in a daemon thread of this worker, inside a copy of the
    current request's context (so ``current_app``, ``request`` and the app's
    extensions work in the tool as they do in a call answered at once).
    Returns whether the thread still runs."""
    if has_request_context():
        target = copy_current_request_context(login.carry(work))  # current_user: the caller there too
    else:
        app = current_app._get_current_object()  # type: ignore[attr-defined]

        def target() -> None:
            with app.app_context():
                work()

    thread = threading.Thread(target=carry_trace_context(target), name="flask-mcp-task", daemon=True)
    thread.start()
    return thread.is_alive


def watch(tasks: Tasks) -> Tasks:
    """Fail ``tasks`` still running when this process exits (a gunicorn worker
    stopping or restarting): their threads end with it."""
    _WATCHED.add(tasks)
    return tasks


@atexit.register
def _abandon_all() -> None:
    for tasks in list(_WATCHED):
        tasks.abandon_running()
