"""The POST body, read once and within both limits: ``MCP_MAX_CONTENT_LENGTH``
(ours, 413 past it) and Flask's ``MAX_CONTENT_LENGTH`` (``request.max_content_length``,
which a hook may set for one request since Flask 3.1).

Flask's limit is asked for on every POST, and ``request.max_content_length``
costs two ``current_app`` proxy look-ups (``if not current_app``, then
``current_app.config``). Answering without them took a 2026 ``tools/call``
from 1 121 942 to 1 105 932 instructions through one gunicorn worker
(-16 000, 1.4 %; 470 557 -> 460 857 in process; bench/README.md, "issue 35:
instructions cut"). :func:`flask_limit` answers the same from the app the
view already holds, reading the per-request value where Flask's own getter
reads it (``Request._max_content_length``, private), only when the app's
request class keeps Flask's property and a self-check at import found the
two answers equal; otherwise it asks the property. The suite runs both paths
(tests/http/test_body.py turns the shortcut off), and CI runs it on the
oldest and newest supported Flask, where a test fails if the self-check
turns the shortcut off.
"""

from __future__ import annotations

from typing import IO

from flask import Flask, Request, request
from flask.wrappers import Request as FlaskRequest

from ..errors import PayloadTooLarge

#: Flask's own ``max_content_length`` property: a request class that replaces it is asked.
_FLASK_PROPERTY = FlaskRequest.__dict__.get("max_content_length")
#: Since Flask 3.1 the property has a setter, keeping the per-request value here.
_PER_REQUEST = "_max_content_length" if getattr(_FLASK_PROPERTY, "fset", None) is not None else None


def read_body(req: Request, limit: int, app: Flask) -> bytes:
    """The body, refused with 413 past ``limit`` (``MCP_MAX_CONTENT_LENGTH``)
    and past Flask's limit (which ``req.stream`` enforces); read through
    Werkzeug's stream (:func:`input_stream`), so a later ``request.get_data()``
    finds it consumed, as after any view, and a chunked body stops at the limit."""
    environ = req.environ
    value = environ.get("CONTENT_LENGTH")
    if value is not None and value.isascii() and value.isdigit() and "HTTP_TRANSFER_ENCODING" not in environ:
        length: int | None = int(value)  # the usual request, without parsing it twice
    else:
        length = req.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(f"The request body is {length} bytes; the limit is {limit} (MCP_MAX_CONTENT_LENGTH).")
    want = limit + 1 if length is None else length
    # input_stream's answer, without its calls (two per POST, ~1 500 instructions):
    if "wsgi.input_terminated" in environ and _SHORTCUT and type(req).max_content_length is _FLASK_PROPERTY and (
        getattr(req, _PER_REQUEST, None) if _PER_REQUEST is not None else None
    ) is None and app.config["MAX_CONTENT_LENGTH"] is None:
        stream: IO[bytes] = environ["wsgi.input"]
    else:
        stream = input_stream(req, app)
    body = stream.read(want)  # the usual request: all of it at once
    while len(body) < want:  # a raw read may return less than asked before the end
        more = stream.read(want - len(body))
        if not more:
            break
        body += more
    if length and not body:  # a before_request hook read the stream: take what it kept
        body = req.get_data(cache=False)
    if len(body) > limit:
        raise PayloadTooLarge(f"The request body exceeds the limit of {limit} bytes (MCP_MAX_CONTENT_LENGTH).")
    return body


def input_stream(req: Request, app: Flask) -> IO[bytes]:
    """``req.stream``, or the same stream without building it: when the server
    ends the input itself (``wsgi.input_terminated``, which gunicorn sets) and
    Flask sets no limit, Werkzeug's ``get_input_stream`` returns
    ``environ["wsgi.input"]`` unwrapped (its documented rule), so that object
    is read directly, without Werkzeug building the same answer (its
    ``get_input_stream`` and content-length parsing) per POST: ~9 500 of
    ~1 155 000 instructions per ``tools/call`` under gunicorn (bench/README.md,
    "issue 35: instructions cut")."""
    environ = req.environ
    if "wsgi.input_terminated" in environ and flask_limit(req, app) is None:
        stream: IO[bytes] = environ["wsgi.input"]  # (no typing.cast: a call per POST)
        return stream
    return req.stream


def flask_limit(req: Request, app: Flask) -> int | None:
    """``req.max_content_length`` for a request of ``app`` (see the module's docstring)."""
    if _SHORTCUT and type(req).max_content_length is _FLASK_PROPERTY:
        return _limit_of(req, app)
    return req.max_content_length


def _limit_of(req: Request, app: Flask) -> int | None:
    per_request = getattr(req, _PER_REQUEST, None) if _PER_REQUEST is not None else None
    return per_request if per_request is not None else app.config["MAX_CONTENT_LENGTH"]  # type: ignore[no-any-return]


def _matches_flask() -> bool:
    """Whether :func:`_limit_of` answers what Flask's property does: from the
    config, and (Flask 3.1 on) from a value set for the request."""
    if not isinstance(_FLASK_PROPERTY, property):
        return False
    try:
        app = Flask(__name__)
        app.config["MAX_CONTENT_LENGTH"] = 123
        with app.test_request_context(method="POST"):
            req = request._get_current_object()  # type: ignore[attr-defined]
            if _limit_of(req, app) != 123 or req.max_content_length != 123:
                return False
            if _PER_REQUEST is not None:
                req.max_content_length = 45
                if _limit_of(req, app) != 45 or req.max_content_length != 45:
                    return False
        return True
    except Exception:  # noqa: BLE001 - any difference means: ask the property
        return False


_SHORTCUT = _matches_flask()
