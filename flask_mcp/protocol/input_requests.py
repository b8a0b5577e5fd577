"""Multi round-trip requests (2026-07-28): how a stateless server asks the
client for input.

A tool (or a prompt, or a resource) that needs an answer stops with
:class:`InputRequired`; the client gets an ``input_required`` result listing
``inputRequests`` and a sealed ``requestState``, and retries the request with
``inputResponses``. The state carries the answers of earlier rounds and is
bound, by HMAC, to the method, its target, the arguments, the caller and an
expiry: the client cannot forge or replay it elsewhere.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParams

#: How long a client may take to answer before the state expires (seconds).
STATE_LIFETIME = 600.0

#: The client capability each kind of input request needs.
CAPABILITY_OF = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
#: The client capabilities without which a call cannot ask the client anything.
ASKING_CAPABILITIES = frozenset(CAPABILITY_OF.values())


@dataclass(frozen=True, slots=True)
class InputRequest:
    """One question for the client: an ``elicitation/create``,
    ``sampling/createMessage`` or ``roots/list`` request, under a key."""

    key: str
    method: str
    params: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        request: dict[str, Any] = {"method": self.method}
        if self.params:
            request["params"] = self.params
        return request


def well_formed(method: str, answer: Any) -> bool:
    """Whether ``answer`` has the shape of a client's answer to a ``method`` request
    (an ``ElicitResult``, a ``CreateMessageResult``, a ``ListRootsResult``)."""
    if not isinstance(answer, dict):
        return False
    if method == "elicitation/create":
        content = answer.get("content")
        actions = ("accept", "decline", "cancel")
        return answer.get("action") in actions and (content is None or isinstance(content, dict))
    if method == "sampling/createMessage":
        return isinstance(answer.get("content"), (dict, list))
    return method == "roots/list" and isinstance(answer.get("roots"), list)


class InputRequired(BaseException):
    """Raised inside a tool when answers are missing; the core turns it into an
    ``input_required`` result. A ``BaseException``, like ``GeneratorExit``, so
    that a tool's own ``except Exception`` does not swallow it."""

    def __init__(self, requests: list[InputRequest]) -> None:
        super().__init__(", ".join(r.key for r in requests))
        self.requests = requests


#: ``json.dumps(sort_keys=True, separators=(",", ":"))``, built once.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def binding(method: str, target: str, arguments: dict[str, Any], principal: str | None) -> str:
    """What a state is valid for: this method (``tools/call``, ``prompts/get``,
    ``resources/read``), on this tool, prompt or URI, with these arguments, for this caller."""
    canonical = _CANONICAL.encode([method, target, arguments, principal])
    return hashlib.sha256(canonical.encode()).hexdigest()


def seal(payload: dict[str, Any], key: bytes) -> str:
    body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def opened(token: Any, key: bytes) -> dict[str, Any]:
    """The payload of a state this server sealed, whatever call it was for;
    empty when ``token`` is not one (altered, or no state at all)."""
    if not isinstance(token, str) or "." not in token:
        return {}
    body, mac = token.rsplit(".", 1)
    expected = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        return {}
    try:
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        return {}
    return payload if isinstance(payload, dict) else {}


def unseal(token: Any, key: bytes, *, bound_to: str, now: float) -> dict[str, Any]:
    """The payload of a state we issued for this call; anything else is ``-32602``."""
    payload = opened(token, key)
    if payload.get("bind") != bound_to:
        raise _bad_state()
    if not isinstance(payload.get("exp"), (int, float)) or payload["exp"] < now:
        raise InvalidParams("requestState has expired: call the tool again without requestState.")
    return payload


def _bad_state() -> InvalidParams:
    return InvalidParams(
        "requestState is not one this server issued for this call (altered, or for other "
        "arguments): call the tool again without requestState."
    )


def state_key(secret: str | bytes) -> bytes:
    """The HMAC key for request states, derived from the app's secret key."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(b"flask-mcp request state\x00" + raw).digest()
