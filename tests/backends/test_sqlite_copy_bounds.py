"""The SQLite store's per-process copies of session records are bounded in
size, not only in number: clients choose what their records hold (client info,
capabilities), and 4096 large records would be hundreds of megabytes per worker."""

from __future__ import annotations

from pathlib import Path

from conftest import FakeClock

from flask_mcp.backends.sqlite import SqliteSessionStore
from flask_mcp.protocol.session import Session, new_session_id


def _new(store: SqliteSessionStore, name_length: int) -> Session:
    session = Session(id=new_session_id(), protocol_version="2025-11-25", client_info={"name": "n" * name_length})
    store.create(session)
    return session


def test_the_cache_keeps_at_most_cache_chars_of_records(tmp_path: Path) -> None:
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), clock=FakeClock())
    store.cache_chars = 10_000
    sessions = [_new(store, 3_000) for _ in range(6)]
    for session in sessions:
        got = store.get(session.id)
        assert got is not None and got.client_info["name"] == "n" * 3_000
    assert list(store._cached) == [s.id for s in sessions[-3:]]  # three records of about 3 100 characters
    assert store._cached_chars == sum(len(entry[3]) for entry in store._cached.values()) <= 10_000


def test_a_record_too_large_to_keep_is_read_each_time(tmp_path: Path) -> None:
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), clock=FakeClock())
    store.cache_record_max = 1_000
    small, large = _new(store, 10), _new(store, 5_000)
    for session in (small, large, small, large):
        got = store.get(session.id)
        assert got is not None and got.id == session.id
    assert list(store._cached) == [small.id]
    assert store._cached_chars == len(store._cached[small.id][3])


def test_a_deleted_session_leaves_the_cache_and_its_count(tmp_path: Path) -> None:
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), clock=FakeClock())
    sessions = [_new(store, 100) for _ in range(3)]
    for session in sessions:
        assert store.get(session.id) is not None
    assert store.delete(sessions[0].id)
    assert sessions[0].id not in store._cached
    assert store._cached_chars == sum(len(entry[3]) for entry in store._cached.values())
    assert store.get(sessions[0].id) is None


def test_pooled_sqlite_connections_have_a_small_page_cache_and_a_bounded_pool(tmp_path: Path) -> None:
    """What a worker's SQLite connections may hold: at most MAX_IDLE idle
    connections of at most CACHE_KIB of cached pages each."""
    store = SqliteSessionStore(str(tmp_path / "s.sqlite3"), clock=FakeClock())
    database = store.database
    _new(store, 10)
    with database.connection() as connection:
        assert connection.execute("PRAGMA cache_size").fetchone()[0] == -database.CACHE_KIB
    assert database.CACHE_KIB * database.MAX_IDLE <= 16 * 1024
    held = [database.connection() for _ in range(database.MAX_IDLE + 4)]  # more at once than the pool keeps
    for context in held:
        context.__enter__()
    for context in held:
        context.__exit__(None, None, None)
    assert len(database._idle) == database.MAX_IDLE
