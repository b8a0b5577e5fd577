"""End to end: the example bookshop's MCP App (``ui://bookshop/shelf``), read
from the example under real gunicorn and rendered in headless Chromium --
alone, and framed by a minimal MCP Apps host that shakes hands with it and
hands it a real ``search_books`` result.

Chromium is driven by tests/chromium.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from chromium import Browser, headless_chromium

pytestmark = pytest.mark.e2e

TIMEOUT = 20.0
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "ui-e2e", "version": "1"},
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with headless_chromium() as opened:
        yield opened


def _call(example_server: Any, method: str, target: str, **params: Any) -> dict[str, Any]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Mcp-Name": target,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    response = requests.post(example_server.url, json=body, headers=headers, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    return response.json()["result"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def view_html(example_server: Any) -> str:
    """The view, read the way a host reads it: ``resources/read`` over HTTP."""
    [item] = _call(example_server, "resources/read", "ui://bookshop/shelf", uri="ui://bookshop/shelf")["contents"]
    assert item["mimeType"] == "text/html;profile=mcp-app"
    assert item["_meta"]["ui"]["domain"].endswith(".claudemcpcontent.com")
    return item["text"]  # type: ignore[no-any-return]


@pytest.fixture
def write_page(tmp_path: Path) -> Callable[[str, str], str]:
    def write(name: str, html: str) -> str:
        path = tmp_path / name
        path.write_text(html, encoding="utf-8")
        return path.as_uri()

    return write


def test_the_shelf_view_renders_the_catalogue_on_its_own(
    browser: Browser, view_html: str, write_page: Callable[[str, str], str]
) -> None:
    page = browser.open(write_page("shelf.html", view_html))

    assert page.wait_until("document.getElementById('status').textContent") == "4 books on the shelf"
    titles = page.evaluate("[...document.querySelectorAll('#shelf li strong')].map((e) => e.textContent)")
    assert titles == ["Pride and Prejudice", "1984", "The Hobbit", "Crime and Punishment"]
    assert page.evaluate("document.querySelector('#shelf li.sold-out strong').textContent") == "1984"
    assert page.evaluate("document.body.dataset.host") == "none"  # no host frames it
    assert page.errors() == []


def _script_json(value: Any) -> str:
    """JSON to embed in a <script>: a "</" would end the element."""
    return json.dumps(value).replace("</", "<\\/")


HOST_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>test host</title></head>
<body>
<iframe id="view" sandbox="allow-scripts allow-same-origin" style="width: 480px; height: 320px"></iframe>
<script>
  "use strict";
  const toolResult = %(result)s;
  const frame = document.getElementById("view");
  window.received = [];
  const post = (message) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
  window.addEventListener("message", (event) => {
    if (event.source !== frame.contentWindow) return;
    const message = event.data;
    window.received.push(message.method || "response");
    if (message.method === "ui/initialize") {
      post({ id: message.id, result: {
        protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "1.0.0" },
        hostCapabilities: {}, hostContext: { theme: "dark", displayMode: "inline" } } });
    } else if (message.method === "ui/notifications/initialized") {
      post({ method: "ui/notifications/tool-input", params: { arguments: { query: "tolkien" } } });
      post({ method: "ui/notifications/tool-result", params: toolResult });
    }
  });
  frame.srcdoc = %(view)s;
</script>
</body></html>
"""


def test_a_host_hands_the_shelf_view_a_search_result(
    browser: Browser, view_html: str, example_server: Any, write_page: Callable[[str, str], str]
) -> None:
    result = _call(example_server, "tools/call", "search_books", name="search_books", arguments={"query": "tolkien"})
    assert result["structuredContent"]["books"][0]["title"] == "The Hobbit"
    page = browser.open(write_page("host.html", HOST_PAGE % {"result": _script_json(result),
                                                              "view": _script_json(view_html)}))

    view = "document.getElementById('view').contentDocument"
    status = f"({view}?.getElementById('status')?.textContent ?? '')"
    assert page.wait_until(f"{status}.includes('matching')") is True
    assert page.evaluate(status) == '1 book matching "tolkien"'
    assert page.evaluate(f"[...{view}.querySelectorAll('#shelf li strong')].map((e) => e.textContent)") == [
        "The Hobbit"
    ]
    assert page.evaluate(f"{view}.body.dataset.host") == "test-host"
    received = page.wait_until("window.received.includes('ui/notifications/size-changed') && window.received")
    assert received[:2] == ["ui/initialize", "ui/notifications/initialized"]
    assert page.errors() == []
