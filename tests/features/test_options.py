"""The options of tools, resources, views and prompts are declared once
(``flask_mcp/features/options.py``) and every decorator and ``add_*`` method takes
them: a misspelt option fails where it is written, as a signature would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask

from flask_mcp import MCP
from flask_mcp.features.options import ListingOptions, PromptOptions, ResourceOptions, ToolOptions, ViewOptions


def _hello() -> str:
    """Say hello."""
    return "hello"


# Misspelt on purpose: mypy refuses each call already (hence the ignores); the test checks
# that running it is refused too.
REGISTRATIONS: dict[str, Callable[[MCP], Any]] = {
    "tool()": lambda mcp: mcp.tool(nmae="x")(_hello),  # type: ignore[call-overload]
    "add_tool": lambda mcp: mcp.add_tool(_hello, nmae="x"),  # type: ignore[call-arg]
    "resource()": lambda mcp: mcp.resource("app://hello", nmae="x")(_hello),  # type: ignore[call-arg]
    "add_resource": lambda mcp: mcp.add_resource(_hello, "app://hello", nmae="x"),  # type: ignore[call-arg]
    "ui_resource()": lambda mcp: mcp.ui_resource("ui://hello", nmae="x")(_hello),  # type: ignore[call-arg]
    "prompt()": lambda mcp: mcp.prompt(nmae="x")(_hello),  # type: ignore[call-overload]
    "add_prompt": lambda mcp: mcp.add_prompt(_hello, nmae="x"),  # type: ignore[call-arg]
}


@pytest.mark.parametrize("how", REGISTRATIONS)
def test_a_misspelt_option_is_refused_when_registering(how: str) -> None:
    mcp = MCP()
    with pytest.raises(TypeError, match="unexpected keyword argument 'nmae'.*takes .*name"):
        REGISTRATIONS[how](mcp)
    assert len(mcp.tools) == 0 and len(mcp.resources) == 0 and len(mcp.prompts) == 0


def test_every_listed_feature_takes_the_listing_options() -> None:
    shared = set(ListingOptions.__optional_keys__)
    for options in (ToolOptions, PromptOptions, ResourceOptions, ViewOptions):
        assert shared <= options.__optional_keys__, options


def test_the_decorator_and_the_add_method_build_the_same_tool() -> None:
    options: ToolOptions = {
        "name": "greet", "title": "Greet", "annotations": {"readOnlyHint": True}, "ui": "ui://greet",
        "visibility": ["app"], "scopes": ["read"], "meta": {"k": 1},
    }
    decorated, added = MCP(), MCP()
    decorated.tool(**options)(_hello)
    added.add_tool(_hello, **options)
    one, other = decorated.tools.find("greet"), added.tools.find("greet")
    assert one is not None and other is not None
    assert one.definition == other.definition
    assert one.definition["_meta"]["ui"] == {"resourceUri": "ui://greet", "visibility": ["app"]}
    assert one.scopes == ("read",)


def test_a_view_is_served_as_an_mcp_app_with_its_listing_options(tmp_path: Any) -> None:
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config.update(TESTING=True, MCP_BACKEND="memory://")
    mcp = MCP(app)
    mcp.ui_resource("ui://hello", title="Hello", prefers_border=True, ttl_ms=5)(lambda: "<html></html>")
    resource = mcp.resources.get("ui://hello")
    assert resource is not None
    assert resource.definition["mimeType"] == "text/html;profile=mcp-app"
    assert resource.definition["title"] == "Hello"
    assert resource.ttl_ms == 5
    assert resource.ui is not None and resource.ui.prefers_border is True
