"""Asking the client for input (elicitation, sampling, roots), in both eras.

2026-07-28: the answers come back in the retried request (multi round-trip);
missing ones end the call with ``input_required``. A call running as a task
(the tasks extension) parks the task in ``input_required`` instead, until
``tasks/update`` brings the answers to whichever worker. Legacy sessions: the
questions are JSON-RPC requests on the call's event stream, and the client
POSTs each answer separately, maybe to another worker or host, whence the
session backend's message bus carries it to the waiting call.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ToolError
from .protocol.bus import reply_channel
from .protocol.errors import MissingClientCapability
from .protocol.input_requests import CAPABILITY_OF, InputRequest, InputRequired, well_formed
from .protocol.request_info import RequestCancelled, RequestInfo

#: How often a waiting call looks for a cancellation (seconds).
_POLL = 0.25


@dataclass(frozen=True)
class ElicitResult:
    """The person's answer to an elicitation."""

    action: str  # "accept", "decline" or "cancel"
    content: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


def ask(request: RequestInfo, questions: Sequence[InputRequest], *, timeout: float) -> list[Any]:
    """The answers to ``questions``, in order (see :meth:`flask_mcp.Context.ask`)."""
    _check_capabilities(request, questions)
    if request.task is not None and request.task.started:
        # A running task waits in input_required until tasks/update brings the answers.
        raw = request.task.ask(list(questions))
        return [_accepted(q, {"result": answer}) for q, answer in zip(questions, raw, strict=True)]
    if request.revision.stateless:
        answers = request.input_responses
        missing = [q for q in questions if answer_of(q, answers.get(q.key)) is None]
        if missing:
            raise InputRequired(missing)
        return [answer_of(q, answers[q.key]) for q in questions]
    return _ask_over_stream(request, questions, timeout)


def _check_capabilities(request: RequestInfo, questions: Sequence[InputRequest]) -> None:
    caps = request.client_capabilities
    for question in questions:
        capability = CAPABILITY_OF[question.method]
        declared = caps.get(capability)
        if not isinstance(declared, dict):
            raise MissingClientCapability({capability: {}})
        if capability == "elicitation" and declared and "form" not in declared:
            # {} means form mode only; a non-empty object must name "form".
            raise MissingClientCapability({"elicitation": {"form": {}}})


def _ask_over_stream(request: RequestInfo, questions: Sequence[InputRequest], timeout: float) -> list[Any]:
    if not request.streaming:
        raise ToolError("This tool asks the client a question, which needs a client that accepts an event stream.")
    if request.bus is None or request.session is None:
        raise ToolError(
            "This tool asks the client a question, which needs a session backend with a message "
            "bus (sqlite://, redis:// or memory://)."
        )
    channels = {reply_channel(request.session.id, _new_id()): q for q in questions}
    answers: dict[str, Any] = {}
    with request.bus.subscribe(list(channels)) as subscription:  # before asking: no answer is missed
        for channel, question in channels.items():
            request.emit(
                {"jsonrpc": "2.0", "id": channel.rsplit(":", 1)[1], "method": question.method,
                 "params": _legacy_params(question)}
            )
        deadline = time.monotonic() + timeout
        while channels:
            if request.is_cancelled():
                raise RequestCancelled()
            left = deadline - time.monotonic()
            if left <= 0:
                names = ", ".join(sorted({q.method for q in channels.values()}))
                raise ToolError(f"The client did not answer {names} within {timeout:g} s.")
            item = subscription.get(min(left, _POLL))
            if item is None or item[0] not in channels:
                continue
            question = channels.pop(item[0])
            answers[question.key] = _accepted(question, item[1])
    if request.is_cancelled():  # cancelled while the answers came in
        raise RequestCancelled()
    return [answers[q.key] for q in questions]


def _accepted(question: InputRequest, reply: dict[str, Any]) -> Any:
    error = reply.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise ToolError(f"The client refused {question.method}: {message}")
    value = answer_of(question, reply.get("result"))
    if value is None:
        raise ToolError(f"The client's answer to {question.method} is malformed.")
    return value


def _legacy_params(question: InputRequest) -> dict[str, Any]:
    """Legacy elicitation requests carry no ``mode`` (2025-06-18 has none)."""
    if question.method == "elicitation/create":
        return {k: v for k, v in question.params.items() if k != "mode"}
    return question.params


def _new_id() -> str:
    return f"flask-mcp-{uuid.uuid4().hex}"


def answer_of(question: InputRequest, raw: Any) -> Any:
    """The usable answer to one question, or ``None`` when it is missing or malformed."""
    if not well_formed(question.method, raw):
        return None
    if question.method == "elicitation/create":
        return ElicitResult(raw["action"], raw.get("content"))
    if question.method == "sampling/createMessage":
        return raw
    return raw["roots"]
