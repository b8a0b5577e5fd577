"""The active account of a call, for apps where one caller acts for several
accounts (a user with a personal and a company account, an agency and its
clients): ``ctx.account``.

Resolved, first match wins, from

1. the request's ``params._meta["com.flask-mcp/account"]``,
2. the ``account_id`` argument of a ``tools/call``,
3. the ``X-Account-Id`` HTTP header (``MCP_ACCOUNT_HEADER``).

The value is what the client *claims*: check that ``ctx.principal`` may act
for it before using it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol.request_info import RequestInfo

#: The ``_meta`` key naming the account (a reverse-DNS prefix that no MCP
#: revision reserves: its second label is ``flask-mcp``, not ``mcp``).
ACCOUNT_META_KEY = "com.flask-mcp/account"
ACCOUNT_ARGUMENT = "account_id"
MAX_ACCOUNT_LENGTH = 256


def _usable(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, str) and 0 < len(value.strip()) <= MAX_ACCOUNT_LENGTH:
        return value.strip()
    return None


def resolve_account(request: RequestInfo, header: str) -> str | None:
    """The account named by ``_meta``, the ``account_id`` argument, or ``header``."""
    params = request.params
    meta = params.get("_meta")
    if isinstance(meta, Mapping) and (found := _usable(meta.get(ACCOUNT_META_KEY))) is not None:
        return found
    arguments = params.get("arguments") if request.method == "tools/call" else None
    if isinstance(arguments, Mapping) and (found := _usable(arguments.get(ACCOUNT_ARGUMENT))) is not None:
        return found
    return _usable(request.headers.get(header.lower()))
