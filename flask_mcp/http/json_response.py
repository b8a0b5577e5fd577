"""JSON answers built without Werkzeug's general-purpose constructor: the one
shortcut past Flask/Werkzeug's public API on the request path, kept because it
pays for itself.

``Response(data, status, content_type=...)`` parses the status, validates each
header it sets and looks for existing ones. Every JSON answer of the endpoint
has the same two headers, so :func:`json_response` fills in the same
attributes directly. Measured gain (``bench/.venv/bin/python
bench/instructions.py call-2026 discover call-legacy initialize list-2026``,
Flask 3.1.3 / Werkzeug 3.1.9, one gunicorn sync worker, 200 requests each,
against the same tree with ``_DIRECT = False``): 14 700 instructions per
``tools/call`` (1 114 599 against 1 129 266 through the constructor; the floor
958 728), 1.3 % of it and 0.01 of its ratio to the floor; 14 200 per
``server/discover``, 14 800 per legacy ``tools/call``, 14 100 per
``initialize``, 14 800 per ``tools/list``.

It is checked once, at import, against what Werkzeug's constructor builds; if
a Werkzeug release stores a response differently, the constructor is used
(``_DIRECT`` is false). The suite runs both paths (``tests/test_json_response.py``
forces the constructor), and CI runs the whole suite on the oldest and the
newest supported Werkzeug (tox ``py-flaskoldest``, ``py-flasklatest``), where
a test fails if the self-check turns the shortcut off.
"""

from __future__ import annotations

from typing import Any

from flask import Response
from werkzeug.datastructures import Headers
from werkzeug.http import HTTP_STATUS_CODES

JSON = "application/json"


def _state(response: Response) -> dict[str, Any]:
    state = dict(vars(response))
    state["headers"] = list(response.headers.items())
    return state


def json_response(data: bytes, status: int, cls: type[Response] = Response) -> Response:
    """A ``Response`` (or ``cls``, a subclass) carrying ``data`` as
    ``application/json`` with ``status`` (an ordinary Flask response:
    ``after_request`` hooks may change it)."""
    line = _STATUS_LINES.get(status)
    if line is None:
        if not _DIRECT or status not in HTTP_STATUS_CODES:
            return cls(data, status, content_type=JSON)
        line = _STATUS_LINES[status] = Response(status=status).status
    headers = Headers.__new__(Headers)
    headers.__dict__["_list"] = [("Content-Type", JSON), ("Content-Length", str(len(data)))]
    response = cls.__new__(cls)
    response.__dict__.update(
        headers=headers,
        _status=line,
        _status_code=status,
        direct_passthrough=False,
        _on_close=[],
        response=[data],
    )
    return response


def _matches_werkzeug() -> bool:
    """Whether :func:`json_response`'s direct build (taken for a status whose
    line is known) makes what Werkzeug's own constructor makes."""
    try:
        for status in (200, 400):
            reference = Response(b'{"a":1}', status, content_type=JSON)
            _STATUS_LINES[status] = reference.status
            if _state(json_response(b'{"a":1}', status)) != _state(reference):
                return False
    except Exception:  # noqa: BLE001 - any difference means: use the constructor
        return False
    finally:
        _STATUS_LINES.clear()
    return True


#: Status -> status line, for the statuses answered so far; only filled while
#: the direct build is on, and the direct build is taken only for these.
_STATUS_LINES: dict[int, str] = {}
_DIRECT = _matches_werkzeug()
