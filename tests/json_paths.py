"""Addressing the inside of a decoded JSON value by a path of keys and indexes,
for the fuzzers that mutate valid messages (tests/test_fuzz.py, tests/hostile.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path inside ``value``, parents before their children."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


def get_at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def set_at(value: Any, path: tuple[Any, ...], new: Any) -> None:
    get_at(value, path[:-1])[path[-1]] = new


def delete_at(value: Any, path: tuple[Any, ...]) -> None:
    del get_at(value, path[:-1])[path[-1]]
