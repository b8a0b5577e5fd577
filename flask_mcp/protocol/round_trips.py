"""The multi round-trip glue shared by ``tools/call``, ``prompts/get`` and
``resources/read`` (2026-07-28; see :mod:`.input_requests` for the sealed state).

Before user code runs, :meth:`RoundTrips.begin` recovers the answers of earlier
rounds from the request's ``requestState`` (refusing a state issued for
another call) and adds this round's ``inputResponses``. When the code still
needs answers it raises :class:`~.input_requests.InputRequired`, and
:meth:`RoundTrips.interim` turns that into the ``input_required`` result.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import InternalError
from .input_requests import ASKING_CAPABILITIES, STATE_LIFETIME, InputRequired, binding, opened, seal, unseal
from .request_info import RequestInfo
from .session import SessionStore

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Interim:
    """User code stopped to ask the client: this ``input_required`` result goes back."""

    result: dict[str, Any]


class RoundTrips:
    """Seals and opens ``requestState`` for one server."""

    def __init__(self, state_key: Callable[[], bytes] | None, clock: Callable[[], float] = time.time) -> None:
        self.state_key = state_key
        self.clock = clock

    def run(
        self,
        request: RequestInfo,
        target: str,
        arguments: dict[str, Any],
        call: Callable[[], T],
        sessions: SessionStore,
    ) -> T | Interim:
        """Run user code for ``request`` (a tool, prompt or resource named ``target``):
        with the answers so far, stopping at an :class:`Interim` when it asks for
        more, and saving the legacy session's app data when the code changed it."""
        bound_to = self.begin(request, target, arguments)
        session = request.session
        snapshot = copy.deepcopy(session.data) if session is not None and session.data else {}
        try:
            value = call()
        except InputRequired as needed:
            return Interim(self.interim(needed, request, bound_to()))
        if session is not None and session.data != snapshot:
            sessions.save(session)
        return value

    def begin(self, request: RequestInfo, target: str, arguments: dict[str, Any]) -> Callable[[], str]:
        """Load the answers so far into ``request.input_responses``; returns what
        the state is bound to (empty on legacy revisions, which ask over a stream)
        as a function: most calls never ask, so the hash is computed only when
        needed, from a copy of the arguments as the call received them. A call
        whose client declared nothing it could be asked (no elicitation,
        sampling or roots) never asks, and is bound to nothing."""
        if not request.revision.stateless:
            return _unbound
        params = request.params
        state = params.get("requestState")
        fresh = params.get("inputResponses")
        if state is None and fresh is None and ASKING_CAPABILITIES.isdisjoint(request.client_capabilities):
            return _unbound  # the usual call: nothing to load, nothing to copy
        answers: dict[str, Any] = {}
        if state is not None:
            bound_to = binding(request.method, target, arguments, request.principal)
            payload = unseal(state, self._key(), bound_to=bound_to, now=self.clock())
            answers.update(payload.get("answers") or {})

            def bind() -> str:
                return bound_to
        else:
            received = dict(arguments)  # the code may change its arguments before it asks
            for key, item in received.items():  # (nested values copied too; most arguments have none)
                if isinstance(item, (dict, list)):
                    received[key] = _json_copy(item)

            def bind() -> str:
                return binding(request.method, target, received, request.principal)
        if isinstance(fresh, dict):
            answers.update(fresh)
        request.input_responses = answers
        return bind

    def interim(self, needed: InputRequired, request: RequestInfo, bound_to: str) -> dict[str, Any]:
        """The ``input_required`` result asking for what is still missing (no
        caching hints: such results are never cacheable)."""
        if not request.revision.stateless:
            raise InternalError("Input requests outside 2026-07-28 travel on the response stream.")
        state: dict[str, Any] = {"bind": bound_to, "exp": self.clock() + STATE_LIFETIME,
                                 "answers": request.input_responses}
        carried = request.carried_now()
        if carried:
            state["carried"] = carried
        return {
            "resultType": "input_required",
            "inputRequests": {r.key: r.to_wire() for r in needed.requests},
            "requestState": seal(state, self._key()),
        }

    def carried(self, token: Any) -> dict[str, str] | None:
        """What an observer had sealed into ``token`` (a retry's ``requestState``),
        when this server issued it; ``None`` otherwise. Only the seal is checked
        (the call's own check of its binding and expiry comes later): the
        observer reads it before the call runs, to link the rounds."""
        if self.state_key is None:
            return None
        try:
            key = self.state_key()
        except InternalError:  # no key (no SECRET_KEY): this server never sealed a state
            return None
        carried = opened(token, key).get("carried")
        if isinstance(carried, dict) and all(isinstance(v, str) for v in carried.values()):
            return carried
        return None

    def _key(self) -> bytes:
        if self.state_key is None:
            raise InternalError("This server cannot ask clients for input: it has no key to seal requestState.")
        return self.state_key()


def _unbound() -> str:
    return ""


def _json_copy(value: Any) -> Any:
    """A copy of decoded JSON (its only containers are dicts and lists)."""
    if isinstance(value, dict):
        return {key: _json_copy(item) if isinstance(item, (dict, list)) else item for key, item in value.items()}
    if isinstance(value, list):
        return [_json_copy(item) if isinstance(item, (dict, list)) else item for item in value]
    return value


def is_retry(request: RequestInfo) -> bool:
    """Whether the request answers an earlier ``input_required`` result (its
    result is then not cacheable either)."""
    params = request.params
    return params.get("requestState") is not None or params.get("inputResponses") is not None
