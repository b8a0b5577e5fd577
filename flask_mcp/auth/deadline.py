"""One deadline over a whole outbound fetch: connect, TLS, status line,
headers and body, however slowly the bytes arrive.

A socket timeout bounds each ``recv``, not the fetch: a server that sends one
byte every half second never trips it. So every fetch the server makes on a
caller's behalf (a Client ID Metadata Document, a JWKS, a token
introspection) runs inside :func:`deadline`: connecting gets at most the time
left, the TLS handshake (one bounded operation in CPython) at most what is
left after that, and from then on a per-process watchdog thread shuts the
socket down when the deadline passes, which ends any ``recv`` blocked on it.
The caller sees an error and :attr:`Deadline.expired` says why.

Connections are watched by the classes here: :func:`urllib3_pool_classes`
(urllib3 and requests) and :class:`DeadlineHTTPConnection` /
:class:`DeadlineHTTPSConnection` (http.client)."""

from __future__ import annotations

import heapq
import http.client
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any


class Deadline:
    """The moment a fetch must be over, and the sockets it is using."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = False
        self._done = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds left; ``TimeoutError`` once none are (nothing more may start)."""
        left = self.at - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimeoutError(f"the fetch took more than {self.seconds:g} s")
        return left

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down when the deadline passes (at once if it has)."""
        with self._lock:
            if self._done:
                return
            if self.expired or time.monotonic() >= self.at:
                self.expired = True
                _cut(sock)
                return
            self._sockets.append(sock)
        _watchdog.add(self)

    def expire(self) -> None:
        """The watchdog's call at the deadline: end every fetch still using a watched socket."""
        with self._lock:
            if self._done:
                return
            self.expired = True
            for sock in self._sockets:
                _cut(sock)

    def close(self) -> None:
        """The fetch is over: its sockets (pooled, perhaps reused) are left alone from now on."""
        with self._lock:
            self._done = True
            self._sockets.clear()


def _cut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket: it acts on the descriptor, which
    # wakes a thread blocked in recv on it, without touching the TLS state that thread uses.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed already, or never connected


class _Watchdog:
    """One daemon thread per process, expiring deadlines in time order."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, deadline: Deadline) -> None:
        with self._cond:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                # First use in this process (a forked worker inherits no thread).
                self._heap = []
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="flask-mcp-fetch-deadlines", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (deadline.at, next(self._order), deadline))
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    heapq.heappop(self._heap)[2].expire()
                self._cond.wait(self._heap[0][0] - now if self._heap else None)


_watchdog = _Watchdog()
_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """Every connection the classes here open or reuse in this thread, within
    the block, ends by ``seconds`` from now."""
    current = Deadline(seconds)
    previous = getattr(_local, "deadline", None)
    _local.deadline = current
    try:
        yield current
    finally:
        _local.deadline = previous
        current.close()


def current_deadline() -> Deadline | None:
    deadline: Deadline | None = getattr(_local, "deadline", None)
    return deadline


def _bounded(timeout: Any) -> Any:
    """``timeout`` (a number, or a library's "default" sentinel) cut to the time left."""
    found = current_deadline()
    if found is None:
        return timeout
    left = found.remaining()
    return min(timeout, left) if isinstance(timeout, (int, float)) else left


def _watch(sock: socket.socket | None) -> None:
    found = current_deadline()
    if found is not None and sock is not None:
        sock.settimeout(found.remaining())  # the TLS handshake, if one follows, gets what is left
        found.watch(sock)


class DeadlineHTTPConnection(http.client.HTTPConnection):
    """http.client's connection, under the thread's :func:`deadline`."""

    def connect(self) -> None:
        self.timeout = _bounded(self.timeout)
        self._create_connection = _watched_connection
        super().connect()


class DeadlineHTTPSConnection(http.client.HTTPSConnection):
    """http.client's TLS connection, under the thread's :func:`deadline`
    (the handshake gets the time left after connecting)."""

    def connect(self) -> None:
        self.timeout = _bounded(self.timeout)
        self._create_connection = _watched_connection
        super().connect()


def _watched_connection(address: tuple[str, int], timeout: Any = None,
                        source_address: Any = None) -> socket.socket:
    sock = socket.create_connection(address, timeout, source_address)
    _watch(sock)
    return sock


@cache
def urllib3_pool_classes() -> tuple[type[Any], type[Any]]:
    """urllib3's HTTP and HTTPS connection pools whose connections, new or
    reused, run under the thread's :func:`deadline`."""
    import urllib3
    from urllib3.connection import HTTPConnection, HTTPSConnection

    class Watched:
        """Before urllib3's connection class in the MRO: its sockets are watched."""

        timeout: Any
        sock: socket.socket | None

        def _new_conn(self) -> socket.socket:
            self.timeout = _bounded(self.timeout)
            sock: socket.socket = super()._new_conn()  # type: ignore[misc]
            _watch(sock)
            return sock

        def request(self, *args: Any, **kwargs: Any) -> None:
            _watch(self.sock)  # a pooled connection's socket; a new one is watched when made
            super().request(*args, **kwargs)  # type: ignore[misc]

    class Plain(Watched, HTTPConnection):
        pass

    class Secure(Watched, HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            _watch(self.sock)  # the TLS socket the response is read from

    class PlainPool(urllib3.HTTPConnectionPool):
        ConnectionCls = Plain

    class SecurePool(urllib3.HTTPSConnectionPool):
        ConnectionCls = Secure

    return PlainPool, SecurePool
