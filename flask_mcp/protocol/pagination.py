"""Opaque list cursors: a page's offset, encoded so clients treat it as a token."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, TypeVar

from .errors import InvalidParams

T = TypeVar("T")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: Any, size: int) -> int:
    """The offset a cursor names; a cursor we did not issue is ``-32602``."""
    if cursor is None:
        return 0
    if not isinstance(cursor, str):
        raise InvalidParams("params.cursor must be the string returned as nextCursor.")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith("o:"):
            raise ValueError
        offset = int(text[2:])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidParams("Invalid cursor: pass back the nextCursor of the previous page unchanged.") from None
    if not 0 <= offset <= size:
        raise InvalidParams("Invalid cursor: the list changed; start again without a cursor.")
    return offset


def page(items: Sequence[T], cursor: Any, size: int) -> tuple[list[T], str | None]:
    """One page of ``items`` and the cursor of the next one (``None`` at the end)."""
    start = decode_cursor(cursor, len(items))
    end = start + size
    return list(items[start:end]), (encode_cursor(end) if end < len(items) else None)
