"""``flask mcp preview``: the host page and the view served on loopback,
fetched over real sockets; the real command run on the example app as a
child process; and, with Chromium, the view rendered in the host page, its
``ui/initialize`` handshake done, a tool result handed to it and a tool
called from it (skipped without Chromium outside CI, failed in CI)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from chromium import Browser, Page, headless_chromium
from cli_app import create_app

from flask_mcp import MCP
from flask_mcp.cli.endpoint import Caller
from flask_mcp.cli.preview import PreviewServer

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0


# ---------------------------------------------------------------------- refusals (click's runner)


def _run(*args: str) -> Any:
    app = create_app()
    mcp: MCP = app.extensions["mcp"].extension

    @mcp.resource("ui://cli/plain", mime_type="text/html")
    def plain() -> str:
        return "<p>not a view</p>"

    return app.test_cli_runner().invoke(args=["mcp", "preview", *args])


def test_preview_refuses_what_is_not_a_view() -> None:
    not_ui = _run("cli://notes", "--no-browser")
    assert not_ui.exit_code == 2 and "an MCP App view's URI starts with ui://" in not_ui.stderr
    unknown = _run("ui://cli/nothing", "--no-browser")
    assert unknown.exit_code == 3 and "Error: resources/read: error" in unknown.stderr
    plain = _run("ui://cli/plain", "--no-browser")
    assert plain.exit_code == 3
    assert "ui://cli/plain is 'text/html', not an MCP App view (text/html;profile=mcp-app)" in plain.stderr


def test_preview_usage_errors() -> None:
    assert "arguments need --tool" in _run("ui://cli/counter", "start=1", "--no-browser").stderr
    assert "no tool named 'nope' is listed" in _run("ui://cli/counter", "--tool", "nope", "--no-browser").stderr
    remote = _run("ui://cli/counter", "--host", "0.0.0.0", "--no-browser")
    assert remote.exit_code == 2 and "loopback address only" in remote.stderr


# ---------------------------------------------------------------------- the servers, over real sockets


@pytest.fixture
def preview() -> Iterator[PreviewServer]:
    server = PreviewServer(create_app(), "ui://cli/counter", call={"name": "count", "arguments": {"start": 41}})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.host_server.shutdown()
    thread.join(timeout=10)
    assert not thread.is_alive()


def _rpc(preview: PreviewServer, body: Any, **headers: str) -> requests.Response:
    return requests.post(preview.url + "rpc", data=json.dumps(body), timeout=TIMEOUT,
                         headers={"Content-Type": "application/json", "Origin": preview.host_origin, **headers})


def test_the_host_page_carries_the_view_the_linked_tools_and_the_call(preview: PreviewServer) -> None:
    page = requests.get(preview.url, timeout=TIMEOUT)
    assert page.status_code == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    found = re.search(r'<script id="config" type="application/json">(.*?)</script>', page.text)
    assert found, page.text
    config = json.loads(found.group(1))
    assert config["uri"] == "ui://cli/counter"
    assert config["viewUrl"] == preview.view_url
    assert config["linkedTools"] == ["count", "model_only"]
    assert config["call"] == {"name": "count", "arguments": {"start": 41}}
    assert preview.view_url.split("/view")[0] != preview.host_origin  # the view has an origin of its own


def test_the_view_is_served_with_the_csp_it_declares(preview: PreviewServer) -> None:
    view = requests.get(preview.view_url, timeout=TIMEOUT)
    assert view.status_code == 200
    assert '<p id="status">no result yet</p>' in view.text
    policy = view.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "connect-src https://api.example.com" in policy
    assert "frame-src 'none'" in policy
    # Each server serves its own pages only.
    assert requests.get(preview.url + "view", timeout=TIMEOUT).status_code == 404
    assert requests.get(preview.view_url.replace("/view", "/"), timeout=TIMEOUT).status_code == 404


def test_tool_calls_are_forwarded_to_the_apps_own_tools(preview: PreviewServer) -> None:
    answer = _rpc(preview, {"method": "tools/call", "params": {"name": "count", "arguments": {"start": 1}},
                            "from": "view"}).json()
    assert answer["result"]["structuredContent"] == {"count": 2}
    read = _rpc(preview, {"method": "resources/read", "params": {"uri": "cli://notes"}, "from": "view"}).json()
    assert read["result"]["contents"][0]["text"] == "notes"
    failed = _rpc(preview, {"method": "tools/call", "params": {"name": "fail", "arguments": {"reason": "x"}}}).json()
    assert failed["result"]["isError"] is True
    unknown = _rpc(preview, {"method": "tools/call", "params": {"name": "nope"}}).json()
    assert unknown["error"]["code"] == -32602


def test_a_view_may_not_call_a_tool_only_the_model_sees(preview: PreviewServer) -> None:
    from_view = _rpc(preview, {"method": "tools/call", "params": {"name": "model_only"}, "from": "view"}).json()
    assert from_view["error"]["message"] == "the tool 'model_only' is not visible to apps (visibility ['model'])"
    from_host = _rpc(preview, {"method": "tools/call", "params": {"name": "model_only"}, "from": "host"}).json()
    assert from_host["result"]["content"][0]["text"] == "model only"


def test_the_preview_answers_its_own_page_only(preview: PreviewServer) -> None:
    assert requests.get(preview.url, headers={"Host": "attacker.example"}, timeout=TIMEOUT).status_code == 403
    body = {"method": "tools/call", "params": {"name": "count"}}
    assert _rpc(preview, body, Origin="https://attacker.example").status_code == 403
    assert _rpc(preview, body, **{"Content-Type": "text/plain"}).status_code == 415
    refused = _rpc(preview, {"method": "tools/list"}).json()
    assert refused["error"]["code"] == -32601
    assert _rpc(preview, "not an object").json()["error"]["code"] == -32601


def test_a_preview_as_a_principal_passes_on_the_servers_refusals() -> None:
    app = create_app(MCP_AUTH=True, MCP_RESOURCE_URL="https://cli.example.com/mcp")
    app.extensions["mcp"].extension.token_verifier(lambda token: None)  # no real token gets in
    preview = PreviewServer(app, "ui://cli/counter", caller=Caller(subject="bob", scopes=("files:read",)))
    thread = threading.Thread(target=preview.serve_forever, daemon=True)
    thread.start()
    try:
        counted = _rpc(preview, {"method": "tools/call", "params": {"name": "count", "arguments": {"start": 1}}})
        assert counted.json()["result"]["structuredContent"] == {"count": 2}
        refused = _rpc(preview, {"method": "tools/call", "params": {"name": "whoami"}}).json()
        assert refused["error"]["code"] == -32603
        assert refused["error"]["message"].startswith("tools/call: HTTP 403: ")
    finally:
        preview.host_server.shutdown()
        thread.join(timeout=10)
    assert app.extensions["mcp"].authenticator._acting == {}  # the --as token died with the preview


# ---------------------------------------------------------------------- the real command, in a browser


@pytest.fixture
def example_preview(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``flask --app example.app mcp preview ui://bookshop/shelf --no-browser``,
    started as a developer starts it (stopped by its PID)."""
    env = {**os.environ, "FLASK_MCP_BACKEND": f"sqlite:///{tmp_path}/mcp.sqlite3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", "example.app", "mcp", "preview", "ui://bookshop/shelf",
         "--no-browser", "--tool", "search_books", "query=tolkien"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"Previewing ui://bookshop/shelf at (http://127\.0\.0\.1:\d+/) \(Ctrl-C to stop\)\n", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")  # type: ignore[union-attr]
        yield match.group(1), process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_the_example_preview_serves_its_page_and_stops_cleanly(example_preview: tuple[str, Any]) -> None:
    url, process = example_preview
    page = requests.get(url, timeout=TIMEOUT)
    assert page.status_code == 200
    assert '"uri": "ui://bookshop/shelf"' in page.text
    assert '"linkedTools": ["search_books"]' in page.text
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=TIMEOUT) == 0
    assert process.stdout.read() == "Stopped.\n"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with headless_chromium() as browser:
        yield browser


def _view_context(page: Page) -> int:
    """The execution context of the document in the page's iframe (the view)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        tree = page.browser.send("Page.getFrameTree", session=page.session)["frameTree"]
        frames = {child["frame"]["id"] for child in tree.get("childFrames", [])}
        page.evaluate("1")  # let the events that came meanwhile in
        for event in reversed(page.browser.events):
            context = event.get("params", {}).get("context", {})
            aux = context.get("auxData", {})
            if (event.get("method") == "Runtime.executionContextCreated" and event.get("sessionId") == page.session
                    and aux.get("frameId") in frames and aux.get("isDefault")):
                return int(context["id"])
        time.sleep(0.05)
    raise AssertionError("the view's document never got an execution context")


def _in_view(page: Page, context: int, expression: str) -> Any:
    result = page.browser.send("Runtime.evaluate", {"expression": expression, "contextId": context,
                                                    "returnByValue": True, "awaitPromise": True},
                               session=page.session)
    if "exceptionDetails" in result:
        raise AssertionError(f"{expression} threw: {result['exceptionDetails']}")
    return result["result"].get("value")


def _wait_in_view(page: Page, context: int, expression: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while True:
        value = _in_view(page, context, expression)
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_the_example_view_renders_in_the_preview_host(chromium: Browser, example_preview: tuple[str, Any]) -> None:
    url, _ = example_preview
    page = chromium.open(url)
    # The handshake, then the search result the command line asked for.
    log = page.wait_until("window.previewLog.includes('→ ui/notifications/tool-result') && window.previewLog")
    assert log[:3] == ["← ui/initialize", "→ result", "← ui/notifications/initialized"]
    context = _view_context(page)
    status = "document.getElementById('status').textContent"
    assert _wait_in_view(page, context, f"{status}.includes('matching') && {status}") == '1 book matching "tolkien"'
    assert _in_view(page, context, "[...document.querySelectorAll('#shelf li strong')].map((e) => e.textContent)") == [
        "The Hobbit"]
    assert _in_view(page, context, "document.body.dataset.host") == "flask-mcp preview"

    # The page's own form calls a tool and hands the view its result.
    page.evaluate("document.getElementById('arguments').value = JSON.stringify({query: 'orwell'});"
                  "document.querySelector('#call-form button').click()")
    assert _wait_in_view(page, context, f"{status}.includes('orwell') && {status}") == '1 book matching "orwell"'

    # The view calls a tool itself: the host forwards it to the app.
    answer = _in_view(page, context, """new Promise((resolve) => {
        window.addEventListener("message", (event) => {
            if (event.data && event.data.id === 9001) resolve(event.data);
        });
        window.parent.postMessage({ jsonrpc: "2.0", id: 9001, method: "tools/call",
                                    params: { name: "get_book", arguments: { isbn: "9780547928227" } } }, "*");
    })""")
    assert answer["result"]["structuredContent"]["title"] == "The Hobbit"
    assert page.errors() == []
