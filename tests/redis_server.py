"""A private ``redis-server`` on a free loopback port, for tests that stop,
restart or reconfigure their server (the shared one at 127.0.0.1:6379 must
stay up for everybody else)."""

from __future__ import annotations

import shutil
import subprocess
import time

import redis
from conftest import unavailable


def start_redis_server(port: int, *options: str, why: str = "the test starts its own") -> subprocess.Popen[bytes]:
    """Start ``redis-server`` with no persistence and ``options``; return once it answers PING."""
    if shutil.which("redis-server") is None:
        unavailable(f"redis-server is not installed ({why})")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1).ping()
            return server
        except redis.exceptions.RedisError:
            time.sleep(0.02)
    stop_redis_server(server)
    raise RuntimeError(f"redis-server did not start on port {port}")


def stop_redis_server(server: subprocess.Popen[bytes]) -> None:
    """Kill it at once (what a crash looks like to its clients) and reap it."""
    server.kill()
    server.wait(5)
