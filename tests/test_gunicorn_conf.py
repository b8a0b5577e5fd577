"""The gunicorn settings shipped in the package (flask_mcp/gunicorn_conf.py),
loaded by real gunicorn the way the README's deploy command names them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import requests
from conftest import free_port, wait_for_health

APP = '''
import gc
from flask import Flask
from flask_mcp import MCP

app = Flask(__name__)
MCP(app)

@app.get("/frozen")
def frozen():
    return {"objects": gc.get_freeze_count()}
'''


def test_gunicorn_runs_an_app_with_the_packaged_settings(tmp_path: Path) -> None:
    (tmp_path / "frozen_app.py").write_text(APP)
    port = free_port()
    log = tmp_path / "gunicorn.log"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "WEB_CONCURRENCY": "2"}
    command = [sys.executable, "-m", "gunicorn", "-c", "python:flask_mcp.gunicorn_conf",
               "-b", f"127.0.0.1:{port}", "frozen_app:app"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        health = wait_for_health(process, port, log, within=60)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        # post_worker_init froze the loaded app out of the collector's reach.
        assert json.loads(requests.get(f"http://127.0.0.1:{port}/frozen", timeout=5).text)["objects"] > 1000
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    output = log.read_text()
    assert "Using worker: gthread" in output
    assert output.count("Booting worker") == 2  # WEB_CONCURRENCY
    assert '"GET /mcp/health HTTP/1.1" 200' in output  # the access log goes to stdout


def test_the_settings_module_is_what_gunicorn_reads(tmp_path: Path) -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "python:flask_mcp.gunicorn_conf", "--print-config", "x:app"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env={**os.environ, "WEB_CONCURRENCY": "3"},
    )
    settings = dict(line.split(" = ", 1) for line in printed.stdout.splitlines() if " = " in line)
    assert {k.strip(): v.strip() for k, v in settings.items() if k.strip() in
            ("worker_class", "workers", "threads", "keepalive", "timeout", "graceful_timeout")} == {
        "worker_class": "gthread", "workers": "3", "threads": "16", "keepalive": "5", "timeout": "120",
        "graceful_timeout": "30",
    }
