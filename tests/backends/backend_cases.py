"""The backends under test, one :class:`Case` each, for the contract suite
(test_contract.py) and the per-backend test files beside it. Everything is
real: SQLite files, the Redis server on 127.0.0.1:6379, child processes."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cachelib import FileSystemCache, SimpleCache
from conftest import REDIS_URL, FakeClock, shared_redis
from mariadb_server import contract_database as mariadb_database
from postgres_server import contract_database, empty_sql_tables
from redis_server import shared_cluster
from sqlalchemy import create_engine

from flask_mcp.backends.cachelib import CachelibSessionStore
from flask_mcp.backends.contracts import Backend, MessageBus
from flask_mcp.backends.memory import MemoryEventLog, MemoryMessageBus, MemorySessionStore
from flask_mcp.backends.redis import RedisEventLog, RedisMessageBus, RedisSessionStore
from flask_mcp.backends.redis_cluster import ClusterEventLog, ClusterMessageBus, ClusterSessionStore
from flask_mcp.backends.redis_cluster import client_from_url as client_from_cluster_url
from flask_mcp.backends.redis_sentinel import client_from_sentinel_url
from flask_mcp.backends.sql import (
    PollingMessageBus,
    PostgresMessageBus,
    SqlDatabase,
    SqlEventLog,
    SqlSessionStore,
    SqlTaskStore,
)
from flask_mcp.backends.sqlite import SqliteDatabase, SqliteEventLog, SqliteMessageBus, SqliteSessionStore
from flask_mcp.protocol.events import EventLog
from flask_mcp.protocol.session import Session

TIMEOUT = 60.0
#: How long the event logs under test keep a stream after its last event.
RETENTION = 30.0
ROOT = Path(__file__).resolve().parents[2]


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


def _cluster_setup(url: str, prefix: str) -> str:
    return (
        "from flask_mcp.backends.registry import Backend\n"
        "from flask_mcp.backends.redis_cluster import ClusterEventLog, ClusterMessageBus, ClusterSessionStore,"
        " client_from_url\n"
        f"client = client_from_url({url!r})\n"
        f"backend = Backend(ClusterSessionStore(client, timeout={TIMEOUT}, key_prefix={prefix + 'session:'!r}),"
        f" bus=ClusterMessageBus(client, channel_prefix={prefix + 'bus:'!r}),"
        f" events=ClusterEventLog(client, retention={RETENTION}, key_prefix={prefix + 'stream:'!r}),"
        " close=client.close)\n"
    )


#: The Redis backend on one server and on a private Sentinel deployment's primary
#: (the same code: only the client differs); the Cluster has a backend of its own.
REDIS = ["redis", "redis-sentinel"]
#: The SQL backend: on PostgreSQL from a URL and through the app's
#: Flask-SQLAlchemy engine (LISTEN/NOTIFY bus, tests/postgres_server.py), and
#: with the polling bus other databases get: on MariaDB from a PyMySQL URL
#: (tests/mariadb_server.py) and on a SQLite file through SQLAlchemy.
SQL = ["postgresql", "postgresql-flask-sqlalchemy", "mariadb", "sql-sqlite"]
ALL = ["memory", "sqlite", *REDIS, "redis-cluster", *SQL, "cachelib-simple", "cachelib-filesystem"]
#: Where a test clock decides expiry (Redis TTLs run on the server's clock).
WITH_CLOCK = [name for name in ALL if not name.startswith("redis")]
WITH_BUS = ["memory", "sqlite", *REDIS, "redis-cluster", *SQL]
#: Shared between processes (a child process can reach the same sessions).
#: (Not the Flask-SQLAlchemy case: its child process opens the URL, as the plain case does.)
SHARED = ["sqlite", *REDIS, "redis-cluster", "postgresql", "mariadb", "sql-sqlite", "cachelib-filesystem"]
SHARED_BUS = ["sqlite", *REDIS, "redis-cluster", "postgresql", "mariadb", "sql-sqlite"]
#: Where the event log's retention runs on the test clock.
CLOCKED_EVENTS = ["memory", "sqlite", *SQL]

def sql_backend(database: SqlDatabase, clock: FakeClock) -> Backend:
    """Every SQL store on ``database``, on the test clock; the bus its dialect gets."""
    bus = PostgresMessageBus(database) if database.postgresql else PollingMessageBus(database)

    def close() -> None:
        bus.close()
        database.close()

    return Backend(
        SqlSessionStore(database, timeout=TIMEOUT, clock=clock,
                        bus=bus if isinstance(bus, PostgresMessageBus) else None),
        bus,
        SqlEventLog(database, retention=RETENTION, clock=clock),
        SqlTaskStore(database, clock=clock),
        close=close,
    )


@contextmanager
def open_sql_case(name: str, tmp_path: Path) -> Iterator[Case]:
    """One of :data:`SQL`, closed afterwards."""
    clock = FakeClock()
    if name == "postgresql":
        url = contract_database()
        database = SqlDatabase.from_url(url)
    elif name == "postgresql-flask-sqlalchemy":
        from flask import Flask
        from flask_sqlalchemy import SQLAlchemy

        url = contract_database()
        app = Flask(__name__)
        app.config["SQLALCHEMY_DATABASE_URI"] = url
        db = SQLAlchemy()
        db.init_app(app)
        with app.app_context():
            database = SqlDatabase(db.engine, owned=False)
    elif name == "mariadb":
        url = mariadb_database()
        database = SqlDatabase.from_url(url)
    else:
        url = f"sqlite:///{tmp_path / 'sql.sqlite3'}"
        database = SqlDatabase(create_engine(url), owned=True)
    empty_sql_tables(database)
    backend = sql_backend(database, clock)
    setup = (
        "from flask_mcp.backends import open_backend\n"
        + ("from sqlalchemy import create_engine\n"
           f"backend = open_backend(create_engine({url!r}), timeout={TIMEOUT}, instance_path='.',"
           f" retention={RETENTION})\n"
           if name == "sql-sqlite" else
           f"backend = open_backend({url!r}, timeout={TIMEOUT}, instance_path='.', retention={RETENTION})\n")
    )
    try:
        yield Case(name, backend, clock, setup)
    finally:
        backend.close()
        if name == "postgresql-flask-sqlalchemy":
            database.engine.dispose()


def cases(names: list[str]) -> pytest.MarkDecorator:
    """Run a test of the parametrized ``case`` fixture on ``names`` only."""
    return pytest.mark.parametrize("case", names, indirect=True)


@contextmanager
def open_case(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Case]:
    """The backend called ``name`` (one of :data:`ALL`), closed afterwards
    (``request`` gives the session's Sentinel deployment, started on first use)."""
    clock = FakeClock()
    if name in SQL:
        with open_sql_case(name, tmp_path) as sql_case:
            yield sql_case
    elif name == "memory":
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
    elif name == "redis-cluster":  # a private cluster (tests/redis_server.py); its own tests: test_redis_cluster.py
        url = shared_cluster().url
        cluster = client_from_cluster_url(url)
        prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"
        backend = Backend(
            ClusterSessionStore(cluster, timeout=TIMEOUT, key_prefix=prefix + "session:"),  # type: ignore[arg-type]
            ClusterMessageBus(cluster, channel_prefix=prefix + "bus:"),
            ClusterEventLog(cluster, retention=RETENTION, key_prefix=prefix + "stream:"),  # type: ignore[arg-type]
        )
        try:
            yield Case(name, backend, None, _cluster_setup(url, prefix), None, prefix)
        finally:
            for key in list(cluster.scan_iter(match=prefix + "*")):
                cluster.delete(key)
            backend.bus.close()  # type: ignore[union-attr]
            cluster.close()
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


