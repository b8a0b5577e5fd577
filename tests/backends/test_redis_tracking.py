"""The Redis session store's per-process copies, invalidated by the server
(CLIENT TRACKING), against private redis-server instances: RESP2 and RESP3,
a server that refuses tracking (no copies at all) and a restart."""

from __future__ import annotations

import time

import pytest
import redis
from conftest import free_port
from redis_server import start_redis_server, stop_redis_server

from flask_mcp.backends.contracts import Session
from flask_mcp.backends.redis import RedisSessionStore


@pytest.fixture
def server(redis_port: int) -> int:
    """This module's name for the test's own redis-server (conftest's ``redis_port``)."""
    return redis_port


def _client(port: int, protocol: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=2, socket_connect_timeout=2)


def _gets(client: redis.Redis) -> int:
    """GET commands the server has run so far."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_get", {}).get("calls", 0))


def _wait_live(store: RedisSessionStore, session_id: str) -> None:
    """Reads until the store's invalidation connection is up (it starts on the first read)."""
    deadline = time.monotonic() + 10
    while not store._copies.live:
        assert time.monotonic() < deadline, f"tracking never came up ({store._copies.refused})"
        store.get(session_id)
        time.sleep(0.01)


def _until(condition: object, seconds: float = 5.0) -> float:
    """Seconds until ``condition()`` held (fails past ``seconds``)."""
    start = time.monotonic()
    while not condition():  # type: ignore[operator]
        assert time.monotonic() - start < seconds, "condition never held"
        time.sleep(0.0005)
    return time.monotonic() - start


def _session(**data: object) -> Session:
    return Session(id="", protocol_version="2025-11-25", client_info={"name": "t", "version": "1"}, data=dict(data))


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_copy_answers_until_another_worker_changes_or_deletes_the_session(server: int, protocol: int) -> None:
    observer = _client(server, 2)
    here = RedisSessionStore(_client(server, protocol), timeout=600)
    there = RedisSessionStore(_client(server, protocol), timeout=600)
    try:
        session = _session(n=1)
        session.id = "s1"
        here.create(session)
        _wait_live(there, "s1")
        got = there.get("s1")  # read and kept (the create refreshed nothing for "there")
        assert got is not None
        got = there.get("s1")
        before = _gets(observer)
        for _ in range(20):
            got = there.get("s1")
            assert got is not None and got.data == {"n": 1}
        assert _gets(observer) == before  # answered from the copy

        session.data = {"n": 2}
        here.save(session)  # another worker changes it: the server invalidates "there"'s copy
        _until(lambda: there.get("s1").data == {"n": 2})  # type: ignore[union-attr]

        assert here.delete("s1")
        assert here.get("s1") is None  # at once where it was deleted
        _until(lambda: there.get("s1") is None, seconds=1.0)
    finally:
        here.close()
        there.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_change_made_behind_the_stores_back_is_seen_too(server: int, protocol: int) -> None:
    raw = _client(server, 2)
    store = RedisSessionStore(_client(server, protocol), timeout=600)
    try:
        session = _session(v="old")
        session.id = "s2"
        store.create(session)
        _wait_live(store, "s2")
        assert store.get("s2").data == {"v": "old"}  # type: ignore[union-attr]
        record = store.key_prefix + "s2"
        stored = raw.get(record)
        assert isinstance(stored, bytes)
        raw.set(record, stored.replace(b'"old"', b'"new"'), keepttl=True)
        _until(lambda: store.get("s2").data == {"v": "new"}, seconds=1.0)  # type: ignore[union-attr]
        raw.flushdb()  # a flush invalidates every copy
        _until(lambda: store.get("s2") is None, seconds=1.0)
    finally:
        store.close()


def test_without_client_tracking_every_read_goes_to_redis() -> None:
    """A server (or proxy) that refuses CLIENT TRACKING gets no copies: a copy
    nobody invalidates could answer for a deleted session."""
    port = free_port()
    process = start_redis_server(port, "--rename-command", "CLIENT", "")
    try:
        raw = _client(port, 2)
        store = RedisSessionStore(_client(port, 3), timeout=600)
        other = RedisSessionStore(_client(port, 2), timeout=600)
        session = _session()
        session.id = "s3"
        store.create(session)
        deadline = time.monotonic() + 10
        while store._copies.refused is None or other._copies.refused is None:
            assert time.monotonic() < deadline, "the refusal was never noticed"
            assert store.get("s3") is not None and other.get("s3") is not None
            time.sleep(0.01)
        assert not store._copies.live
        before = _gets(raw)
        for _ in range(5):
            assert store.get("s3") is not None
        assert _gets(raw) == before + 5
        assert other.delete("s3")
        assert store.get("s3") is None  # at once: nothing was kept
        store.close()
        other.close()
    finally:
        stop_redis_server(process)


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_restarted_redis_without_persistence_loses_the_session_and_no_copy_answers_for_it(protocol: int) -> None:
    port = free_port()
    process = start_redis_server(port, why="the session cache tests start their own")
    store = RedisSessionStore(_client(port, protocol), timeout=600)
    try:
        session = _session()
        session.id = "s4"
        store.create(session)
        _wait_live(store, "s4")
        assert store.get("s4") is not None
        stop_redis_server(process)
        process = start_redis_server(port, why="the session cache tests start their own")
        gone = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                gone = store.get("s4")
                if gone is None:
                    break
            except Exception:  # noqa: BLE001 - BackendUnavailable while the pool reconnects
                pass
            time.sleep(0.01)
        assert gone is None
        _until(lambda: store._copies.live, seconds=10)  # the invalidation connection came back
        fresh = _session()
        fresh.id = "s5"
        store.create(fresh)
        assert store.get("s5") is not None
    finally:
        store.close()
        stop_redis_server(process)


def test_where_acls_forbid_client_tracking_nothing_is_kept(server: int) -> None:
    """A managed service that allows CLIENT ID but not CLIENT TRACKING (here an ACL)."""
    admin = _client(server, 2)
    admin.execute_command(
        "ACL", "SETUSER", "app", "on", "nopass", "~*", "&*", "+@all", "-client|tracking")
    client = redis.Redis(host="127.0.0.1", port=server, username="app", password="", socket_timeout=2)
    store = RedisSessionStore(client, timeout=600)
    try:
        session = _session()
        session.id = "s6"
        store.create(session)
        deadline = time.monotonic() + 10
        while store._copies.refused is None:
            assert time.monotonic() < deadline, "the refusal was never noticed"
            assert store.get("s6") is not None
            time.sleep(0.01)
        before = _gets(admin)
        for _ in range(3):
            assert store.get("s6") is not None
        assert _gets(admin) == before + 3
        admin.delete(store.key_prefix + "s6")
        assert store.get("s6") is None
    finally:
        store.close()


def test_a_worker_is_told_only_about_the_sessions_it_read(server: int) -> None:
    """New sessions made elsewhere cost a worker nothing: Redis tracks only
    the keys this worker read through its tracked connections."""
    admin = _client(server, 2)
    reader = RedisSessionStore(_client(server, 3), timeout=600)
    writer = RedisSessionStore(_client(server, 3), timeout=600)
    try:
        first = _session()
        first.id = "read-me"
        writer.create(first)
        reader.create(_session())  # the reader's own create is not a read either
        _wait_live(reader, "read-me")
        for n in range(20):
            other = _session()
            other.id = f"unread-{n}"
            writer.create(other)
        assert reader.get("read-me") is not None
        tracked = {int(admin.info("stats")["tracking_total_keys"])}
        assert tracked == {1}, tracked
    finally:
        reader.close()
        writer.close()


def _read_connection_ids(admin: redis.Redis, store: RedisSessionStore) -> list[int]:
    """Server-side ids of the store's tracked read connections (tracking on, redirected)."""
    listener = store._copies._listener_id
    return [
        int(client["id"])
        for client in admin.client_list()
        if "t" in client["flags"] and int(client["id"]) != listener and int(client.get("redir", -1)) == listener
    ]


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_read_connection_killed_by_the_server_is_tracked_again_before_its_reads_are_kept(
    server: int, protocol: int
) -> None:
    """redis-py reconnects a read connection the server closed (idle timeout,
    CLIENT KILL, a load balancer) without telling anyone: the new socket must be
    tracked before anything read over it is kept, and copies read over the old
    one (Redis no longer reports on them) are dropped."""
    admin = _client(server, 2)
    here = RedisSessionStore(_client(server, protocol), timeout=600)
    there = RedisSessionStore(_client(server, protocol), timeout=600)
    here.cache_max_age = 600.0  # only an invalidation can make a copy go away
    try:
        for name in ("k1", "k2"):
            session = _session(name=name)
            session.id = name
            there.create(session)
        _wait_live(here, "k1")
        _until(lambda: here.get("k1") is not None and here._copies.get(here.key_prefix + "k1") is not None)
        assert here.get("k2") is not None  # the first read refreshes the TTL (not kept)
        assert here._copies.get(here.key_prefix + "k2") is None
        killed = _read_connection_ids(admin, here)
        assert killed
        for client_id in killed:
            admin.execute_command("CLIENT", "KILL", "ID", client_id)
        assert here.get("k2") is not None  # read over a silently reconnected socket
        assert here._copies.get(here.key_prefix + "k2") is not None  # ...and kept

        assert there.delete("k2")
        _until(lambda: here.get("k2") is None, seconds=2.0)
        assert there.delete("k1")  # read over the killed socket: nobody reports this
        assert here.get("k1") is None
        assert set(_read_connection_ids(admin, here)) - set(killed)  # tracked again
    finally:
        here.close()
        there.close()


def test_an_error_answering_a_get_leaves_the_cache_on(server: int) -> None:
    """A READONLY (failover), LOADING or WRONGTYPE answer to a GET is that read's
    error, not the server refusing tracking."""
    admin = _client(server, 2)
    store = RedisSessionStore(_client(server, 2), timeout=600)
    try:
        session = _session()
        session.id = "ok"
        store.create(session)
        _wait_live(store, "ok")
        wrong = _session()
        wrong.id = "wrong"
        store.create(wrong)
        assert store.get("wrong") is not None  # refreshed: the next read is a tracked one
        admin.delete(store.key_prefix + "wrong")
        admin.lpush(store.key_prefix + "wrong", "x")  # a GET of it answers WRONGTYPE
        _until(lambda: store._copies.get(store.key_prefix + "wrong") is None)
        with pytest.raises(Exception, match="WRONGTYPE|wrong kind|unavailable"):
            store.get("wrong")
        assert store._copies.refused is None
        assert store._copies.live
        assert store.get("ok") is not None
        before = _gets(admin)
        assert store.get("ok") is not None
        assert _gets(admin) == before  # still answered from the copy
    finally:
        store.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_killed_invalidation_connection_pauses_the_cache_and_never_turns_it_off(server: int, protocol: int) -> None:
    """Reads racing the listener's death must not redirect tracking to its dead
    id (which Redis answers with an error that is not a refusal)."""
    admin = _client(server, 2)
    store = RedisSessionStore(_client(server, protocol), timeout=600)
    try:
        session = _session()
        session.id = "l1"
        store.create(session)
        _wait_live(store, "l1")
        listener = store._copies._listener_id
        assert listener is not None
        admin.execute_command("CLIENT", "KILL", "ID", listener)
        _until(lambda: store.get("l1") is not None and store._copies._listener_id != listener, seconds=10)
        _until(lambda: store.get("l1") is not None and store._copies.live, seconds=10)
        assert store._copies.refused is None
        assert store._copies._listener_id not in (None, listener)
    finally:
        store.close()
