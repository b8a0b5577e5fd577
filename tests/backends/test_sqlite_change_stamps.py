"""The SQLite store's per-process copies of session records, and the change
stamps that keep them honest across processes (flask_mcp/backends/sqlite/change_stamps.py).
Real files, real forked processes."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from conftest import FakeClock

from flask_mcp.backends.sqlite import SqliteSessionStore, change_stamps
from flask_mcp.protocol.session import Session, new_session_id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _store(path: Path, clock: FakeClock) -> SqliteSessionStore:
    """A store with its own database object: what another worker process has."""
    return SqliteSessionStore(str(path), clock=clock, timeout=3600.0)


def _new(store: SqliteSessionStore) -> Session:
    session = Session(id=new_session_id(), protocol_version="2025-11-25", client_info={"name": "t"})
    store.create(session)
    return session


def _delete_behind_its_back(path: Path, session_id: str) -> None:
    """A write that stamps nothing (a hand-written statement, an older version)."""
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM mcp_sessions WHERE id = ?", (session_id,))


def test_a_cached_record_answers_without_reading_the_file_for_at_most_cache_max_age(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "s.sqlite3"
    store = _store(path, clock)
    session = _new(store)
    assert store.get(session.id) is not None  # read, and kept
    _delete_behind_its_back(path, session.id)
    assert store.get(session.id) is not None  # the copy: the file was not read
    clock.now += store.cache_max_age + 0.01
    assert store.get(session.id) is None  # too old to trust: read again


def test_another_process_sees_a_change_and_a_delete_at_once(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "s.sqlite3"
    writer, reader = _store(path, clock), _store(path, clock)
    session = _new(writer)
    first = reader.get(session.id)
    assert first is not None and first.log_level is None
    session.log_level = "debug"
    session.data["cart"] = [1, 2]
    writer.save(session)
    changed = reader.get(session.id)  # same instant: only the stamp says it changed
    assert changed is not None and changed.log_level == "debug" and changed.data == {"cart": [1, 2]}
    assert writer.delete(session.id)
    assert reader.get(session.id) is None


def test_a_forked_worker_s_delete_is_seen_by_its_parent(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path / "s.sqlite3", clock)
    session = _new(store)
    assert store.get(session.id) is not None
    pid = os.fork()
    if pid == 0:  # the child, as a gunicorn worker forked from a master that used the store
        code = 0 if store.delete(session.id) else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get(session.id) is None


def test_forked_processes_draw_different_stamps() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write_end, change_stamps._random.getrandbits(64).to_bytes(8, "big"))
        os._exit(0)
    os.close(write_end)
    child = int.from_bytes(os.read(read_end, 8), "big")
    os.close(read_end)
    os.waitpid(pid, 0)
    assert child != change_stamps._random.getrandbits(64)


def test_the_idle_timer_is_still_written_back_when_stale(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "s.sqlite3"
    store = _store(path, clock)
    store.cache_max_age = 10_000.0  # only the refresh rule can send the read to the file
    session = _new(store)
    assert store.get(session.id) is not None
    clock.now += store.refresh_slack + 1
    assert store.get(session.id) is not None
    with sqlite3.connect(path) as connection:
        (last_seen,) = connection.execute("SELECT last_seen FROM mcp_sessions WHERE id = ?", (session.id,)).fetchone()
    assert last_seen == clock.now


def test_changing_a_returned_session_changes_nothing_until_saved(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path / "s.sqlite3", clock)
    session = _new(store)
    got = store.get(session.id)
    assert got is not None
    got.client_info["name"] = "changed"
    got.data["x"] = 1
    again = store.get(session.id)
    assert again is not None and again.client_info == {"name": "t"} and again.data == {}


def test_the_cache_keeps_at_most_cache_size_records(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path / "s.sqlite3", clock)
    store.cache_size = 3
    sessions = [_new(store) for _ in range(5)]
    for session in sessions:
        assert store.get(session.id) is not None
    assert list(store._cached) == [s.id for s in sessions[-3:]]


def test_zero_cache_max_age_reads_the_file_every_time(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "s.sqlite3"
    store = _store(path, clock)
    store.cache_max_age = 0.0
    session = _new(store)
    assert store.get(session.id) is not None
    _delete_behind_its_back(path, session.id)
    assert store.get(session.id) is None


@pytest.mark.parametrize("spoil", ["folder", "wrong size"])
def test_an_unusable_stamps_file_turns_the_cache_off(tmp_path: Path, clock: FakeClock, spoil: str) -> None:
    path = tmp_path / "s.sqlite3"
    stamps_path = Path(f"{path}-stamps")
    if spoil == "folder":
        stamps_path.mkdir()
    else:
        stamps_path.write_bytes(b"\0" * 100)
    store = _store(path, clock)
    session = _new(store)
    assert store.get(session.id) is not None
    _delete_behind_its_back(path, session.id)
    assert store.get(session.id) is None  # no copy was trusted
    if spoil == "wrong size":
        assert stamps_path.stat().st_size == 100  # left as found


def test_stamps_are_shared_between_mappings_of_one_file(tmp_path: Path) -> None:
    one = change_stamps.ChangeStamps.open(str(tmp_path / "x-stamps"))
    two = change_stamps.ChangeStamps.open(str(tmp_path / "x-stamps"))
    assert one is not None and two is not None
    before = two.read("session-a")
    one.bump("session-a")
    assert two.read("session-a") != before
    assert (tmp_path / "x-stamps").stat().st_size == change_stamps.SLOTS * 8
