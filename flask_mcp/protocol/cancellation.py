"""Legacy ``notifications/cancelled``, heard by whichever worker runs the call.

A cancellation may reach any worker (or host) sharing the backend, so it goes
over the message bus on one channel. Each process keeps a single subscription
to it while calls are in flight, shared by all of them: a call registers its
``(session, request id)`` and learns of its cancellation from a flag. A
subscription per call would cost a connection (Redis) and a round trip on
every ``tools/call``, answered as plain JSON or not.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from . import process_id
from .bus import CANCELLATIONS_CHANNEL, MessageBus, Subscription
from .jsonrpc import RequestId
from .session import StoreUnavailable

logger = logging.getLogger("flask_mcp")

_Key = tuple[str, str, RequestId]  # (session id, id's type name, id): 1 and "1" are different ids


def _close_quietly(subscription: Subscription) -> None:
    try:
        subscription.close()
    except StoreUnavailable:
        pass


def _key(session_id: str, request_id: RequestId) -> _Key:
    return (session_id, type(request_id).__name__, request_id)


class Watch:
    """One in-flight call's view of its cancellation (a context manager that
    stops watching on exit)."""

    __slots__ = ("_cancellations", "_key", "cancelled")

    def __init__(self, cancellations: Cancellations, key: _Key) -> None:
        self._cancellations = cancellations
        self._key = key
        #: Set once the client cancelled the call.
        self.cancelled = False

    def is_cancelled(self) -> bool:
        """Whether the call was cancelled; reads what the bus delivered so far."""
        if not self.cancelled:
            subscription = self._cancellations._subscription  # (drain()'s own first test, without its call)
            ready = getattr(subscription, "ready", None)
            if subscription is not None and (ready is None or ready()):
                self._cancellations.drain()
        return self.cancelled

    def close(self) -> None:
        """Stop watching."""
        cancellations = self._cancellations
        in_flight = cancellations._in_flight
        in_flight.discard(self)
        if not in_flight:
            cancellations._idle_since = time.monotonic()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Cancellations:
    """This process's subscription to legacy cancellations, shared by the calls
    in flight. A background thread waits on it (so a cancellation reaches its
    call as it arrives, and nothing piles up while no call looks) and closes
    it after ``idle_close`` seconds without calls; a call looking at its flag
    also reads what is there at once."""

    def __init__(self, bus: MessageBus, *, interval: float = 0.25, idle_close: float = 60.0) -> None:
        self.bus = bus
        self.interval = interval
        self.idle_close = idle_close
        self._lock = process_id.ProcessLock()  # made in the worker: see ProcessLock
        #: The calls watching now. A call comes in and goes out without the lock
        #: (a set's ``add`` and ``discard`` are atomic); see :meth:`watch`.
        self._in_flight: set[Watch] = set()
        self._subscription: Subscription | None = None
        self._thread: threading.Thread | None = None
        #: Set by the reader while it decides to close an idle subscription.
        self._closing = False
        self._idle_since = time.monotonic()
        self._pid = process_id.current

    def publish(self, session_id: str, request_id: RequestId) -> None:
        """Tell every worker that the session's client cancelled ``request_id``."""
        self.bus.publish(CANCELLATIONS_CHANNEL, {"session": session_id, "requestId": request_id})

    def end_session(self, session_id: str) -> None:
        """Tell every worker that the session ended (``DELETE``): its calls in
        flight are cancelled, as no answer of theirs can reach the client any
        more (a question they wait on would hold its thread until it timed out)."""
        self.bus.publish(CANCELLATIONS_CHANNEL, {"session": session_id, "ended": True})

    def watch(self, session_id: str, request_id: RequestId) -> Watch:
        """Start watching for the cancellation of one call. Raises
        :class:`StoreUnavailable` when the bus cannot be subscribed to.

        The usual call (this process subscribed already) takes no lock: it
        joins the calls in flight, then checks that the reader did not begin
        to close the subscription meanwhile. The reader closes it in two
        steps, marking it closing and then looking for calls again (see
        :meth:`_close_if_idle`), so a call that found it not closing after
        joining is seen by that second look."""
        watch = Watch(self, (session_id, type(request_id).__name__, request_id))
        if self._pid == process_id.current and self._subscription is not None and self._thread is not None:
            self._in_flight.add(watch)
            if not self._closing:
                return watch
            self._in_flight.discard(watch)
        with self._lock:
            if self._pid != process_id.current:  # forked: the parent's subscription and thread are not ours
                self._in_flight, self._subscription, self._thread, self._pid = set(), None, None, process_id.current
            if self._subscription is not None:
                self._add(watch)
                return watch
        # Before the call runs: a cancellation published from now on is delivered.
        # Outside the lock: a slow backend delays this call only, not every call.
        self._subscribe()
        with self._lock:
            self._add(watch)
        return watch

    def _add(self, watch: Watch) -> None:
        """Register ``watch`` (under the lock), with the thread that waits on the bus."""
        self._in_flight.add(watch)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="flask-mcp-cancellations", daemon=True)
            self._thread.start()

    def drain(self) -> None:
        """Hand what the bus delivered to the calls it cancels."""
        subscription = self._subscription
        ready = getattr(subscription, "ready", None)  # the in-process queues say cheaply when they are empty
        if subscription is None or (ready is not None and not ready()):
            return
        with self._lock:
            subscription = self._subscription
            while subscription is not None:
                try:
                    item = subscription.get(0)
                except StoreUnavailable as exc:
                    logger.warning("Cancellations cannot be heard for now: %s", exc)
                    self._drop_subscription()
                    return
                if item is None:
                    return
                self._deliver(item[1])

    def _deliver(self, message: dict[str, Any]) -> None:
        session_id, request_id = message.get("session"), message.get("requestId")
        if not isinstance(session_id, str):
            return
        if message.get("ended") is True:
            for watch in list(self._in_flight):  # (a copy: calls come and go without the lock)
                if watch._key[0] == session_id:
                    watch.cancelled = True
            return
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        key = _key(session_id, request_id)
        for watch in list(self._in_flight):
            if watch._key == key:
                watch.cancelled = True

    def _subscribe(self) -> None:
        """Subscribe to the channel unless another thread just did (then the
        spare subscription is closed). Raises :class:`StoreUnavailable`."""
        subscription: Subscription | None = self.bus.subscribe([CANCELLATIONS_CHANNEL])
        with self._lock:
            if self._subscription is None:
                self._subscription, subscription = subscription, None
        if subscription is not None:
            _close_quietly(subscription)

    def _drop_subscription(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            _close_quietly(subscription)

    def _run(self) -> None:
        while True:
            subscription = self._subscription
            if subscription is None:
                time.sleep(self.interval)
            else:
                self._receive(subscription)
            with self._lock:
                if self._thread is not threading.current_thread():
                    return  # replaced after a fork
                lost = self._subscription is None
            if self._close_if_idle():
                return
            if lost:  # the backend failed under the calls in flight: hear them again once it is back
                try:
                    self._subscribe()
                except StoreUnavailable:
                    pass

    def _close_if_idle(self) -> bool:
        """Let the subscription (and this thread) go after ``idle_close``
        seconds without calls. Two steps: mark it closing, then look for
        calls again; a call that joined without the lock in between either
        saw the mark (and took the lock) or is found by the second look."""
        with self._lock:
            if self._in_flight or time.monotonic() - self._idle_since < self.idle_close:
                return False
            self._closing = True
        with self._lock:
            self._closing = False
            if self._in_flight:
                return False
            self._drop_subscription()
            self._thread = None
            return True

    def _receive(self, subscription: Subscription) -> None:
        """Wait up to ``interval`` on the subscription, outside the lock, and
        deliver what comes. While this thread waits on a Redis subscription's
        socket, a call's own look (:meth:`drain`) finds it being read and
        returns without a system call of its own."""
        started = time.monotonic()
        try:
            item = subscription.get(self.interval)
        except Exception as exc:  # noqa: BLE001 - the backend down, or closed under the read (shutdown)
            with self._lock:
                if self._subscription is subscription:
                    logger.warning("Cancellations cannot be heard for now: %s", exc)
                    self._subscription = None
            # Closed even when another thread already let it go: a failed read
            # may have opened its connection again (redis-py reconnects on error).
            _close_quietly(subscription)
            return
        if item is not None:
            with self._lock:
                self._deliver(item[1])
            self.drain()  # what came with it
        elif time.monotonic() - started < self.interval / 2:
            time.sleep(self.interval)  # nothing, at once: a subscription closed under us must not spin this loop
