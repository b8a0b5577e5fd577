"""What a tool reports while ``flask mcp call`` waits for it: progress and log
messages (``notifications/progress``, ``notifications/message``), shown on
standard error as they arrive, so that standard output holds the result only.

On a terminal, progress is one status line redrawn in place (a bar when the
tool gives a total) and log messages are printed above it. Anywhere else (a
pipe, a file, a CI log) each notification is one plain line, since carriage
returns and escape codes there are noise.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any, TextIO

import click

#: Width of the bar, in characters, when the terminal leaves room for it.
BAR_WIDTH = 24
_LEVEL_COLOURS = {"warning": "yellow", "error": "red", "critical": "red", "alert": "red", "emergency": "red"}


def log_text(params: dict[str, Any]) -> str:
    """A log message as one line: ``[level] data`` (``[level logger] ...``)."""
    data = params.get("data")
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    logger = f" {params['logger']}" if params.get("logger") else ""
    return f"[{params.get('level', 'info')}{logger}] {text}"


def progress_text(params: dict[str, Any]) -> str:
    """A progress notification as a plain line: ``[progress 2/5] message``."""
    total = f"/{_number(params['total'])}" if params.get("total") is not None else ""
    message = f" {params['message']}" if params.get("message") else ""
    return f"[progress {_number(params.get('progress', 0))}{total}]{message}"


def _columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` shows on (``COLUMNS`` first, as shutil does)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns if columns > 0 else shutil.get_terminal_size((80, 24)).columns  # 0: a size never set


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


class Reporter:
    """Shows each notification it is called with; ``live`` (default: whether
    the stream is a terminal) draws progress as a status line."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._status: str | None = None  # the status line on screen, if any

    def __call__(self, notification: dict[str, Any]) -> None:
        params = notification.get("params") or {}
        if notification.get("method") == "notifications/message":
            self.line(log_text(params), colour=_LEVEL_COLOURS.get(str(params.get("level"))))
        elif notification.get("method") == "notifications/progress":
            if self.live:
                self._draw(self._bar(params))
            else:
                self.line(progress_text(params))

    def line(self, text: str, *, colour: str | None = None) -> None:
        """A line of its own, above the status line (which is drawn again)."""
        status = self._status
        self.clear()
        click.echo(click.style(text, fg=colour) if colour and self.live else text, file=self.stream, color=self.live)
        if status is not None:
            self._draw(status)

    def clear(self) -> None:
        """Take the status line off the screen (before a prompt, or at the end)."""
        if self._status is not None:
            self.stream.write("\r\x1b[K")  # to the line's start, then erase it
            self.stream.flush()
            self._status = None

    def _draw(self, status: str) -> None:
        columns = _columns(self.stream)
        if len(status) >= columns:
            status = status[: max(columns - 2, 1)] + "…"
        self.stream.write("\r" + status + "\x1b[K")
        self.stream.flush()
        self._status = status

    @staticmethod
    def _bar(params: dict[str, Any]) -> str:
        progress = params.get("progress", 0)
        total = params.get("total")
        message = f"  {params['message']}" if params.get("message") else ""
        valid = isinstance(progress, (int, float)) and isinstance(total, (int, float)) and total > 0
        if not valid:
            return f"[{_number(progress)}]{message}"
        share = min(max(progress / total, 0.0), 1.0)
        filled = round(share * BAR_WIDTH)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        return f"[{bar}] {share:4.0%} {_number(progress)}/{_number(total)}{message}"
