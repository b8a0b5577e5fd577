"""A worker's memory and threads stay flat under a long mixed workload: the
workload of bench/memory.py (legacy sessions created, used and deleted,
stateless calls, event streams, failing requests, clients that leave in the
middle of a question), shortened to run in seconds, against the conformance
fixture app under real gunicorn on the SQLite backend. The benchmark's full
run (50 000 requests) is ``python3 bench/memory.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_file

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "memory.py"
REQUESTS = 12_000
WARMUP = 2_000


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_file("bench_memory_under_test", BENCH)


def test_workers_stay_flat_over_a_long_mixed_workload(bench: ModuleType, tmp_path: Path) -> None:
    server = bench.Server(tmp_path, threads=8, trace_marks=None)
    rss: dict[int, dict[int, float]] = {}
    threads: dict[int, dict[int, int]] = {}

    def mark(n: int) -> None:
        rss[n] = server.rss_mb()
        threads[n] = server.status("Threads")

    try:
        bench.drive(server.port, REQUESTS, 8, [WARMUP], mark)
        time.sleep(1.5)  # the last abandoned questions end with their sessions
        mark(REQUESTS)
        log = (tmp_path / "gunicorn.log").read_text()
    finally:
        server.stop()
    assert "Traceback" not in log, log
    assert rss[WARMUP].keys() == rss[REQUESTS].keys() and len(rss[REQUESTS]) == 2, rss
    for pid in rss[REQUESTS]:
        # Calls whose client left mid-question end with their session: their threads do not pile up.
        assert threads[REQUESTS][pid] <= threads[WARMUP][pid] + 6, (pid, threads)
        assert rss[REQUESTS][pid] - rss[WARMUP][pid] < 20, (pid, rss)
