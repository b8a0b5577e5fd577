"""The express lane: a 2026-07-28 ``tools/call`` of the usual shape, answered
in one function.

Why it exists: the general path (:meth:`.server.Server.handle_post`) answers
every message of every revision through layers (``Incoming``, the message
classes, the era's handler, ``_answer``, the observer, the method table,
``call_tool``), each cheap, together about a third of a request's Python above
bare Flask; and under gunicorn each function a request runs is fetched into the
CPU's caches anew, which costs more than its instructions (bench/README.md,
"issue 35: the express lane"). Most calls an MCP server serves look alike: a
2026-07-28 ``tools/call`` of a plain tool, its headers as the client library
writes them, nothing to stream, nothing to ask. This lane recognizes that
shape and answers it directly, with the same helpers the general path uses for
the work itself (the tool's ``invoke``, its result's shaping, the error
replies).

The rule that keeps the two paths the same: :meth:`ExpressLane.answer` returns
``None`` for anything it does not recognize, before it has done anything that
matters (no user code run, no state changed), and the general path then
answers as it always did. tests/protocol/test_express.py sends each request of
a corpus through both and compares the answers byte for byte.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import MCPError
from .headers import LITERAL_VALUES
from .input_requests import ASKING_CAPABILITIES
from .jsonrpc import MAX_ID_LENGTH, MAX_INT_ID
from .meta import CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY, RequestMeta
from .request_info import InvalidToolArguments, RequestInfo
from .shaping import finish_result, shape_tool_result
from .transport import Emit, EndpointURL, Reply, failure_reply
from .versions import REVISIONS, STATELESS_VERSIONS

if TYPE_CHECKING:
    from .methods import Methods
    from .observe import Observer

logger = logging.getLogger("flask_mcp")

#: The members of the usual call, its params and its ``_meta``: anything else goes the general way.
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_CALL_PARAMS = frozenset({"name", "arguments", "_meta"})
_PLAIN_META = frozenset({PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY})


class ExpressLane:
    """Answers the usual 2026-07-28 ``tools/call`` (see the module's docstring)."""

    __slots__ = ("methods",)

    def __init__(self, methods: Methods) -> None:
        self.methods = methods

    def answer(
        self,
        payload: dict[str, Any],
        headers: Mapping[str, str],
        emit: Emit,
        principal: str | None,
        auth: Any,
        endpoint_url: EndpointURL,
        observer: Observer | None = None,
    ) -> Reply | None:
        """The reply to ``payload`` (one decoded JSON object), or ``None``: not
        the usual call, nothing done, the general path answers it; so is a call
        while ``observer`` listens (spans and access records come from the
        general path)."""
        if payload.keys() != _REQUEST_KEYS or payload["method"] != "tools/call" or payload["jsonrpc"] != "2.0":
            return None  # a notification, a response, extra members, another method
        request_id = payload["id"]
        if type(request_id) is int:
            if not -MAX_INT_ID <= request_id <= MAX_INT_ID:
                return None
        elif type(request_id) is not str or len(request_id) > MAX_ID_LENGTH:
            return None
        params = payload["params"]
        if type(params) is not dict or not params.keys() <= _CALL_PARAMS:
            return None  # requestState, inputResponses, a task...
        meta = params.get("_meta")
        if type(meta) is not dict or not meta.keys() <= _PLAIN_META:
            return None  # a progress token or a log level (it streams), trace context...
        version = meta.get(PROTOCOL_VERSION_KEY)
        capabilities = meta.get(CLIENT_CAPABILITIES_KEY)
        client_info = meta.get(CLIENT_INFO_KEY)
        name = params.get("name")
        arguments = params.get("arguments")
        if arguments is None:  # as tools/call takes it: no arguments
            arguments = {}
        if (
            type(version) is not str
            or version not in STATELESS_VERSIONS
            or type(capabilities) is not dict
            or (client_info is not None and type(client_info) is not dict)
            or not ASKING_CAPABILITIES.isdisjoint(capabilities)  # the tool may ask: round trips kept
            or type(name) is not str
            or type(arguments) is not dict
            or headers.get("mcp-protocol-version") != version
            or headers.get("mcp-method") != "tools/call"
            or headers.get("mcp-name") != name
            or name not in LITERAL_VALUES  # a name like =?base64?...?= is decoded by the general path
        ):
            return None
        tool = self.methods.tools.find(name)
        if tool is None or tool.task_support is not None or tool.header_params:
            return None
        if observer is not None and observer.listening():
            return None
        revision = REVISIONS[version]
        request = RequestInfo(
            revision, "tools/call", params, headers, request_id, client_info, capabilities, None,
            RequestMeta(version, capabilities, client_info, None, None), principal, auth, emit, endpoint=endpoint_url,
        )
        try:
            try:
                outcome = tool.invoke(arguments, request)
            except InvalidToolArguments as exc:
                outcome = exc.outcome(revision)
        except MCPError as exc:
            return failure_reply(exc, request_id, revision)
        except Exception:
            logger.exception("Unexpected failure while serving %s", "tools/call")
            return failure_reply(None, request_id, revision)
        result = finish_result(shape_tool_result(outcome, revision), revision, self.methods.server_info)
        return Reply(200, {"jsonrpc": "2.0", "id": request_id, "result": result})
