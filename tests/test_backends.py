"""One contract for every session backend (memory, SQLite, Redis, cachelib)
and every message bus, plus URI parsing and fault handling. Everything is
real: SQLite files, the Redis server on 127.0.0.1:6379, child processes."""

from __future__ import annotations

import copy
import json
import math
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cachelib import FileSystemCache, SimpleCache
from conftest import REDIS_URL, FakeClock, free_port, read_only, shared_redis
from redis_server import start_redis_server, stop_redis_server

from flask_mcp.backends.cachelib import CachelibSessionStore
from flask_mcp.backends.contracts import Backend, BackendUnavailable, BusNotSupported, MessageBus
from flask_mcp.backends.memory import MemoryEventLog, MemoryMessageBus, MemorySessionStore, _copy
from flask_mcp.backends.redis import RedisEventLog, RedisMessageBus, RedisSessionStore
from flask_mcp.backends.redis_sentinel import client_from_sentinel_url
from flask_mcp.backends.registry import open_backend
from flask_mcp.backends.sqlite import SqliteDatabase, SqliteEventLog, SqliteMessageBus, SqliteSessionStore
from flask_mcp.protocol.events import EventLog
from flask_mcp.protocol.session import Session

TIMEOUT = 60.0
#: How long the event logs under test keep a stream after its last event.
RETENTION = 30.0
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    """One backend under test."""

    name: str
    backend: Backend
    #: ``None`` when expiry is the server's business (Redis TTLs).
    clock: FakeClock | None
    #: Python code that binds ``backend`` to the same backend in a child
    #: process, or ``None`` when the backend lives in this process only.
    child_setup: str | None = None
    redis_client: redis.Redis | None = None
    prefix: str = ""

    @property
    def clock_(self) -> FakeClock:
        assert self.clock is not None
        return self.clock

    @property
    def bus(self) -> MessageBus:
        assert self.backend.bus is not None
        return self.backend.bus

    @property
    def events(self) -> EventLog:
        assert self.backend.events is not None
        return self.backend.events


def _redis_setup(prefix: str, url: str = REDIS_URL) -> str:
    sentinel = url.startswith("redis+sentinel://")
    return (
        "from flask_mcp.backends.registry import Backend\n"
        "from flask_mcp.backends.redis import RedisMessageBus, RedisSessionStore, client_from_url\n"
        + ("from flask_mcp.backends.redis_sentinel import client_from_sentinel_url as client_from_url\n" * sentinel)
        + f"client = client_from_url({url!r})\n"
        "from flask_mcp.backends.redis import RedisEventLog\n"
        f"backend = Backend(sessions=RedisSessionStore(client, timeout={TIMEOUT}, key_prefix={prefix + 'session:'!r}),"
        f" bus=RedisMessageBus(client, channel_prefix={prefix + 'bus:'!r}),"
        f" events=RedisEventLog(client, retention={RETENTION}, key_prefix={prefix + 'stream:'!r}),"
        " close=client.close)\n"
    )


#: "redis-sentinel": the Redis backend on a private Sentinel deployment's primary.
REDIS = ["redis", "redis-sentinel"]
ALL = ["memory", "sqlite", *REDIS, "cachelib-simple", "cachelib-filesystem"]
#: Where a test clock decides expiry (Redis TTLs run on the server's clock).
WITH_CLOCK = [name for name in ALL if name not in REDIS]
WITH_BUS = ["memory", "sqlite", *REDIS]
#: Shared between processes (a child process can reach the same sessions).
SHARED = ["sqlite", *REDIS, "cachelib-filesystem"]
SHARED_BUS = ["sqlite", *REDIS]


def cases(names: list[str]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("case", names, indirect=True)


@pytest.fixture(params=ALL)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    name: str = request.param
    clock = FakeClock()
    if name == "memory":
        events = MemoryEventLog(RETENTION, clock=clock)
        yield Case(name, Backend(MemorySessionStore(TIMEOUT, clock=clock), MemoryMessageBus(), events), clock)
    elif name == "sqlite":
        database = SqliteDatabase(str(tmp_path / "mcp.sqlite3"))
        backend = Backend(
            SqliteSessionStore(database, timeout=TIMEOUT, clock=clock),
            SqliteMessageBus(database),
            SqliteEventLog(database, retention=RETENTION, clock=clock),
        )
        setup = (
            "from flask_mcp.backends import open_backend\n"
            f"backend = open_backend({'sqlite:///' + database.path!r}, timeout={TIMEOUT}, instance_path='.',"
            f" retention={RETENTION})\n"
        )
        yield Case(name, backend, clock, setup)
    elif name in REDIS:
        url = REDIS_URL if name == "redis" else request.getfixturevalue("sentinel_deployment").url()
        client = shared_redis() if name == "redis" else client_from_sentinel_url(url)
        prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"
        backend = Backend(
            RedisSessionStore(client, timeout=TIMEOUT, key_prefix=prefix + "session:"),
            RedisMessageBus(client, channel_prefix=prefix + "bus:"),
            RedisEventLog(client, retention=RETENTION, key_prefix=prefix + "stream:"),
        )
        try:
            yield Case(name, backend, None, _redis_setup(prefix, url), client, prefix)
        finally:
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
            client.close()
    elif name == "cachelib-simple":
        store = CachelibSessionStore(SimpleCache(), timeout=TIMEOUT, clock=clock)
        yield Case(name, Backend(store), clock)
    else:
        directory = str(tmp_path / "cache")
        store = CachelibSessionStore(FileSystemCache(directory), timeout=TIMEOUT, clock=clock)
        setup = (
            "from cachelib import FileSystemCache\n"
            "from flask_mcp.backends import open_backend\n"
            f"backend = open_backend(FileSystemCache({directory!r}), timeout={TIMEOUT}, instance_path='.')\n"
        )
        yield Case(name, Backend(store), clock, setup)


def full_session(session_id: str | None = None) -> Session:
    """A session with every field away from its default."""
    return Session(
        id=session_id or uuid.uuid4().hex,
        protocol_version="2025-06-18",
        client_info={"name": "inspector", "version": "1.2.3", "nested": {"ünïcode": [1, 2.5, None, True]}},
        client_capabilities={"roots": {"listChanged": True}, "sampling": {}},
        log_level="debug",
        principal="alice",
        initialized=True,
        data={"cursor": "abc", "numbers": [1, 2, 3]},
    )


def run_child(case: Case, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter after the case's set-up code."""
    assert case.child_setup is not None
    return subprocess.run(
        [sys.executable, "-c", case.child_setup + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


# ------------------------------------------------------------------ sessions


def test_a_created_session_reads_back_with_every_field(case: Case) -> None:
    session = full_session()
    before = time.time()
    case.backend.sessions.create(session)

    got = case.backend.sessions.get(session.id)

    assert got is not None
    expected = session.to_dict()
    actual = got.to_dict()
    assert actual.pop("last_seen") >= expected.pop("last_seen")
    assert actual == expected
    if case.clock is not None:
        assert got.created_at == case.clock.now
    else:
        assert before <= got.created_at <= time.time()


def test_get_returns_a_copy_so_changes_count_only_once_saved(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)

    got = case.backend.sessions.get(session.id)
    assert got is not None
    got.log_level = "error"
    got.data["cursor"] = "changed"
    got.client_info["name"] = "changed"

    again = case.backend.sessions.get(session.id)
    assert again is not None
    assert again.log_level == "debug"
    assert again.data["cursor"] == "abc"
    assert again.client_info["name"] == "inspector"


def test_nested_containers_are_copied_on_create_get_and_save(case: Case) -> None:
    """Changes deep inside a session count only once saved, whether made to the
    object handed to ``create``/``save`` afterwards or to one ``get`` returned."""
    session = full_session()
    case.backend.sessions.create(session)
    session.data["numbers"].append("after create")

    got = case.backend.sessions.get(session.id)
    assert got is not None
    got.data["numbers"].append("after get")
    got.client_info["nested"]["ünïcode"].append("after get")
    got.client_capabilities["roots"]["listChanged"] = False
    again = case.backend.sessions.get(session.id)
    assert again is not None
    assert again.data["numbers"] == [1, 2, 3]
    assert again.client_info["nested"]["ünïcode"] == [1, 2.5, None, True]
    assert again.client_capabilities["roots"] == {"listChanged": True}

    again.data["numbers"].append(4)
    case.backend.sessions.save(again)
    again.data["numbers"].append("after save")
    last = case.backend.sessions.get(session.id)
    assert last is not None
    assert last.data["numbers"] == [1, 2, 3, 4]


def test_save_persists_changes(case: Case) -> None:
    session = Session(id=uuid.uuid4().hex, protocol_version="2025-11-25")
    case.backend.sessions.create(session)

    got = case.backend.sessions.get(session.id)
    assert got is not None
    got.initialized = True
    got.log_level = "warning"
    got.data["k"] = {"v": 1}
    case.backend.sessions.save(got)

    again = case.backend.sessions.get(session.id)
    assert again is not None
    assert (again.initialized, again.log_level, again.data) == (True, "warning", {"k": {"v": 1}})


def test_delete_reports_whether_there_was_a_session(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)

    assert case.backend.sessions.delete(session.id) is True
    assert case.backend.sessions.delete(session.id) is False
    assert case.backend.sessions.get(session.id) is None


def test_saving_a_deleted_session_does_not_bring_it_back(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)
    case.backend.sessions.delete(session.id)

    case.backend.sessions.save(session)

    assert case.backend.sessions.get(session.id) is None


def test_an_unknown_session_id_reads_as_none(case: Case) -> None:
    assert case.backend.sessions.get("no-such-session") is None
    assert case.backend.sessions.get("") is None


def test_touch_refreshes_a_live_session_and_reports_unknown_ones(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)
    touch = case.backend.sessions.touch  # type: ignore[attr-defined]

    assert touch(session.id) is True
    assert touch("no-such-session") is False


@cases(WITH_CLOCK)
def test_a_session_idle_past_the_timeout_expires(case: Case) -> None:
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)

    clock.advance(TIMEOUT - 1)
    assert case.backend.sessions.get(session.id) is not None  # refreshes the idle timer
    clock.advance(TIMEOUT - 1)
    assert case.backend.sessions.get(session.id) is not None
    clock.advance(TIMEOUT + 1)
    assert case.backend.sessions.get(session.id) is None
    # Gone for good, even once the clock no longer says so.
    clock.advance(-(TIMEOUT + 1))
    assert case.backend.sessions.get(session.id) is None


@cases(WITH_CLOCK)
def test_saving_an_expired_session_does_not_bring_it_back(case: Case) -> None:
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)
    clock.advance(TIMEOUT + 1)

    case.backend.sessions.save(session)

    assert case.backend.sessions.get(session.id) is None


@cases(WITH_CLOCK)
def test_touch_keeps_a_session_alive(case: Case) -> None:
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)
    touch = case.backend.sessions.touch  # type: ignore[attr-defined]

    clock.advance(TIMEOUT - 1)
    assert touch(session.id) is True
    clock.advance(TIMEOUT - 1)
    assert case.backend.sessions.get(session.id) is not None
    clock.advance(TIMEOUT + 1)
    assert touch(session.id) is False


@cases(WITH_CLOCK)
def test_saving_a_session_read_earlier_does_not_set_its_idle_timer_back(case: Case) -> None:
    """Two requests of one session: the first saves what it read after the
    second refreshed the timer; the session stays as fresh as the second left it."""
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)
    clock.advance(10)
    first = case.backend.sessions.get(session.id)
    assert first is not None
    clock.advance(30)
    assert case.backend.sessions.get(session.id) is not None

    first.log_level = "error"
    case.backend.sessions.save(first)
    clock.advance(TIMEOUT - 5)  # idle past TIMEOUT since the first read, not since the second

    got = case.backend.sessions.get(session.id)
    assert got is not None
    assert got.log_level == "error"


@cases(SHARED)
def test_a_session_created_by_a_process_that_then_crashes_is_still_there(case: Case) -> None:
    session = full_session()
    code = (
        "import os, signal\n"
        "from flask_mcp.protocol.session import Session\n"
        f"backend.sessions.create(Session.from_dict({session.to_dict()!r}))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )

    child = run_child(case, code)

    assert child.returncode == -signal.SIGKILL, child.stderr
    got = case.backend.sessions.get(session.id)
    assert got is not None
    assert (got.principal, got.client_info, got.data) == (session.principal, session.client_info, session.data)


@cases(SHARED)
def test_a_change_saved_here_is_seen_by_another_process(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)
    session.log_level = "critical"
    case.backend.sessions.save(session)
    code = (
        "import json\n"
        f"got = backend.sessions.get({session.id!r})\n"
        "print(json.dumps(got.to_dict()))\n"
        "backend.close()\n"
    )

    child = run_child(case, code)

    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout)["log_level"] == "critical"


@cases(SHARED)
def test_workers_in_several_processes_share_sessions_without_errors(case: Case) -> None:
    code = (
        "import sys\n"
        "from flask_mcp.protocol.session import Session\n"
        "for n in range(60):\n"
        "    session = Session(id=f'{sys.argv[1]}-{n}', protocol_version='2025-06-18')\n"
        "    backend.sessions.create(session)\n"
        "    got = backend.sessions.get(session.id)\n"
        "    got.data['n'] = n\n"
        "    backend.sessions.save(got)\n"
        "backend.close()\n"
    )
    assert case.child_setup is not None
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", case.child_setup + code, f"w{i}"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=60)
        assert worker.returncode == 0, stderr.decode()

    for i in range(4):
        for n in (0, 59):
            got = case.backend.sessions.get(f"w{i}-{n}")
            assert got is not None
            assert got.data == {"n": n}


# ------------------------------------------------------------------ message bus


@cases(WITH_BUS)
def test_a_published_message_reaches_subscribers_of_its_channel_only(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["a", "b"]) as subscription:
        bus.publish("elsewhere", {"n": 0})
        bus.publish("b", {"n": 1, "nested": {"list": [1, "x", None]}})
        bus.publish("a", {"n": 2})

        assert subscription.get(5) == ("b", {"n": 1, "nested": {"list": [1, "x", None]}})
        assert subscription.get(5) == ("a", {"n": 2})
        assert subscription.get(0.05) is None


@cases(WITH_BUS)
def test_every_subscriber_of_a_channel_gets_the_message(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["c"]) as first, bus.subscribe(["c"]) as second:
        bus.publish("c", {"hello": "all"})

        assert first.get(5) == ("c", {"hello": "all"})
        assert second.get(5) == ("c", {"hello": "all"})


@cases(WITH_BUS)
def test_messages_published_before_subscribing_are_not_delivered(case: Case) -> None:
    bus = case.bus
    bus.publish("early", {"n": 1})
    with bus.subscribe(["early"]) as subscription:
        assert subscription.get(0.1) is None


@cases(WITH_BUS)
def test_a_subscription_waits_no_longer_than_its_timeout(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["quiet"]) as subscription:
        started = time.monotonic()
        assert subscription.get(0.2) is None
        assert 0.15 <= time.monotonic() - started < 2
        started = time.monotonic()
        assert subscription.get(0) is None
        assert time.monotonic() - started < 1


@cases(WITH_BUS)
def test_a_waiting_subscriber_wakes_when_another_thread_publishes(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["wake"]) as subscription:
        publisher = threading.Thread(target=bus.publish, args=("wake", {"from": "thread"}))
        started = time.monotonic()
        publisher.start()
        try:
            assert subscription.get(10) == ("wake", {"from": "thread"})
        finally:
            publisher.join(10)
        assert time.monotonic() - started < 5


@cases(SHARED_BUS)
def test_a_message_published_by_another_process_is_received(case: Case) -> None:
    with case.bus.subscribe(["cross"]) as subscription:
        child = run_child(case, "backend.bus.publish('cross', {'from': 'child'})\nbackend.close()\n")
        assert child.returncode == 0, child.stderr

        assert subscription.get(5) == ("cross", {"from": "child"})


# ------------------------------------------------------------------ event logs (resumable streams)


@cases(WITH_BUS)
def test_an_event_log_reads_back_the_events_after_a_sequence_number(case: Case) -> None:
    case.events.append("s/a", 0, {"message": None, "final": False})
    case.events.append("s/a", 1, {"message": {"n": 1}, "final": False})
    case.events.append("s/a", 2, {"message": {"n": 2}, "final": True})
    case.events.append("s/b", 0, {"message": None, "final": False})
    assert case.events.read("s/a", 0) == [
        (1, {"message": {"n": 1}, "final": False}),
        (2, {"message": {"n": 2}, "final": True}),
    ]
    assert case.events.read("s/a", 1) == [(2, {"message": {"n": 2}, "final": True})]
    assert case.events.read("s/a", 2) == []
    assert case.events.read("s/b", 0) == []  # known, nothing after the priming event
    assert case.events.read("s/c", 0) is None  # unknown


@cases(WITH_BUS)
def test_an_event_log_keeps_its_own_copy(case: Case) -> None:
    event: dict[str, object] = {"message": {"n": 1}, "final": False}
    case.events.append("copy", 0, event)
    event["message"] = "changed"
    assert case.events.read("copy", -1) == [(0, {"message": {"n": 1}, "final": False})]


@cases(["memory", "sqlite"])
def test_a_stream_is_forgotten_a_retention_after_its_last_event(case: Case) -> None:
    case.events.append("old", 0, {"message": None, "final": False})
    case.clock_.advance(RETENTION - 1)
    case.events.append("old", 1, {"message": {"n": 1}, "final": False})  # refreshes the whole stream
    case.clock_.advance(2)
    assert case.events.read("old", 0) == [(1, {"message": {"n": 1}, "final": False})]
    case.clock_.advance(RETENTION)
    assert case.events.read("old", 0) is None


@cases(REDIS)
def test_redis_forgets_a_stream_a_retention_after_its_last_event(case: Case) -> None:
    assert case.redis_client is not None
    events = RedisEventLog(case.redis_client, retention=0.3, key_prefix=case.prefix + "short:")
    events.append("s", 0, {"message": None, "final": False})
    assert events.read("s", 0) == []
    time.sleep(0.5)
    assert events.read("s", 0) is None


@pytest.mark.parametrize("uri", ["memory://", "sqlite://", REDIS_URL])
def test_open_backend_gives_an_event_log_with_the_bus_and_the_retention_asked_for(tmp_path: Path, uri: str) -> None:
    backend = open_backend(uri, timeout=TIMEOUT, instance_path=str(tmp_path), retention=12.5)
    try:
        assert backend.bus is not None and isinstance(backend.events, EventLog)
        assert backend.events.retention == 12.5  # type: ignore[attr-defined]
    finally:
        backend.close()
    cache = open_backend(SimpleCache(), timeout=TIMEOUT, instance_path=str(tmp_path))
    assert cache.bus is None and cache.events is None


@cases(SHARED_BUS)
def test_events_appended_by_another_process_are_read(case: Case) -> None:
    code = (
        "backend.events.append('cross/s', 0, {'message': None, 'final': False})\n"
        "backend.events.append('cross/s', 1, {'message': {'from': 'child'}, 'final': True})\n"
        "backend.close()\n"
    )
    child = run_child(case, code)
    assert child.returncode == 0, child.stderr
    assert case.events.read("cross/s", 0) == [(1, {"message": {"from": "child"}, "final": True})]


def test_a_backend_without_a_bus_says_so_and_refuses_bus_features(case: Case) -> None:
    if case.backend.bus is not None:
        assert case.backend.supports_bus
        assert case.backend.require_bus("subscriptions/listen") is case.backend.bus
        return
    assert not case.backend.supports_bus
    with pytest.raises(BusNotSupported, match="subscriptions/listen needs a message bus"):
        case.backend.require_bus("subscriptions/listen")


# ------------------------------------------------------------------ backend specifics


def test_sqlite_prunes_expired_sessions_when_creating(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), timeout=TIMEOUT, clock=clock, prune_interval=10)
    store.create(full_session())
    clock.advance(TIMEOUT + 1)
    store.create(full_session())

    with sqlite3.connect(store.database.path) as connection:
        count = connection.execute("SELECT COUNT(*) FROM mcp_sessions").fetchone()[0]
    connection.close()
    assert count == 1


def _session_ids(path: str) -> list[str]:
    """The ids in the sessions table, in rowid order."""
    with sqlite3.connect(path) as connection:
        ids = [row[0] for row in connection.execute("SELECT id FROM mcp_sessions ORDER BY rowid")]
    connection.close()
    return ids


def test_sqlite_a_session_kept_alive_by_reads_is_not_in_the_way_of_pruning(tmp_path: Path) -> None:
    """A refresh moves the row to the end, so the expired rows stay the first
    ones (pruning reads oldest first and stops at a live row)."""
    clock = FakeClock()
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), timeout=TIMEOUT, clock=clock, prune_interval=10)
    store.prune_batch = 1
    kept, idle = full_session("kept"), full_session("idle")
    store.create(kept)
    store.create(idle)
    clock.advance(TIMEOUT / 2)
    assert store.get("kept") is not None  # staler than refresh_slack: written back
    assert store.touch("kept")
    clock.advance(TIMEOUT / 2 + 1)
    store.create(full_session("new"))

    assert _session_ids(store.database.path) == ["kept", "new"]
    assert store.get("kept") is not None


def test_sqlite_pruning_gets_past_a_live_row_that_is_out_of_order(tmp_path: Path) -> None:
    """Rows an earlier version refreshed in place (or written before the clock
    stepped back) can sit before expired ones: each prune still deletes the
    expired rows of its first batch."""
    clock = FakeClock()
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), timeout=TIMEOUT, clock=clock, prune_interval=0)
    store.prune_batch = 3
    for name in ("live", "old1", "old2", "old3", "old4"):
        store.create(full_session(name))
    clock.advance(TIMEOUT + 1)
    with sqlite3.connect(store.database.path) as connection:  # refreshed in place, as before this version
        connection.execute("UPDATE mcp_sessions SET last_seen = ? WHERE id = 'live'", (clock.now,))
    connection.close()

    store.create(full_session("new1"))
    assert _session_ids(store.database.path) == ["live", "old3", "old4", "new1"]
    store.create(full_session("new2"))
    assert _session_ids(store.database.path) == ["live", "new1", "new2"]


def test_sqlite_file_of_an_earlier_version_keeps_working_without_its_last_seen_index(tmp_path: Path) -> None:
    path = str(tmp_path / "old.sqlite3")
    session = full_session()
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "PRAGMA journal_mode=WAL;"
            "CREATE TABLE mcp_sessions (id TEXT PRIMARY KEY, record TEXT NOT NULL, last_seen REAL NOT NULL);"
            "CREATE INDEX mcp_sessions_last_seen ON mcp_sessions (last_seen);"
        )
        connection.execute(
            "INSERT INTO mcp_sessions VALUES (?, ?, ?)", (session.id, json.dumps(session.to_dict()), time.time())
        )
    connection.close()
    store = SqliteSessionStore(path)

    got = store.get(session.id)
    store.create(full_session("another"))

    assert got is not None and got.to_dict() | {"last_seen": 0} == session.to_dict() | {"last_seen": 0}
    with sqlite3.connect(path) as connection:
        indexes = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")]
    connection.close()
    assert "mcp_sessions_last_seen" not in indexes
    assert len(store) == 2


def test_sqlite_session_data_that_utf8_cannot_carry_reads_back(tmp_path: Path) -> None:
    """A lone surrogate (a client can send one as a JSON escape) falls back to
    the stdlib's ASCII escapes; a big integer stays exact."""
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"))
    session = full_session()
    session.client_info = {"name": "\ud800 and ü"}
    session.data = {"big": 2**70}
    store.create(session)

    got = store.get(session.id)

    assert got is not None
    assert (got.client_info, got.data) == ({"name": "\ud800 and ü"}, {"big": 2**70})


def test_sqlite_keeps_nan_and_infinities_in_app_data(tmp_path: Path) -> None:
    """orjson would store them as null: records with app data go through the stdlib."""
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"))
    session = full_session()
    store.create(session)
    session.data = {"ratio": float("nan"), "limit": float("inf"), "floor": float("-inf")}
    store.save(session)

    got = store.get(session.id)

    assert got is not None
    assert math.isnan(got.data["ratio"]) and got.data["limit"] == float("inf") and got.data["floor"] == float("-inf")


def test_sqlite_reads_a_record_with_nan_written_by_an_earlier_version(tmp_path: Path) -> None:
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"))
    session = full_session()
    store.create(session)
    record = json.dumps({**session.to_dict(), "data": {"x": float("inf")}})  # the stdlib writes Infinity
    with sqlite3.connect(store.database.path) as connection:
        connection.execute("UPDATE mcp_sessions SET record = ? WHERE id = ?", (record, session.id))
    connection.close()

    got = store.get(session.id)

    assert got is not None
    assert got.data == {"x": float("inf")}


def test_sqlite_prunes_old_messages_when_publishing(tmp_path: Path) -> None:
    bus = SqliteMessageBus(str(tmp_path / "m.sqlite3"), retention=60, prune_interval=0)
    bus.publish("old", {"n": 1})
    with sqlite3.connect(bus.database.path) as connection:
        connection.execute("UPDATE mcp_messages SET created = created - 120")
    connection.close()

    bus.publish("new", {"n": 2})

    with sqlite3.connect(bus.database.path) as connection:
        channels = [row[0] for row in connection.execute("SELECT channel FROM mcp_messages")]
    connection.close()
    assert channels == ["new"]


def test_sqlite_subscriptions_share_one_polling_thread_that_stops_with_the_last(tmp_path: Path) -> None:
    """An idle subscription must cost nothing of its own (a worker may hold
    thousands of listen streams under gevent)."""
    bus = SqliteMessageBus(str(tmp_path / "bus.sqlite3"))

    def pollers() -> int:
        return sum(1 for thread in threading.enumerate() if thread.name == "flask-mcp-sqlite-bus")

    before = pollers()
    subscriptions = [bus.subscribe(["shared"] if i % 2 else ["other"]) for i in range(50)]
    assert pollers() == before + 1
    bus.publish("shared", {"n": 1})
    assert all(s.get(5) == ("shared", {"n": 1}) for s in subscriptions[1::2])
    assert all(s.get(0.05) is None for s in subscriptions[::2])
    for subscription in subscriptions:
        subscription.close()
    deadline = time.monotonic() + 5
    while pollers() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pollers() == before
    with bus.subscribe(["shared"]) as again:  # and starts again for the next one
        bus.publish("shared", {"n": 2})
        assert again.get(5) == ("shared", {"n": 2})


def test_sqlite_uses_write_ahead_logging(tmp_path: Path) -> None:
    store = SqliteSessionStore(str(tmp_path / "wal.sqlite3"))
    store.create(full_session())

    with sqlite3.connect(store.database.path) as connection:
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    connection.close()
    assert mode == "wal"


def test_sqlite_a_forked_child_opens_connections_of_its_own(tmp_path: Path) -> None:
    """The pool learns of a fork from an at-fork hook (not from a getpid()
    system call per operation); the child must not reuse the parent's
    connections. Forked in a fresh interpreter: pytest's own threads make
    fork() warn."""
    code = (
        "import os\n"
        "from flask_mcp.backends.sqlite import SqliteSessionStore\n"
        "from flask_mcp.protocol.session import Session\n"
        f"store = SqliteSessionStore({str(tmp_path / 'fork.sqlite3')!r})\n"
        "store.create(Session(id='parent', protocol_version='2025-06-18'))\n"
        "inherited = [connection for connection, _ in store.database._idle]\n"
        "assert inherited\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    connection, _ = store.database._checkout()\n"
        "    fresh = all(connection is not old for old in inherited)\n"
        "    store.create(Session(id='child', protocol_version='2025-06-18'))\n"
        "    os._exit(0 if fresh else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status), store.get('child') is not None, store.get('parent') is not None)\n"
    )

    child = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)

    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["0", "True", "True"]


@cases(REDIS)
def test_redis_refreshes_the_ttl_on_a_read_once_refresh_slack_has_passed(case: Case) -> None:
    """Batched as SQLite's ``last_seen``: a read refreshes the TTL only when
    this process last did over ``refresh_slack`` seconds ago."""
    assert case.redis_client is not None
    clock = FakeClock()
    store = RedisSessionStore(case.redis_client, timeout=TIMEOUT, key_prefix=case.prefix + "slack:", clock=clock)
    try:
        session = full_session()
        store.create(session)
        key = store.key_prefix + session.id
        case.redis_client.pexpire(key, 5000)  # as if most of the timeout had passed

        assert store.get(session.id) is not None
        assert case.redis_client.pttl(key) <= 5000  # refreshed by the create, just now
        clock.advance(store.refresh_slack + 0.1)
        assert store.get(session.id) is not None
        assert case.redis_client.pttl(key) > 50_000
        case.redis_client.pexpire(key, 5000)
        got = store.get(session.id)
        assert got is not None
        store.save(got)
        assert 0 < case.redis_client.pttl(key) <= 5000  # a save keeps the TTL
    finally:
        store.close()


@cases(REDIS)
def test_redis_expires_an_idle_session_on_the_server(case: Case) -> None:
    assert case.redis_client is not None
    store = RedisSessionStore(case.redis_client, timeout=0.3, key_prefix=case.prefix + "short:")
    session = full_session()
    store.create(session)
    assert case.redis_client.exists(case.prefix + "short:" + session.id)

    deadline = time.monotonic() + 5
    while case.redis_client.exists(case.prefix + "short:" + session.id) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert store.get(session.id) is None


def _memory_ids(store: MemorySessionStore) -> list[str]:
    """The stored ids in idle order, oldest first (what a prune walks)."""
    return list(store._records)


def test_memory_prunes_expired_sessions_and_keeps_the_live_ones() -> None:
    """A read moves a session to the end, so the expired ones are the first
    ones and a prune stops at the first live one."""
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=0)
    for i in range(100):
        store.create(full_session(f"s{i}"))
        clock.advance(0.5)
    assert store.get("s5") is not None  # idle 47.5 s: refreshed, moved to the end
    clock.advance(30)  # s0..s39 idle more than TIMEOUT now

    store.create(full_session("new"))

    live = [f"s{i}" for i in range(40, 100)]
    assert _memory_ids(store) == [*live, "s5", "new"]
    assert len(store) == len(live) + 2
    assert all(store.get(f"s{i}") is None for i in range(40) if i != 5)
    assert all(store.get(session_id) is not None for session_id in [*live, "s5", "new"])


def test_memory_a_session_created_again_under_its_id_moves_to_the_end() -> None:
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=0)
    store.create(full_session("again"))
    clock.advance(30)
    store.create(full_session("idle"))
    clock.advance(20)
    store.create(full_session("again"))
    clock.advance(TIMEOUT - 19)  # "idle" idle past TIMEOUT, "again" not

    store.create(full_session("new"))

    assert _memory_ids(store) == ["again", "new"]


def test_memory_prunes_at_most_once_per_interval_and_never_returns_an_expired_session() -> None:
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=10)
    store.create(full_session("old"))
    clock.advance(TIMEOUT - 5)
    store.create(full_session("pruner"))  # prunes (nothing expired yet)
    clock.advance(6)  # "old" is expired; the last prune was 6 s ago

    store.create(full_session("skipped"))
    assert _memory_ids(store) == ["old", "pruner", "skipped"]
    assert len(store) == 2
    clock.advance(4)
    store.create(full_session("prunes"))
    assert _memory_ids(store) == ["pruner", "skipped", "prunes"]

    store.create(full_session("again"))
    clock.advance(TIMEOUT + 1)
    assert store.get("again") is None  # not pruned yet, but expired: gone
    assert _memory_ids(store) == ["pruner", "skipped", "prunes"]


def test_memory_a_clock_stepping_back_never_gets_a_live_session_pruned() -> None:
    """Sessions written before the clock stepped back sit out of idle order: a
    live one stops a prune early, and the expired ones behind it go when read."""
    clock = FakeClock()
    start = clock.now
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=TIMEOUT)
    store.create(full_session("expired1"))
    clock.now = start + 30
    store.create(full_session("live"))
    clock.now = start - 10  # back 40 s
    store.create(full_session("expired2"))
    clock.now = start + 70  # expired1 idle 70 s, live 40 s, expired2 80 s

    store.create(full_session("new"))

    assert _memory_ids(store) == ["live", "expired2", "new"]
    assert len(store) == 2
    assert store.get("expired2") is None
    assert store.get("live") is not None
    assert _memory_ids(store) == ["new", "live"]


def test_memory_prunes_after_the_clock_steps_back_without_waiting_for_it_to_catch_up() -> None:
    clock = FakeClock()
    start = clock.now
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=TIMEOUT)
    store.create(full_session("refreshed-in-the-past"))  # prunes; the last prune is at start
    clock.now = start - 1000
    assert store.get("refreshed-in-the-past") is not None
    clock.now = start - 900  # idle 100 s, and the clock is behind the last prune

    store.create(full_session("new"))

    assert _memory_ids(store) == ["new"]


class _Box:
    """App data that is not JSON: the memory backend keeps it as it is."""

    def __init__(self, items: object) -> None:
        self.items = items


def test_memory_copies_app_objects_in_session_data_as_deepcopy_does() -> None:
    store = MemorySessionStore()
    shared: dict[str, object] = {"n": 1}
    cycle: list[object] = []
    cycle.append(cycle)
    session = full_session()
    session.data = {"box": _Box([1]), "a": shared, "b": shared, "in_box": _Box(shared), "pair": ([1], "x")}
    session.data["cycle"] = cycle
    store.create(session)
    session.data["box"].items.append("after create")

    got = store.get(session.id)

    assert got is not None
    box = got.data["box"]
    assert isinstance(box, _Box) and box is not session.data["box"] and box.items == [1]
    assert got.data["a"] is got.data["b"] is got.data["in_box"].items
    assert got.data["a"] is not shared
    assert got.data["cycle"][0] is got.data["cycle"] is not cycle
    box.items.append(2)
    got.data["pair"][0].append(2)
    got.data["a"]["n"] = 2
    again = store.get(session.id)
    assert again is not None
    assert again.data["box"].items == [1]
    assert again.data["pair"] == ([1], "x")
    assert again.data["in_box"].items == {"n": 1}


@pytest.mark.parametrize(
    "value",
    [
        {"k": [1, 2.5, None, True, "s", {"n": []}], "big": 2**70},
        OrderedDict(a=[1]),
        defaultdict(list, a=[1]),
        {1: [1], (2, 3): {"t": []}},
        [[1], ([2], 3), {"x"}],
    ],
    ids=["json", "ordered-dict", "defaultdict", "non-string-keys", "tuple-and-set"],
)
def test_memory_record_copy_equals_deepcopy_and_shares_no_container(value: object) -> None:
    copied = _copy(value)

    assert type(copied) is type(value)
    assert copied == copy.deepcopy(value)

    def containers(item: object) -> list[int]:
        found: list[int] = []
        if isinstance(item, dict):
            found += [id(item)] + [i for v in item.values() for i in containers(v)]
        elif isinstance(item, (list, set)):
            found += [id(item)] + [i for v in item for i in containers(v)]
        elif isinstance(item, tuple):
            found += [i for v in item for i in containers(v)]
        return found

    assert not set(containers(copied)) & set(containers(value))


# ------------------------------------------------------------------ open_backend


def test_open_backend_memory_uri_gives_an_in_process_store_and_bus(tmp_path: Path) -> None:
    backend = open_backend("memory://", timeout=42, instance_path=str(tmp_path))

    assert isinstance(backend.sessions, MemorySessionStore)
    assert backend.sessions.timeout == 42
    assert isinstance(backend.bus, MemoryMessageBus)
    assert backend.describe() == "memory://"


def test_open_backend_bare_sqlite_uri_uses_a_file_in_the_instance_folder(tmp_path: Path) -> None:
    instance = tmp_path / "instance"
    backend = open_backend("sqlite://", timeout=42, instance_path=str(instance))

    assert isinstance(backend.sessions, SqliteSessionStore)
    assert isinstance(backend.bus, SqliteMessageBus)
    assert backend.sessions.timeout == 42
    assert backend.sessions.database.path == str(instance / "flask-mcp.sqlite3")
    backend.check()  # creates the folder and the file
    assert (instance / "flask-mcp.sqlite3").is_file()
    assert backend.describe() == f"sqlite:///{instance}/flask-mcp.sqlite3"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sqlite:///mcp.db", "instance/mcp.db"),
        ("sqlite:///sub/dir/mcp.db", "instance/sub/dir/mcp.db"),
        ("sqlite:////ABS/mcp.db", "ABS/mcp.db"),
        ("sqlite:///", "instance/flask-mcp.sqlite3"),
    ],
)
def test_open_backend_sqlite_paths_are_relative_to_the_instance_folder_unless_absolute(
    tmp_path: Path, uri: str, expected: str
) -> None:
    uri = uri.replace("/ABS", str(tmp_path))
    backend = open_backend(uri, timeout=42, instance_path=str(tmp_path / "instance"))

    assert isinstance(backend.sessions, SqliteSessionStore)
    path = Path(expected.replace("ABS", str(tmp_path))) if expected.startswith("ABS") else tmp_path / expected
    assert backend.sessions.database.path == str(path)
    backend.sessions.create(full_session())
    assert path.is_file()


@pytest.mark.parametrize(
    ("uri", "kwargs", "shown"),
    [
        ("redis://localhost:6390/3", {"host": "localhost", "port": 6390, "db": 3}, "redis://localhost:6390/3"),
        (
            "rediss://user:s3cret@cache.example:6380/1",
            {"host": "cache.example", "port": 6380, "db": 1, "username": "user", "password": "s3cret"},
            "rediss://user:***@cache.example:6380/1",
        ),
        (
            "redis+unix:///run/redis/redis.sock?db=2&password=s3cret",
            {"path": "/run/redis/redis.sock", "db": 2, "password": "s3cret"},
            "redis+unix:///run/redis/redis.sock?db=2&password=***",
        ),
    ],
)
def test_open_backend_redis_uris_build_a_client_with_bounded_timeouts(
    tmp_path: Path, uri: str, kwargs: dict[str, object], shown: str
) -> None:
    backend = open_backend(uri, timeout=42, instance_path=str(tmp_path), io_timeout=1.5)
    try:
        assert isinstance(backend.sessions, RedisSessionStore)
        assert isinstance(backend.bus, RedisMessageBus)
        assert backend.sessions.timeout == 42
        pool_kwargs = backend.sessions.client.connection_pool.connection_kwargs
        assert {k: pool_kwargs.get(k) for k in kwargs} == kwargs
        assert pool_kwargs["socket_timeout"] == 1.5
        if "path" not in kwargs:
            assert pool_kwargs["socket_connect_timeout"] == 1.5
        assert backend.describe() == shown
        assert "s3cret" not in backend.describe()
        if uri.startswith("rediss"):
            assert backend.sessions.client.connection_pool.connection_class.__name__ == "SSLConnection"
    finally:
        backend.close()


def test_open_backend_reuses_a_redis_client_and_leaves_it_open(tmp_path: Path) -> None:
    client = shared_redis()
    try:
        backend = open_backend(client, timeout=42, instance_path=str(tmp_path))
        assert isinstance(backend.sessions, RedisSessionStore)
        assert backend.sessions.client is client
        assert isinstance(backend.bus, RedisMessageBus)
        backend.check()
        backend.close()
        assert client.ping()  # still usable: the app owns it
        assert "127.0.0.1" in backend.describe()
    finally:
        client.close()


def test_a_reused_redis_client_that_decodes_responses_works_too(tmp_path: Path) -> None:
    shared_redis().close()
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True, socket_timeout=2)
    prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"
    store = RedisSessionStore(client, key_prefix=prefix)
    bus = RedisMessageBus(client, channel_prefix=prefix)
    session = full_session()
    try:
        store.create(session)
        got = store.get(session.id)
        assert got is not None
        assert got.client_info == session.client_info
        with bus.subscribe(["text"]) as subscription:
            bus.publish("text", {"ü": "ß"})
            assert subscription.get(5) == ("text", {"ü": "ß"})
    finally:
        store.delete(session.id)
        client.close()


def test_open_backend_reuses_a_cachelib_cache_without_a_bus(tmp_path: Path) -> None:
    cache = SimpleCache()
    backend = open_backend(cache, timeout=42, instance_path=str(tmp_path))

    assert isinstance(backend.sessions, CachelibSessionStore)
    assert backend.sessions.cache is cache
    assert backend.bus is None
    assert not backend.supports_bus
    assert backend.describe() == "cachelib SimpleCache"


def test_open_backend_accepts_a_store_object_and_uses_it_as_bus_if_it_is_one(tmp_path: Path) -> None:
    store = MemorySessionStore()
    plain = open_backend(store, timeout=42, instance_path=str(tmp_path))
    assert plain.sessions is store
    assert plain.bus is None

    class StoreAndBus(MemorySessionStore, MemoryMessageBus):
        def __init__(self) -> None:
            MemorySessionStore.__init__(self)
            MemoryMessageBus.__init__(self)

    both = StoreAndBus()
    backend = open_backend(both, timeout=42, instance_path=str(tmp_path))
    assert backend.sessions is both
    assert backend.bus is both

    assert open_backend(backend, timeout=1, instance_path=str(tmp_path)) is backend


def test_a_rejected_uri_does_not_echo_its_password(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scheme") as caught:
        open_backend("postgres://app:s3cret@db/x", timeout=42, instance_path=str(tmp_path))
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("spec", ["postgres://db/x", "memory", "memory://extra", "", "sqlite", 42, object(), None])
def test_open_backend_rejects_anything_else_and_lists_what_is_accepted(tmp_path: Path, spec: object) -> None:
    with pytest.raises(ValueError, match="MCP_BACKEND accepts 'memory://', 'sqlite://'"):
        open_backend(spec, timeout=42, instance_path=str(tmp_path))


# ------------------------------------------------------------------ faults


def test_redis_at_a_closed_port_is_unavailable_quickly(tmp_path: Path) -> None:
    backend = open_backend("redis://127.0.0.1:1/0", timeout=42, instance_path=str(tmp_path))
    assert backend.bus is not None
    calls: list[Callable[[], object]] = [
        lambda: backend.sessions.create(full_session()),
        lambda: backend.sessions.get("x"),
        lambda: backend.sessions.save(full_session()),
        lambda: backend.sessions.delete("x"),
        lambda: backend.sessions.touch("x"),  # type: ignore[attr-defined]
        lambda: backend.bus.publish("c", {}),  # type: ignore[union-attr]
        lambda: backend.bus.subscribe(["c"]),  # type: ignore[union-attr]
        backend.check,
    ]
    started = time.monotonic()
    try:
        for call in calls:
            with pytest.raises(BackendUnavailable, match="127.0.0.1:1"):
                call()
    finally:
        backend.close()
    assert time.monotonic() - started < 5


def test_redis_requests_fail_while_the_server_is_down_and_recover_when_it_is_back(tmp_path: Path) -> None:
    port = free_port()
    server = start_redis_server(port, why="needed to stop and restart a private server")
    backend = open_backend(f"redis://127.0.0.1:{port}/0", timeout=42, instance_path=str(tmp_path))
    try:
        session = full_session()
        backend.sessions.create(session)
        assert backend.sessions.get(session.id) is not None

        stop_redis_server(server)
        with pytest.raises(BackendUnavailable):
            backend.sessions.get(session.id)
        with pytest.raises(BackendUnavailable):
            backend.check()

        server = start_redis_server(port)
        backend.sessions.create(session)  # the same backend object reconnects by itself
        assert backend.sessions.get(session.id) is not None
        with backend.require_bus("test").subscribe(["back"]) as subscription:
            backend.require_bus("test").publish("back", {"ok": True})
            assert subscription.get(5) == ("back", {"ok": True})
    finally:
        backend.close()
        stop_redis_server(server)


def test_sqlite_path_that_is_a_directory_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    backend = open_backend(f"sqlite:///{tmp_path / 'db'}", timeout=42, instance_path=str(tmp_path))

    with pytest.raises(BackendUnavailable, match="unable to open"):
        backend.sessions.create(full_session())
    with pytest.raises(BackendUnavailable):
        backend.sessions.get("x")
    with pytest.raises(BackendUnavailable):
        backend.check()


def test_sqlite_file_whose_folder_cannot_be_created_is_unavailable_until_it_can(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file where the instance folder should be")
    backend = open_backend("sqlite://", timeout=42, instance_path=str(blocker))
    bus = backend.require_bus("test")

    with pytest.raises(BackendUnavailable):
        backend.sessions.create(full_session())
    with pytest.raises(BackendUnavailable):
        bus.publish("c", {})
    with pytest.raises(BackendUnavailable):
        bus.subscribe(["c"])

    blocker.unlink()  # the operator fixes it; no restart needed
    session = full_session()
    backend.sessions.create(session)
    assert backend.sessions.get(session.id) is not None


def test_sqlite_read_only_file_is_unavailable(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    backend = open_backend(f"sqlite:///{folder / 'mcp.sqlite3'}", timeout=42, instance_path=str(tmp_path))
    session = full_session()
    backend.sessions.create(session)
    backend.close()  # as a worker starting afresh: no open connection, no -wal/-shm files remain

    with read_only(folder / "mcp.sqlite3", folder):
        with pytest.raises(BackendUnavailable):
            backend.sessions.create(full_session())
        with pytest.raises(BackendUnavailable):
            backend.require_bus("test").publish("c", {})
        with pytest.raises(BackendUnavailable):
            backend.check()

    backend.sessions.create(full_session())  # writable again: works without a restart


def test_sqlite_locked_by_another_writer_is_unavailable_within_the_busy_timeout_then_recovers(
    tmp_path: Path,
) -> None:
    database = SqliteDatabase(str(tmp_path / "locked.sqlite3"), io_timeout=0.2)
    store = SqliteSessionStore(database)
    bus = SqliteMessageBus(database)
    session = full_session()
    store.create(session)
    holder = sqlite3.connect(database.path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match="locked"):
            store.create(full_session())
        with pytest.raises(BackendUnavailable, match="locked"):
            bus.publish("c", {})
        assert time.monotonic() - started < 3
        holder.execute("ROLLBACK")
    finally:
        holder.close()

    assert store.get(session.id) is not None
    store.create(full_session())


def test_a_cache_that_cannot_write_is_unavailable(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    store = CachelibSessionStore(FileSystemCache(str(directory)))
    shutil.rmtree(directory)
    directory.write_text("a file where the cache folder was")

    with pytest.raises(BackendUnavailable, match="FileSystemCache"):
        store.create(full_session())


def test_redis_reads_refresh_the_ttl_on_a_server_without_getex() -> None:
    """Servers before Redis 6.2 (or with GETEX renamed away) get GET and PEXPIRE in a transaction."""
    port = free_port()
    server = start_redis_server(port, "--rename-command", "GETEX", "", why="needed for a private server without GETEX")
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
            client.getex("x", px=1000)
        store = RedisSessionStore(client, timeout=60)
        session = full_session()
        store.create(session)
        key = store.key_prefix + session.id
        client.pexpire(key, 5000)
        store._refreshed.clear()  # as if refresh_slack had passed since the create
        got = store.get(session.id)
        assert got is not None and got.id == session.id
        assert client.pttl(key) > 50_000
        assert not store._getex  # it asked once, and now goes straight to the transaction
        client.pexpire(key, 5000)
        store._refreshed.clear()
        assert store.get(session.id) is not None
        assert client.pttl(key) > 50_000
        assert store.get("unknown") is None
    finally:
        client.close()
        stop_redis_server(server)
