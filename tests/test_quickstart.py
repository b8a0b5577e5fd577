"""The README's first page, followed as a newcomer would: save the first
example as app.py, start it with ``flask --app app run`` (then under gunicorn
with the packaged settings), and call its tool with the official MCP client
at the URL the README gives."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, free_port, wait_for_health
from mcp import Client
from test_docs import PYTHON_BLOCKS

pytestmark = pytest.mark.e2e
README = (ROOT / "README.md").read_text()


def first_app() -> str:
    block = next(b for b in PYTHON_BLOCKS if b.page.name == "README.md")
    assert "@mcp.tool" in block.code and "def add(" in block.code, "the README's first block is no longer the app"
    return block.code


def serve(command: list[str], folder: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_MCP_")}
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    health = wait_for_health(process, port, folder / "server.log", within=60)
    assert health.json()["status"] == "ok", health.text
    return process


def add_with_the_official_client(url: str, mode: str) -> object:
    async def call() -> object:
        async with Client(url, mode=mode) as client:
            result = await client.call_tool("add", {"a": 2, "b": 3})
            return result.structured_content

    return asyncio.run(call())


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_flask_run_serves_the_first_example_where_the_readme_says(tmp_path: Path, mode: str) -> None:
    assert "flask --app app run" in README and "http://127.0.0.1:5000/mcp" in README
    (tmp_path / "app.py").write_text(first_app())
    port = free_port()  # the README's 5000, moved to a free port
    process = serve([sys.executable, "-m", "flask", "--app", "app", "run", "--port", str(port)], tmp_path, port)
    try:
        assert add_with_the_official_client(f"http://127.0.0.1:{port}/mcp", mode) == {"result": 5}
    finally:
        stop(process)


def test_gunicorn_with_the_packaged_settings_serves_the_first_example(tmp_path: Path) -> None:
    assert "gunicorn -c python:flask_mcp.gunicorn_conf -b 0.0.0.0:8000 app:app" in README
    (tmp_path / "app.py").write_text(first_app())
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "-c", "python:flask_mcp.gunicorn_conf",
               "-b", f"127.0.0.1:{port}", "app:app"]
    process = serve(command, tmp_path, port)
    try:
        assert add_with_the_official_client(f"http://127.0.0.1:{port}/mcp", "legacy") == {"result": 5}
        assert add_with_the_official_client(f"http://127.0.0.1:{port}/mcp", "auto") == {"result": 5}
    finally:
        stop(process)
