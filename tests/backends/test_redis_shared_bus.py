"""One pub/sub connection per process (issue #34), against private
redis-servers: however many subscriptions a process holds, Redis sees one
subscriber client (CLIENT LIST) and each channel once (PUBSUB NUMSUB); a
closed subscription leaves no channel behind; a killed or restarted
connection is reported to every subscriber and the next subscription
connects again; a forked child opens its own."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from conftest import free_port
from redis_server import start_redis_server, stop_redis_server

from flask_mcp.backends.contracts import BackendUnavailable
from flask_mcp.backends.redis import RedisMessageBus, client_from_url

PREFIX = "flask-mcp:bus:"


@pytest.fixture
def admin(redis_port: int) -> Iterator[redis.Redis]:
    client = redis.Redis(host="127.0.0.1", port=redis_port, protocol=2, socket_timeout=2, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def bus(redis_port: int) -> Iterator[RedisMessageBus]:
    made = RedisMessageBus(client_from_url(f"redis://127.0.0.1:{redis_port}"), io_timeout=2.0)
    yield made
    made.close()
    made.client.close()


def subscribers(admin: redis.Redis) -> list[dict[str, Any]]:
    """The clients in subscribed mode (CLIENT LIST's ``P`` flag)."""
    return [c for c in admin.client_list() if "P" in c["flags"]]


def numsub(admin: redis.Redis, *channels: str) -> dict[str, int]:
    return {str(name): int(count) for name, count in admin.pubsub_numsub(*(PREFIX + c for c in channels))}


def _until(condition: Callable[[], object], what: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.01)


def test_many_subscriptions_share_one_pubsub_connection(bus: RedisMessageBus, admin: redis.Redis) -> None:
    listens = [bus.subscribe(["events"]) for _ in range(200)]
    replies = [bus.subscribe([f"reply-{i}", "events"]) for i in range(20)]
    try:
        (shared,) = subscribers(admin)
        assert shared["sub"] == "21"  # events and the 20 reply channels, once each
        assert numsub(admin, "events", "reply-0", "reply-19") == {
            PREFIX + "events": 1, PREFIX + "reply-0": 1, PREFIX + "reply-19": 1
        }
        bus.publish("events", {"type": "list_changed"})
        bus.publish("reply-7", {"result": {}})
        for subscription in [*listens, *replies]:
            assert subscription.get(5) == ("events", {"type": "list_changed"})
        assert replies[7].get(5) == ("reply-7", {"result": {}})
        assert all(r.get(0) is None for r in replies)
    finally:
        for subscription in [*listens, *replies]:
            subscription.close()
    # No channel outlives its last subscription (UNSUBSCRIBE is sent as the last one closes).
    _until(lambda: numsub(admin, "events", "reply-0", "reply-19") == {
        PREFIX + "events": 0, PREFIX + "reply-0": 0, PREFIX + "reply-19": 0
    }, "every channel unsubscribed")
    _until(lambda: [c["sub"] for c in admin.client_list() if c["id"] == shared["id"]] == ["0"],
           "the connection open, subscribed to nothing")


def test_the_connection_closes_once_idle_and_the_next_subscription_opens_it(
    bus: RedisMessageBus, admin: redis.Redis
) -> None:
    bus.shared.idle_close = 0.2
    with bus.subscribe(["a"]):
        assert len(subscribers(admin)) == 1
    _until(lambda: not bus.shared.connected(), "the idle connection closed", seconds=5)
    _until(lambda: not subscribers(admin), "Redis saw the connection go")
    with bus.subscribe(["a"]) as again:
        bus.publish("a", {"n": 1})
        assert again.get(5) == ("a", {"n": 1})


def test_a_killed_connection_is_reported_to_every_subscriber_and_the_next_subscription_reconnects(
    bus: RedisMessageBus, admin: redis.Redis
) -> None:
    held = [bus.subscribe(["events"]) for _ in range(5)] + [bus.subscribe([f"reply-{i}"]) for i in range(5)]
    bus.publish("events", {"before": True})
    (killed,) = subscribers(admin)
    admin.execute_command("CLIENT", "KILL", "ID", killed["id"])
    for subscription in held:
        if subscription.names == (PREFIX + "events",):
            assert subscription.get(5) == ("events", {"before": True})  # what came before the fault first
        with pytest.raises(BackendUnavailable, match=r"127\.0\.0\.1:\d+.*unavailable"):
            subscription.get(5)
        with pytest.raises(BackendUnavailable):  # and again: it never goes quiet
            subscription.get(0)
        subscription.close()
    with bus.subscribe(["events"]) as fresh:
        (reconnected,) = subscribers(admin)
        assert reconnected["id"] != killed["id"]
        bus.publish("events", {"after": True})
        assert fresh.get(5) == ("events", {"after": True})


def test_a_redis_restart_is_reported_and_subscriptions_work_again_once_it_is_back() -> None:
    port = free_port()
    server = start_redis_server(port, why="needed to stop and restart a private server")
    bus = RedisMessageBus(client_from_url(f"redis://127.0.0.1:{port}", io_timeout=1.0), io_timeout=1.0)
    try:
        subscription = bus.subscribe(["c"])
        stop_redis_server(server)
        with pytest.raises(BackendUnavailable):
            subscription.get(5)
        subscription.close()
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match=f"127.0.0.1:{port}"):
            bus.subscribe(["c"])
        assert time.monotonic() - started < 3
        server = start_redis_server(port)
        with bus.subscribe(["c"]) as again:
            bus.publish("c", {"back": True})
            assert again.get(5) == ("c", {"back": True})
    finally:
        bus.close()
        stop_redis_server(server)


def test_a_silent_server_is_noticed_within_the_io_timeout(bus: RedisMessageBus, admin: redis.Redis) -> None:
    """A server that stops answering (paused here; a dead host in life): the
    ping of a quiet connection goes unanswered, and every subscriber hears it."""
    bus.shared.ping_interval = 0.2
    subscription = bus.subscribe(["c"])
    admin.execute_command("CLIENT", "PAUSE", "4000", "ALL")
    try:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match="PING"):
            subscription.get(6)
        assert time.monotonic() - started < 4.5
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
        subscription.close()


def test_every_subscriber_registered_before_a_publish_gets_it_while_others_come_and_go(
    bus: RedisMessageBus,
) -> None:
    """subscribe() returns once Redis confirmed the channel, even when the
    channel is being unsubscribed by another thread's last subscription at
    that moment: a message published after it returns is never missed."""
    missed: list[str] = []

    def churn(worker: int) -> None:
        for i in range(100):
            with bus.subscribe(["shared", f"own-{worker}"]) as subscription:
                bus.publish("shared", {"w": worker, "i": i})
                bus.publish(f"own-{worker}", {"i": i})
                got: set[str] = set()
                deadline = time.monotonic() + 5
                while len(got) < 2 and time.monotonic() < deadline:
                    item = subscription.get(0.5)
                    if item is not None and (item[1].get("w", worker), item[1]["i"]) == (worker, i):
                        got.add(item[0])
                if got != {"shared", f"own-{worker}"}:
                    missed.append(f"worker {worker} message {i}: got {got}")

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not missed, missed[:5]


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents_alone(
    bus: RedisMessageBus, admin: redis.Redis
) -> None:
    """gunicorn --preload forks workers from a process that may have subscribed."""
    parent = bus.subscribe(["parent"])
    (parents,) = subscribers(admin)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        status = 1
        try:
            with bus.subscribe(["child"]) as child:
                ids = {c["id"] for c in subscribers(admin)}
                bus.publish("child", {"from": "child"})
                ok = child.get(5) == ("child", {"from": "child"}) and len(ids) == 2 and parents["id"] in ids
                bus.publish("parent", {"from": "child"})
            os.write(write, b"ok" if ok else repr(ids).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    try:
        report = os.read(read, 1000)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(read)
    assert report == b"ok" and os.waitstatus_to_exitcode(status) == 0, report
    # The child's exit closed its copies of the parent's sockets without shutting them down.
    assert parent.get(5) == ("parent", {"from": "child"})
    bus.publish("parent", {"from": "parent"})
    assert parent.get(5) == ("parent", {"from": "parent"})
    assert [c["id"] for c in subscribers(admin)] == [parents["id"]]
    parent.close()


def test_a_dispatcher_held_up_past_the_io_timeout_does_not_take_late_answers_for_missing(
    redis_port: int,
) -> None:
    """A busy worker (thousands of streams on one core) may not run the
    dispatcher for longer than the I/O timeout: a command queued meanwhile is
    judged from when it was sent, and answers that came meanwhile are read
    before anything is judged missing; a false "no answer" would end every
    stream of the worker."""
    bus = RedisMessageBus(client_from_url(f"redis://127.0.0.1:{redis_port}"), io_timeout=0.3)
    bus.shared.ping_interval = 0.05
    try:
        with bus.subscribe(["c"]) as subscription:
            for _ in range(3):
                with bus.shared._lock:  # what a starved event loop does to the dispatcher
                    bus.shared._queue("ping", "")  # the dispatcher sends it once it runs again
                    time.sleep(1.0)
                time.sleep(0.2)
            assert not subscription.ready()  # no fault reported
            bus.publish("c", {"still": "here"})
            assert subscription.get(5) == ("c", {"still": "here"})
    finally:
        bus.close()
