"""What gunicorn's log shows at start: nothing but gunicorn's own lines for a
correct deployment (the example app, two workers, SQLite), and the memory://
warning exactly where it is true -- several workers, each with sessions of its
own -- and not for one worker, where memory:// is a correct choice."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import GunicornServer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_shell_flask_mcp_variables")]

MEMORY_WARNING = "MCP_BACKEND is memory://: sessions live in this process only, so with 2 gunicorn workers"


#: A gunicorn setting that says when each worker has loaded the app (its start-up warnings are then out).
READY_HOOK = """
def post_worker_init(worker):
    worker.log.info("worker %s loaded the app", worker.pid)
"""


def started(gunicorn_server: Callable[..., GunicornServer], tmp_path: Path, workers: int,
            **env: str) -> GunicornServer:
    """example.app under gunicorn, once each worker has loaded it."""
    hook = tmp_path / f"ready_{workers}.py"
    hook.write_text(READY_HOOK)
    server = gunicorn_server("example.app:app", workers=workers, env=env, extra_args=["-c", str(hook)])
    deadline = time.monotonic() + 30
    while server.output().count("loaded the app") < workers:
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.1)
    return server


def _app_lines(log: str) -> list[str]:
    """The lines that are not gunicorn's own ``[time] [pid] [INFO] ...`` lines."""
    return [line for line in log.splitlines() if line.strip() and not line.startswith("[")]


def test_the_example_app_starts_under_gunicorn_without_a_warning(
    gunicorn_server: Callable[..., GunicornServer], tmp_path: Path
) -> None:
    server = started(gunicorn_server, tmp_path, 2)
    assert _app_lines(server.output()) == [], server.output()


def test_memory_backend_is_a_warning_with_several_workers_only(
    gunicorn_server: Callable[..., GunicornServer], tmp_path: Path
) -> None:
    several = started(gunicorn_server, tmp_path, 2, FLASK_MCP_BACKEND="memory://")
    one = started(gunicorn_server, tmp_path, 1, FLASK_MCP_BACKEND="memory://")
    warned = [line for line in _app_lines(several.output()) if line.startswith(MEMORY_WARNING)]
    assert len(warned) == 2, several.output()  # each worker says it, as each has its own sessions
    assert _app_lines(one.output()) == [], one.output()
