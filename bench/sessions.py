#!/usr/bin/env python3
"""What one legacy session costs in each store: lookup time and bytes at rest.

    bench/.venv/bin/python bench/sessions.py [--count 10000] [--json out.json]

(``python3 bench/run.py`` runs it too, pinned to the server core.) For
memory://, sqlite:// and redis://, through ``flask_mcp.backends.open_backend``
exactly as the extension opens them:

* creates ``--count`` sessions shaped like the ones ``initialize`` stores;
* times ``get()`` of known ids in random order (each call timed alone;
  median and p99 in microseconds), and ``get()`` of unknown ids (a miss);
* bytes per stored session: SQLite file growth after ``VACUUM`` and a WAL
  checkpoint divided by the count; Redis ``MEMORY USAGE`` averaged over a
  sample of keys (and the ``used_memory`` growth per session); memory://
  the ``tracemalloc`` growth per session.

Redis: database ``--redis-db`` (default 15) and its own key prefix; every key
it writes is deleted before it exits, and it refuses a database that already
holds keys with that prefix. SQLite: a file in a temporary folder, removed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from flask_mcp.backends import open_backend  # type: ignore[attr-defined]
from flask_mcp.protocol.session import Session, new_session_id

REDIS_URL = "redis://127.0.0.1:6379"
KEY_PREFIX = "flask-mcp-bench:session:"


def make_session() -> Session:
    """What a legacy client's ``initialize`` leaves in the store."""
    return Session(
        id=new_session_id(),
        protocol_version="2025-11-25",
        client_info={"name": "claude-ai", "version": "0.1.0"},
        client_capabilities={"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}},
    )


def timed(fn: Any, items: list[str]) -> list[float]:
    """Microseconds per call, each call timed alone."""
    out = []
    clock = time.perf_counter_ns
    for item in items:
        t0 = clock()
        fn(item)
        out.append((clock() - t0) / 1000)
    return out


def summary(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "median_us": round(statistics.median(samples), 2),
        "p99_us": round(samples[int(len(samples) * 0.99) - 1], 2),
        "mean_us": round(statistics.fmean(samples), 2),
    }


def fill(store: Any, count: int) -> tuple[list[str], dict[str, float]]:
    """Create ``count`` sessions; their ids, and the mean create() time overall and
    over the last 1% (a store whose create() grows with its size shows it there)."""
    sessions = [make_session() for _ in range(count)]
    durations = timed(store.create, sessions)  # type: ignore[arg-type]
    tail = durations[-max(1, count // 100):]
    return [s.id for s in sessions], {
        "create_us_mean": round(statistics.fmean(durations), 2),
        "create_us_mean_last_1pct": round(statistics.fmean(tail), 2),
    }


def time_gets(store: Any, ids: list[str], lookups: int) -> dict[str, Any]:
    """get() of ``lookups`` known ids in random order, then of as many unknown ids."""
    sample = random.Random(1).sample(ids, min(lookups, len(ids)))
    for sid in sample[:100]:  # warm the code paths and any connection pool
        if store.get(sid) is None:
            raise AssertionError(f"session {sid} vanished")
    hits = timed(store.get, sample)
    misses = timed(store.get, [new_session_id() for _ in range(len(sample))])
    return {"lookups": len(sample), "get_hit": summary(hits), "get_miss": summary(misses)}


def memory_bytes_per_session(count: int, tmp: str) -> int:
    store = open_backend("memory://", timeout=3600, instance_path=tmp).sessions
    sessions = [make_session() for _ in range(count)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for s in sessions:
        store.create(s)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return round(grown / count)


def sqlite_file_bytes(path: str) -> int:
    """Main file size after VACUUM and a truncating WAL checkpoint (everything in the main file)."""
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    wal = Path(path + "-wal")
    return os.path.getsize(path) + (wal.stat().st_size if wal.exists() else 0)


def run(count: int, lookups: int, redis_db: int) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="flask-mcp-sessions-")
    results: dict[str, Any] = {}
    try:
        # memory://: timed without tracemalloc, then a second store measured with it.
        store = open_backend("memory://", timeout=3600, instance_path=tmp).sessions
        ids, created = fill(store, count)
        results["memory"] = {"uri": "memory://", "sessions": count, **created, **time_gets(store, ids, lookups)}
        del store, ids
        results["memory"]["bytes_per_session"] = memory_bytes_per_session(count, tmp)
        results["memory"]["bytes_method"] = "tracemalloc growth while a fresh store takes count sessions, / count"

        # sqlite: every call opens and closes its own connection; when no other
        # connection to the file is open, closing the last one checkpoints the
        # WAL into the database (and syncs it), so both cases are timed.
        path = os.path.join(tmp, "sessions.sqlite3")
        uri = f"sqlite:///{path}"
        backend = open_backend(uri, timeout=3600, instance_path=tmp)
        backend.check()  # creates the file and its tables
        size_empty = sqlite_file_bytes(path)
        store = backend.sessions
        # These rows time SQLite's own reads: each worker's copies of the records
        # it read (flask_mcp/backends/sqlite/sessions.py) are off here and get their own row.
        store.cache_max_age = 0.0
        holder = sqlite3.connect(path)  # keeps the WAL open while filling (else ~ms per create)
        holder.execute("SELECT COUNT(*) FROM mcp_sessions").fetchall()  # a read really opens it
        ids, created = fill(store, count)
        held = time_gets(store, ids, lookups)
        holder.close()
        alone = time_gets(store, ids, lookups)
        del store.cache_max_age  # the class default again
        time_gets(store, ids, lookups)  # reads every sampled record once, keeping a copy
        copies = time_gets(store, ids, lookups)  # the same ids again, within the copies' lifetime
        size_full = sqlite_file_bytes(path)
        common = {
            "sessions": count,
            "bytes_per_session": round((size_full - size_empty) / count),
            "bytes_method": f"file size after VACUUM + wal_checkpoint(TRUNCATE): {size_empty} -> {size_full} bytes",
        }
        results["sqlite"] = {"uri": uri, "note": "no other connection open (one process, one request at a time)",
                             **alone, **common}
        results["sqlite, another connection open"] = {
            "uri": uri, "note": "another connection to the file stays open (creates timed here too)",
            **created, **held, **common}
        results["sqlite, the worker's copy"] = {
            "uri": uri, "note": "records read again while unchanged: a stamp compared, no SQLite read (misses read it)",
            **copies, **common}

        # redis: MEMORY USAGE of a sample, and used_memory growth.
        results["redis"] = bench_redis(count, lookups, redis_db, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def bench_redis(count: int, lookups: int, db: int, tmp: str) -> dict[str, Any]:
    try:
        import redis
    except ImportError:
        return {"skipped": "the redis package is not installed"}
    client = redis.Redis.from_url(f"{REDIS_URL}/{db}", socket_timeout=5, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        return {"skipped": f"Redis unavailable at {REDIS_URL}: {exc}"}
    if next(client.scan_iter(match=KEY_PREFIX + "*", count=1000), None) is not None:
        return {"skipped": f"db {db} already holds {KEY_PREFIX}* keys; not touching them"}
    ids: list[str] = []
    try:
        uri = f"{REDIS_URL}/{db}"
        backend = open_backend(uri, timeout=3600, instance_path=tmp)
        store = backend.sessions
        store.key_prefix = KEY_PREFIX  # a prefix of its own, on top of a database of its own
        used_before = int(client.info("memory")["used_memory"])
        ids, created = fill(store, count)
        used_after = int(client.info("memory")["used_memory"])
        res: dict[str, Any] = {"uri": uri, "sessions": count, **created, **time_gets(store, ids, lookups)}
        sample = random.Random(2).sample(ids, min(500, len(ids)))
        usage = [int(client.memory_usage(KEY_PREFIX + sid) or 0) for sid in sample]
        res["bytes_per_session"] = round(statistics.fmean(usage))
        res["bytes_method"] = f"MEMORY USAGE averaged over {len(sample)} keys"
        res["used_memory_growth_per_session"] = round((used_after - used_before) / count)
        res["redis_db"] = db
        backend.close()
        return res
    finally:
        for i in range(0, len(ids), 1000):
            client.delete(*(KEY_PREFIX + sid for sid in ids[i : i + 1000]))
        left = sum(1 for _ in client.scan_iter(match=KEY_PREFIX + "*", count=1000))
        if left:
            print(f"!! {left} {KEY_PREFIX}* keys left in db {db}", file=sys.stderr)
        client.close()


def _us(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def render(results: dict[str, Any]) -> str:
    lines = [
        "| store | sessions | get() hit median us | hit p99 us | get() miss median us | create mean us "
        "| create at full us | bytes per session |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, r in results.items():
        if "skipped" in r:
            lines.append(f"| {name} | skipped: {r['skipped']} | | | | | | |")
            continue
        extra = ""
        if "used_memory_growth_per_session" in r:
            extra = f" (used_memory +{r['used_memory_growth_per_session']})"
        lines.append(
            f"| {name} | {r['sessions']} | {r['get_hit']['median_us']:.1f} | {r['get_hit']['p99_us']:.1f} | "
            f"{r['get_miss']['median_us']:.1f} | {_us(r.get('create_us_mean'))} | "
            f"{_us(r.get('create_us_mean_last_1pct'))} | {r['bytes_per_session']}{extra} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--lookups", type=int, default=2000, help="get() calls timed per store (default 2000)")
    p.add_argument("--redis-db", type=int, default=15)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    results = run(args.count, args.lookups, args.redis_db)
    table = render(results)
    print(table, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"stores": results, "table_markdown": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
