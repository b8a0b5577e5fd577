"""One contract for the task store of every backend that keeps tasks (memory,
SQLite, Redis, SQL on PostgreSQL and MariaDB): records read back whole,
updates are atomic against other threads and processes, and a record is
gone once its TTL has passed.
Everything is real: SQLite files, the Redis server on 127.0.0.1:6379, the
tests' own PostgreSQL and MariaDB servers."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cachelib import SimpleCache
from conftest import REDIS_URL, FakeClock, shared_redis
from mariadb_server import contract_database as mariadb_database
from postgres_server import contract_database, empty_sql_tables
from redis_server import shared_cluster

from flask_mcp.backends import open_backend
from flask_mcp.backends.contracts import ListingTaskStore, StatusCountingStore
from flask_mcp.backends.memory import MemoryTaskStore
from flask_mcp.backends.redis import RedisTaskStore
from flask_mcp.backends.redis_cluster import client_from_url as client_from_cluster_url
from flask_mcp.backends.redis_sentinel import client_from_sentinel_url
from flask_mcp.backends.sql import SqlDatabase, SqlTaskStore
from flask_mcp.backends.sqlite import SqliteDatabase, SqliteTaskStore
from flask_mcp.protocol.task_records import TaskRecord, TaskStore

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Case:
    name: str
    store: TaskStore
    clock: FakeClock | None  # None: Redis expires keys on its own clock
    child_setup: str | None = None
    redis_client: redis.Redis | None = None


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-cluster", "redis-sentinel", "postgresql", "mariadb"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    clock = FakeClock()
    if request.param in ("postgresql", "mariadb"):  # the session's server (tests/*_server.py), tables emptied
        url = contract_database() if request.param == "postgresql" else mariadb_database()
        sql = SqlDatabase.from_url(url)
        empty_sql_tables(sql)
        setup = f"from flask_mcp.backends.sql import SqlTaskStore\nstore = SqlTaskStore({url!r})\n"
        try:
            yield Case(request.param, SqlTaskStore(sql, clock=clock), clock, setup)
        finally:
            sql.close()
    elif request.param == "memory":
        yield Case("memory", MemoryTaskStore(clock=clock), clock)
    elif request.param == "sqlite":
        database = SqliteDatabase(str(tmp_path / "tasks.sqlite3"))
        setup = (
            "from flask_mcp.backends.sqlite import SqliteTaskStore\n"
            f"store = SqliteTaskStore({database.path!r})\n"
        )
        yield Case("sqlite", SqliteTaskStore(database, clock=clock), clock, setup)
    elif request.param == "redis-cluster":  # a private cluster (tests/redis_server.py)
        url = shared_cluster().url
        cluster = client_from_cluster_url(url)
        prefix = f"flask-mcp-test:{uuid.uuid4().hex}:task:"
        setup = (
            "from flask_mcp.backends.redis import RedisTaskStore\n"
            "from flask_mcp.backends.redis_cluster import client_from_url\n"
            f"store = RedisTaskStore(client_from_url({url!r}), key_prefix={prefix!r})\n"
        )
        try:
            store = RedisTaskStore(cluster, key_prefix=prefix)  # type: ignore[arg-type]
            yield Case("redis-cluster", store, None, setup, cluster)  # type: ignore[arg-type]
        finally:
            for key in list(cluster.scan_iter(match=prefix + "*")):
                cluster.delete(key)
            cluster.close()
    else:
        sentinel = request.param == "redis-sentinel"
        url = request.getfixturevalue("sentinel_deployment").url() if sentinel else REDIS_URL
        client = client_from_sentinel_url(url) if sentinel else shared_redis()
        prefix = f"flask-mcp-test:{uuid.uuid4().hex}:task:"
        setup = (
            "from flask_mcp.backends.redis import RedisTaskStore, client_from_url\n"
            + ("from flask_mcp.backends.redis_sentinel import client_from_sentinel_url as client_from_url\n" * sentinel)
            + f"store = RedisTaskStore(client_from_url({url!r}), key_prefix={prefix!r})\n"
        )
        try:
            yield Case(request.param, RedisTaskStore(client, key_prefix=prefix), None, setup, client)
        finally:
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
            client.close()


def full_record(ttl_ms: int | None = 60_000) -> TaskRecord:
    now = time.time()
    return TaskRecord(
        task_id=uuid.uuid4().hex,
        principal="alice",
        status="input_required",
        status_message="Waiting for ünïcode",
        created_at=now,
        updated_at=now + 0.5,
        ttl_ms=ttl_ms,
        poll_interval_ms=250,
        input_requests={"k": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}},
        answers={"j": {"action": "accept", "content": {"n": [1, 2.5, None, True]}}},
        asked=["j", "k"],
        result=None,
        error={"code": -32603, "message": "earlier"},
        cancel_requested=True,
        tool="slow_report",
        session_id="a-legacy-session",
        queue_id=str(uuid.uuid4()),
    )


def asking(key: str) -> Callable[[TaskRecord], bool]:
    """An update that adds ``key`` to the record's ``asked`` (and is stored)."""
    def change(record: TaskRecord) -> bool:
        record.asked.append(key)
        return True
    return change


def test_a_created_record_reads_back_with_every_field(case: Case) -> None:
    record = full_record()
    case.store.create(record)
    assert case.store.get(record.task_id) == record


def test_an_unknown_task_reads_as_none_and_is_not_updated(case: Case) -> None:
    assert case.store.get("never-created") is None
    assert case.store.update("never-created", lambda r: True) is None
    assert case.store.get("never-created") is None


def test_an_update_is_stored_and_returned_and_a_declined_one_is_not(case: Case) -> None:
    record = full_record()
    case.store.create(record)

    def complete(current: TaskRecord) -> bool:
        current.status, current.result = "completed", {"content": []}
        return True

    changed = case.store.update(record.task_id, complete)
    assert changed is not None and changed.status == "completed"
    assert case.store.get(record.task_id) == changed

    def decline(current: TaskRecord) -> bool:
        current.status = "failed"
        return False

    case.store.update(record.task_id, decline)
    stored = case.store.get(record.task_id)
    assert stored is not None and stored.status == "completed"


def test_concurrent_updates_from_threads_are_all_applied(case: Case) -> None:
    record = full_record()
    record.asked = []
    case.store.create(record)

    def add(n: int) -> None:
        for i in range(15):
            case.store.update(record.task_id, asking(f"{n}-{i}"))

    threads = [threading.Thread(target=add, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    stored = case.store.get(record.task_id)
    assert stored is not None and len(stored.asked) == 60 and len(set(stored.asked)) == 60


# memory:// lives in one process
@pytest.mark.parametrize("case", ["sqlite", "redis", "redis-cluster", "redis-sentinel", "postgresql", "mariadb"],
                         indirect=True)
def test_updates_from_another_process_interleave_without_losing_any(case: Case) -> None:
    assert case.child_setup is not None
    record = full_record()
    record.asked = []
    case.store.create(record)
    code = case.child_setup + (
        f"for i in range(30):\n"
        f"    store.update({record.task_id!r}, lambda r, i=i: r.asked.append(f'child-{{i}}') is None)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    for i in range(30):
        case.store.update(record.task_id, asking(f"parent-{i}"))
    assert child.wait(timeout=30) == 0
    stored = case.store.get(record.task_id)
    assert stored is not None and len(stored.asked) == 60


# Redis: its own clock, next test
@pytest.mark.parametrize("case", ["memory", "sqlite", "postgresql", "mariadb"], indirect=True)
def test_a_record_is_gone_once_its_ttl_has_passed(case: Case) -> None:
    assert case.clock is not None
    record = full_record(ttl_ms=10_000)
    case.store.create(record)
    case.clock.now = record.created_at + 9.9
    assert case.store.get(record.task_id) is not None
    case.clock.now = record.created_at + 10.1
    assert case.store.get(record.task_id) is None
    assert case.store.update(record.task_id, lambda r: True) is None


def test_the_memory_store_drops_expired_tasks_once_per_prune_interval() -> None:
    clock = FakeClock()
    store = MemoryTaskStore(clock=clock, prune_interval=60)
    expiring = [full_record(ttl_ms=10_000) for _ in range(50)]
    lasting = full_record(ttl_ms=None)
    for record in [*expiring, lasting]:
        store.create(record)
    clock.now += 30  # all 50 expired, but the last prune was only 30 s ago
    middle = full_record(ttl_ms=None)
    store.create(middle)
    assert len(store._records) == 52
    assert store.get(expiring[0].task_id) is None  # an expired task reads as gone meanwhile
    clock.now += 31
    newest = full_record(ttl_ms=None)
    store.create(newest)
    assert set(store._records) == {lasting.task_id, middle.task_id, newest.task_id}
    assert set(store._expires) == set(store._records)
    assert store.get(lasting.task_id) == lasting


@pytest.mark.parametrize("case", ["redis", "redis-cluster", "redis-sentinel"], indirect=True)
def test_redis_gives_the_key_the_task_ttl_and_updates_keep_it(case: Case) -> None:
    assert case.redis_client is not None
    assert isinstance(case.store, RedisTaskStore)
    record = full_record(ttl_ms=60_000)
    case.store.create(record)
    key = case.store.key_prefix + record.task_id
    assert 0 < case.redis_client.pttl(key) <= 60_000

    def working(current: TaskRecord) -> bool:
        current.status = "working"
        return True

    case.store.update(record.task_id, working)
    assert 0 < case.redis_client.pttl(key) <= 60_000


def test_a_record_without_ttl_never_expires(case: Case) -> None:
    record = full_record(ttl_ms=None)
    case.store.create(record)
    if case.clock is not None:
        case.clock.now += 10 * 365 * 86400
    else:
        assert case.redis_client is not None
        assert case.redis_client.pttl(case.store.key_prefix + record.task_id) == -1  # type: ignore[attr-defined]
    assert case.store.get(record.task_id) == record


@pytest.mark.parametrize("case", ["memory", "sqlite"], indirect=True)  # the stores that count by status
def test_live_tasks_are_counted_by_status_and_expired_ones_are_not(case: Case) -> None:
    assert isinstance(case.store, StatusCountingStore)
    assert case.store.count_by_status() == {}
    statuses = ["working", "working", "input_required", "completed", "failed", "cancelled", "completed"]
    for status in statuses:
        record = full_record(ttl_ms=60_000)
        record.status = status
        case.store.create(record)
    forever = full_record(ttl_ms=None)
    forever.status = "completed"
    case.store.create(forever)
    assert case.store.count_by_status() == {"working": 2, "input_required": 1, "completed": 3, "failed": 1,
                                            "cancelled": 1}

    def finish(record: TaskRecord) -> bool:
        record.status = "failed"
        return True

    case.store.update(forever.task_id, finish)
    assert case.store.count_by_status() == {"working": 2, "input_required": 1, "completed": 2, "failed": 2,
                                            "cancelled": 1}
    assert case.clock is not None
    case.clock.now += 61  # every record but the one without a TTL expired (still kept: not pruned yet)
    assert case.store.count_by_status() == {"failed": 1}


def test_unfinished_tasks_are_listed_oldest_first_and_ended_or_expired_ones_are_not(case: Case) -> None:
    assert isinstance(case.store, ListingTaskStore)
    assert case.store.unfinished(10) == []
    created = []
    for n, status in enumerate(["working", "completed", "input_required", "failed", "working", "cancelled"]):
        record = full_record(ttl_ms=60_000 if n else None)  # the oldest never expires
        record.status = status
        record.created_at -= 10 - n  # n-th oldest
        case.store.create(record)
        created.append(record)
    running = [created[0], created[2], created[4]]
    assert case.store.unfinished(10) == running
    assert case.store.unfinished(2) == running[:2]

    def finish(record: TaskRecord) -> bool:
        record.status = "completed"
        return True

    case.store.update(created[2].task_id, finish)
    assert [r.task_id for r in case.store.unfinished(10)] == [created[0].task_id, created[4].task_id]
    if case.clock is not None:  # Redis expires keys on its own clock: the TTL test above covers it
        case.clock.now += 61  # expired, not pruned yet: not listed
        assert [r.task_id for r in case.store.unfinished(10)] == [created[0].task_id]


@pytest.mark.parametrize("case", ["redis", "redis-cluster"], indirect=True)
def test_redis_does_not_count_by_status(case: Case) -> None:
    """A per-status count would need an index updated with every change of
    every task, across Redis Cluster slots (docs/observability.md): Redis
    stores give the total only, so the gauge is unlabelled."""
    assert not isinstance(case.store, StatusCountingStore)


@pytest.mark.parametrize("uri", ["memory://", "sqlite://", REDIS_URL])
def test_open_backend_gives_a_task_store_with_every_backend_that_can_keep_tasks(tmp_path: Path, uri: str) -> None:
    backend = open_backend(uri, timeout=60, instance_path=str(tmp_path))
    try:
        assert backend.tasks is not None
    finally:
        backend.close()


def test_a_cachelib_cache_keeps_no_tasks(tmp_path: Path) -> None:
    assert open_backend(SimpleCache(), timeout=60, instance_path=str(tmp_path)).tasks is None


def test_a_durable_call_s_record_keeps_its_marker_and_stream_in_every_store(case: Case) -> None:
    """``flask mcp sessions`` lists a durable call by its record (flask_mcp.protocol.durable_records):
    the marker that keeps it from ``tasks/*`` and its stream survive the store."""
    assert isinstance(case.store, ListingTaskStore)
    record = full_record(ttl_ms=60_000)
    record.durable, record.stream_id, record.queue_id = True, "s-1", "celery-id"
    case.store.create(record)
    [listed] = case.store.unfinished(10)
    assert (listed.durable, listed.stream_id, listed.queue_id) == (True, "s-1", "celery-id")
    stored = case.store.get(record.task_id)
    assert stored is not None and stored.durable and stored.stream_id == "s-1"
