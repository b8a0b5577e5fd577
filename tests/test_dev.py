"""``python3 dev.py example``, the README's first command: it serves the
example, and stopping it by its PID (as a supervisor does) stops the server."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, free_port, wait_for_health


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
        health = wait_for_health(process, port, log, within=300)
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
