"""``async def`` wherever an app registers a function (tools, resources and
templates, prompts, completions, instructions, token verifiers): it runs as
Flask runs an async view, through the app's ``ensure_sync``.

Flask's default ``ensure_sync`` hands a coroutine function to asgiref's
``async_to_sync`` (the ``flask[async]`` extra): each call runs in an event loop
of its own on a helper thread while the request's thread waits, with the
request's context variables (``current_app``, ``g``, ``request``, the MCP
call) copied in. An app that overrides ``ensure_sync`` or ``async_to_sync``
(as it would for its own async views) is obeyed here too: the override is
looked up per call. A missing asgiref is reported when the function is
registered, not on its first call.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from collections.abc import Callable
from typing import Any

from flask import current_app

#: What installs asgiref, the library Flask runs ``async def`` views with.
ASYNC_EXTRA = 'pip install "flask[async]"'


def is_async(fn: Any) -> bool:
    """Whether calling ``fn`` makes a coroutine: an ``async def`` function or
    method, a ``functools.partial`` of one, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - the method itself is what is asked about
    return not (inspect.isroutine(fn) or inspect.isclass(fn)) and inspect.iscoroutinefunction(call)


def require_async_support(what: str) -> None:
    """Refuse, at registration, an ``async def`` that could not run: asgiref is missing."""
    if importlib.util.find_spec("asgiref") is None:
        raise RuntimeError(
            f"{what} is an async def function: flask-mcp runs it as Flask runs async views, which needs "
            f"asgiref ({ASYNC_EXTRA}, or flask-mcp[async]). Install it, or define the function with plain def."
        )


def synced(fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``fn`` itself, or, for an ``async def``, a plain function that runs it
    through ``current_app.ensure_sync`` (so it needs an app context, as every
    registered function has when flask-mcp calls it). ``what`` names the
    function in the error raised when asgiref is missing."""
    if not is_async(fn):
        return fn
    require_async_support(what)

    def run_in_flask(*args: Any, **kwargs: Any) -> Any:
        return current_app.ensure_sync(fn)(*args, **kwargs)

    return functools.update_wrapper(run_in_flask, fn)  # name, docstring, signature (through __wrapped__)
