"""A stdio connection's messages, carried to the app's own endpoint in-process.

``flask mcp stdio`` reads JSON-RPC messages; this module hands each one to
the app exactly as a Streamable HTTP client would (a POST through Flask's
test client, with the headers of the message's era), and hands back every
message the answer carries, as it arrives. So a stdio client gets what an
HTTP client gets, through the same checks, dispatch, sessions and streams:

- a 2026-07-28 request (``_meta`` names the revision) is posted with
  ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and the tool's
  ``Mcp-Param-*`` headers (learnt from ``tools/list``, fetched when a call
  names a tool not seen yet); ``notifications/cancelled`` for it closes its
  connection, which is how HTTP cancels such a request;
- anything else is legacy: ``initialize`` opens a session whose id and
  revision every later message repeats; the server's requests (elicitation,
  sampling, roots) reach the client, whose answers are posted back; the
  session ends (``DELETE``) when the connection does.

Each request runs in a thread of its own, so a long call does not hold up
the others, nor the answers it waits for.
"""

from __future__ import annotations

import itertools
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Flask
from werkzeug.test import TestResponse

from ..protocol import jsonrpc
from ..protocol.errors import InternalError, InvalidRequest
from ..protocol.headers import NAME_PARAM, HeaderParam, collect_header_params
from ..protocol.meta import PROTOCOL_VERSION_KEY
from ..testing import ACCEPT, encode_header_value, parse_sse, sse_event_id

logger = logging.getLogger("flask_mcp.stdio")

Deliver = Callable[[Any], None]
"""Writes one message (or a batch's list of them) to the client."""

#: How many times a legacy stream that the server let go is resumed (GET + Last-Event-ID).
MAX_RESUMPTIONS = 100


@dataclass
class _Flight:
    """A request on its way: the two ends of the connection it is served on
    (closing ours is how its client leaves) and whether it was cancelled."""

    modern: bool
    ours: socket.socket
    theirs: socket.socket
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.cancelled.set()
        self.ours.close()


class Relay:
    """Messages from one client to ``app``'s endpoint at ``url``, answers to ``deliver``."""

    def __init__(self, app: Flask, *, url: str, deliver: Deliver, token: str | None = None) -> None:
        self.app = app
        self.url = url
        self.deliver = deliver
        self.token = token
        self.session_id: str | None = None
        self.negotiated_version: str | None = None
        self._flights: dict[str, _Flight] = {}
        self._threads: set[threading.Thread] = set()
        self._header_params: dict[str, tuple[HeaderParam, ...]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------ from the client

    def handle(self, line: bytes) -> None:
        """One line the client wrote: a request (served in a thread), a
        notification or an answer (posted now), or anything else (the endpoint
        judges it, as it would over HTTP)."""
        raw = line.strip()
        if not raw:
            return
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if isinstance(message, dict) and "id" in message and "method" not in message:
            self._post_quietly(raw, message)  # the client's answer to a server request
        elif isinstance(message, dict) and "method" in message and "id" not in message:
            if not self._cancels_modern_request(message):
                self._post_quietly(raw, message)
        else:
            # Registered before the next line is read: a cancellation right behind it finds it.
            flight = _Flight(is_modern(message), *socket.socketpair())
            key = _key(message.get("id")) if isinstance(message, dict) else None
            if isinstance(message, dict) and message.get("method") == "initialize":
                # Served before the next line is read: what follows needs its session.
                self._serve(raw, message, flight, None)
                return
            thread = threading.Thread(target=self._serve, args=(raw, message, flight, key), name="flask-mcp-stdio",
                                      daemon=True)
            with self._lock:
                if key is not None:
                    self._flights[key] = flight
                self._threads.add(thread)
            thread.start()

    def close(self, grace: float = 0.0) -> None:
        """The client is gone: requests still running get ``grace`` seconds to
        finish, then are cancelled; the legacy session ends."""
        deadline = time.monotonic() + grace
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
        with self._lock:
            flights = list(self._flights.values())
            threads = list(self._threads)
        for flight in flights:
            flight.cancel()
        deadline = time.monotonic() + 2.0  # a cancelled stream ends within the server's probe period
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
        if self.session_id is not None:
            response = self.app.test_client().delete(self.url, headers=self._headers(None))
            response.close()
            self.session_id = None

    # ------------------------------------------------------------------ to the endpoint

    def _serve(self, raw: bytes, message: Any, flight: _Flight, key: str | None) -> None:
        request_id = message.get("id") if isinstance(message, dict) else None
        try:
            self._exchange(raw, self._headers(message), flight, request_id, message)
        except Exception:  # the client must get an answer, never silence
            logger.exception("Unexpected failure while relaying a request")
            if request_id is not None and not flight.cancelled.is_set():
                self.deliver(jsonrpc.error_message(request_id, InternalError("Internal error; see standard error.")))
        finally:
            with self._lock:
                if key is not None and self._flights.get(key) is flight:
                    del self._flights[key]
                self._threads.discard(threading.current_thread())
            flight.ours.close()
            flight.theirs.close()

    def _exchange(self, raw: bytes, headers: dict[str, str], flight: _Flight, request_id: Any, message: Any) -> None:
        method = message.get("method") if isinstance(message, dict) else None
        http = self.app.test_client().post(
            self.url, data=raw, headers=headers, buffered=False,
            environ_overrides={"werkzeug.socket": flight.theirs},
        )
        try:
            if method == "initialize" and http.headers.get("Mcp-Session-Id"):
                self.session_id = http.headers["Mcp-Session-Id"]  # before the client reads the result
            answered, last_event_id = self._relay_answer(http, flight, request_id, method)
        finally:
            http.close()
        # A 2025-11-25 stream the server let go before the answer: resumed, as a client would.
        for _ in range(MAX_RESUMPTIONS):
            if answered or last_event_id is None or flight.cancelled.is_set():
                return
            get_headers = {**self._headers(None), "Accept": "text/event-stream", "Last-Event-ID": last_event_id}
            http = self.app.test_client().get(
                self.url, headers=get_headers, buffered=False, environ_overrides={"werkzeug.socket": flight.theirs},
            )
            try:
                if http.status_code != 200:
                    return
                answered, last_event_id = self._relay_answer(http, flight, request_id, method, last_event_id)
            finally:
                http.close()

    def _relay_answer(self, http: TestResponse, flight: _Flight, request_id: Any, method: str | None,
                      last_event_id: str | None = None) -> tuple[bool, str | None]:
        """Deliver what one HTTP answer carries; whether it held the response
        to ``request_id``, and the last event id seen (for resuming)."""
        answered = False
        if http.mimetype == "text/event-stream":
            for message, event_id in _events(http):
                last_event_id = event_id or last_event_id
                answered = self._pass_on(message, request_id, method, flight) or answered
            return answered, last_event_id
        body = http.get_data()
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        if _is_jsonrpc(payload):
            for message in payload if isinstance(payload, list) else [payload]:
                answered = self._pass_on(message, request_id, method, flight, batch=isinstance(payload, list))
            if isinstance(payload, list) and not flight.cancelled.is_set():
                self.deliver(payload)
            return True, None
        if http.status_code >= 400 and request_id is not None and not flight.cancelled.is_set():
            error_class = InternalError if http.status_code >= 500 else InvalidRequest
            text = _http_text(http, body)
            self.deliver(jsonrpc.error_message(request_id, error_class(f"HTTP {http.status_code}: {text}")))
        return True, None

    def _pass_on(self, message: Any, request_id: Any, method: str | None, flight: _Flight, *,
                 batch: bool = False) -> bool:
        """Learn from one message, then deliver it (a batch is delivered whole
        by the caller); whether it is the response to ``request_id``."""
        is_response = isinstance(message, dict) and "method" not in message and "id" in message
        final = is_response and message.get("id") == request_id
        if final and isinstance(message.get("result"), dict):
            self._learn(method, message["result"])
        if flight.cancelled.is_set() and flight.modern:
            return final  # a cancelled 2026-07-28 request gets nothing more
        if not batch:
            self.deliver(message)
        return final

    def _learn(self, method: str | None, result: dict[str, Any]) -> None:
        if method == "initialize" and isinstance(result.get("protocolVersion"), str):
            self.negotiated_version = result["protocolVersion"]
        elif method == "tools/list":
            self._remember_tools(result.get("tools"))

    def _post_quietly(self, raw: bytes, message: dict[str, Any]) -> None:
        """Post a notification or an answer; what the endpoint says goes to the log."""
        response = self.app.test_client().post(self.url, data=raw, headers=self._headers(message))
        if response.status_code >= 400:
            logger.warning("The endpoint refused %s: HTTP %s: %s", message.get("method") or "an answer",
                           response.status_code, _http_text(response, response.get_data()))
        response.close()

    def _cancels_modern_request(self, notification: dict[str, Any]) -> bool:
        """``notifications/cancelled`` for a 2026-07-28 request in flight: its
        connection is closed (on HTTP the client closes the stream). A legacy
        one goes to the endpoint like any notification."""
        if notification.get("method") != "notifications/cancelled":
            return False
        params = notification.get("params")
        key = _key(params.get("requestId")) if isinstance(params, dict) else None
        with self._lock:
            flight = self._flights.get(key) if key is not None else None
        if flight is not None and flight.modern:
            flight.cancel()
            return True
        # A request that already finished: nothing to do, unless a legacy session may know it.
        return flight is None and (is_modern(notification) or self.session_id is None)

    # ------------------------------------------------------------------ headers

    def _headers(self, message: Any) -> dict[str, str]:
        """What an HTTP client sends with ``message`` (``None``: a GET or DELETE)."""
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if isinstance(message, dict) and is_modern(message):
            params = message.get("params")
            headers.update(self._modern_headers(message, params if isinstance(params, dict) else {}))
        elif not (isinstance(message, dict) and message.get("method") == "initialize"):
            if self.session_id:
                headers["Mcp-Session-Id"] = self.session_id
            if self.negotiated_version and self.negotiated_version != "2025-03-26":
                headers["MCP-Protocol-Version"] = self.negotiated_version
        return headers

    def _modern_headers(self, message: dict[str, Any], params: dict[str, Any]) -> dict[str, str]:
        method = message.get("method")
        headers = {"MCP-Protocol-Version": str(params["_meta"][PROTOCOL_VERSION_KEY])}
        if not isinstance(method, str):
            return headers
        headers["Mcp-Method"] = encode_header_value(method)
        target = params.get(NAME_PARAM.get(method, ""))
        if isinstance(target, str):
            headers["Mcp-Name"] = encode_header_value(target)
        if method == "tools/call" and isinstance(params.get("name"), str):
            arguments = params.get("arguments")
            for param in self._tool_header_params(params["name"], params["_meta"]):
                value = _lookup(arguments, param.path)
                if value is not None:
                    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
                    headers[f"Mcp-Param-{param.header}"] = encode_header_value(text)
        return headers

    def _tool_header_params(self, name: str, meta: dict[str, Any]) -> tuple[HeaderParam, ...]:
        """The tool's ``x-mcp-header`` arguments; a tool not listed yet is
        looked up with ``tools/list``, as the calling client would see it."""
        if name not in self._header_params:
            self._list_tools(meta)
        return self._header_params.get(name, ())

    def _list_tools(self, meta: dict[str, Any]) -> None:
        known = {key: value for key, value in meta.items() if key.startswith("io.modelcontextprotocol/")}
        cursor: str | None = None
        for _ in range(100):
            params: dict[str, Any] = {"_meta": known, **({"cursor": cursor} if cursor else {})}
            message = {"jsonrpc": "2.0", "id": f"flask-mcp-stdio-{next(self._ids)}", "method": "tools/list",
                       "params": params}
            response = self.app.test_client().post(self.url, data=jsonrpc.encode(message),
                                                   headers=self._headers(message))
            result = (response.get_json(silent=True) or {}).get("result")
            response.close()
            if not isinstance(result, dict):
                return
            self._remember_tools(result.get("tools"))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return

    def _remember_tools(self, tools: Any) -> None:
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            try:
                self._header_params[tool["name"]] = collect_header_params(tool.get("inputSchema") or {})
            except (ValueError, AttributeError):  # a schema clients would drop: no headers to send
                self._header_params[tool["name"]] = ()


def is_modern(message: Any) -> bool:
    """Whether a message is of the 2026-07-28 era: its ``_meta`` names the revision."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def _key(request_id: Any) -> str | None:
    """A request id as a dictionary key that keeps ``1`` and ``"1"`` apart."""
    return json.dumps(request_id) if isinstance(request_id, (str, int)) and not isinstance(request_id, bool) else None


def _events(http: TestResponse) -> Iterator[tuple[Any, str | None]]:
    """Each message of an event stream as it arrives, with its event's id."""
    buffer = b""
    for chunk in http.iter_encoded():
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            event_id = sse_event_id(block)
            for data in parse_sse(block + b"\n\n"):
                try:
                    yield json.loads(data), event_id
                except ValueError:
                    logger.warning("The endpoint sent an event that is not JSON: %r", data[:200])


def _is_jsonrpc(payload: Any) -> bool:
    if isinstance(payload, list):
        return bool(payload) and all(isinstance(item, dict) and item.get("jsonrpc") == "2.0" for item in payload)
    return isinstance(payload, dict) and payload.get("jsonrpc") == "2.0"


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    value = arguments
    for step in path:
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _http_text(response: TestResponse, body: bytes) -> str:
    """What a refusal that is not JSON-RPC says (an OAuth error, a text body)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body.decode(errors="replace").strip()[:500] or response.status
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for key in ("error_description", "message", "error"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return body.decode(errors="replace")[:500]
