"""Counting and pruning what the backends keep (``flask mcp sessions``): every
session store (memory, SQLite, Redis, cachelib) and every task store
(memory, SQLite, Redis), all real: SQLite files, the Redis server on
127.0.0.1:6379 under keys of this test's own."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from cachelib import FileSystemCache, SimpleCache
from conftest import FakeClock, shared_redis

from flask_mcp.backends.cachelib import CachelibSessionStore
from flask_mcp.backends.contracts import CountableStore, NotCountable, StoreCount
from flask_mcp.backends.memory import MemorySessionStore, MemoryTaskStore
from flask_mcp.backends.redis import RedisSessionStore, RedisTaskStore
from flask_mcp.backends.sqlite import SqliteDatabase, SqliteSessionStore, SqliteTaskStore
from flask_mcp.protocol.session import Session
from flask_mcp.protocol.task_records import TaskRecord

TIMEOUT = 60.0


@dataclass
class Stores:
    sessions: Any
    tasks: Any
    clock: FakeClock | None  # None: Redis expires keys on its own clock


@pytest.fixture
def redis_prefix() -> Iterator[tuple[redis.Redis, str]]:
    client = shared_redis()
    prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"
    try:
        yield client, prefix
    finally:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    clock = FakeClock()
    if request.param == "memory":
        return Stores(MemorySessionStore(TIMEOUT, clock=clock), MemoryTaskStore(clock=clock), clock)
    if request.param == "sqlite":
        database = SqliteDatabase(str(tmp_path / "counts.sqlite3"))
        return Stores(SqliteSessionStore(database, timeout=TIMEOUT, clock=clock),
                      SqliteTaskStore(database, clock=clock), clock)
    client, prefix = request.getfixturevalue("redis_prefix")
    # A key prefix with glob characters: counting must not read them as a pattern.
    prefix += "[x]*?:"
    return Stores(RedisSessionStore(client, timeout=TIMEOUT, key_prefix=prefix + "session:"),
                  RedisTaskStore(client, key_prefix=prefix + "task:"), None)


def _session() -> Session:
    return Session(id=uuid.uuid4().hex, protocol_version="2025-11-25")


def _task(ttl_ms: int | None) -> TaskRecord:
    now = time.time()
    return TaskRecord(task_id=uuid.uuid4().hex, created_at=now, updated_at=now, ttl_ms=ttl_ms)


def test_every_store_that_keeps_state_is_countable(stores: Stores) -> None:
    assert isinstance(stores.sessions, CountableStore)
    assert isinstance(stores.tasks, CountableStore)
    assert stores.sessions.count() == StoreCount(0, 0)
    assert stores.tasks.count() == StoreCount(0, 0)


def test_sessions_are_counted_and_expired_ones_pruned(stores: Stores) -> None:
    for _ in range(3):
        stores.sessions.create(_session())
    assert stores.sessions.count() == StoreCount(3, 0)
    if stores.clock is None:  # Redis: the server expires keys, there is nothing to prune
        assert stores.sessions.prune() == 0
        assert stores.sessions.count() == StoreCount(3, 0)
        return
    stores.clock.advance(TIMEOUT / 2)
    kept = _session()
    stores.sessions.create(kept)
    stores.clock.advance(TIMEOUT / 2 + 1)  # the first three are now idle past the timeout
    assert stores.sessions.count() == StoreCount(1, 3)
    assert stores.sessions.prune() == 3
    assert stores.sessions.count() == StoreCount(1, 0)
    assert stores.sessions.prune() == 0
    assert stores.sessions.get(kept.id) is not None


def test_tasks_are_counted_and_expired_ones_pruned(stores: Stores) -> None:
    stores.tasks.create(_task(ttl_ms=None))  # kept until the backend drops it
    stores.tasks.create(_task(ttl_ms=3_600_000))
    if stores.clock is None:
        stores.tasks.create(_task(ttl_ms=3_600_000))
        assert stores.tasks.count() == StoreCount(3, 0)
        assert stores.tasks.prune() == 0
        return
    stores.tasks.create(_task(ttl_ms=1_000))
    assert stores.tasks.count() == StoreCount(3, 0)
    stores.clock.advance(5)
    assert stores.tasks.count() == StoreCount(2, 1)
    assert stores.tasks.prune() == 1
    assert stores.tasks.count() == StoreCount(2, 0)


def test_redis_expired_sessions_vanish_from_the_count_on_their_own(redis_prefix: tuple[redis.Redis, str]) -> None:
    client, prefix = redis_prefix
    store = RedisSessionStore(client, timeout=0.2, key_prefix=prefix + "session:")
    store.create(_session())
    assert store.count() == StoreCount(1, 0)
    deadline = time.monotonic() + 5
    while store.count().live and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.count() == StoreCount(0, 0)


@pytest.mark.parametrize("cache", ["simple", "filesystem"])
def test_a_cachelib_store_says_it_cannot_count_or_prune(cache: str, tmp_path: Path) -> None:
    backing = SimpleCache() if cache == "simple" else FileSystemCache(str(tmp_path / "cache"))
    store = CachelibSessionStore(backing, timeout=TIMEOUT)
    store.create(_session())
    with pytest.raises(NotCountable, match="cannot list its keys"):
        store.count()
    with pytest.raises(NotCountable, match="drops them itself"):
        store.prune()
