"""RedisSubscription.ready(): the cheap look every legacy call's cancellation
check takes, against a private redis-server."""

from __future__ import annotations

import threading
import time

import pytest

from flask_mcp.backends.contracts import BackendUnavailable
from flask_mcp.backends.redis import RedisMessageBus, RedisSubscription, client_from_url
from flask_mcp.protocol.cancellation import Cancellations


@pytest.fixture
def bus(redis_port: int) -> RedisMessageBus:
    return RedisMessageBus(client_from_url(f"redis://127.0.0.1:{redis_port}"))


def _until(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.001)


def test_ready_says_when_a_message_waits(bus: RedisMessageBus) -> None:
    subscription = bus.subscribe(["c"])
    subscription._full_read_at = time.monotonic() + 3600  # no periodic full read during the test
    assert not subscription.ready()
    assert subscription.get(0) is None
    bus.publish("c", {"n": 1})
    _until(subscription.ready)
    assert subscription.get(0) == ("c", {"n": 1})
    assert not subscription.ready()
    subscription.close()
    assert not subscription.ready()


def test_ready_asks_for_a_full_read_now_and_then(bus: RedisMessageBus) -> None:
    """So that redis-py's health checks on the subscription still go out."""
    subscription = bus.subscribe(["c"])
    subscription._full_read_at = time.monotonic() - subscription.READY_FULL_READ
    assert subscription.ready()
    assert not subscription.ready()
    subscription.close()


def test_ready_does_not_touch_a_socket_another_thread_reads(bus: RedisMessageBus) -> None:
    """ready() is asked outside the cancellations lock: while a get() waits on
    the socket, it answers at once instead of racing that read."""
    subscription = bus.subscribe(["c"])
    subscription._full_read_at = time.monotonic() + 3600
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(subscription.get(2.0)))
    reader.start()
    _until(subscription._reading.locked)
    start = time.monotonic()
    assert not subscription.ready()
    assert time.monotonic() - start < 1.0  # waiting on the read would take until get()'s 2 s
    bus.publish("c", {"n": 2})
    reader.join(5)
    assert got == [("c", {"n": 2})]
    subscription.close()


def test_a_call_looks_without_a_system_call_while_the_cancellation_reader_waits(bus: RedisMessageBus) -> None:
    """Every legacy call asks ready(); while the cancellations' reader thread
    waits on the socket, the answer is "no" from the lock alone."""
    cancellations = Cancellations(bus, interval=30.0)
    watch = cancellations.watch("session-1", "call-1")
    subscription = cancellations._subscription
    assert isinstance(subscription, RedisSubscription)
    _until(subscription._reading.locked)
    subscription._full_read_at = 0.0  # a full read would be due: the reader does them
    assert not subscription.ready()
    assert not watch.is_cancelled()
    cancellations.publish("session-1", "call-1")
    _until(lambda: watch.cancelled)
    watch.close()
    cancellations._drop_subscription()


def test_a_closed_bus_opens_no_subscription_again(bus: RedisMessageBus) -> None:
    """Backend.close: a cancellations reader that outlives it (its app was not
    torn down) must not reconnect in the background."""
    subscription = bus.subscribe(["c"])
    bus.close()
    with pytest.raises(BackendUnavailable, match="closed"):
        bus.subscribe(["c"])
    subscription.close()
