"""What ``flask mcp call`` shows while a tool runs (flask_mcp.cli.progress):
a status line redrawn in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

import pytest

from flask_mcp.cli.progress import Reporter


def progress(value: float, total: float | None = None, message: str | None = None) -> dict[str, object]:
    params: dict[str, object] = {"progressToken": "t", "progress": value}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def log(level: str, data: object, logger: str | None = None) -> dict[str, object]:
    params = {"level": level, "data": data, **({"logger": logger} if logger else {})}
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}


def test_plain_lines_where_there_is_no_terminal() -> None:
    stream = io.StringIO()
    show = Reporter(stream, live=False)
    show(progress(1, 4, "first"))
    show(progress(2.5))
    show(log("warning", {"disk": "90%"}, logger="db"))
    show({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "x://y"}})
    show.clear()
    assert stream.getvalue() == '[progress 1/4] first\n[progress 2.5]\n[warning db] {"disk": "90%"}\n'


def test_on_a_terminal_the_status_line_is_redrawn_and_log_lines_go_above_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    stream = io.StringIO()
    show = Reporter(stream, live=True)
    show(progress(1, 4))
    show(log("info", "halfway"))
    show(progress(7, message="a message far too long for a forty-column terminal"))
    show.clear()
    assert stream.getvalue().split("\r") == [
        "",
        "[######------------------]  25% 1/4\x1b[K",
        "\x1b[K[info] halfway\n",  # the bar taken off, the line printed, the bar drawn again
        "[######------------------]  25% 1/4\x1b[K",
        "[7]  a message far too long for a fort…\x1b[K",  # cut to the terminal's width
        "\x1b[K",
    ]
