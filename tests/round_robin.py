"""A TCP round-robin balancer on loopback, standing in front of several
gunicorn hosts in the end-to-end tests (tests/e2e/test_e2e_durable.py).

Each client connection goes to the next backend in turn; a backend that
refuses the connection (a host that is down) is skipped. It copies bytes and
nothing else, so what the client sees is exactly what gunicorn sent: an
event stream unbuffered, a dead worker as a closed connection. When either
side closes, the other is closed too, as a load balancer does. ``cut()``
severs every open connection (a network fault), leaving the servers running.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass


@dataclass(eq=False)  # kept in a set: hashed by identity
class _Pair:
    client: socket.socket
    upstream: socket.socket
    backend: tuple[str, int]

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class RoundRobin:
    """Listens on ``127.0.0.1:<port>``; forwards to ``backends`` in turn."""

    def __init__(self, backends: list[tuple[str, int]], *, connect_timeout: float = 1.0) -> None:
        self.backends = backends
        self.connect_timeout = connect_timeout
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.port: int = self.listener.getsockname()[1]
        self._next = 0
        self._lock = threading.Lock()
        self._pairs: set[_Pair] = set()
        #: Connections refused by a backend, and client connections closed because every backend refused.
        self.skipped = 0
        self.unserved = 0
        self._stopped = False
        self._acceptor = threading.Thread(target=self._accept, name="round-robin", daemon=True)
        self._acceptor.start()

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % len(self.backends)
        for i in range(len(self.backends)):
            backend = self.backends[(start + i) % len(self.backends)]
            try:
                upstream = socket.create_connection(backend, timeout=self.connect_timeout)
            except OSError:
                with self._lock:
                    self.skipped += 1
                continue
            upstream.settimeout(None)
            pair = _Pair(client, upstream, backend)
            with self._lock:
                if self._stopped:
                    pair.close()
                    return
                self._pairs.add(pair)
            threading.Thread(target=self._pump, args=(pair, upstream, client), daemon=True).start()
            self._pump(pair, client, upstream)
            return
        with self._lock:
            self.unserved += 1
        client.close()

    def _pump(self, pair: _Pair, source: socket.socket, sink: socket.socket) -> None:
        """Copy one direction; when it ends, close the whole pair (an HTTP
        client never half-closes, and a server that closed has nothing more to say)."""
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        with self._lock:
            self._pairs.discard(pair)
        pair.close()

    def cut(self) -> int:
        """Sever every open connection; how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, set()
        for pair in pairs:
            pair.close()
        return len(pairs)

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()
        self.cut()
