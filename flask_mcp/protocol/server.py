"""The sans-IO MCP server core: one POST body in, one :class:`Reply` out.

It chooses the revision per request (the decision ladder of the spec digest,
section 1), validates what that revision demands, dispatches the method and
shapes the result for the revision. The HTTP layer only translates. The
usual 2026-07-28 ``tools/call`` takes a shorter way, :mod:`.express`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from . import jsonrpc
from .batches import answer_batch
from .bus import MessageBus, reply_channel
from .cancellation import Cancellations
from .deferred import STREAMABLE_METHODS, may_stream, run_cancellable, run_deferred
from .durable import DurableWriter, SendDurable, hand_off, run_durable
from .durable_records import DurableRecord
from .errors import (
    HeaderMismatch,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    SessionNotFound,
    SessionRequired,
    UnsupportedProtocolVersion,
)
from .events import EventLog
from .express import ExpressLane
from .headers import check_standard_headers
from .info import ProtocolOptions, ServerInfo
from .jsonrpc import ClientResponse, Message, Notification, Request
from .meta import PROTOCOL_VERSION_KEY, parse_request_meta
from .methods import Instructions, Methods
from .observe import Observer
from .providers import CompletionProvider, PromptProvider, ResourceProvider, SkillProvider
from .request_info import RequestInfo, ToolProvider
from .session import Session, SessionStore, StoreUnavailable
from .session_start import answer_and_store, open_session
from .shaping import finish_result
from .stream_resume import resume_reply
from .subscriptions import Listen
from .task_methods import Tasks
from .transport import (
    Emit,
    EndConnection,
    EndpointURL,
    Incoming,
    Reply,
    discard,
    error_reply,
    failure_reply,
    store_unavailable,
)
from .versions import (
    LEGACY_VERSIONS,
    REVISIONS,
    STATELESS_VERSIONS,
    SUPPORTED_VERSIONS,
    check_legacy_version_header,
    check_session_version_header,
)

logger = logging.getLogger("flask_mcp")

class Server:
    """Answers MCP POST bodies for every supported revision."""

    def __init__(
        self,
        *,
        info: ServerInfo,
        tools: ToolProvider,
        sessions: SessionStore,
        options: ProtocolOptions | None = None,
        instructions: Instructions | None = None,
        state_key: Callable[[], bytes] | None = None,
        bus: MessageBus | None = None,
        events: EventLog | None = None,
        resources: ResourceProvider | None = None,
        prompts: PromptProvider | None = None,
        completions: CompletionProvider | None = None,
        clock: Callable[[], float] = time.time,
        tasks: Tasks | None = None,
        skills: SkillProvider | None = None,
        durable: SendDurable | None = None,
    ) -> None:
        self.info = info
        self.sessions = sessions
        self.bus = bus
        #: Legacy ``notifications/cancelled``, heard by the worker running the call.
        self.cancellations = Cancellations(bus) if bus is not None else None
        #: Resumable streams need both the log and the bus (to follow a stream live).
        self.events = events if bus is not None else None
        #: Hands durable calls of legacy sessions to a task queue (``None``: they run here).
        self.durable = durable if self.events is not None else None
        self.clock = clock
        self.methods = Methods(
            list_changed=bus is not None,
            info=info,
            tools=tools,
            sessions=sessions,
            options=options or ProtocolOptions(),
            instructions=instructions,
            state_key=state_key,
            resources=resources,
            prompts=prompts,
            completions=completions,
            clock=clock,
            tasks=tasks,
            skills=skills,
        )
        self._handlers = self.methods.table()
        #: The usual 2026-07-28 ``tools/call`` in one function (``None``: all take the general path).
        self.express: ExpressLane | None = ExpressLane(self.methods)
        #: Watches every message (tracing, metrics, the access log); ``None``: nobody does.
        self.observer: Observer | None = None

    # ------------------------------------------------------------------ entry points

    def handle_post(
        self,
        headers: Mapping[str, str],
        body: bytes,
        emit: Emit | None = None,
        principal: str | None = None,
        auth: Any = None,
        endpoint_url: EndpointURL = None,
        confirm_later: bool = False,
    ) -> Reply:
        """Answer one POST. ``headers`` maps lower-case names to values; ``emit``
        receives the notifications a request produces before its result;
        ``principal`` names the authenticated caller (sessions are bound to it)
        and ``auth`` is all the HTTP layer knows about it (scopes, claims);
        ``endpoint_url`` is the URL the client posted to (MCP Apps derive a
        sandbox domain from it; a function returning it is called only when needed).
        With ``confirm_later``, the caller confirms a new session's write
        itself (``Reply.unconfirmed``) before sending the reply."""
        try:
            payload = jsonrpc.parse_body(body, self.methods.options.max_json_depth)
        except jsonrpc.TooDeep as exc:  # read, then refused: its id can be echoed
            return error_reply(exc.request_id, exc, 400)
        except MCPError as exc:
            return error_reply(None, exc, 400)
        express = self.express
        if express is not None and type(payload) is dict:
            reply = express.answer(payload, headers, emit or discard, principal, auth, endpoint_url, self.observer)
            if reply is not None:
                return reply
        incoming = Incoming(headers, emit or discard, principal, auth, endpoint_url, confirm_later)
        incoming.body_size = len(body)
        message: Message | None = None
        try:
            if isinstance(payload, list):
                session = self._find_session(incoming) if incoming.read_session_id() else None
                return answer_batch(payload, incoming, session, self._legacy_message)
            try:
                message = jsonrpc.classify(payload)
            except MCPError as exc:
                return error_reply(jsonrpc.readable_id(payload), exc, 400)
            if incoming.header_version in STATELESS_VERSIONS or (  # or a _meta that marks the request 2026-07-28 style
                not isinstance(message, ClientResponse)
                and isinstance(meta := message.params.get("_meta"), dict) and PROTOCOL_VERSION_KEY in meta
            ):
                return self._handle_stateless(message, incoming)
            session_id = headers.get("mcp-session-id")  # (incoming.read_session_id(), without its call)
            incoming.session_id = (session_id.strip() or None) if session_id is not None else None
            return self._handle_legacy(message, incoming)
        except StoreUnavailable as exc:
            return store_unavailable(exc, message.id if isinstance(message, Request) else None)

    def check_get(self, headers: Mapping[str, str], principal: str | None = None) -> Reply | None:
        """A GET naming an unknown or ended session learns so (404); one with
        ``Last-Event-ID`` on a live session resumes that stream (``Reply.resume``);
        any other GET gets ``None``, and the HTTP layer answers that no stream is offered."""
        incoming = Incoming(headers, discard, principal)
        if not incoming.read_session_id():
            return None
        try:
            session = self._find_session(incoming)
        except StoreUnavailable as exc:
            return store_unavailable(exc)
        if session is None:
            return error_reply(None, SessionNotFound(), 404)
        last_event_id = headers.get("last-event-id")
        if last_event_id is None:
            return None
        return resume_reply(self.events, session, last_event_id.strip())

    def handle_delete(self, headers: Mapping[str, str], principal: str | None = None) -> Reply:
        """End the legacy session named by ``Mcp-Session-Id``."""
        incoming = Incoming(headers, discard, principal)
        if not incoming.read_session_id():
            return error_reply(None, SessionRequired(), 400)
        try:
            session = self._find_session(incoming)
            deleted = session is not None and self.sessions.delete(session.id)
        except StoreUnavailable as exc:
            return store_unavailable(exc)
        if session is None or not deleted:
            return error_reply(None, SessionNotFound(), 404)
        if self.cancellations is not None:
            try:
                self.cancellations.end_session(session.id)
            except StoreUnavailable as exc:  # the session is gone all the same; its calls time out
                logger.warning("Could not cancel the calls of ended session: %s", exc)
        if self.observer is not None and session is not None:
            self.observer.session_ended(session, self.clock())
        return Reply(200)

    # ------------------------------------------------------------------ eras

    def _handle_stateless(self, message: Message, incoming: Incoming) -> Reply:
        if isinstance(message, ClientResponse):
            return error_reply(
                message.id,
                InvalidRequest("2026-07-28 clients must not send JSON-RPC responses."),
                400,
            )
        if isinstance(message, Notification):
            if self.observer is not None:
                self.observer.notification(message, incoming, None, incoming.header_version or "")
            return Reply(202)
        header_version = incoming.header_version
        try:
            meta = parse_request_meta(message.params)
            if header_version is None:
                raise HeaderMismatch(
                    "Missing MCP-Protocol-Version header: it must repeat "
                    f"_meta protocolVersion ({meta.protocol_version})."
                )
            if header_version != meta.protocol_version:
                raise HeaderMismatch(
                    f"MCP-Protocol-Version header {header_version!r} does not match "
                    f"_meta protocolVersion {meta.protocol_version!r}."
                )
            if meta.protocol_version not in STATELESS_VERSIONS:
                raise UnsupportedProtocolVersion(meta.protocol_version, list(SUPPORTED_VERSIONS))
            check_standard_headers(incoming.headers, message.method, message.params)
        except MCPError as exc:
            return error_reply(message.id, exc, 400)
        request = RequestInfo(  # as incoming.request_info() builds it, without its call
            REVISIONS[meta.protocol_version], message.method, message.params, incoming.headers, message.id,
            meta.client_info, meta.client_capabilities, None, meta, incoming.principal, incoming.auth, incoming.emit,
            endpoint=incoming.endpoint_url,
        )
        if message.method == "subscriptions/listen":
            return self._listen(message, request)
        return self._answer(message, request, defer=True)

    def _listen(self, message: Request, request: RequestInfo) -> Reply:
        """A listen stream, when this server can deliver change notifications."""
        offered = self.methods.listen_offer(request.revision)
        if self.bus is None or not offered:
            error = MethodNotFound("This server sends no change notifications (subscriptions/listen).")
            return error_reply(message.id, error, request.revision.method_not_found_status)
        try:
            listen = Listen.from_request(
                message.id, message.params, offered,
                principal=request.principal, client_capabilities=request.client_capabilities,
            )
        except MCPError as exc:
            return error_reply(message.id, exc, exc.http_status or 200)
        return Reply(200, listen=listen)

    def _handle_legacy(self, message: Message, incoming: Incoming) -> Reply:
        request_id = message.id if isinstance(message, Request) else None
        try:
            header_version = incoming.header_version
            if header_version is not None and header_version not in LEGACY_VERSIONS:
                check_legacy_version_header(header_version)  # raises
            if isinstance(message, Request) and message.method == "initialize":
                return self._dispatch_initialize(message, incoming)
            session_id = incoming.session_id
            if not session_id:
                raise SessionRequired()
            session = self.sessions.get(session_id)  # (_find_session, without its call)
            if session is None or session.principal != incoming.principal:
                raise SessionNotFound()
            if header_version is not None and header_version != session.protocol_version:
                check_session_version_header(header_version, session.protocol_version)  # raises
        except MCPError as exc:
            return error_reply(request_id, exc, exc.http_status or 400)
        answered = self._legacy_message(message, incoming, session, defer=True)
        return Reply(202) if answered is None else answered

    def _legacy_message(
        self, message: Message, incoming: Incoming, session: Session, defer: bool = False
    ) -> Reply | None:
        """Answer one message of an established session (``None`` = nothing to send)."""
        if isinstance(message, Notification):
            if self.observer is not None:
                self.observer.notification(message, incoming, session, session.protocol_version)
            self._legacy_notification(message, session)
            return None
        if isinstance(message, ClientResponse):
            # The answer to a request one of our tools sent: the tool may be
            # waiting in another worker, so it travels over the bus.
            if self.observer is not None:
                self.observer.response(message, incoming, session)
            if self.bus is not None:
                answer = {"result": message.result, "error": message.error}
                self.bus.publish(reply_channel(session.id, message.id), answer)
            return None
        if message.method == "initialize":
            error = InvalidRequest("initialize must be sent alone, as the first request of a session.")
            return Reply(400, jsonrpc.error_message(message.id, error))
        request = RequestInfo(  # as incoming.request_info() builds it, without its call
            REVISIONS[session.protocol_version], message.method, message.params, incoming.headers, message.id,
            session.client_info, session.client_capabilities, session, None, incoming.principal, incoming.auth,
            incoming.emit, endpoint=incoming.endpoint_url,
        )
        return self._answer(message, request, defer=defer)

    def _legacy_notification(self, message: Notification, session: Session) -> None:
        if message.method == "notifications/initialized" and not session.initialized:
            session.initialized = True
            self.sessions.save(session)
        elif message.method == "notifications/cancelled" and self.cancellations is not None:
            request_id = message.params.get("requestId")
            if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
                self.cancellations.publish(session.id, request_id)

    # ------------------------------------------------------------------ dispatch

    def _dispatch_initialize(self, message: Request, incoming: Incoming) -> Reply:
        opened = open_session(message, incoming, self.methods.options.max_client_info_bytes, self.clock())
        if isinstance(opened, Reply):  # refused
            return opened
        session = opened
        request = incoming.request_info(
            message, REVISIONS[session.protocol_version], session.client_info, session.client_capabilities,
            session=session,
        )
        return answer_and_store(self.sessions, session, lambda: self._answer(message, request), message.id,
                                incoming.confirm_later)

    def _answer(self, message: Request, request: RequestInfo, defer: bool = False) -> Reply:
        """Run the method; every failure becomes a JSON-RPC error message with
        the HTTP status (and headers) it calls for. With ``defer``, a request
        that may stream is handed back to the HTTP layer to run instead."""
        if defer and request.method in STREAMABLE_METHODS:
            if self.durable is not None and request.session is not None and self._is_durable(request):
                if self.observer is not None:  # its span and access record end at the hand-off
                    return self.observer.request(message, request, self._durable_reply)
                return self._durable_reply(message, request)
            meta = request.meta  # (may_stream's answer for a 2026-07-28 request, without its call)
            if (meta.progress_token is not None or meta.log_level is not None) if meta is not None else may_stream(
                request
            ):

                def run(emit: Emit | None, closed: Callable[[], bool], end: EndConnection | None) -> Reply | None:
                    return run_deferred(lambda: self._answer(message, request), request, self.bus, emit, closed,
                                        end, self.cancellations)

                session = request.session
                resumable = session is not None and request.revision.resumable_streams and self.events is not None
                return Reply(200, deferred=run, resumable_session=session.id if session and resumable else None)
            if request.session is not None and self.cancellations is not None:
                # Answered as plain JSON, and still cancellable: a cancelled call gets no answer.
                observer = self.observer  # what _answer() does below, without a lambda and a call of it
                answer = (partial(observer.request, message, request, self._run) if observer is not None
                          else partial(self._run, message, request))
                reply = run_cancellable(answer, request, self.cancellations)
                return Reply(202) if reply is None else reply
        observer = self.observer
        if observer is not None:
            return observer.request(message, request, self._run)
        return self._run(message, request)

    def _is_durable(self, request: RequestInfo) -> bool:
        """A call of a durable tool in a session whose revision carries event ids."""
        return (
            request.method == "tools/call"
            and request.session is not None
            and request.revision.durable_streams
            and self.methods.durable_tool(request.params.get("name"))
        )

    def _durable_reply(self, message: Request, request: RequestInfo) -> Reply:
        """Hand a durable call over: its stream opened, its record kept, the call
        queued (:func:`.durable.hand_off`); the HTTP layer then follows the stream."""
        assert self.durable is not None and self.events is not None
        return hand_off(self.events, self.durable, self.methods.tasks, request)

    def run_durable(self, request: RequestInfo, key: str, *, keep_alive: float, record_id: str | None = None) -> str:
        """Run a durable call here (a queue worker): ``request`` is the call as the
        web worker accepted it, ``key`` its stream in the event log, ``record_id``
        the task record operators see it by. Its observer's span continues the
        trace of the web worker's (``request.carried``). How it went (see
        :func:`.durable.run_durable`)."""
        assert self.events is not None and self.bus is not None
        bus = self.bus
        writer = DurableWriter(self.events, key, bus.publish, keep_alive=keep_alive)
        message = Request(request.request_id, request.method, request.params)  # type: ignore[arg-type]
        observer = self.observer

        def answer(job: RequestInfo) -> Any:
            job.bus = bus
            if observer is None:
                reply = run_cancellable(lambda: self._run(message, job), job, self.cancellations)
            else:
                reply = run_cancellable(lambda: observer.durable_run(message, job, self._run), job,
                                        self.cancellations)
            return None if reply is None else reply.body

        tasks = self.methods.tasks
        record = DurableRecord(tasks.store, record_id, clock=tasks.clock) if record_id and tasks else None
        repeatable = self.methods.rerun_allowed(request.params.get("name"))
        return run_durable(answer, request, writer, repeatable=repeatable, record=record)

    def _run(self, message: Request, request: RequestInfo) -> Reply:
        """Dispatch to the method's handler and shape its answer."""
        handler = self._handlers.get(message.method)
        try:
            if handler is None or message.method not in request.revision.core_methods:
                raise MethodNotFound(
                    f"Method {message.method!r} is not available in protocol version "
                    f"{request.revision.version}."
                )
            result = handler(request)
        except MCPError as exc:
            return failure_reply(exc, message.id, request.revision)
        except Exception:
            logger.exception("Unexpected failure while serving %s", message.method)
            return failure_reply(None, message.id, request.revision)
        result = finish_result(result, request.revision, self.methods.server_info)
        return Reply(200, {"jsonrpc": "2.0", "id": message.id, "result": result})  # (jsonrpc.result_message)

    # ------------------------------------------------------------------ sessions

    def _find_session(self, incoming: Incoming) -> Session | None:
        """The live session named by the request, if it belongs to this caller:
        another principal presenting the id is told it does not exist."""
        session = self.sessions.get(incoming.session_id) if incoming.session_id else None
        if session is None or session.principal != incoming.principal:
            return None
        return session
