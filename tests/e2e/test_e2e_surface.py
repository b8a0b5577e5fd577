"""End to end: the official Python MCP client (``mcp`` 2.3.0) reads the example
bookshop's resources, templates, prompt, completions and MCP App, in both its
2026-07-28 and its legacy (2025-11-25) mode, against real gunicorn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

pytestmark = pytest.mark.e2e

T = TypeVar("T")
HOBBIT = "9780547928227"
#: "auto" discovers the server and speaks 2026-07-28; "legacy" initializes a 2025-11-25 session.
MODES = ["auto", "legacy"]


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_the_client_lists_and_reads_resources_and_templates(example_server: Any, mode: str) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with Client(example_server.url, mode=mode) as client:
            return (
                await client.list_resources(),
                await client.list_resource_templates(),
                await client.read_resource("bookshop://catalogue"),
                await client.read_resource(f"bookshop://books/{HOBBIT}"),
            )

    resources, templates, catalogue, hobbit = run(scenario())

    assert {str(r.uri) for r in resources.resources} == {
        "bookshop://catalogue", "ui://bookshop/shelf", "skill://bookshop-desk/SKILL.md"}
    assert [t.uri_template for t in templates.resource_templates] == ["bookshop://books/{isbn}"]
    assert len(json.loads(catalogue.contents[0].text)) == 4
    assert json.loads(hobbit.contents[0].text)["title"] == "The Hobbit"


@pytest.mark.parametrize("mode", MODES)
def test_the_client_gets_the_prompt_and_completes_its_arguments(example_server: Any, mode: str) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with Client(example_server.url, mode=mode) as client:
            return (
                await client.list_prompts(),
                await client.get_prompt("recommend", {"mood": "classic", "budget_eur": "10"}),
                await client.complete(PromptReference(name="recommend"), {"name": "mood", "value": "c"}),
                await client.complete(ResourceTemplateReference(uri="bookshop://books/{isbn}"),
                                      {"name": "isbn", "value": "9780547"}),
            )

    prompts, prompt, moods, isbns = run(scenario())

    [recommend] = prompts.prompts
    assert recommend.name == "recommend"
    assert [(a.name, a.required) for a in recommend.arguments or []] == [("mood", True), ("budget_eur", False)]
    embedded, question = prompt.messages
    assert embedded.content.type == "resource"
    assert [book["title"] for book in json.loads(embedded.content.resource.text)] == ["Pride and Prejudice"]
    assert "classic" in question.content.text and "10.00 EUR" in question.content.text
    assert moods.completion.values == ["classic"]
    assert isbns.completion.values == [HOBBIT]


@pytest.mark.parametrize("mode", MODES)
def test_the_client_sees_the_app_view_and_the_tool_linked_to_it(example_server: Any, mode: str) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(example_server.url, mode=mode) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            return client.server_capabilities, await client.list_tools(), await client.read_resource(
                "ui://bookshop/shelf"
            )

    capabilities, tools, view = run(scenario())

    extensions = capabilities.model_dump(by_alias=True).get("extensions") or {}
    assert extensions["io.modelcontextprotocol/ui"] == {"mimeTypes": ["text/html;profile=mcp-app"]}
    search = next(tool for tool in tools.tools if tool.name == "search_books")
    assert search.meta is not None and search.meta["ui"] == {"resourceUri": "ui://bookshop/shelf"}
    [html] = view.contents
    assert html.mime_type == "text/html;profile=mcp-app"
    assert html.text.startswith("<!doctype html>")
    assert html.meta is not None and html.meta["ui"]["prefersBorder"] is True
