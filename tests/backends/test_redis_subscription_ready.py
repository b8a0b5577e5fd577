"""RedisSubscription.ready(): the cheap look every legacy call's cancellation
check takes, against a private redis-server. The subscriptions of a process
share one connection read by its dispatcher thread, so the look is a glance
at a queue: no lock, no socket."""

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
    assert not subscription.ready()
    assert subscription.get(0) is None
    bus.publish("c", {"n": 1})
    _until(subscription.ready)
    assert subscription.get(0) == ("c", {"n": 1})
    assert not subscription.ready()
    subscription.close()
    assert not subscription.ready()


def test_ready_answers_at_once_while_another_thread_waits_in_get(bus: RedisMessageBus) -> None:
    """ready() is asked outside the cancellations lock: while a get() waits,
    it answers at once instead of waiting for that read."""
    subscription = bus.subscribe(["c"])
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(subscription.get(2.0)))
    reader.start()
    time.sleep(0.05)
    start = time.monotonic()
    assert not subscription.ready()
    assert time.monotonic() - start < 0.5  # waiting on the read would take until get()'s 2 s
    bus.publish("c", {"n": 2})
    reader.join(5)
    assert got == [("c", {"n": 2})]
    subscription.close()


def test_ready_is_true_once_the_connection_broke_so_the_reader_hears_it(redis_port: int) -> None:
    """A broken connection must reach Cancellations.drain(), which asks ready() first."""
    bus = RedisMessageBus(client_from_url(f"redis://127.0.0.1:{redis_port}"))
    subscription = bus.subscribe(["c"])
    assert not subscription.ready()
    client_from_url(f"redis://127.0.0.1:{redis_port}").client_kill_filter(_type="pubsub")
    _until(subscription.ready)
    with pytest.raises(BackendUnavailable, match="unavailable"):
        subscription.get(0)
    subscription.close()
    bus.close()


def test_a_call_looks_without_touching_the_socket_while_the_cancellation_reader_waits(bus: RedisMessageBus) -> None:
    """Every legacy call asks ready(); while the cancellations' reader thread
    waits in get(), the answer is "no" from the queue alone."""
    cancellations = Cancellations(bus, interval=30.0)
    watch = cancellations.watch("session-1", "call-1")
    subscription = cancellations._subscription
    assert isinstance(subscription, RedisSubscription)
    time.sleep(0.05)  # the reader thread is in get() now
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
    with pytest.raises(BackendUnavailable, match="closed"):
        subscription.get(1)
    subscription.close()
