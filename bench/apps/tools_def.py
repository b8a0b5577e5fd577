"""The 52 tools every benchmarked MCP server registers: ``echo``, ``add`` and 50
generated ones with distinct names and docstrings.

One definition, imported by both the flask-mcp app and the SDK app, so both
servers describe and run exactly the same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GENERATED = 50


def echo(text: str) -> str:
    """Echo the text back unchanged."""
    return text


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _generated(index: int) -> Callable[..., Any]:
    if index % 2 == 0:

        def tool(text: str, times: int = 1) -> str:
            return text * times

        tool.__doc__ = f"Repeat a text a number of times (variant {index:02d} of the text tools)."
    else:

        def tool(a: int, b: int = 0) -> int:  # type: ignore[misc]
            return a * index + b

        tool.__doc__ = f"Multiply a by {index} and add b (variant {index:02d} of the number tools)."
    tool.__name__ = tool.__qualname__ = f"tool_{index:02d}"
    return tool


def all_tools() -> list[Callable[..., Any]]:
    """The 52 functions, in registration order."""
    return [echo, add, *(_generated(i) for i in range(GENERATED))]
