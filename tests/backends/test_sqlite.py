"""The SQLite backend beyond the contract: pruning, old files, WAL, forked
workers, and the faults of a file system (a directory, read-only, locked)."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from backend_cases import (
    ROOT,
    TIMEOUT,
    full_session,
)
from conftest import FakeClock, read_only

from flask_mcp.backends.contracts import BackendUnavailable
from flask_mcp.backends.registry import open_backend
from flask_mcp.backends.sqlite import SqliteDatabase, SqliteMessageBus, SqliteSessionStore


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


def test_sqlite_a_new_connection_reads_while_another_writer_holds_the_lock(tmp_path: Path) -> None:
    """A worker's new connection (a burst of listen streams opens many) is not
    refused because another process is writing: its reads go on under WAL;
    only writes wait for the lock, within the busy timeout."""
    database = SqliteDatabase(str(tmp_path / "busy.sqlite3"), io_timeout=0.2)
    store = SqliteSessionStore(database)
    bus = SqliteMessageBus(database)
    store.create(full_session())
    database.close()  # no idle connection left: the next call opens a new one
    holder = sqlite3.connect(database.path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        subscription = bus.subscribe(["c"])  # reads the newest message id on a new connection
        subscription.close()
        with pytest.raises(BackendUnavailable, match="locked"):
            bus.publish("c", {})
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    bus.publish("c", {})


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
