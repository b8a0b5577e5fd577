"""JSON-RPC 2.0 framing: parse a body, classify a message, build answers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidRequest, MCPError, ParseError

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the installed extras
    _orjson = None

RequestId = str | int

#: Hardening limits (cheap to check, generous for real clients).
MAX_JSON_DEPTH = 64
MAX_ID_LENGTH = 256
MAX_METHOD_LENGTH = 128
#: The largest integer id, either sign (64-bit integers).
MAX_INT_ID = 2**63 - 1
_NO_ID = object()


@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Notification:
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ClientResponse:
    """The client's answer to a request the server sent (legacy revisions only)."""

    id: RequestId
    result: Any = None
    error: Any = None


Message = Request | Notification | ClientResponse


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: Built once: ``json.loads`` with options builds a new decoder per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
#: orjson turns integers beyond 64 bits into floats; bodies with such long
#: digit runs take the stdlib path, which keeps them exact. Found in one C pass
#: that maps digits to "0", both opening brackets to "[" and the rest to " "
#: (the same copy then counts the brackets; a regex is ten times slower).
_SCAN = bytes(
    0x30 if 0x30 <= byte <= 0x39 else 0x5B if byte in (0x5B, 0x7B) else 0x20 for byte in range(256)
)
_LONG_DIGIT_RUN = b"0" * 19


def parse_body(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode a POST body; anything that is not UTF-8 JSON is a parse error,
    and so is JSON nested more than ``max_depth`` levels: a limit of the
    parser (RFC 8259 section 9), met while parsing, whatever the depth."""
    if not body or body.isspace():  # no stripped copy of the body
        raise ParseError("Empty request body: send one JSON-RPC message as JSON.")
    scan = body.translate(_SCAN)
    if _orjson is not None and _LONG_DIGIT_RUN not in scan:  # orjson first (see _decode_stdlib)
        try:
            payload = _orjson.loads(body)
        except _orjson.JSONDecodeError:
            payload = _decode_stdlib(body, max_depth)
    else:
        payload = _decode_stdlib(body, max_depth)
    # Only a body with more brackets than the limit can be too deep.
    if scan.count(b"[") > max_depth and _deeper_than(payload, max_depth):
        raise TooDeep(max_depth, readable_id(payload))
    return payload


def decode_exact(data: bytes) -> Any:
    """JSON as the stdlib reads it (integers of any size stay exact), through
    orjson when installed; no depth limit, for records this package wrote.
    Invalid JSON (NaN included) is a :class:`ParseError`."""
    if _orjson is not None and _LONG_DIGIT_RUN not in data.translate(_SCAN):  # orjson first (see _decode_stdlib)
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    return _decode_stdlib(data, None)


def _decode_stdlib(body: bytes, max_depth: int | None) -> Any:
    """JSON through the stdlib: what :func:`parse_body` and :func:`decode_exact`
    fall back to when orjson is not installed, when the scan shows an integer
    beyond 64 bits, and for anything orjson refuses (so that error messages
    stay the same). Only UTF-8 is read (RFC 8259: JSON exchanged between
    systems is UTF-8): UTF-16 and UTF-32 bodies, and the bytes of a lone
    surrogate (``ED A0 80``), are parse errors; a UTF-8 byte order mark is
    ignored, as RFC 8259 allows. Escaped lone surrogates (``"\\ud800"``) are
    valid JSON and read as such."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(
            f"The request body is not UTF-8 (invalid byte at offset {exc.start}): send JSON encoded as UTF-8."
        ) from None
    try:
        # The C parser itself stops at the interpreter's recursion limit.
        return _DECODER.decode(text)
    except RecursionError:
        if max_depth is None:
            raise ParseError("The JSON text is nested too deeply to read.") from None
        raise TooDeep(max_depth) from None
    except ValueError as exc:
        raise ParseError(f"The request body is not valid JSON: {_short(exc)}") from None


class TooDeep(ParseError):
    """A body nested beyond the limit; ``request_id`` is its id when it was read."""

    def __init__(self, max_depth: int, request_id: RequestId | None = None) -> None:
        super().__init__(f"The request body is nested more than {max_depth} levels deep.")
        self.request_id = request_id



def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _short(exc: Exception) -> str:
    return str(exc).split("\n", 1)[0][:200]


def readable_id(obj: Any) -> RequestId | None:
    """The message's id, for echoing in an error, whenever it is a string or
    an integer (what every schema revision calls a ``RequestId``), even one
    beyond this server's limits: the client can then match the error to its
    request (a 2025-03-26 batch answer needs the id; that revision's errors
    must carry one)."""
    if isinstance(obj, dict):
        value = obj.get("id")
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value
    return None


def _valid_id(value: Any) -> bool:
    if type(value) is int:  # the usual id, checked first
        return -MAX_INT_ID <= value <= MAX_INT_ID
    if isinstance(value, str):
        return len(value) <= MAX_ID_LENGTH
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_INT_ID <= value <= MAX_INT_ID


def classify(obj: Any) -> Message:
    """Turn one decoded JSON value into a request, notification or response."""
    if not isinstance(obj, dict):
        raise InvalidRequest("A JSON-RPC message must be a JSON object.")
    if obj.get("jsonrpc") != "2.0":
        raise InvalidRequest('A JSON-RPC message must carry "jsonrpc": "2.0".')
    request_id = obj.get("id", _NO_ID)
    has_id = request_id is not _NO_ID
    if has_id and not (type(request_id) is int and -MAX_INT_ID <= request_id <= MAX_INT_ID) and not _valid_id(
        request_id
    ):  # (the usual id, an int in range, without the call)
        raise InvalidRequest(
            f"A JSON-RPC id must be a string of at most {MAX_ID_LENGTH} characters or a 64-bit integer (not null)."
        )
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise InvalidRequest('"method" must be a non-empty string.')
        if len(method) > MAX_METHOD_LENGTH:
            raise InvalidRequest(f'"method" is longer than {MAX_METHOD_LENGTH} characters: no MCP method is.')
        params = obj.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidRequest('"params" must be a JSON object when present.')
        if has_id:
            return Request(request_id, method, params)
        return Notification(method, params)
    if has_id and ("result" in obj) != ("error" in obj):
        return ClientResponse(request_id, obj.get("result"), obj.get("error"))
    raise InvalidRequest(
        "Not a JSON-RPC request, notification or response: a request needs "
        '"method" and "id", a notification "method", a response "id" and '
        'exactly one of "result" or "error".'
    )


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: MCPError) -> dict[str, Any]:
    """An error answer; an unreadable id is omitted (2025-11-25+ wording)."""
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:
        message["id"] = request_id
    message["error"] = error.to_error()
    return message


class PreparedList(list):  # type: ignore[type-arg]
    """A list that also knows its own JSON (a listing served again and again,
    such as a whole ``tools/list`` page): with orjson, :func:`encode` copies
    those bytes instead of serializing the items. To everything else it is
    the list it holds. Made by :func:`prepared_list`."""

    __slots__ = ("json",)

    def __init__(self, items: list[Any], json: bytes) -> None:
        super().__init__(items)
        self.json = json


def prepared_list(items: list[Any]) -> list[Any]:
    """``items`` with their JSON prepared once, where it can be (orjson installed
    and the items serializable by it); otherwise a plain copy."""
    if _orjson is not None:
        try:
            return PreparedList(items, _orjson.dumps(items, default=_subclass_as_base, option=_ENCODE_OPTIONS))
        except TypeError:
            pass
    return list(items)


def _subclass_as_base(value: Any) -> Any:
    """orjson's ``default`` for what it passes through: a prepared list as its
    bytes, other subclasses of dict, list, str and int as their base type (as
    orjson would serialize them itself). Anything else stays unserializable."""
    if type(value) is PreparedList:
        return _orjson.Fragment(value.json)
    # The base types' own methods: what the object holds, whatever its class overrides.
    if isinstance(value, dict):
        return dict.copy(value)
    if isinstance(value, list):
        return list.copy(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


_ENCODE_OPTIONS = _orjson.OPT_PASSTHROUGH_SUBCLASS if _orjson is not None else 0


def encode(payload: Any) -> bytes:
    """Compact UTF-8 JSON, as sent on the wire: orjson when installed (the
    ``fast`` extra; ten times quicker on a big ``tools/list``, and prepared
    lists are copied, not serialized again), else the stdlib."""
    if _orjson is not None:
        try:
            encoded: bytes = _orjson.dumps(payload, default=_subclass_as_base, option=_ENCODE_OPTIONS)
            return encoded
        except TypeError:  # integers beyond 64 bits, keys that are not strings
            pass
    return encode_stdlib(payload)


def encode_stdlib(payload: Any) -> bytes:
    """The stdlib's compact JSON as UTF-8. A string UTF-8 cannot carry (a lone
    surrogate, read from an escaped ``"\\ud800"`` in a request) is written as
    the same escape, so the answer is valid UTF-8 and the client gets back the
    very string it sent (its id above all)."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode()
