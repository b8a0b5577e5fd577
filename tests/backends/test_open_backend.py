"""``open_backend``: what each URI or object the app configures opens, and
what it refuses (without echoing a password)."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_cases import (
    TIMEOUT,
    full_session,
)
from cachelib import SimpleCache
from conftest import REDIS_URL, shared_redis

from flask_mcp.backends.cachelib import CachelibSessionStore
from flask_mcp.backends.memory import MemoryMessageBus, MemorySessionStore
from flask_mcp.backends.redis import RedisMessageBus, RedisSessionStore
from flask_mcp.backends.registry import open_backend
from flask_mcp.backends.sqlite import SqliteMessageBus, SqliteSessionStore
from flask_mcp.protocol.events import EventLog


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
        open_backend("mongodb://app:s3cret@db/x", timeout=42, instance_path=str(tmp_path))
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("spec", ["mongodb://db/x", "memory", "memory://extra", "", "sqlite", 42, object(), None])
def test_open_backend_rejects_anything_else_and_lists_what_is_accepted(tmp_path: Path, spec: object) -> None:
    with pytest.raises(ValueError, match="MCP_BACKEND accepts 'memory://', 'sqlite://'"):
        open_backend(spec, timeout=42, instance_path=str(tmp_path))
