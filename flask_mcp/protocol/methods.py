"""The MCP methods the core serves, and how their results are shaped per
revision: lifecycle (``initialize``, ``ping``, ``server/discover``), logging
level, tools, and the 2026-07-28 multi round-trip glue."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from .errors import InternalError, InvalidParams, MissingClientCapability
from .features import InvalidToolArguments, RequestInfo, ToolOutcome, ToolProvider
from .headers import check_param_headers
from .info import ProtocolOptions, ServerInfo
from .meta import LOG_LEVELS
from .mrtr import STATE_LIFETIME, InputRequired, binding, seal, unseal
from .pagination import page
from .session import SessionStore
from .subscriptions import RESOURCE_UPDATES
from .versions import SUPPORTED_VERSIONS, Revision

Instructions = Callable[[RequestInfo], "str | None"]
Handler = Callable[[RequestInfo], dict[str, Any]]


class Methods:
    """Handlers for the methods of the core, each taking the request and
    returning its result (or raising an ``MCPError``)."""

    def __init__(
        self,
        *,
        info: ServerInfo,
        tools: ToolProvider,
        sessions: SessionStore,
        options: ProtocolOptions,
        instructions: Instructions | None = None,
        state_key: Callable[[], bytes] | None = None,
        list_changed: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.info = info
        #: Change notifications can be delivered (a bus carries them to listen streams).
        self.list_changed = list_changed
        self.tools = tools
        self.sessions = sessions
        self.options = options
        self.instructions = instructions
        self.state_key = state_key
        self.clock = clock
        self._tool_listings: dict[str, tuple[int, list[dict[str, Any]]]] = {}

    def table(self) -> dict[str, Handler]:
        """Method name -> handler (each revision says which of them it offers)."""
        return {
            "initialize": self.initialize,
            "ping": self.ping,
            "server/discover": self.discover,
            "logging/setLevel": self.set_level,
            "tools/list": self.list_tools,
            "tools/call": self.call_tool,
        }

    def capabilities(self, revision: Revision) -> dict[str, Any]:
        # logging: tools may log through their Context (deprecated in 2026-07-28, still served).
        capabilities: dict[str, Any] = {"logging": {}, "tools": {}}
        if self.list_changed and revision.stateless:
            # Delivered on subscriptions/listen streams; legacy clients would need a
            # GET stream, which this server does not open.
            capabilities["tools"] = {"listChanged": True}
        return capabilities

    def listen_offer(self, revision: Revision) -> frozenset[str]:
        """The change notifications a listen stream can get: list kinds whose
        capability says ``listChanged``, plus ``RESOURCE_UPDATES`` when resource
        updates are delivered (``resources.subscribe``)."""
        caps = self.capabilities(revision)
        kinds = {kind for kind in ("tools", "prompts", "resources") if caps.get(kind, {}).get("listChanged")}
        if caps.get("resources", {}).get("subscribe"):
            kinds.add(RESOURCE_UPDATES)
        return frozenset(kinds)

    def _instructions_for(self, request: RequestInfo) -> str | None:
        if self.instructions is None:
            return None
        return self.instructions(request)

    def initialize(self, request: RequestInfo) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": request.revision.version,
            "capabilities": self.capabilities(request.revision),
            "serverInfo": self.info.for_revision(request.revision),
        }
        text = self._instructions_for(request)
        if text:
            result["instructions"] = text
        return result

    def ping(self, request: RequestInfo) -> dict[str, Any]:
        return {}

    def discover(self, request: RequestInfo) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(request.revision),
        }
        text = self._instructions_for(request)
        if text:
            result["instructions"] = text
        return self._with_cache_hints(result, request.revision)

    def set_level(self, request: RequestInfo) -> dict[str, Any]:
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
        """The tools as this revision knows them, rebuilt only when the set changes."""
        generation = self.tools.generation
        cached = self._tool_listings.get(revision.version)
        if cached is not None and cached[0] == generation:
            return cached[1]
        listing = [{k: v for k, v in tool.items() if k in revision.tool_fields} for tool in self.tools.definitions()]
        self._tool_listings[revision.version] = (generation, listing)
        return listing

    def list_tools(self, request: RequestInfo) -> dict[str, Any]:
        tools, next_cursor = page(self._tool_listing(request.revision), request.params.get("cursor"),
                                  self.options.page_size)
        result: dict[str, Any] = {"tools": tools}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return self._with_cache_hints(result, request.revision)

    def call_tool(self, request: RequestInfo) -> dict[str, Any]:
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
