"""What a tool, resource or prompt may demand of the caller's token: scopes
declared at decoration time, checked per request, refused with a step-up
challenge (``403 insufficient_scope``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..protocol.errors import ErrorCode, MCPError
from ..protocol.request_info import RequestInfo
from .bearer import challenge
from .tokens import Principal

#: RFC 6749 ``scope-token``: printable ASCII without space, ``"`` and ``\``.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")


def validate_scopes(scopes: Iterable[str] | None, where: str) -> tuple[str, ...]:
    """Scopes as declared on a tool, resource or prompt, checked at decoration time."""
    if scopes is None:
        return ()
    if isinstance(scopes, str):
        scopes = scopes.split()
    checked = tuple(scopes)
    for scope in checked:
        if not isinstance(scope, str) or not _SCOPE_TOKEN.fullmatch(scope):
            raise ValueError(f"{where}: invalid scope {scope!r} (printable ASCII without spaces, quotes or '\\')")
    return checked


def _principal_of(request: RequestInfo) -> Principal | None:
    auth = request.auth
    return auth if isinstance(auth, Principal) else None


def permits(scopes: Sequence[str], request: RequestInfo) -> bool:
    """Whether the caller of ``request`` may use something that needs ``scopes``
    (always, when the app does not authenticate: ``MCP_AUTH`` off)."""
    if not scopes or request.auth is None:
        return True
    principal = _principal_of(request)
    return principal is not None and principal.has_scopes(scopes)


class InsufficientScope(MCPError):
    """The caller's token lacks a scope: 403 with a step-up challenge."""

    code = ErrorCode.INVALID_REQUEST
    http_status = 403


def require_scopes(scopes: Sequence[str], request: RequestInfo, what: str) -> None:
    """Stop unless the caller has ``scopes``: ``403`` with ``WWW-Authenticate:
    Bearer error="insufficient_scope", scope="..."`` and a JSON-RPC error body.
    ``what`` names the thing, e.g. ``"Tool 'refund'"``. For tools, resources
    and prompts alike."""
    if permits(scopes, request):
        return
    principal = _principal_of(request)
    granted = " ".join(sorted(principal.scopes)) if principal else ""
    needed = " ".join(scopes)
    description = f"{what} needs the scope {needed}"
    message = (
        f"{description}; the access token grants {granted or 'no scopes'}. "
        "Ask the authorization server for a token with the missing scope."
    )
    raise InsufficientScope(
        message,
        data={"error": "insufficient_scope", "scope": needed},
        http_headers={"WWW-Authenticate": challenge("insufficient_scope", description, scope=needed)},
    )
