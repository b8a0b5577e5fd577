"""The app's own MCP endpoint, spoken to in-process the way a 2026-07-28
client speaks to it over HTTP: every command goes through the real protocol
path (Flask's test client calls the WSGI app: checks, authentication,
dispatch, result shaping), so what the commands show is what clients get."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import click
from flask import Flask, current_app

from ..auth.tokens import Principal
from ..testing import MCPResponse, MCPTestClient

#: Exit status for a refusal by the protocol (HTTP error, JSON-RPC error).
PROTOCOL_ERROR_EXIT = 3


class ProtocolFailure(click.ClickException):
    """The endpoint refused a request: printed as ``Error: ...``, exit status 3."""

    exit_code = PROTOCOL_ERROR_EXIT


def package_version() -> str:
    try:
        return version("flask-mcp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


@dataclass(frozen=True)
class Caller:
    """Who the commands call as: nobody in particular, the holder of a
    ``token``, or (``--as``) a ``subject`` with ``scopes``."""

    token: str | None = None
    subject: str | None = None
    scopes: tuple[str, ...] = ()


def caller_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--token``, or ``--as`` with ``--scope``: handed to the command as ``caller``."""

    @functools.wraps(fn)
    def command(*args: Any, token: str | None, as_subject: str | None, scopes: tuple[str, ...],
                **kwargs: Any) -> Any:
        if scopes and as_subject is None:
            raise click.BadParameter("goes with --as SUBJECT", param_hint="--scope")
        if token and as_subject is not None:
            raise click.BadParameter("give --token or --as, not both", param_hint="--as")
        return fn(*args, caller=Caller(token, as_subject, scopes), **kwargs)

    command = click.option(
        "--scope", "scopes", multiple=True, metavar="SCOPE", help="A scope the --as principal holds (repeatable).",
    )(command)
    command = click.option(
        "--as", "as_subject", metavar="SUBJECT",
        help="Call as this principal, without a token from the authorization server (MCP_AUTH on).",
    )(command)
    return click.option(
        "--token", metavar="TOKEN",
        help="Access token sent as 'Authorization: Bearer TOKEN' (for apps with MCP_AUTH on).",
    )(command)


class Endpoint:
    """Requests to the current app's endpoint, answers checked and unwrapped."""

    def __init__(self, app: Flask | None = None, *, caller: Caller | None = None) -> None:
        self.app = app or current_app._get_current_object()  # type: ignore[attr-defined]
        if "mcp" not in self.app.extensions:
            raise click.ClickException("This app has no MCP extension (flask_mcp.MCP) initialised.")
        self.state = self.app.extensions["mcp"]
        caller = caller or Caller()
        self.token = caller.token
        self._resources = ExitStack()
        if caller.subject is not None:
            if not self.state.settings.auth:
                raise click.BadParameter("MCP_AUTH is off: every caller is anonymous, so there is no one to be",
                                         param_hint="--as")
            principal = Principal(subject=caller.subject, scopes=frozenset(caller.scopes))
            # A token only this process knows, valid while the command runs.
            self.token = self._resources.enter_context(self.state.authenticator.acting_as(principal))
            context = click.get_current_context(silent=True)
            if context is not None:
                context.call_on_close(self.close)

    def close(self) -> None:
        """Forget the ``--as`` token (if any)."""
        self._resources.close()

    def client(self) -> MCPTestClient:
        """A fresh client (one per thread: a client is not thread-safe)."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return MCPTestClient(
            self.app,
            url=self.state.settings.url_prefix,
            client_info={"name": "flask-mcp-cli", "version": package_version()},
            headers=headers,
        )

    def result(self, response: MCPResponse, what: str) -> dict[str, Any]:
        """The JSON-RPC result, or :class:`ProtocolFailure` saying what went wrong."""
        if response.status_code != 200:
            raise ProtocolFailure(f"{what}: HTTP {response.status_code}: {_http_error(response)}")
        try:
            message = response.message
        except AssertionError:
            raise ProtocolFailure(f"{what}: the endpoint sent no JSON-RPC response") from None
        if "error" in message:
            error = message["error"]
            raise ProtocolFailure(f"{what}: error {error.get('code')}: {error.get('message')}")
        result: dict[str, Any] = message["result"]
        return result

    def request(self, method: str, params: dict[str, Any] | None = None,
                client: MCPTestClient | None = None) -> dict[str, Any]:
        return self.result((client or self.client()).request(method, params), method)

    def list_all(self, method: str, key: str, client: MCPTestClient | None = None) -> list[dict[str, Any]]:
        """Every item of a paginated list method, page after page."""
        client = client or self.client()
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(10_000):  # a server that keeps handing out cursors must not loop forever
            result = self.request(method, {"cursor": cursor} if cursor else {}, client)
            items.extend(result.get(key) or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return items
        raise ProtocolFailure(f"{method}: more than 10000 pages; stopped")


def _http_error(response: MCPResponse) -> str:
    """What an HTTP refusal's body says (JSON-RPC error, OAuth error, or text)."""
    body = response.http.get_data(as_text=True)
    try:
        payload = json.loads(body)
    except ValueError:
        return body.strip()[:500] or response.http.status
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        description = payload.get("error_description") or payload.get("message") or error
        if description:
            return str(description)
    return body[:500]
