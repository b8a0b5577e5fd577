"""``flask mcp preview ui://...``: an MCP App view in a local browser page,
framed by a minimal MCP Apps host, while it is being built.

Two small HTTP servers on loopback: the host page on one port, the view on
another, so the view runs on an origin of its own as hosts frame it (with
the Content-Security-Policy its ``_meta.ui.csp`` asks for). The host page
speaks the MCP Apps postMessage protocol with the view (``ui/initialize``,
``ui/notifications/tool-input`` and ``tool-result``, size changes) and
proxies the view's ``tools/call`` and ``resources/read`` to the app's own
endpoint, in this process, through the real protocol path.
"""

from __future__ import annotations

import json
import signal
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from ..features.apps import UI_MIME_TYPE
from .calling import arguments_options, find_tool, parse_arguments
from .endpoint import Caller, Endpoint, ProtocolFailure, caller_options, package_version

#: The largest request body the host page may send (a tool's arguments).
MAX_BODY = 4 * 1024 * 1024
#: What a view may do when its ``_meta.ui.csp`` asks for nothing more.
_BASE_CSP = {
    "default-src": ["'none'"],
    "script-src": ["'self'", "'unsafe-inline'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'", "data:"],
    "media-src": ["'self'", "data:"],
    "connect-src": ["'none'"],
    "frame-src": ["'none'"],
    "base-uri": ["'self'"],
}


def view_csp(ui: dict[str, Any]) -> str:
    """The Content-Security-Policy a host applies to a view with ``_meta.ui``:
    deny by default, plus the domains its ``csp`` declares."""
    csp = ui.get("csp") or {}
    policy = {name: list(sources) for name, sources in _BASE_CSP.items()}

    def allow(directives: tuple[str, ...], domains: Any) -> None:
        for directive in directives:
            for domain in domains or ():
                policy[directive] = [s for s in policy[directive] if s != "'none'"] + [str(domain)]

    allow(("connect-src",), csp.get("connectDomains"))
    allow(("script-src", "style-src", "img-src", "font-src", "media-src"), csp.get("resourceDomains"))
    allow(("frame-src",), csp.get("frameDomains"))
    allow(("base-uri",), csp.get("baseUriDomains"))
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in policy.items())


def _origin(server: Any) -> str:
    """``http://127.0.0.1:PORT`` of a server listening on IPv4 loopback."""
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


class PreviewServer:
    """The host page and the view, each on its own loopback port."""

    def __init__(self, app: Flask, uri: str, *, caller: Caller | None = None, host: str = "127.0.0.1",
                 port: int = 0, call: dict[str, Any] | None = None) -> None:
        self.endpoint = Endpoint(app, caller=caller)
        self.uri = uri
        self.call = call
        self.read_view()  # fail now, not in the browser, when there is no such view
        self.host_server = ThreadingHTTPServer((host, port), _handler(self, "host"))
        self.view_server = ThreadingHTTPServer((host, 0), _handler(self, "view"))
        for server in (self.host_server, self.view_server):
            server.daemon_threads = True

    @property
    def url(self) -> str:
        return _origin(self.host_server) + "/"

    @property
    def host_origin(self) -> str:
        return _origin(self.host_server)

    @property
    def view_url(self) -> str:
        return _origin(self.view_server) + "/view"

    def read_view(self) -> tuple[str, dict[str, Any]]:
        """The view's HTML and ``_meta.ui``, read as a host reads it (every
        page load reads it again, so a reload shows the latest template)."""
        result = self.endpoint.request("resources/read", {"uri": self.uri})
        for item in result.get("contents") or []:
            if item.get("uri") == self.uri and "text" in item:
                if item.get("mimeType") != UI_MIME_TYPE:
                    raise ProtocolFailure(f"{self.uri} is {item.get('mimeType')!r}, not an MCP App view "
                                          f"({UI_MIME_TYPE}); declare it with @mcp.ui_resource")
                return str(item["text"]), dict((item.get("_meta") or {}).get("ui") or {})
        raise ProtocolFailure(f"resources/read {self.uri}: no text content came back")

    def host_page(self) -> str:
        tools = self.endpoint.list_all("tools/list", "tools")
        linked = [t["name"] for t in tools if ((t.get("_meta") or {}).get("ui") or {}).get("resourceUri") == self.uri]
        config = {
            "uri": self.uri,
            "viewUrl": self.view_url,
            "hostInfo": {"name": "flask-mcp preview", "version": package_version()},
            "tools": [{"name": t["name"], "inputSchema": t.get("inputSchema") or {}} for t in tools],
            "linkedTools": linked,
            "call": self.call,
        }
        template = resources.files(__package__).joinpath("preview_host.html").read_text(encoding="utf-8")
        return template.replace("/*CONFIG*/null", json.dumps(config).replace("</", "<\\/"))

    def rpc(self, body: Any) -> dict[str, Any]:
        """A request the host page forwards: ``tools/call`` (from the view or
        the page's own form) or ``resources/read``, answered as the endpoint
        answered it (``{"result": ...}`` or ``{"error": ...}``)."""
        if not isinstance(body, dict) or body.get("method") not in ("tools/call", "resources/read"):
            return {"error": {"code": -32601, "message": "the preview host forwards tools/call and resources/read"}}
        params: dict[str, Any] = body["params"] if isinstance(body.get("params"), dict) else {}
        client = self.endpoint.client()
        if body["method"] == "tools/call" and body.get("from") == "view":
            refusal = self._invisible_to_apps(str(params.get("name")), client)
            if refusal:
                return {"error": {"code": -32602, "message": refusal}}
        if body["method"] == "tools/call":
            client.list_tools()  # the client learns the tools' schemas (for their Mcp-Param-* headers)
        response = client.request(body["method"], params)
        try:
            return {"result": self.endpoint.result(response, body["method"])}
        except ProtocolFailure:
            # A JSON-RPC error goes back to the view as it came; an HTTP refusal as the failure's message.
            answers = [m for m in response.messages if "error" in m and "method" not in m]
            if response.status_code == 200 and answers:
                return {"error": answers[-1]["error"]}
            raise

    def _invisible_to_apps(self, name: str, client: Any) -> str | None:
        """Why a view may not call ``name`` (its visibility leaves out "app"), if so."""
        for tool in self.endpoint.list_all("tools/list", "tools", client):
            if tool["name"] == name:
                visibility = ((tool.get("_meta") or {}).get("ui") or {}).get("visibility")
                if visibility is not None and "app" not in visibility:
                    return f"the tool {name!r} is not visible to apps (visibility {visibility})"
        return None

    def serve_forever(self) -> None:
        """Serve until interrupted (Ctrl-C), then close both servers."""
        thread = threading.Thread(target=self.view_server.serve_forever, name="mcp-preview-view", daemon=True)
        thread.start()
        try:
            self.host_server.serve_forever()
        finally:
            self.view_server.shutdown()
            thread.join()
            self.close()

    def close(self) -> None:
        self.host_server.server_close()
        self.view_server.server_close()
        self.endpoint.close()


def _handler(preview: PreviewServer, role: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "flask-mcp-preview"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal is the developer's
            pass

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _text(self, status: int, text: str) -> None:
            self._send(status, text.encode(), "text/plain; charset=utf-8")

        def _own_host(self) -> bool:
            """Only requests naming this server (no DNS rebinding onto loopback)."""
            if self.headers.get("Host") == _origin(self.server).removeprefix("http://"):
                return True
            self._text(403, "This preview answers requests for its own address only.")
            return False

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if not self._own_host():
                return
            path = self.path.split("?", 1)[0]
            try:
                if role == "host" and path == "/":
                    self._send(200, preview.host_page().encode(), "text/html; charset=utf-8")
                elif role == "view" and path == "/view":
                    html, ui = preview.read_view()
                    self._send(200, html.encode(), "text/html; charset=utf-8",
                               {"Content-Security-Policy": view_csp(ui)})
                elif path == "/favicon.ico":  # browsers ask; no console error for a missing one
                    self._send(204, b"", "image/x-icon")
                else:
                    self._text(404, "Not found.")
            except click.ClickException as exc:
                self._text(502, exc.format_message())

        def do_POST(self) -> None:  # noqa: N802
            if not self._own_host():
                return
            if role != "host" or self.path != "/rpc":
                self._text(404, "Not found.")
                return
            # Only the host page may forward requests: not another site open in the browser.
            if self.headers.get("Origin") != preview.host_origin:
                self._text(403, "Requests come from the preview page only.")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if self.headers.get_content_type() != "application/json" or not 0 < length <= MAX_BODY:
                self._text(415, "Send a JSON body of at most 4 MiB.")
                return
            try:
                body = json.loads(self.rfile.read(length))
                answer = preview.rpc(body)
            except ValueError:
                answer = {"error": {"code": -32700, "message": "the body is not JSON"}}
            except click.ClickException as exc:
                answer = {"error": {"code": -32603, "message": exc.format_message()}}
            self._send(200, json.dumps(answer).encode(), "application/json")

    return Handler


@click.command("preview")
@click.argument("uri")
@click.option("--tool", "tool_name", metavar="TOOL",
              help="Call this tool when the view is ready and hand it the result (arguments as for 'call').")
@arguments_options
@click.option("--host", default="127.0.0.1", show_default=True, help="The loopback address to serve on (127.x.x.x).")
@click.option("--port", default=0, type=click.IntRange(0, 65535), help="The host page's port (default: any free one).")
@click.option("--no-browser", is_flag=True, help="Print the page's URL instead of opening a browser.")
@caller_options
@with_appcontext
def preview_command(uri: str, tool_name: str | None, pairs: tuple[str, ...], json_text: str | None, host: str,
                    port: int, no_browser: bool, caller: Caller) -> None:
    """Show an MCP App view (ui://...) in a browser, framed by a minimal host.

    The page can call the tools linked to the view and hand their results to
    it; the view's own tool calls reach this app's tools. Ctrl-C stops it.
    """
    if not uri.startswith("ui://"):
        raise click.BadParameter("an MCP App view's URI starts with ui://", param_hint="URI")
    if not host.startswith("127."):
        raise click.BadParameter("the preview serves on an IPv4 loopback address only (127.x.x.x)",
                                 param_hint="--host")
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    call = None
    if tool_name is not None:
        endpoint = Endpoint(app, caller=caller)
        tools = endpoint.list_all("tools/list", "tools")
        tool = find_tool(tool_name, tools)
        if not tool:
            known = ", ".join(sorted(t["name"] for t in tools)) or "none"
            raise click.BadParameter(f"no tool named {tool_name!r} is listed (tools: {known})", param_hint="--tool")
        call = {"name": tool_name, "arguments": parse_arguments(pairs, json_text, tool.get("inputSchema") or {})}
    elif pairs or json_text is not None:
        raise click.BadParameter("arguments need --tool", param_hint="[KEY=VALUE]...")
    try:
        preview = PreviewServer(app, uri, caller=caller, host=host, port=port, call=call)
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from None
    main_thread = threading.current_thread() is threading.main_thread()
    # Stopped by a process manager (SIGTERM): as cleanly as by Ctrl-C.
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    click.echo(f"Previewing {uri} at {preview.url} (Ctrl-C to stop)")
    if not no_browser and not webbrowser.open(preview.url):
        click.echo("No browser could be started here: open the address above in one.", err=True)
    try:
        preview.serve_forever()
    except KeyboardInterrupt:
        click.echo("Stopped.")
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
