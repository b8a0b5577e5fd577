"""The gunicorn settings shipped in the package (flask_mcp/gunicorn_conf.py),
loaded by real gunicorn the way the README's deploy command names them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from conftest import free_port, unavailable, wait_for_health

#: How many bytes of a 2 MiB block, allocated after an 8 MiB one was freed, glibc
#: maps on their own (``mallinfo2().hblkhd``): about 2 MiB while the mmap
#: threshold stays fixed (1 MiB), 0 once glibc raised it to 8 MiB.
MAPPED_AFTER_A_LARGE_FREE = '''
import ctypes

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

_libc = ctypes.CDLL(None)
_libc.mallinfo2.restype = MallInfo2

def mapped_after_a_large_free():
    large = bytearray(8 * 1024 * 1024)
    del large
    before = _libc.mallinfo2().hblkhd
    block = bytearray(2 * 1024 * 1024)
    mapped = _libc.mallinfo2().hblkhd - before
    del block
    return mapped
'''

APP = MAPPED_AFTER_A_LARGE_FREE + '''
import gc
from flask import Flask
from flask_mcp import MCP

app = Flask(__name__)
MCP(app)

@app.get("/frozen")
def frozen():
    return {"objects": gc.get_freeze_count()}

@app.get("/mapped")
def mapped():
    return {"bytes": mapped_after_a_large_free()}
'''


def glibc_with_mallinfo2() -> None:
    """The memory tests read glibc's own figures (``mallinfo2``: glibc 2.33 and later)."""
    version = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
    if not version or not version.startswith("glibc ") or tuple(map(int, version.split()[1].split(".")[:2])) < (2, 33):
        unavailable(f"needs glibc 2.33 or later for mallinfo2 (C library: {version or 'not glibc'})")


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
        if (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            # post_worker_init fixed the mmap threshold: large buffers stay out of the arenas.
            assert requests.get(f"http://127.0.0.1:{port}/mapped", timeout=5).json()["bytes"] >= 2 * 1024 * 1024
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


@pytest.mark.parametrize(("fixed", "environ", "mapped"), [
    (False, {}, False),  # glibc's own behaviour: the threshold rose to 8 MiB with the freed block
    (True, {}, True),
    (True, {"MALLOC_MMAP_THRESHOLD_": str(16 * 1024 * 1024)}, False),  # the deployer's choice wins
])
def test_the_fixed_mmap_threshold_keeps_large_blocks_out_of_the_arenas(
    fixed: bool, environ: dict[str, str], mapped: bool
) -> None:
    glibc_with_mallinfo2()
    script = MAPPED_AFTER_A_LARGE_FREE + f"""
from flask_mcp.gunicorn_conf import fix_mmap_threshold
print(fix_mmap_threshold() if {fixed} else None, mapped_after_a_large_free())
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **environ})
    assert run.returncode == 0, run.stderr
    applied, mapped_bytes = run.stdout.split()
    assert applied == {(False, False): "None", (True, True): "True", (True, False): "False"}[(fixed, mapped)]
    assert (int(mapped_bytes) >= 2 * 1024 * 1024) is mapped, mapped_bytes
