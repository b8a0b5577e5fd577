"""The four thin views: HTTP checks, then the sans-IO core, then a response.

``POST /mcp`` (JSON-RPC), ``GET /mcp`` (405: no server-initiated stream),
``DELETE /mcp`` (end a session), ``GET /mcp/health`` (unauthenticated probe).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Flask, Request, Response, current_app, request
from flask.sansio.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException

from ..auth import login
from ..auth.rebinding import check_origin, host_allowed, host_refused
from ..errors import MCPHTTPException, MethodNotAllowedHere, NotAcceptableMedia, UnsupportedContentType
from ..protocol import jsonrpc
from ..protocol.events import StreamRecorder, stored_trace
from ..protocol.session import StoreUnavailable
from ..protocol.transport import Reply, store_unavailable
from . import sse, streaming
from .body import read_body
from .held_response import HeldResponse
from .json_response import json_response

if TYPE_CHECKING:
    from ..auth.tokens import Principal
    from .state import MCPState

logger = logging.getLogger("flask_mcp")

JSON = "application/json"
EVENT_STREAM = "text/event-stream"


def create_blueprint() -> Blueprint:
    bp = Blueprint("mcp", __name__)
    # OPTIONS is answered by the view for the other methods (see _route_unlisted_methods).
    bp.add_url_rule("", "post", _post, methods=["POST"], provide_automatic_options=False)
    bp.add_url_rule("", "get", _get, methods=["GET"], provide_automatic_options=False)
    bp.add_url_rule("", "delete", _delete, methods=["DELETE"], provide_automatic_options=False)
    bp.add_url_rule("/health", "health", _health, methods=["GET"], provide_automatic_options=False)
    bp.register_error_handler(Exception, _unexpected)
    bp.record(_route_unlisted_methods)
    return bp


def _route_unlisted_methods(setup: BlueprintSetupState) -> None:
    """Send every other method (``PUT``, ``FOO``, ``TRACE``...) on the
    endpoint's paths to a view that answers the JSON-RPC ``405`` with
    ``Allow``: a rule that lists no methods, added after the endpoint's own
    rules (a path's rules are tried in the order they were added). Without
    it, Werkzeug's router refuses such a method with an HTML page, before any
    view or blueprint error handler runs. A rule costs the app's other
    requests nothing; the app-wide ``before_request`` hook that did this
    before cost ~7 400 instructions on every request (bench/README.md).

    That view also answers ``OPTIONS`` (``200`` and ``Allow``, as Flask's
    automatic answer did): Flask finds the allowed methods by matching a
    method no rule lists, which the rule without methods would match, so the
    endpoint's own rules opt out of the automatic answer."""
    app = setup.app
    endpoint = setup.url_prefix or "/"
    paths = {
        endpoint: (("POST", "DELETE"), ("GET", "HEAD", "POST", "DELETE", "OPTIONS")),
        endpoint.rstrip("/") + "/health": (("GET",), ("GET", "HEAD", "OPTIONS")),
    }
    for index, (path, (allow, served)) in enumerate(paths.items()):
        name = f"{setup.name_prefix}.{setup.name}.unlisted{index}".lstrip(".")  # as Blueprint.add_url_rule names it
        rule = app.url_rule_class(path, endpoint=name, subdomain=setup.subdomain)
        rule.methods = _EVERY_METHOD  # type: ignore[assignment]
        app.url_map.add(rule)
        app.view_functions[name] = _unlisted_view(allow, served)


class _EveryMethod(frozenset):  # type: ignore[type-arg]
    """The methods of the rule for unlisted methods: every method is in it,
    which is how Werkzeug's router asks (``method in rule.methods``); to code
    that lists an app's routes it is empty. Werkzeug's own "any method"
    (``methods=None``) would match the same, but tools that document or list
    routes call ``rule.methods.difference(...)`` and would fail on ``None``.
    tests/http/test_blueprint.py checks both sides."""

    __slots__ = ()

    def __contains__(self, method: object) -> bool:
        return True


_EVERY_METHOD = _EveryMethod()


def _unlisted_view(allow: tuple[str, ...], served: tuple[str, ...]) -> Callable[[], Response]:
    """The view for the methods a path's own rules do not list: ``OPTIONS``
    gets the methods ``served``; any other the JSON-RPC ``405`` with ``allow``."""
    hint = "POST (or DELETE to end a session)" if "POST" in allow else " or ".join(allow)

    def unlisted() -> Response:
        if request.method == "OPTIONS":
            response: Response = current_app.response_class()
            response.allow.update(served)
            return response
        _guard(_state())
        raise MethodNotAllowedHere(f"{request.method} is not supported here: use {hint}.", allow)

    return unlisted


def _state() -> MCPState:
    return current_app.extensions["mcp"]  # type: ignore[no-any-return]


def _request() -> Request:
    """The request object itself: one proxy lookup instead of one per attribute."""
    return request._get_current_object()  # type: ignore[attr-defined,no-any-return]


def _guard(state: MCPState, req: Request | None = None, app: Flask | None = None) -> None:
    """DNS-rebinding checks, first of all (spec digest section 1, step 1);
    and the endpoint's sessions still guarded (:mod:`flask_mcp.auth.login`)."""
    app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]
    if not isinstance(app.session_interface, login.EndpointSessions):
        login.check_sessions_guarded(app)
    settings = state.settings
    if not settings.dns_rebinding_protection:
        return
    req = req if req is not None else _request()
    environ = req.environ
    host = req.host
    server_name = environ.get("SERVER_NAME", "")
    if not host_allowed(server_name, host, settings.allowed_hosts):  # (check_host, without its call)
        raise host_refused(server_name, host)
    origin = environ.get("HTTP_ORIGIN")
    if origin is not None:
        check_origin(origin, host, req.scheme, settings)


def _caller(state: MCPState) -> Principal | None:
    """Authentication (400/401/503) then the endpoint's rate limit (429): step 2
    of the spec digest's ladder. ``None`` when the app does not authenticate.
    Refused attempts count against the caller's address, so guessing tokens
    (or flooding the authorization server) runs into the limit too."""
    try:
        principal = state.authenticator.authenticate() if state.authenticator is not None else None
    except HTTPException:
        if state.rate_limits is not None:
            state.rate_limits.hit_endpoint(None)
        raise
    if state.rate_limits is not None:
        state.rate_limits.hit_endpoint(principal)
    if principal is not None:
        login.present(principal.user)  # current_user, from here on
    return principal


def _subject(principal: Principal | None) -> str | None:
    return principal.subject if principal is not None else None


def _headers() -> Mapping[str, str]:
    """The request headers for the core: werkzeug's view looks names up
    case-insensitively, so no copy is needed."""
    return request.headers  # type: ignore[return-value]


class EnvironHeaderView(Mapping[str, str]):
    """The request headers as the WSGI environ holds them (PEP 3333), looked up
    by name in any case: what the core asks for, several times per request,
    without Werkzeug's general-purpose ``EnvironHeaders`` (own code over the
    environ, no Werkzeug internals)."""

    __slots__ = ("environ",)

    def __init__(self, environ: Mapping[str, Any]) -> None:
        self.environ = environ

    def get(self, key: str, default: Any = None) -> Any:
        try:
            name = _ENVIRON_KEYS[key]
        except KeyError:
            name = _environ_key(key)
        return self.environ.get(name, default)

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        for key in self.environ:
            if key.startswith("HTTP_"):
                yield key[5:].replace("_", "-").title()
            elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and self.environ[key]:
                yield key.replace("_", "-").title()

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: Header name -> environ key, for the names looked up so far (a plain dict: a
#: lookup costs less than a call through ``functools.lru_cache``).
_ENVIRON_KEYS: dict[str, str] = {}


def _environ_key(name: str) -> str:
    """Where a header lives in the WSGI environ (PEP 3333: ``HTTP_`` + the name
    upper-cased with ``-`` as ``_``; the two CGI names without the prefix)."""
    key = name.upper().replace("-", "_")
    key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"
    if len(_ENVIRON_KEYS) < 512:  # the names the core asks for, and a few of the app's
        _ENVIRON_KEYS[name] = key
    return key


def _post() -> Response:
    req: Request = request._get_current_object()  # type: ignore[attr-defined]  # as _request(), without its call
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    state: MCPState = app.extensions["mcp"]
    _guard(state, req, app)
    try:
        principal = _caller(state) if state.checks_callers else None
    except HTTPException as exc:  # 401, 403, 429: the refusal is watched too
        if state.telemetry is not None:
            _refused(state, req, exc)
        raise
    environ = req.environ
    accept = environ.get("HTTP_ACCEPT")
    wants_stream = False if accept is None or accept in _USUAL_ACCEPT else _negotiate_media(req)
    if environ.get("CONTENT_TYPE") != JSON and req.mimetype != JSON:  # the usual value needs no parsing
        raise UnsupportedContentType(
            f"Content-Type must be {JSON} (got {req.content_type or 'none'!r})."
        )
    body = read_body(req, state.settings.max_content_length, app)
    notifications: list[dict[str, Any]] = []
    reply = state.server.handle_post(
        EnvironHeaderView(environ), body, notifications.append,
        principal.subject if principal is not None else None, principal,
        endpoint_url=lambda: req.base_url,  # as the client used it (ProxyFix-aware); built only when needed
        # In HeldResponse, before the response's first bytes go out; unless the
        # app's own response class would replace it (make_response retypes a response).
        confirm_later=issubclass(HeldResponse, app.response_class),
    )
    if reply.listen is not None:
        if not _accepts_stream(req):
            raise NotAcceptableMedia("subscriptions/listen answers with an event stream: accept text/event-stream.")
        bus = state.server.bus
        assert bus is not None  # the core offers listen streams only with a bus
        slots = state.stream_slots
        if not slots.take():  # the worker's other threads stay free for ordinary requests
            return _render(slots.refusal(reply.listen.subscription_id), wants_stream)
        try:
            response = streaming.listen(reply.listen, bus, state.stream_options)
        except StoreUnavailable as exc:  # the bus is down: 503, the client retries
            slots.give_back()
            return _render(store_unavailable(exc, reply.listen.subscription_id), wants_stream)
        response.call_on_close(slots.give_back)
        return response
    if reply.durable is not None:
        server = state.server
        assert server.events is not None and server.bus is not None  # the core sends durable calls only then
        return streaming.durable(
            reply.durable, server.events, server.bus,
            live=_accepts_stream(req),
            options=state.stream_options,
            render=lambda done: _render(done, wants_stream),
            streams=state.open_streams,
        )
    if reply.deferred is not None:
        return streaming.respond(
            reply.deferred,
            live=_accepts_stream(req),
            options=state.stream_options,
            render=lambda done: _render(done, wants_stream),
            recorder=_recorder(state, reply.resumable_session),
            streams=state.open_streams,
        )
    if notifications and reply.body is not None and _accepts_stream(req):
        return _render_stream(notifications, reply)  # a 2025-03-26 batch
    return _render(reply, wants_stream)


def _refused(state: MCPState, req: Request, exc: HTTPException) -> None:
    """Hand a refused POST to telemetry (its body read within the size limit)."""
    assert state.telemetry is not None
    try:
        body = read_body(req, state.settings.max_content_length, current_app._get_current_object())  # type: ignore[attr-defined]
    except HTTPException:
        return
    headers = EnvironHeaderView(req.environ)
    state.telemetry.refused(body, exc.code or 400, exc.description or exc.name, headers)


def _get() -> Response:
    state = _state()
    _guard(state)
    headers = _headers()
    reply = state.server.check_get(headers, _subject(_caller(state)))
    if reply is not None and reply.resume is not None and state.server.events is not None:
        if not _accepts_stream(_request()):
            raise NotAcceptableMedia("Resuming a stream answers with an event stream: accept text/event-stream.")
        assert state.server.bus is not None  # the core resumes streams only with a bus
        slots = state.stream_slots
        if not slots.take():
            return _render(slots.refusal(None), False)
        try:
            events, where = state.server.events, reply.resume
            watched = None
            if state.telemetry is not None:  # a span in the trace of the call that opened the stream
                watched = state.telemetry.resumed(where.stream, headers.get("last-event-id") or "", headers,
                                                  lambda: stored_trace(events, where.stream))
            response = streaming.resume(where, events, state.server.bus, state.stream_options, watched)
        except BaseException:
            slots.give_back()
            raise
        response.call_on_close(slots.give_back)
        return response
    if reply is not None:
        return _render(reply, False)
    raise MethodNotAllowedHere(
        "This server opens no server-initiated stream: POST JSON-RPC requests to this "
        "endpoint (GET is only for resuming a stream, with Last-Event-ID)."
    )


def _recorder(state: MCPState, session_id: str | None) -> StreamRecorder | None:
    """Keeps a 2025-11-25 session's response stream in the event log, so the
    client can resume it on any worker after a dropped connection."""
    server = state.server
    if session_id is None or server.events is None or server.bus is None:
        return None
    telemetry = state.telemetry
    return StreamRecorder(server.events, session_id, server.bus.publish,
                          telemetry.current_context if telemetry is not None else None)


def _delete() -> Response:
    state = _state()
    _guard(state)
    return _render(state.server.handle_delete(_headers(), _subject(_caller(state))), False)


def _health() -> Response:
    settings = _state().settings
    return _json_response({"status": "ok", "server": settings.name, "version": settings.version}, 200)


#: What every MCP client sends: answered without parsing the header.
_USUAL_ACCEPT = frozenset({"application/json, text/event-stream", "text/event-stream, application/json"})


def _negotiate_media(req: Request) -> bool:
    """True when the answer must be an event stream (the client takes no JSON)."""
    value = req.environ.get("HTTP_ACCEPT")
    if value is None or value in _USUAL_ACCEPT:
        return False
    accept = req.accept_mimetypes
    if accept.best_match([JSON]) is not None:
        return False
    if accept.best_match([EVENT_STREAM]) is not None:
        return True
    raise NotAcceptableMedia(
        f"The client must accept {JSON} or {EVENT_STREAM} (Accept: {value!r})."
    )


def _accepts_stream(req: Request) -> bool:
    """Whether notifications can precede the result (the client takes SSE)."""
    value = req.environ.get("HTTP_ACCEPT")
    if value is None or value in _USUAL_ACCEPT:
        return True
    return req.accept_mimetypes.best_match([EVENT_STREAM]) is not None


def _render(reply: Reply, wants_stream: bool) -> Response:
    if reply.body is None:
        response = Response(status=reply.status, headers=reply.headers)
        del response.headers["Content-Type"]
        return response
    data = jsonrpc.encode(reply.body)
    cls = Response if reply.unconfirmed is None else HeldResponse
    if wants_stream and _answers_a_request(reply.body):
        headers = {**reply.headers, **sse.SSE_HEADERS}
        response = cls(sse.event(data), status=reply.status, headers=headers, mimetype=EVENT_STREAM)
    else:
        response = json_response(data, reply.status, cls)
        for name, value in reply.headers.items():  # quicker than Response(headers=...)
            response.headers[name] = value
    if isinstance(response, HeldResponse):  # a new session, its write not confirmed yet
        response.confirm = reply.unconfirmed
        response.render = lambda failed: _render(failed, wants_stream)
    return response


def _answers_a_request(body: Any) -> bool:
    """Whether an event stream may carry ``body``: an answer a client can match
    (an id, or a batch). An error without an id (a parse error) goes as JSON."""
    return isinstance(body, list) or (isinstance(body, dict) and "id" in body)


def _render_stream(notifications: list[dict[str, Any]], reply: Reply) -> Response:
    """The request's notifications, then its result, as one SSE stream."""

    def events() -> Iterator[bytes]:
        for message in notifications:
            yield sse.event(jsonrpc.encode(message))
        yield sse.event(jsonrpc.encode(reply.body))

    headers = {**reply.headers, **sse.SSE_HEADERS}
    return Response(sse.guarded(events()), status=reply.status, headers=headers, mimetype=EVENT_STREAM)


def _json_response(payload: Any, status: int) -> Response:
    return json_response(jsonrpc.encode(payload), status)


def _unexpected(error: Exception) -> Response | MCPHTTPException:
    """Anything our views did not foresee: logged, and a JSON-RPC error without
    internals (never a traceback or an HTML page)."""
    if isinstance(error, MCPHTTPException):
        return error
    if isinstance(error, HTTPException):
        body = {"jsonrpc": "2.0", "error": {"code": -32600, "message": error.description or error.name}}
        response = _json_response(body, error.code or 400)
        for name, value in error.get_headers():
            if name.lower() != "content-type":
                response.headers[name] = value
        return response
    logger.exception("Unexpected error in the MCP endpoint", exc_info=error)
    body = {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Internal server error; see the server log."}}
    return _json_response(body, 500)
