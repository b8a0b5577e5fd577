"""An ``initialize`` answer held until its new session's write is confirmed.

A store that sends the write ahead (Redis, ``begin_create``) has its reply
read back here as late as the answer can still change: when the WSGI server
asks for the body's first item (after Flask's ``after_request`` hooks and
the request context's teardown), not in the view. The worker finishes the
response while the reply travels: ``initialize`` on Redis went from 0.61-0.66
to 0.65-0.71 of the Flask floor with the read in ``Response.__call__``; at the
first item the reply is nearly always there when read (bench/README.md, "the
reply read when the response leaves", "what one round trip costs here"). An app
with its own ``response_class`` confirms in the view instead (Flask would
retype this response). The session id still goes out only once the write is
confirmed: if it failed, the client gets the 503 the view would have given,
without the id, keeping the headers the app's hooks added (CORS, rate limits).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from flask import Response

from ..protocol.transport import Reply

logger = logging.getLogger("flask_mcp")

#: Headers that describe the held body or name the session: not carried over
#: to the answer sent instead of it.
_NOT_CARRIED = frozenset({
    "content-type", "content-length", "content-encoding", "content-range", "etag", "last-modified",
    "transfer-encoding", "mcp-session-id",
})


class HeldResponse(Response):
    """A response that confirms its session's write before the WSGI server sends any of it.

    ``confirm`` returns ``None`` when the write held, else the reply to send
    instead; ``render`` turns that reply into a response."""

    confirm: Callable[[], Reply | None] | None = None
    render: Callable[[Reply], Response]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        confirm, self.confirm = self.confirm, None
        if confirm is None:
            return super().__call__(environ, start_response)
        return _ConfirmedFirst(self, confirm, environ, start_response)

    def _instead(self, failed: Reply) -> Response:
        response = self.render(failed)
        for name, value in self.headers.items():
            if name.lower() not in _NOT_CARRIED and name not in response.headers:
                response.headers.add(name, value)
        return response

    def __del__(self) -> None:
        # Not sent: an after_request hook returned another response, or raised.
        # The write is still read back, so its connection serves again; the
        # client may hold the id of a session that was not stored.
        confirm, self.confirm = self.confirm, None
        if confirm is None:
            return
        try:
            failed = confirm()
        except BaseException:  # noqa: BLE001 - nothing may escape a finalizer
            failed = Reply(500)
        if failed is not None:
            logger.error("A new MCP session was not stored (%d), and its answer was replaced by an "
                         "after_request hook: the client may see 404 and initialize again.", failed.status)


class _ConfirmedFirst:
    """The held answer's WSGI body: its first iteration reads the write's
    reply, then starts the response (this one, or the one sent instead).

    PEP 3333 lets an application call ``start_response`` from the first
    iteration of its body; the server sends nothing before that first item.
    Flask pops the request context and the server takes the body between
    ``__call__`` and that iteration, so the reply has longer to arrive."""

    __slots__ = ("_body", "_confirm", "_environ", "_held", "_start_response", "_wsgi")

    def __init__(
        self, held: HeldResponse, confirm: Callable[[], Reply | None], environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> None:
        self._held = held
        self._confirm: Callable[[], Reply | None] | None = confirm
        self._environ = environ
        self._start_response = start_response
        self._wsgi = held.get_wsgi_response(environ)  # built in the request's context, as Flask would
        self._body: Iterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        body = self._body
        if body is None:
            body = self._body = iter(self._start())
        return next(body)

    def _start(self) -> Iterable[bytes]:
        confirm, self._confirm = self._confirm, None
        assert confirm is not None
        failed = confirm()
        if failed is not None:
            _close(self._wsgi[0])
            self._wsgi = self._held._instead(failed).get_wsgi_response(self._environ)
        app_iter, status, headers = self._wsgi
        self._start_response(status, headers)
        return app_iter

    def close(self) -> None:
        confirm, self._confirm = self._confirm, None
        if confirm is not None:  # closed unread (the client left first): nothing was sent
            confirm()  # the reply is still read, so its connection serves again
        _close(self._wsgi[0])


def _close(app_iter: Iterable[bytes]) -> None:
    close = getattr(app_iter, "close", None)
    if close is not None:
        close()
