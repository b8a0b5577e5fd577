"""JSON answers built without Werkzeug's general-purpose constructor.

``Response(data, status, content_type=...)`` parses the status, validates each
header it sets and looks for existing ones: about 30 000 instructions, a tenth
of a small MCP request. Every JSON answer of the endpoint has the same two
headers, so :func:`json_response` fills in the same attributes directly. It is
checked once, at import, against what Werkzeug's constructor builds; if a
Werkzeug release stores a response differently, the constructor is used.
"""

from __future__ import annotations

from typing import Any

from flask import Response
from werkzeug.datastructures import Headers
from werkzeug.http import HTTP_STATUS_CODES

JSON = "application/json"


def _built(data: bytes, status: int, status_line: str) -> Response:
    headers = Headers.__new__(Headers)
    headers.__dict__["_list"] = [("Content-Type", JSON), ("Content-Length", str(len(data)))]
    response = Response.__new__(Response)
    response.__dict__.update(
        headers=headers,
        _status=status_line,
        _status_code=status,
        direct_passthrough=False,
        _on_close=[],
        response=[data],
    )
    return response


def _state(response: Response) -> dict[str, Any]:
    state = dict(vars(response))
    state["headers"] = list(response.headers.items())
    return state


def _matches_werkzeug() -> bool:
    """Whether :func:`_built` makes what Werkzeug's own constructor makes."""
    try:
        for status in (200, 400):
            reference = Response(b'{"a":1}', status, content_type=JSON)
            if _state(_built(b'{"a":1}', status, reference.status)) != _state(reference):
                return False
    except Exception:  # noqa: BLE001 - any difference means: use the constructor
        return False
    return True


_STATUS_LINES: dict[int, str] = {}
_DIRECT = _matches_werkzeug()


def json_response(data: bytes, status: int) -> Response:
    """A ``Response`` carrying ``data`` as ``application/json`` with ``status``
    (an ordinary Flask response: ``after_request`` hooks may change it)."""
    line = _STATUS_LINES.get(status)
    if line is None:
        if not _DIRECT or status not in HTTP_STATUS_CODES:
            return Response(data, status, content_type=JSON)
        line = _STATUS_LINES[status] = Response(status=status).status
    return _built(data, status, line)
