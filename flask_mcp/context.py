"""The per-call context a tool receives when it asks for one (a parameter
annotated ``Context``): who is calling, over which revision, with what."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

from flask import current_app
from werkzeug.local import LocalProxy

from .asking import ElicitResult, ask
from .auth.accounts import resolve_account
from .protocol.errors import MissingClientCapability
from .protocol.input_requests import InputRequest
from .protocol.meta import LOG_LEVELS
from .protocol.request_info import RequestCancelled, RequestInfo, log_level_reaches
from .protocol.session import Session

if TYPE_CHECKING:
    from .auth.tokens import Principal

logger = logging.getLogger("flask_mcp")

_current_request: ContextVar[RequestInfo | None] = ContextVar("flask_mcp_request", default=None)
#: The same variable, for the tool-call hot path to set and reset directly
#: (:class:`serving` costs three Python calls per tool call).
current_request_var = _current_request


class serving:  # noqa: N801 - used like a function: ``with serving(request):``
    """Make ``request`` the current MCP request while a tool runs (a class: a
    generator-based context manager costs more, on every tool call)."""

    __slots__ = ("_request", "_token")

    def __init__(self, request: RequestInfo) -> None:
        self._request = request

    def __enter__(self) -> None:
        self._token = _current_request.set(self._request)

    def __exit__(self, *exc_info: object) -> None:
        _current_request.reset(self._token)


def _session() -> Session | None:
    request = _current_request.get()
    return request.session if request is not None else None


#: The legacy session of the MCP request being served (falsy on 2026-07-28
#: requests and outside a tool call). Its ``data`` dict is the app's own and is
#: saved to the session backend when a tool changes it.
current_session = cast(Session, LocalProxy(_session))


class Context:
    """Request information for tools and ``@mcp.instructions`` functions."""

    def __init__(self, request: RequestInfo) -> None:
        self._request = request
        self._last_progress: float | None = None
        self._asked = 0
        self._user: Any = None
        self._user_looked_up = False

    @property
    def request_id(self) -> str | int | None:
        return self._request.request_id

    @property
    def method(self) -> str:
        return self._request.method

    @property
    def protocol_version(self) -> str:
        """The revision this request speaks, e.g. ``"2026-07-28"``."""
        return self._request.revision.version

    @property
    def stateless(self) -> bool:
        """True for 2026-07-28 requests (no session)."""
        return self._request.revision.stateless

    @property
    def client_info(self) -> dict[str, Any]:
        """The client's ``name``/``version`` (display only; do not branch on it)."""
        return dict(self._request.client_info or {})

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return dict(self._request.client_capabilities)

    @property
    def headers(self) -> Mapping[str, str]:
        """The HTTP request headers, keyed by lower-case name."""
        return self._request.headers

    @property
    def session(self) -> Session | None:
        """The legacy session, or ``None`` on the stateless revision."""
        return self._request.session

    @property
    def session_id(self) -> str | None:
        session = self._request.session
        return session.id if session else None

    @property
    def progress_token(self) -> str | int | None:
        return self._request.progress_token

    @property
    def meta(self) -> dict[str, Any]:
        """The request's ``params._meta`` as sent."""
        meta = self._request.params.get("_meta")
        return dict(meta) if isinstance(meta, dict) else {}

    @property
    def principal(self) -> Principal | None:
        """The authenticated caller (subject, scopes, claims); ``None`` when ``MCP_AUTH`` is off."""
        return cast("Principal | None", self._request.auth)

    @property
    def user(self) -> Any:
        """The app's user for the caller: what ``@mcp.verify_token`` returned or
        ``@mcp.user_loader`` loaded (once per request, right after the token was
        checked); ``None`` without either, or when ``MCP_AUTH`` is off. With
        Flask-Login it is ``current_user`` too."""
        principal = self._request.auth
        if principal is None:
            return None
        user = getattr(principal, "user", None)
        if user is None and not self._user_looked_up:  # a task on a Celery worker: loaded here
            self._user_looked_up = True
            authenticator = current_app.extensions["mcp"].authenticator
            if authenticator is not None:
                self._user = authenticator.load_user(principal)
        return user if user is not None else self._user

    @property
    def access_token(self) -> str | None:
        """The caller's bearer token, for tools that check or forward it themselves."""
        principal = self._request.auth
        return getattr(principal, "token", None) or None

    @property
    def account(self) -> str | None:
        """The account this call acts for: ``_meta["com.flask-mcp/account"]``, else an
        ``account_id`` argument, else the ``X-Account-Id`` header (``MCP_ACCOUNT_HEADER``).
        It is the client's claim: check ``principal`` may act for it."""
        return resolve_account(self._request, current_app.extensions["mcp"].settings.account_header)

    @property
    def cancelled(self) -> bool:
        """Whether the client cancelled this call (2026-07-28: it closed the
        stream; legacy: ``notifications/cancelled``, from any worker)."""
        return self._request.is_cancelled()

    def check_cancelled(self) -> None:
        """Stop here if the call was cancelled (nothing more is sent for it).
        Every progress, log and question call checks this too."""
        if self._request.is_cancelled():
            raise RequestCancelled()

    def has_client_capability(self, name: str) -> bool:
        return name in self._request.client_capabilities

    def require_client_capability(self, **required: Any) -> None:
        """Stop unless the client declared these capabilities, e.g.
        ``ctx.require_client_capability(sampling={})``: a 2026-07-28 client gets
        ``-32021``, a legacy client an ``isError`` result."""
        missing = {k: v for k, v in required.items() if k not in self._request.client_capabilities}
        if missing:
            raise MissingClientCapability(missing)

    # ------------------------------------------------------------------ tasks

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as (the tasks extension), else ``None``."""
        task = self._request.task
        return task.task_id if task is not None else None

    def start_task(self, status_message: str | None = None) -> bool:
        """Begin this call's task now (a tool declared ``task_start="explicit"``):
        the client gets its ``CreateTaskResult`` and the rest of the call runs in
        the background. Questions asked before this go back in the ``tools/call``
        itself (multi round-trip), later ones through the task. ``False`` (and
        nothing changes) when the call does not run as a task: the client did not
        declare the extension, or the revision has none."""
        task = self._request.task
        if task is None:
            return False
        self.check_cancelled()
        task.start(status_message)
        return True

    def set_task_status(self, message: str | None) -> None:
        """Set the task's ``statusMessage`` (what ``tasks/get`` shows); nothing
        when the call does not run as a task."""
        task = self._request.task
        if task is not None:
            self.check_cancelled()
            task.set_status_message(message)

    def close_stream(self, retry_ms: int | None = None) -> bool:
        """Let this call's response connection go while the call goes on (a
        2025-11-25 session answered on an event stream): the client reconnects
        after ``retry_ms`` (default ``MCP_SSE_RETRY_MS``) with ``Last-Event-ID``,
        on any worker, and receives everything sent meanwhile and the result.
        Frees the connection during long work. ``False`` where a stream cannot
        be resumed (other revisions, a JSON answer): nothing changes then."""
        self.check_cancelled()
        return self._request.end_connection(retry_ms)

    # ------------------------------------------------------------------ notifications

    def log(self, level: str, data: Any, *, logger_name: str | None = None) -> None:
        """Send a log message to the client (``notifications/message``) if it asked
        for this level: a legacy session's ``logging/setLevel`` (nothing before
        it), or a 2026-07-28 request's ``_meta`` logLevel (no logs without it).

        ``data`` is any JSON value; never put secrets or personal data in it.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        self.check_cancelled()
        if not log_level_reaches(level, self._request.log_threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name:
            params["logger"] = logger_name
        self._request.emit({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    def debug(self, data: Any) -> None:
        self.log("debug", data)

    def info(self, data: Any) -> None:
        self.log("info", data)

    def warning(self, data: Any) -> None:
        self.log("warning", data)

    def error(self, data: Any) -> None:
        self.log("error", data)

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the client how far the call has got, if it asked (a ``progressToken``).

        ``progress`` must increase from one report to the next; a report that
        does not is dropped (and logged on the server).
        """
        self.check_cancelled()
        token = self._request.progress_token
        if token is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            logger.warning("Dropped a progress report that did not increase (%s after %s)",
                           progress, self._last_progress)
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._request.emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    # ------------------------------------------------------------------ asking the client

    def elicitation(self, message: str, schema: dict[str, Any], *, key: str | None = None) -> InputRequest:
        """A question for the person (form mode); pass it to :meth:`ask`.

        ``schema`` is a flat object schema of primitive properties.
        """
        params = {"mode": "form", "message": message, "requestedSchema": schema}
        return InputRequest(key or self._next_key("elicitation"), "elicitation/create", params)

    def sampling(
        self,
        messages: str | Sequence[dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
        **extra: Any,
    ) -> InputRequest:
        """A completion request for the client's model; pass it to :meth:`ask`.

        ``messages`` is a prompt string or a list of ``{"role", "content"}`` messages;
        ``extra`` holds further ``sampling/createMessage`` params (``modelPreferences``...).
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": list(messages), "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        return InputRequest(key or self._next_key("sampling"), "sampling/createMessage", params)

    def roots(self, *, key: str | None = None) -> InputRequest:
        """A request for the client's roots; pass it to :meth:`ask`."""
        return InputRequest(key or self._next_key("roots"), "roots/list", {})

    def ask(self, *requests: InputRequest) -> list[Any]:
        """Ask the client, and return the answers in order: an :class:`ElicitResult`,
        a ``sampling/createMessage`` result (a dict), or a list of roots.

        Over 2026-07-28 the call ends here with an ``input_required`` result until
        the client retries with every answer; the tool then runs again from the
        start, so code before ``ask`` must be safe to repeat. Over a legacy session
        the questions go out on the call's event stream and the answers come back
        (through the session backend) to this call, which waits at most
        ``MCP_CLIENT_TIMEOUT`` seconds. A client that did not declare the needed
        capability gets ``-32021`` (2026-07-28) or an ``isError`` result.
        """
        self.check_cancelled()
        return ask(self._request, requests, timeout=current_app.extensions["mcp"].settings.client_timeout)

    def elicit(self, message: str, schema: dict[str, Any], *, key: str | None = None) -> ElicitResult:
        """Ask the person a question (see :meth:`ask`)."""
        result: ElicitResult = self.ask(self.elicitation(message, schema, key=key))[0]
        return result

    def sample(self, messages: str | Sequence[dict[str, Any]], *, max_tokens: int, **options: Any) -> dict[str, Any]:
        """Ask the client's model for a completion (see :meth:`ask` and :meth:`sampling`)."""
        result: dict[str, Any] = self.ask(self.sampling(messages, max_tokens=max_tokens, **options))[0]
        return result

    def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (see :meth:`ask`)."""
        result: list[dict[str, Any]] = self.ask(self.roots(key=key))[0]
        return result

    # ------------------------------------------------------------------ the same, awaited (async def tools)

    async def aask(self, *requests: InputRequest) -> list[Any]:
        """:meth:`ask` for an ``async def`` tool: the wait for the client runs on a
        worker thread (with this call's context variables), so the tool's event
        loop is free for its other awaits meanwhile."""
        return await asyncio.to_thread(self.ask, *requests)

    async def aelicit(self, message: str, schema: dict[str, Any], *, key: str | None = None) -> ElicitResult:
        """:meth:`elicit`, awaited (see :meth:`aask`)."""
        result: ElicitResult = (await self.aask(self.elicitation(message, schema, key=key)))[0]
        return result

    async def asample(self, messages: str | Sequence[dict[str, Any]], *, max_tokens: int,
                      **options: Any) -> dict[str, Any]:
        """:meth:`sample`, awaited (see :meth:`aask`)."""
        result: dict[str, Any] = (await self.aask(self.sampling(messages, max_tokens=max_tokens, **options)))[0]
        return result

    async def alist_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """:meth:`list_roots`, awaited (see :meth:`aask`)."""
        result: list[dict[str, Any]] = (await self.aask(self.roots(key=key)))[0]
        return result

    async def areport_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """:meth:`report_progress` from an ``async def`` tool (it waits for nobody:
        the notification is queued for the stream)."""
        self.report_progress(progress, total, message)

    def _next_key(self, kind: str) -> str:
        self._asked += 1
        return f"{kind}_{self._asked}"
