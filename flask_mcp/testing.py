"""An MCP client over Flask's test client, for users' tests and ours.

It speaks both eras: ``MCPTestClient(app)`` sends 2026-07-28 requests with
per-request ``_meta`` and the standard headers; ``MCPTestClient(app,
protocol_version="2025-11-25")`` performs the ``initialize`` handshake and
repeats ``Mcp-Session-Id``. Answers may be JSON or an SSE stream.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Flask
from werkzeug.test import TestResponse

from .protocol.headers import NAME_PARAM
from .protocol.versions import STATELESS_VERSIONS

Observer = Callable[[str, str | None, dict[str, Any]], None]
"""Called with (protocol version, request method, message) for every message received."""

ACCEPT = "application/json, text/event-stream"


@dataclass
class MCPResponse:
    """One HTTP answer and the JSON-RPC messages it carried."""

    http: TestResponse
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: How many times the stream was resumed (GET + Last-Event-ID) to complete the answer.
    resumptions: int = 0

    @property
    def status_code(self) -> int:
        return self.http.status_code

    @property
    def headers(self) -> Any:
        return self.http.headers

    @property
    def message(self) -> dict[str, Any]:
        """The final JSON-RPC response (the last message with an id)."""
        for message in reversed(self.messages):
            if "result" in message or "error" in message:
                return dict(message)
        raise AssertionError(f"No JSON-RPC response in the answer (HTTP {self.status_code}): {self.http.data!r}")

    @property
    def result(self) -> dict[str, Any]:
        message = self.message
        if "error" in message:
            raise AssertionError(f"Expected a result, got error {message['error']}")
        return message["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        message = self.message
        if "error" not in message:
            raise AssertionError(f"Expected an error, got result {message.get('result')}")
        return message["error"]  # type: ignore[no-any-return]

    @property
    def notifications(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if "method" in m and "id" not in m]


def parse_sse(data: bytes) -> Iterator[str]:
    """The ``data`` of each event of an SSE body that carries any (a priming
    event's empty data carries no message)."""
    for block in data.decode().replace("\r\n", "\n").split("\n\n"):
        lines = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if lines and any(lines):
            yield "\n".join(lines)


def sse_event_id(block: bytes) -> str | None:
    """The ``id`` field of one SSE event block, if it has one."""
    for line in block.decode().replace("\r\n", "\n").split("\n"):
        if line.startswith("id:"):
            return line[3:].lstrip(" ")
    return None


def encode_header_value(value: str) -> str:
    """Header-safe form of a value (the ``=?base64?...?=`` sentinel when needed)."""
    if value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?base64?"):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


class MCPTestClient:
    """Drive an app's MCP endpoint the way a real client does."""

    def __init__(
        self,
        app: Flask,
        *,
        protocol_version: str = "2026-07-28",
        url: str = "/mcp",
        client_info: dict[str, Any] | None = None,
        capabilities: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.client = app.test_client()
        self.protocol_version = protocol_version
        self.url = url
        self.client_info = client_info or {"name": "flask-mcp-test-client", "version": "1.0"}
        self.capabilities = capabilities or {}
        self.extra_headers = dict(headers or {})
        self.session_id: str | None = None
        self.negotiated_version: str | None = None
        self.observers: list[Observer] = []
        #: Answers the server's requests (elicitation, sampling, roots) arriving on
        #: a legacy event stream: takes the request, returns its ``result``. With
        #: none set, such requests are answered with a JSON-RPC error.
        self.on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        #: Called with each notification (progress, a log message...) as it
        #: arrives on an event stream, before the answer is complete: what a
        #: client shows while a tool runs. ``MCPResponse.notifications`` has them
        #: all afterwards.
        self.on_notification: Callable[[dict[str, Any]], None] | None = None
        #: How many times one request's stream is resumed at most (GET + Last-Event-ID).
        self.max_resumptions = 10
        #: The id of the last SSE event received on the latest request's streams.
        self.last_event_id: str | None = None
        self._ids = itertools.count(1)
        self._tool_schemas: dict[str, dict[str, Any]] = {}

    @property
    def stateless(self) -> bool:
        return self.protocol_version in STATELESS_VERSIONS

    # ------------------------------------------------------------------ high level

    def initialize(self) -> MCPResponse:
        """Legacy handshake: ``initialize``, then ``notifications/initialized``."""
        response = self.request(
            "initialize",
            {
                "protocolVersion": self.protocol_version,
                "capabilities": self.capabilities,
                "clientInfo": self.client_info,
            },
        )
        self.session_id = response.headers.get("Mcp-Session-Id")
        self.negotiated_version = response.result["protocolVersion"]
        self.notify("notifications/initialized")
        return response

    def discover(self) -> MCPResponse:
        return self.request("server/discover")

    def list_tools(self, cursor: str | None = None) -> MCPResponse:
        response = self.request("tools/list", {"cursor": cursor} if cursor else {})
        for tool in response.result.get("tools", []):
            self._tool_schemas[tool["name"]] = tool.get("inputSchema", {})
        return response

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> MCPResponse:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.request("tools/call", params, **kwargs)

    def list_resources(self, cursor: str | None = None, **kwargs: Any) -> MCPResponse:
        """One page of ``resources/list`` (pass the previous ``nextCursor`` for the next)."""
        return self.request("resources/list", {"cursor": cursor} if cursor else {}, **kwargs)

    def list_resource_templates(self, cursor: str | None = None, **kwargs: Any) -> MCPResponse:
        """One page of ``resources/templates/list``."""
        return self.request("resources/templates/list", {"cursor": cursor} if cursor else {}, **kwargs)

    def read_resource(self, uri: str, **kwargs: Any) -> MCPResponse:
        """``resources/read``; on 2026-07-28 the URI is mirrored in ``Mcp-Name``."""
        return self.request("resources/read", {"uri": uri}, **kwargs)

    def list_prompts(self, cursor: str | None = None, **kwargs: Any) -> MCPResponse:
        """One page of ``prompts/list``."""
        return self.request("prompts/list", {"cursor": cursor} if cursor else {}, **kwargs)

    def get_prompt(self, name: str, arguments: dict[str, str] | None = None, **kwargs: Any) -> MCPResponse:
        """``prompts/get`` (arguments are strings on the wire); the name goes in ``Mcp-Name``."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.request("prompts/get", params, **kwargs)

    def complete(
        self,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> MCPResponse:
        """``completion/complete``: ``ref`` as on the wire (``{"type": "ref/prompt",
        "name": ...}`` or ``{"type": "ref/resource", "uri": ...}``), ``argument``
        as ``{"name": ..., "value": ...}``; ``context_arguments`` are the other
        arguments' values so far."""
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        if context_arguments is not None:
            params["context"] = {"arguments": context_arguments}
        return self.request("completion/complete", params, **kwargs)

    def list_skills(self, cursor: str | None = None, **kwargs: Any) -> MCPResponse:
        """One page of ``skills/list`` (the skills extension; pass the previous ``nextCursor`` for the next)."""
        return self.request("skills/list", {"cursor": cursor} if cursor else {}, **kwargs)

    def get_skill(self, uri: str, **kwargs: Any) -> MCPResponse:
        """``skills/get``: the entry of the skill whose ``SKILL.md`` is at ``uri``."""
        return self.request("skills/get", {"uri": uri}, **kwargs)

    def read_directory(self, uri: str, cursor: str | None = None, **kwargs: Any) -> MCPResponse:
        """One page of ``resources/directory/read`` (when the server declares ``directoryRead``)."""
        params: dict[str, Any] = {"uri": uri}
        if cursor:
            params["cursor"] = cursor
        return self.request("resources/directory/read", params, **kwargs)

    def get_task(self, task_id: str, **kwargs: Any) -> MCPResponse:
        """``tasks/get`` (the tasks extension; declare it in ``capabilities``)."""
        return self.request("tasks/get", {"taskId": task_id}, **kwargs)

    def update_task(self, task_id: str, input_responses: dict[str, Any], **kwargs: Any) -> MCPResponse:
        return self.request("tasks/update", {"taskId": task_id, "inputResponses": input_responses}, **kwargs)

    def cancel_task(self, task_id: str, **kwargs: Any) -> MCPResponse:
        return self.request("tasks/cancel", {"taskId": task_id}, **kwargs)

    def delete(self) -> TestResponse:
        """End the session: a DELETE is a request like any other, so it carries
        the client's own headers (a bearer token) and the protocol version."""
        headers = {**self.extra_headers, **self._version_headers()}
        return self.client.delete(self.url, headers=headers)

    # ------------------------------------------------------------------ low level

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: str | int | None = None,
        headers: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> MCPResponse:
        """Send one request with the headers and ``_meta`` its era needs."""
        params = dict(params or {})
        if self.stateless:
            params["_meta"] = {**self.request_meta(), **(meta or {})}
        elif meta:
            params["_meta"] = meta
        message = {"jsonrpc": "2.0", "id": next(self._ids) if id is None else id, "method": method, "params": params}
        return self.post(message, headers={**self.standard_headers(method, params), **(headers or {})})

    def notify(self, method: str, params: dict[str, Any] | None = None) -> MCPResponse:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return self.post(message, headers=self.standard_headers(method, params or {}))

    def request_meta(self) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": self.protocol_version,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": self.client_info,
        }

    def standard_headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        headers = self._version_headers()
        if self.stateless:
            headers["Mcp-Method"] = method
            param = NAME_PARAM.get(method)
            target = params.get(param) if param is not None else None
            if isinstance(target, str):
                headers["Mcp-Name"] = encode_header_value(target)
            if method == "tools/call":
                headers.update(self._param_headers(params))
        return headers

    def _version_headers(self) -> dict[str, str]:
        """What every HTTP request repeats, DELETE included: the version on
        2026-07-28; after a legacy ``initialize``, the session id and the
        negotiated version (2025-03-26 had no version header)."""
        if self.stateless:
            return {"MCP-Protocol-Version": self.protocol_version}
        headers: dict[str, str] = {}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.negotiated_version and self.negotiated_version != "2025-03-26":
            headers["MCP-Protocol-Version"] = self.negotiated_version
        return headers

    def _param_headers(self, params: dict[str, Any]) -> dict[str, str]:
        schema = self._tool_schemas.get(params.get("name", ""))
        if schema is None:
            return {}
        headers: dict[str, str] = {}

        def walk(node: dict[str, Any], value: Any) -> None:
            for key, prop in (node.get("properties") or {}).items():
                sub = value.get(key) if isinstance(value, dict) else None
                if sub is None:
                    continue
                if "x-mcp-header" in prop:
                    text = ("true" if sub else "false") if isinstance(sub, bool) else str(sub)
                    headers[f"Mcp-Param-{prop['x-mcp-header']}"] = encode_header_value(text)
                walk(prop, sub)

        walk(schema, params.get("arguments") or {})
        return headers

    def post(self, body: Any, *, headers: dict[str, str] | None = None, raw: bool = False) -> MCPResponse:
        """POST a message (or raw bytes with ``raw=True``) and parse the answer."""
        all_headers = {"Accept": ACCEPT, "Content-Type": "application/json", **self.extra_headers, **(headers or {})}
        data = body if raw else json.dumps(body)
        http = self.client.post(self.url, data=data, headers=all_headers, buffered=False)
        self.last_event_id = None
        try:
            response = MCPResponse(http, list(self._messages(http)))
        finally:
            http.close()
        self._resume(body, response)
        method = body.get("method") if isinstance(body, dict) else None
        version = self.negotiated_version or self.protocol_version
        for message in response.messages:
            for observer in self.observers:
                observer(version, method, message)
        return response

    def _resume(self, body: Any, response: MCPResponse) -> None:
        """Like a 2025-11-25 client: a stream that ended before the answer to
        our request, after an event id, is resumed with ``GET`` +
        ``Last-Event-ID`` (as often as the server lets the connection go)."""
        request_id = body.get("id") if isinstance(body, dict) and "method" in body else None
        for _ in range(self.max_resumptions):
            answered = any(m.get("id") == request_id and "method" not in m for m in response.messages)
            if request_id is None or answered or self.last_event_id is None:
                return
            headers = {"Accept": "text/event-stream", "Last-Event-ID": self.last_event_id, **self._version_headers()}
            http = self.client.get(self.url, headers={**self.extra_headers, **headers}, buffered=False)
            try:
                if http.status_code != 200:
                    return
                response.messages.extend(self._messages(http))
            finally:
                http.close()
            response.resumptions += 1

    def _messages(self, http: TestResponse) -> Iterator[dict[str, Any]]:
        if http.mimetype == "text/event-stream":
            # Read the stream as it comes (the server may wait for our answers),
            # then keep the whole body on the response for the caller to inspect.
            received: list[bytes] = []
            buffer = b""
            for chunk in http.iter_encoded():
                received.append(chunk)
                buffer += chunk
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    self.last_event_id = sse_event_id(block) or self.last_event_id
                    for data in parse_sse(block + b"\n\n"):
                        for message in _as_list(json.loads(data)):
                            yield message
                            if "method" in message and "id" in message:
                                self._answer_server_request(message)
                            elif "method" in message and self.on_notification is not None:
                                self.on_notification(message)
            http.set_data(b"".join(received))
            return
        body = http.get_data()
        if body and http.mimetype == "application/json":
            yield from _as_list(json.loads(body))

    def _answer_server_request(self, request: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if self.on_request is None:
            answer["error"] = {"code": -32601, "message": "This test client answers no requests."}
        else:
            try:
                answer["result"] = self.on_request(request)
            except Exception as exc:  # the handler's refusal becomes a JSON-RPC error
                answer["error"] = {"code": -32603, "message": str(exc)}
        reply = self.post(answer, headers=self.standard_headers("", {}))
        assert reply.status_code == 202, f"answer to {request['method']} got HTTP {reply.status_code}"


def _as_list(payload: Any) -> list[dict[str, Any]]:
    return payload if isinstance(payload, list) else [payload]
