"""Whether the client of a streaming response is still connected.

A WSGI generator learns that its client left only when a write fails, and the
first write after the client closed usually succeeds (the kernel takes it; the
peer's reset comes back afterwards). An idle stream that writes only a
heartbeat every ``MCP_SSE_HEARTBEAT`` seconds (15 by default) therefore keeps
its thread for up to two heartbeats after the client has gone. Where the
server hands the application its connection (gunicorn: ``gunicorn.socket``,
Werkzeug: ``werkzeug.socket``), the socket is asked instead: a client that
closed its end makes it readable with nothing to read. The check peeks without
consuming, so it never takes bytes from the server's parser. (A client that
half-closes its connection after its request, which HTTP clients do not do,
would look gone.) Elsewhere (TLS,
HTTP/2, other servers) :attr:`Peer.observable` is ``False`` and the caller
falls back to writing short comments more often.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Mapping
from typing import Any

_PEEK = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)


class Peer:
    """The client at the other end of one response."""

    __slots__ = ("_socket",)

    def __init__(self, environ: Mapping[str, Any]) -> None:
        self._socket = _plain_socket(environ)

    @property
    def observable(self) -> bool:
        """Whether :meth:`gone` can tell (the connection's socket is at hand)."""
        return self._socket is not None

    def gone(self) -> bool:
        """``True`` once the client has closed or reset its connection. Never
        blocks; ``False`` when it cannot tell."""
        sock = self._socket
        if sock is None:
            return False
        try:
            if not _readable(sock):
                return False  # nothing came: the client is still there, waiting
            data = sock.recv(1, _PEEK)
        except (BlockingIOError, InterruptedError):
            return False
        except ValueError:  # closed by the server meanwhile, or a socket that takes no flags
            self._socket = None
            return False
        except OSError:  # reset by the peer
            return True
        return not data  # end of stream; bytes would be the client's next request


def _plain_socket(environ: Mapping[str, Any]) -> Any:
    """The HTTP/1 connection's plain (non-TLS) socket, if the server exposes it."""
    if not str(environ.get("SERVER_PROTOCOL", "")).startswith("HTTP/1"):
        return None  # HTTP/2 multiplexes streams on one socket: its readability says nothing
    sock = environ.get("gunicorn.socket") or environ.get("werkzeug.socket")
    if sock is None or isinstance(sock, ssl.SSLSocket) or not callable(getattr(sock, "recv", None)):
        return None
    try:
        sock.fileno()
    except (OSError, ValueError):
        return None
    return sock


def _readable(sock: Any) -> bool:
    """Whether reading ``sock`` would not block, asked without waiting (poll
    where it exists: select's descriptor limit does not apply)."""
    poll = getattr(select, "poll", None)  # gevent's patching removes it; its select cooperates
    if poll is not None:
        poller = poll()
        poller.register(sock, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)
