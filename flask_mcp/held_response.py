"""An ``initialize`` answer held until its new session's write is confirmed.

A store that sends the write ahead (Redis, ``begin_create``) has its reply
read back here as late as the answer can still change: when the WSGI server
takes the response (``Response.__call__``, after Flask's ``after_request``
hooks), not in the view. The worker finishes the response while the reply
travels: on the benchmark's VM the wait per ``initialize`` went from 77 to
47 µs, and ``initialize`` on Redis from 0.61-0.66 to 0.65-0.71 of the Flask
floor (bench/README.md, "the reply read when the response leaves"). An app
with its own ``response_class`` confirms in the view instead (Flask would
retype this response). The session id still goes out only once the write is
confirmed: if it failed, the client gets the 503 the view would have given,
without the id, keeping the headers the app's hooks added (CORS, rate limits).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from flask import Response

from .protocol.transport import Reply

logger = logging.getLogger("flask_mcp")

#: Headers that describe the held body or name the session: not carried over
#: to the answer sent instead of it.
_NOT_CARRIED = frozenset({
    "content-type", "content-length", "content-encoding", "content-range", "etag", "last-modified",
    "transfer-encoding", "mcp-session-id",
})


class HeldResponse(Response):
    """A response that confirms its session's write before the WSGI server sees it.

    ``confirm`` returns ``None`` when the write held, else the reply to send
    instead; ``render`` turns that reply into a response."""

    confirm: Callable[[], Reply | None] | None = None
    render: Callable[[Reply], Response]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        confirm, self.confirm = self.confirm, None
        failed = confirm() if confirm is not None else None
        if failed is not None:
            return self._instead(failed)(environ, start_response)
        return super().__call__(environ, start_response)

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
