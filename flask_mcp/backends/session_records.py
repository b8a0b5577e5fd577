"""A session record as the stores keep it: JSON text, written by orjson
where that gives exactly what the stdlib would read back."""

from __future__ import annotations

import json
from typing import Any

from ..protocol import jsonrpc
from ..protocol.errors import MCPError


def dump_record(record: dict[str, Any]) -> str:
    """A session record as JSON. A record without app data (every new
    session) holds only what came in as JSON, so orjson (through
    ``jsonrpc.encode``; ten times quicker than the stdlib) writes it exactly.
    App data may hold NaN or infinities, which orjson would store as null:
    the stdlib writes those records, as it writes strings UTF-8 cannot carry
    (lone surrogates)."""
    if record.get("data"):
        return json.dumps(record)
    try:
        return jsonrpc.encode(record).decode()
    except UnicodeEncodeError:
        return json.dumps(record)


def dump_record_ascii(record: dict[str, Any]) -> bytes:
    """A session record as ASCII JSON bytes, for a store whose readers may
    decode with any ASCII-compatible encoding (a Redis client's ``encoding``):
    orjson where it writes the record exactly and in ASCII, else the stdlib,
    which escapes everything else (as every Redis record was written before)."""
    if not record.get("data"):
        encoded = jsonrpc.encode(record)
        if encoded.isascii():
            return encoded
    return json.dumps(record).encode()


def load_record(text: str | bytes) -> Any:
    """A stored session record (text, or the bytes a Redis client returns):
    orjson when installed (through ``jsonrpc.decode_exact``), the stdlib for
    what that path refuses (NaN and infinities in app data)."""
    data = text.encode() if isinstance(text, str) else text
    try:
        return jsonrpc.decode_exact(data)
    except MCPError:
        return json.loads(data)
