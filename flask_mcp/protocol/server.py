"""The sans-IO MCP server core: one POST body in, one :class:`Reply` out.

It chooses the revision per request (the decision ladder of the spec digest,
section 1), validates what that revision demands, dispatches the method and
shapes the result for the revision. The HTTP layer only translates.
"""

from __future__ import annotations

import base64
import binascii
import copy
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import jsonrpc
from .errors import (
    BadProtocolVersionHeader,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    MissingClientCapability,
    SessionNotFound,
    SessionRequired,
    UnsupportedProtocolVersion,
)
from .features import InvalidToolArguments, RequestInfo, ToolOutcome, ToolProvider
from .headers import check_param_headers, check_standard_headers
from .jsonrpc import ClientResponse, Message, Notification, Request, RequestId
from .meta import LOG_LEVELS, SERVER_INFO_KEY, carries_modern_meta, parse_request_meta
from .mrtr import STATE_LIFETIME, InputRequired, binding, seal, unseal
from .session import Session, SessionStore, StoreUnavailable, new_session_id
from .versions import (
    DEFAULT_LEGACY_VERSION,
    LEGACY_VERSIONS,
    REVISIONS,
    STATELESS_VERSIONS,
    SUPPORTED_VERSIONS,
    Revision,
    negotiate,
)

logger = logging.getLogger("flask_mcp")

Instructions = Callable[[RequestInfo], "str | None"]
Emit = Callable[[dict[str, Any]], None]


def _discard(message: dict[str, Any]) -> None:
    """Where notifications go when the caller takes none."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Who we are, as ``serverInfo`` / ``io.modelcontextprotocol/serverInfo``."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    icons: tuple[dict[str, Any], ...] = ()

    def for_revision(self, revision: Revision) -> dict[str, Any]:
        full: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title:
            full["title"] = self.title
        if self.description:
            full["description"] = self.description
        if self.website_url:
            full["websiteUrl"] = self.website_url
        if self.icons:
            full["icons"] = list(self.icons)
        return {k: v for k, v in full.items() if k in revision.implementation_fields}


@dataclass(frozen=True, slots=True)
class ProtocolOptions:
    page_size: int = 100
    ttl_ms: int = 60_000
    cache_scope: str = "public"


@dataclass(frozen=True, slots=True)
class Incoming:
    """What the HTTP layer hands over besides the body, for one request."""

    headers: Mapping[str, str]
    emit: Emit
    principal: str | None

    @property
    def header_version(self) -> str | None:
        return _header(self.headers, "mcp-protocol-version")

    @property
    def session_id(self) -> str | None:
        return _header(self.headers, "mcp-session-id") or None


@dataclass(slots=True)
class Reply:
    """What to send back: a status, extra headers, and a JSON payload or nothing."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.info = info
        self.tools = tools
        self.sessions = sessions
        self.options = options or ProtocolOptions()
        self.instructions = instructions
        self.state_key = state_key
        self.clock = clock
        self._handlers: dict[str, Callable[[RequestInfo], dict[str, Any]]] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "logging/setLevel": self._set_level,
        }
        self._tool_listing_cache: dict[tuple[str, int], list[dict[str, Any]]] = {}

    # ------------------------------------------------------------------ entry points

    def handle_post(
        self,
        headers: Mapping[str, str],
        body: bytes,
        emit: Emit | None = None,
        principal: str | None = None,
    ) -> Reply:
        """Answer one POST. ``headers`` maps lower-case names to values; ``emit``
        receives the notifications a request produces before its result;
        ``principal`` names the authenticated caller (sessions are bound to it)."""
        incoming = Incoming(headers, emit or _discard, principal)
        try:
            return self._handle_post(incoming, body)
        except StoreUnavailable as exc:
            return _store_unavailable(exc)

    def _handle_post(self, incoming: Incoming, body: bytes) -> Reply:
        try:
            payload = jsonrpc.parse_body(body)
        except MCPError as exc:
            return self._error_reply(None, exc, 400)
        if isinstance(payload, list):
            return self._handle_batch(payload, incoming)
        try:
            message = jsonrpc.classify(payload)
        except MCPError as exc:
            return self._error_reply(jsonrpc.readable_id(payload), exc, 400)
        if _is_stateless(message, incoming.header_version):
            return self._handle_stateless(message, incoming)
        return self._handle_legacy(message, incoming)

    def check_get(self, headers: Mapping[str, str], principal: str | None = None) -> Reply | None:
        """A GET naming an unknown or ended session learns so (404); any other GET
        gets ``None`` here, and the HTTP layer answers that no stream is offered."""
        incoming = Incoming(headers, _discard, principal)
        try:
            if incoming.session_id and self._find_session(incoming) is None:
                return self._error_reply(None, SessionNotFound(), 404)
        except StoreUnavailable as exc:
            return _store_unavailable(exc)
        return None

    def handle_delete(self, headers: Mapping[str, str], principal: str | None = None) -> Reply:
        """End the legacy session named by ``Mcp-Session-Id``."""
        incoming = Incoming(headers, _discard, principal)
        if not incoming.session_id:
            return self._error_reply(None, SessionRequired(), 400)
        try:
            session = self._find_session(incoming)
            deleted = session is not None and self.sessions.delete(session.id)
        except StoreUnavailable as exc:
            return _store_unavailable(exc)
        if not deleted:
            return self._error_reply(None, SessionNotFound(), 404)
        return Reply(200)

    # ------------------------------------------------------------------ eras

    def _handle_stateless(self, message: Message, incoming: Incoming) -> Reply:
        if isinstance(message, ClientResponse):
            return self._error_reply(
                message.id,
                InvalidRequest("2026-07-28 clients must not send JSON-RPC responses."),
                400,
            )
        if isinstance(message, Notification):
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
            return self._error_reply(message.id, exc, 400)
        revision = REVISIONS[meta.protocol_version]
        request = RequestInfo(
            revision=revision,
            method=message.method,
            params=message.params,
            headers=incoming.headers,
            request_id=message.id,
            client_info=meta.client_info,
            client_capabilities=meta.client_capabilities,
            meta=meta,
            principal=incoming.principal,
            emit=incoming.emit,
        )
        return self._dispatch(message, request)

    def _handle_legacy(self, message: Message, incoming: Incoming) -> Reply:
        request_id = message.id if isinstance(message, Request) else None
        try:
            _check_legacy_header(incoming.header_version)
            if isinstance(message, Request) and message.method == "initialize":
                return self._dispatch_initialize(message, incoming)
            session = self._require_session(incoming)
        except MCPError as exc:
            return self._error_reply(request_id, exc, exc.http_status or 400)
        answered = self._legacy_message(message, incoming, session)
        if answered is None:
            return Reply(202)
        return Reply(answered[1], answered[0])

    def _legacy_message(
        self, message: Message, incoming: Incoming, session: Session
    ) -> tuple[dict[str, Any], int] | None:
        """Answer one message of an established session (``None`` = nothing to send)."""
        if isinstance(message, Notification):
            if message.method == "notifications/initialized" and not session.initialized:
                session.initialized = True
                self.sessions.save(session)
            return None
        if isinstance(message, ClientResponse):
            return None  # answers to server requests are routed by the streaming layer
        if message.method == "initialize":
            error = InvalidRequest("initialize must be sent alone, as the first request of a session.")
            return jsonrpc.error_message(message.id, error), 400
        request = RequestInfo(
            revision=REVISIONS[session.protocol_version],
            method=message.method,
            params=message.params,
            headers=incoming.headers,
            request_id=message.id,
            client_info=session.client_info,
            client_capabilities=session.client_capabilities,
            session=session,
            principal=incoming.principal,
            emit=incoming.emit,
        )
        return self._answer(message, request)

    def _handle_batch(self, items: list[Any], incoming: Incoming) -> Reply:
        """JSON-RPC batches exist only in 2025-03-26."""
        session_id = incoming.session_id
        session = self._find_session(incoming) if session_id else None
        effective = incoming.header_version or (session.protocol_version if session else DEFAULT_LEGACY_VERSION)
        if session is not None and effective != session.protocol_version:
            effective = session.protocol_version  # the session's version decides, not a header
        revision = REVISIONS.get(effective)
        if revision is None or not revision.batching:
            return self._error_reply(
                None,
                InvalidRequest(
                    f"JSON-RPC batches are not allowed in protocol version {effective}: "
                    "send one message per POST."
                ),
                400,
            )
        if not items:
            return self._error_reply(None, InvalidRequest("An empty JSON-RPC batch is invalid."), 400)
        if session is None:
            error = SessionNotFound() if session_id else SessionRequired()
            return self._error_reply(None, error, error.http_status or 400)
        answers: list[dict[str, Any]] = []
        for item in items:
            try:
                message = jsonrpc.classify(item)
            except MCPError as exc:
                answers.append(jsonrpc.error_message(jsonrpc.readable_id(item), exc))
                continue
            answered = self._legacy_message(message, incoming, session)
            if answered is not None:
                answers.append(answered[0])
        return Reply(200, answers) if answers else Reply(202)

    # ------------------------------------------------------------------ dispatch

    def _dispatch_initialize(self, message: Request, incoming: Incoming) -> Reply:
        params = message.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            return self._error_reply(
                message.id,
                InvalidParams('initialize needs params.protocolVersion (a string such as "2025-11-25").'),
                400,
            )
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        revision = REVISIONS[negotiate(requested)]
        now = self.clock()
        session = Session(
            id=new_session_id(),
            protocol_version=revision.version,
            client_info=client_info if isinstance(client_info, dict) else {},
            client_capabilities=capabilities if isinstance(capabilities, dict) else {},
            principal=incoming.principal,
            created_at=now,
            last_seen=now,
        )
        request = RequestInfo(
            revision=revision,
            method="initialize",
            params=params,
            headers=incoming.headers,
            request_id=message.id,
            client_info=session.client_info,
            client_capabilities=session.client_capabilities,
            session=session,
            principal=incoming.principal,
            emit=incoming.emit,
        )
        answer, status = self._answer(message, request)
        if "error" in answer:
            return Reply(status, answer)
        self.sessions.create(session)
        return Reply(200, answer, {"Mcp-Session-Id": session.id})

    def _dispatch(self, message: Request, request: RequestInfo) -> Reply:
        answer, status = self._answer(message, request)
        return Reply(status, answer)

    def _answer(self, message: Request, request: RequestInfo) -> tuple[dict[str, Any], int]:
        """Run the method; every failure becomes a JSON-RPC error message.

        Returns the answer and its HTTP status."""
        handler = self._handlers.get(message.method)
        try:
            if handler is None or message.method not in request.revision.core_methods:
                raise MethodNotFound(
                    f"Method {message.method!r} is not available in protocol version "
                    f"{request.revision.version}."
                )
            result = handler(request)
        except MCPError as exc:
            status = exc.http_status
            if status is None:
                is_unknown = exc.code == MethodNotFound.code
                status = request.revision.method_not_found_status if is_unknown else 200
            return jsonrpc.error_message(message.id, exc), status
        except Exception:
            logger.exception("Unexpected failure while serving %s", message.method)
            error = MCPError("Internal error while serving the request; see the server log.")
            return jsonrpc.error_message(message.id, error), 500
        return jsonrpc.result_message(message.id, self._finish_result(result, request.revision)), 200

    def _finish_result(self, result: dict[str, Any], revision: Revision) -> dict[str, Any]:
        if revision.result_type:
            result.setdefault("resultType", "complete")
            meta = result.setdefault("_meta", {})
            meta[SERVER_INFO_KEY] = self.info.for_revision(revision)
        return result

    def _error_reply(self, request_id: RequestId | None, error: MCPError, status: int) -> Reply:
        return Reply(error.http_status or status, jsonrpc.error_message(request_id, error))

    # ------------------------------------------------------------------ sessions

    def _find_session(self, incoming: Incoming) -> Session | None:
        """The live session named by the request, if it belongs to this caller:
        another principal presenting the id is told it does not exist."""
        session = self.sessions.get(incoming.session_id) if incoming.session_id else None
        if session is None or session.principal != incoming.principal:
            return None
        return session

    def _require_session(self, incoming: Incoming) -> Session:
        if not incoming.session_id:
            raise SessionRequired()
        session = self._find_session(incoming)
        if session is None:
            raise SessionNotFound()
        header_version = incoming.header_version
        if header_version is not None and header_version != session.protocol_version:
            raise BadProtocolVersionHeader(
                f"MCP-Protocol-Version header {header_version!r} differs from the version "
                f"negotiated for this session ({session.protocol_version})."
            )
        return session

    # ------------------------------------------------------------------ methods

    def _capabilities(self, revision: Revision) -> dict[str, Any]:
        # logging: tools may log through their Context (deprecated in 2026-07-28, still served).
        return {"logging": {}, "tools": {}}

    def _instructions_for(self, request: RequestInfo) -> str | None:
        if self.instructions is None:
            return None
        return self.instructions(request)

    def _initialize(self, request: RequestInfo) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": request.revision.version,
            "capabilities": self._capabilities(request.revision),
            "serverInfo": self.info.for_revision(request.revision),
        }
        text = self._instructions_for(request)
        if text:
            result["instructions"] = text
        return result

    def _ping(self, request: RequestInfo) -> dict[str, Any]:
        return {}

    def _discover(self, request: RequestInfo) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self._capabilities(request.revision),
        }
        text = self._instructions_for(request)
        if text:
            result["instructions"] = text
        return self._with_cache_hints(result, request.revision)

    def _set_level(self, request: RequestInfo) -> dict[str, Any]:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"logging/setLevel needs params.level, one of {', '.join(LOG_LEVELS)}.")
        assert request.session is not None
        request.session.log_level = level
        self.sessions.save(request.session)
        return {}

    def _with_cache_hints(self, result: dict[str, Any], revision: Revision) -> dict[str, Any]:
        if revision.cache_hints:
            result["ttlMs"] = self.options.ttl_ms
            result["cacheScope"] = self.options.cache_scope
        return result

    def _tool_listing(self, revision: Revision) -> list[dict[str, Any]]:
        key = (revision.version, self.tools.generation)
        listing = self._tool_listing_cache.get(key)
        if listing is None:
            listing = [
                {k: v for k, v in tool.items() if k in revision.tool_fields}
                for tool in self.tools.definitions()
            ]
            self._tool_listing_cache = {key: listing} | {
                k: v for k, v in self._tool_listing_cache.items() if k[1] == key[1]
            }
        return listing

    def _list_tools(self, request: RequestInfo) -> dict[str, Any]:
        listing = self._tool_listing(request.revision)
        start = _decode_cursor(request.params.get("cursor"), len(listing))
        end = start + self.options.page_size
        result: dict[str, Any] = {"tools": listing[start:end]}
        if end < len(listing):
            result["nextCursor"] = _encode_cursor(end)
        return self._with_cache_hints(result, request.revision)

    def _call_tool(self, request: RequestInfo) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("tools/call needs params.name, the name of a tool from tools/list.")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("tools/call params.arguments must be an object.")
        tool = self.tools.find(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool {name!r}: call tools/list for the tools this server offers.")
        revision = request.revision
        bound_to = ""
        if revision.stateless:
            if tool.header_params:
                check_param_headers(request.headers, tool.header_params, arguments)
            bound_to = binding(name, arguments, request.principal)
            request.input_responses = self._input_responses(params, bound_to)
        session = request.session
        snapshot = copy.deepcopy(session.data) if session is not None else None
        try:
            outcome = tool.invoke(arguments, request)
            if session is not None and session.data != snapshot:
                self.sessions.save(session)  # the tool changed the session's app data
        except InputRequired as needed:
            return self._input_required(needed, request, bound_to)
        except InvalidToolArguments as exc:
            if not revision.argument_errors_as_results:
                raise InvalidParams(exc.message, data={"errors": exc.details}) from None
            outcome = ToolOutcome([{"type": "text", "text": exc.message}], is_error=True)
        except MissingClientCapability as exc:
            if revision.stateless:
                raise
            outcome = ToolOutcome([{"type": "text", "text": exc.message}], is_error=True)
        return _shape_tool_result(outcome, revision)


    # ------------------------------------------------------------------ multi round-trip

    def _key(self) -> bytes:
        if self.state_key is None:
            raise InternalError("This server cannot ask clients for input: it has no key to seal requestState.")
        return self.state_key()

    def _input_responses(self, params: dict[str, Any], bound_to: str) -> dict[str, Any]:
        """Earlier rounds' answers (from our sealed state) plus this round's."""
        answers: dict[str, Any] = {}
        if params.get("requestState") is not None:
            payload = unseal(params["requestState"], self._key(), bound_to=bound_to, now=self.clock())
            answers.update(payload.get("answers") or {})
        fresh = params.get("inputResponses")
        if isinstance(fresh, dict):
            answers.update(fresh)
        return answers

    def _input_required(self, needed: InputRequired, request: RequestInfo, bound_to: str) -> dict[str, Any]:
        if not request.revision.stateless:
            raise InternalError("Input requests outside 2026-07-28 travel on the response stream.")
        state = {"bind": bound_to, "exp": self.clock() + STATE_LIFETIME, "answers": request.input_responses}
        return {
            "resultType": "input_required",
            "inputRequests": {r.key: r.to_wire() for r in needed.requests},
            "requestState": seal(state, self._key()),
        }


def _store_unavailable(exc: StoreUnavailable) -> Reply:
    """503: the session store is down; one log line, no traceback, retry later."""
    logger.error("MCP session store unavailable: %s", exc)
    error = InternalError("Session storage is temporarily unavailable; retry the request shortly.")
    return Reply(503, jsonrpc.error_message(None, error), {"Retry-After": "1"})


def _shape_tool_result(outcome: ToolOutcome, revision: Revision) -> dict[str, Any]:
    content = [_block_for(block, revision) for block in outcome.content]
    result: dict[str, Any] = {"content": content}
    if outcome.has_structured and revision.structured_output:
        result["structuredContent"] = outcome.structured
    if outcome.is_error:
        result["isError"] = True
    if outcome.meta:
        result["_meta"] = dict(outcome.meta)
    return result


def _block_for(block: dict[str, Any], revision: Revision) -> dict[str, Any]:
    """A content block as this revision knows it: unknown types as text, and
    no block ``_meta`` or ``annotations.lastModified`` where they do not exist."""
    if block.get("type") not in revision.content_types:
        block = _as_text_block(block)
    if not revision.content_meta:
        annotations = block.get("annotations")
        block = {k: v for k, v in block.items() if k != "_meta"}
        if isinstance(annotations, dict) and "lastModified" in annotations:
            block["annotations"] = {k: v for k, v in annotations.items() if k != "lastModified"}
    return block


def _as_text_block(block: dict[str, Any]) -> dict[str, Any]:
    """Older revisions lack some block types (resource links): say it in text."""
    if block.get("type") == "resource_link":
        label = block.get("title") or block.get("name") or block.get("uri")
        return {"type": "text", "text": f"{label}: {block.get('uri')}"}
    return {"type": "text", "text": str(block)}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        return None
    return value.strip()


def _is_stateless(message: Message, header_version: str | None) -> bool:
    if header_version in STATELESS_VERSIONS:
        return True
    if isinstance(message, (Request, Notification)):
        return carries_modern_meta(message.params)
    return False


def _check_legacy_header(header_version: str | None) -> None:
    if header_version is not None and header_version not in LEGACY_VERSIONS:
        raise BadProtocolVersionHeader(
            f"Unsupported MCP-Protocol-Version header {header_version!r}: this server "
            f"speaks {', '.join(SUPPORTED_VERSIONS)} (2026-07-28 requests also need "
            "the _meta protocolVersion)."
        )


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: Any, size: int) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str):
        raise InvalidParams("params.cursor must be the string returned as nextCursor.")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith("o:"):
            raise ValueError
        offset = int(text[2:])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidParams("Invalid cursor: pass back the nextCursor of the previous page unchanged.") from None
    if not 0 <= offset <= size:
        raise InvalidParams("Invalid cursor: the list changed; start again without a cursor.")
    return offset
