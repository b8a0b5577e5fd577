"""What the operator gauges read (``flask_mcp.sessions.live``, ``flask_mcp.streams.open``...):
counts this process keeps as it goes, and store-wide counts taken in the
background and cached. A metric collection never waits on a backend longer
than its I/O timeout, and a worker counts a store at most once per
:data:`MAX_AGE`, whatever the export interval; no request ever counts
anything. Importable without OpenTelemetry (``otel.py`` makes the instruments).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..backends.contracts import DEFAULT_IO_TIMEOUT, NotCountable, StoreCount
from ..protocol.session import StoreUnavailable

logger = logging.getLogger("flask_mcp")

T = TypeVar("T")

#: How old a store-wide count may be before a collection asks for a new one (seconds).
MAX_AGE = 30.0


class OpenStreams:
    """How many event-stream responses this process is sending now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0

    @property
    def value(self) -> int:
        return self._open

    def opened(self) -> None:
        with self._lock:
            self._open += 1

    def closed(self) -> None:
        with self._lock:
            self._open = max(0, self._open - 1)


class Cached(Generic[T]):
    """A store-wide reading (a count), taken in a thread of its own when the
    last one is older than ``max_age``. :meth:`value` waits at most ``wait``
    seconds, and only while it has no reading yet; afterwards it answers with
    the last one at once (``None``: none yet, or the store cannot count)."""

    def __init__(self, read: Callable[[], T], *, wait: float = DEFAULT_IO_TIMEOUT,
                 max_age: float = MAX_AGE, clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self.wait = wait
        self.max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._value: T | None = None
        self._taken_at: float | None = None
        self._counting: threading.Event | None = None
        #: The store said it cannot count (a cache): never asked again.
        self.uncountable = False

    def value(self) -> T | None:
        if self.uncountable:
            return None
        with self._lock:
            now = self._clock()
            stale = self._taken_at is None or now - self._taken_at >= self.max_age
            counting = self._counting
            if stale and counting is None:
                counting = self._counting = threading.Event()
                threading.Thread(target=self._refresh, args=(counting, now), name="flask-mcp-gauge",
                                 daemon=True).start()
            value = self._value
        if value is None and counting is not None and counting.wait(self.wait):
            value = self._value
        return value

    def _refresh(self, done: threading.Event, started: float) -> None:
        value = None
        try:
            value = self._read()
        except NotCountable:
            self.uncountable = True
        except StoreUnavailable as exc:  # the last reading stays; the next collection counts again
            logger.warning("Could not count a store for the flask_mcp gauges: %s", exc)
        finally:
            with self._lock:
                if value is not None:
                    self._value = value
                    self._taken_at = started  # the reading's age runs from when it began
                self._counting = None
            done.set()


class CachedCount(Cached[int]):
    """A store's live records (:meth:`CountableStore.count <.contracts.CountableStore.count>`), cached."""

    def __init__(self, count: Callable[[], StoreCount], *, wait: float = DEFAULT_IO_TIMEOUT,
                 max_age: float = MAX_AGE, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(lambda: count().live, wait=wait, max_age=max_age, clock=clock)


@dataclass
class GaugeSources:
    """What each gauge reads; ``None``: that gauge is not reported."""

    #: Live legacy sessions in the session store (store-wide).
    sessions: CachedCount | None = None
    #: Live task records in the task store (store-wide, every status).
    tasks: CachedCount | None = None
    #: Live task records in the task store by status (store-wide), where the
    #: store can tell them (:class:`~.backends.contracts.StatusCountingStore`):
    #: reported instead of :attr:`tasks`.
    task_statuses: Cached[dict[str, int]] | None = None
    #: Task tools running in this process now.
    running_tasks: Callable[[], int] | None = None
    #: Long-lived streams (``subscriptions/listen``, resumed ``GET``) this process holds.
    long_lived_streams: Callable[[], int] | None = None
    #: Event-stream responses to requests this process is sending.
    response_streams: Callable[[], int] | None = None
