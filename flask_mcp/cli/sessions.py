"""``flask mcp sessions``: how many legacy sessions and tasks the configured
backend holds, the tasks still running (which tool, session, since when, their
status message, which Celery task runs them; durable calls of 2025 sessions
among them, with their stream), and (``--prune``) deleting the
expired ones now rather than waiting for the next create to do it."""

from __future__ import annotations

import json
import time
from typing import Any

import click
from flask import current_app
from flask.cli import with_appcontext

from ..backends.contracts import BackendUnavailable, CountableStore, ListingTaskStore, NotCountable
from ..protocol.task_records import TaskRecord, iso

#: How many running tasks are listed unless ``--limit`` says otherwise (the oldest first).
LIMIT = 50


def _inventory(store: Any, what: str, prune: bool) -> dict[str, Any]:
    """One store's count (and prune): numbers, or the reason there are none."""
    if store is None:
        return {"countable": False, "reason": f"this backend keeps no {what}"}
    if not isinstance(store, CountableStore):
        return {"countable": False,
                "reason": f"the store {type(store).__name__} offers no count() and prune() methods"}
    try:
        pruned = store.prune() if prune else None
        count = store.count()
    except NotCountable as exc:
        return {"countable": False, "reason": str(exc)}
    entry: dict[str, Any] = {"countable": True, "live": count.live, "expired": count.expired}
    if pruned is not None:
        entry["pruned"] = pruned
    return entry


def _running(store: Any, limit: int) -> dict[str, Any]:
    """The tasks still running, oldest first, or the reason they cannot be listed."""
    if store is None:
        return {"listable": False, "reason": "this backend keeps no tasks"}
    if not isinstance(store, ListingTaskStore):
        return {"listable": False, "reason": f"the store {type(store).__name__} offers no unfinished() method"}
    records = store.unfinished(limit + 1)  # one more tells whether some were left out
    return {"listable": True, "tasks": [_entry(record) for record in records[:limit]],
            "more": len(records) > limit}


def _entry(record: TaskRecord) -> dict[str, Any]:
    return {
        "task_id": record.task_id,
        "tool": record.tool,
        "session_id": record.session_id,
        "status": record.status,
        "status_message": record.status_message,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "queued": record.queued,
        "runs": record.runs,
        "celery_task_id": record.queue_id,
        "cancel_requested": record.cancel_requested,
        "durable": record.durable,
        "stream_id": record.stream_id,
    }


def _ago(stamp: str, now: float) -> str:
    from datetime import datetime

    seconds = max(0, round(now - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _running_lines(running: dict[str, Any], now: float) -> list[str]:
    if not running["listable"]:
        return [f"Running tasks: not listed: {running['reason']}"]
    tasks = running["tasks"]
    if not tasks:
        return ["Running tasks: none"]
    shown = f"the oldest {len(tasks)}" if running["more"] else str(len(tasks))
    lines = [f"Running tasks ({shown}):"]
    for task in tasks:
        if task["queued"]:
            where = f"queued on Celery (task {task['celery_task_id']})"
        elif task["celery_task_id"]:
            where = f"on Celery (task {task['celery_task_id']}, run {task['runs']})"
        else:
            where = "in a web worker's thread"
        line = (f"  {task['task_id']}  {task['tool'] or '?'}  {task['status']}"
                f"  since {task['created_at']} ({_ago(task['created_at'], now)})  {where}")
        if task["session_id"]:
            line += f"  session {task['session_id']}"
        if task["durable"]:  # a 2025 session's durable call, its stream in the event log
            line += f"  durable call, stream {task['stream_id']}"
        if task["cancel_requested"]:
            line += "  cancel requested"
        lines.append(line)
        if task["status_message"]:
            lines.append(f"      {task['status_message']} (updated {_ago(task['updated_at'], now)} ago)")
    return lines


def _line(label: str, entry: dict[str, Any], noun: str) -> str:
    if not entry["countable"]:
        return f"{label}: not counted: {entry['reason']}"
    line = f"{label}: {entry['live']} live"
    if entry["expired"]:
        line += f", {entry['expired']} expired awaiting pruning (flask mcp sessions --prune)"
    if "pruned" in entry:
        line += f"; pruned {entry['pruned']} expired {noun}{'' if entry['pruned'] == 1 else 's'}"
    return line


@click.command("sessions")
@click.option("--prune", is_flag=True, help="Delete expired sessions and tasks now.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts and the running tasks as JSON.")
@click.option("--limit", type=click.IntRange(min=1), default=LIMIT, show_default=True,
              help="List at most this many running tasks (the oldest first).")
@with_appcontext
def sessions_command(prune: bool, as_json: bool, limit: int) -> None:
    """Count the legacy sessions and tasks the backend holds; list the tasks still running."""
    state = current_app.extensions["mcp"]
    backend = state.backend
    description = backend.describe()
    try:
        report = {
            "backend": description,
            "sessions": _inventory(backend.sessions, "sessions", prune),
            "tasks": _inventory(backend.tasks, "tasks", prune),
            "running": _running(backend.tasks, limit),
        }
    except BackendUnavailable as exc:
        raise click.ClickException(f"the backend {description} is unavailable: {exc}") from None
    if description.startswith("memory"):
        report["note"] = ("memory:// keeps sessions and tasks inside each server process: this command "
                          "runs in a process of its own, so it sees none of the server's")
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"Backend: {description}")
    click.echo(_line("Legacy sessions", report["sessions"], "session"))
    click.echo(_line("Tasks", report["tasks"], "task"))
    for line in _running_lines(report["running"], time.time()):
        click.echo(line)
    if "note" in report:
        click.echo(f"Note: {report['note']}.")
