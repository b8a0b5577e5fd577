"""How long a change made through one Redis session store takes to reach
another process's copy (docs/redis.md): the first process creates a session,
the second reads it (and keeps a copy), then the first deletes it or saves a
change, and the second polls ``get()`` until it sees that.

    python3 bench/invalidation.py [--url redis://127.0.0.1:6379/14] [--rounds 200] [--protocol 3]

The observer is a separate process (as another gunicorn worker or host would
be); the two agree on when the change was made through a pipe. Prints the
median, p90, p99 and maximum in milliseconds, for a DELETE and for a save."""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
import uuid
from multiprocessing.connection import Connection

import redis

from flask_mcp.backends.contracts import Session
from flask_mcp.backends.redis import RedisSessionStore


def _store(url: str, protocol: int, prefix: str) -> RedisSessionStore:
    return RedisSessionStore(redis.Redis.from_url(url, protocol=protocol), timeout=600, key_prefix=prefix)


def _observer(url: str, protocol: int, prefix: str, pipe: Connection) -> None:
    store = _store(url, protocol, prefix)
    while True:
        order = pipe.recv()
        if order is None:
            break
        kind, session_id = order
        while store.get(session_id) is None:  # until read and kept
            time.sleep(0.001)
        while not store._copies.live:
            store.get(session_id)
            time.sleep(0.01)
        store.get(session_id)
        pipe.send("kept")
        pipe.recv()  # the change is being made now
        start = time.perf_counter()
        while True:
            got = store.get(session_id)
            if kind == "delete" and got is None or kind == "save" and got is not None and got.data.get("v") == 2:
                break
            time.sleep(0.0001)  # a worker between requests: the listener thread gets the GIL
        pipe.send(time.perf_counter() - start)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--protocol", type=int, choices=(2, 3), default=3)
    args = parser.parse_args()
    prefix = f"flask-mcp-bench-invalidation:{uuid.uuid4().hex}:"
    store = _store(args.url, args.protocol, prefix)
    here, there = multiprocessing.Pipe()
    spawn = multiprocessing.get_context("spawn")
    child = spawn.Process(target=_observer, args=(args.url, args.protocol, prefix, there))
    child.start()
    results: dict[str, list[float]] = {"delete": [], "save": []}
    for round_ in range(args.rounds):
        kind = "delete" if round_ % 2 == 0 else "save"
        session = Session(id=uuid.uuid4().hex, protocol_version="2025-11-25", client_info={}, data={"v": 1})
        store.create(session)
        here.send((kind, session.id))
        assert here.recv() == "kept"
        here.send("go")
        if kind == "delete":
            store.delete(session.id)
        else:
            session.data = {"v": 2}
            store.save(session)
        results[kind].append(here.recv())
        store.delete(session.id)
    here.send(None)
    child.join(10)
    store.close()
    for kind, seconds in results.items():
        ms = sorted(s * 1000 for s in seconds)
        print(
            f"{kind:6} n={len(ms)} median {statistics.median(ms):.2f} ms, p90 {ms[int(len(ms) * 0.9)]:.2f}, "
            f"p99 {ms[min(len(ms) - 1, int(len(ms) * 0.99))]:.2f}, max {ms[-1]:.2f} (RESP{args.protocol})"
        )


if __name__ == "__main__":
    main()
