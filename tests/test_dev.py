"""``python3 dev.py example``, the README's first command: it serves the
example, and stopping it by its PID (as a supervisor does) stops the server."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from conftest import ROOT, free_port


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_to_dev_py_example_leaves_nothing_listening(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "dev.log"
    with log.open("wb") as out:
        # dev.py creates .venv first when it is missing: that may take a minute or two.
        process = subprocess.Popen([sys.executable, "dev.py", "example", "--port", str(port)], cwd=ROOT,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert process.poll() is None, log.read_text()
            try:
                health = requests.get(f"http://127.0.0.1:{port}/mcp/health", timeout=2)
                break
            except requests.RequestException:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
        assert health.status_code == 200 and health.json()["server"] == "bookshop"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    deadline = time.monotonic() + 10
    while listening(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not listening(port), f"something still serves port {port} after SIGTERM to dev.py:\n{log.read_text()}"
