"""``flask mcp sessions``: how many legacy sessions and tasks the configured
backend holds, and (``--prune``) deleting the expired ones now rather than
waiting for the next create to do it."""

from __future__ import annotations

import json
from typing import Any

import click
from flask import current_app
from flask.cli import with_appcontext

from ..backends.contracts import BackendUnavailable, CountableStore, NotCountable


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
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@with_appcontext
def sessions_command(prune: bool, as_json: bool) -> None:
    """Count the legacy sessions and tasks the backend holds."""
    state = current_app.extensions["mcp"]
    backend = state.backend
    description = backend.describe()
    try:
        report = {
            "backend": description,
            "sessions": _inventory(backend.sessions, "sessions", prune),
            "tasks": _inventory(backend.tasks, "tasks", prune),
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
    if "note" in report:
        click.echo(f"Note: {report['note']}.")
