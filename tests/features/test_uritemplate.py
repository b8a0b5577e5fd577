"""Matching URIs against RFC 6570 templates (resource templates)."""

from __future__ import annotations

from typing import Any

import pytest

from flask_mcp.features.uritemplate import UriTemplate, is_template


@pytest.mark.parametrize(
    "template,uri,expected",
    [
        ("test://template/{id}/data", "test://template/123/data", {"id": "123"}),
        ("test://template/{id}/data", "test://template/1/2/data", None),
        ("test://template/{id}/data", "test://template//data", None),
        ("app://{a}/{b}", "app://x/y", {"a": "x", "b": "y"}),
        ("app://{q}", "app://hello%20world", {"q": "hello world"}),
        ("app://{x,y}", "app://1,2", {"x": "1", "y": "2"}),
        ("app://{list*}", "app://a,b,c", {"list": ["a", "b", "c"]}),
        ("app://{code:3}", "app://abc", {"code": "abc"}),
        ("app://{code:3}", "app://abcd", None),
        ("file:///{+path}", "file:///etc/hosts", {"path": "etc/hosts"}),
        ("file:///{+path}/meta", "file:///a/b/meta", {"path": "a/b"}),
        ("app://page{#section}", "app://page#intro", {"section": "intro"}),
        ("app://{name}{.ext}", "app://report.pdf", {"name": "report", "ext": "pdf"}),
        ("app://{name}{.ext}", "app://report", {"name": "report"}),
        ("repo://{owner}{/path*}", "repo://ada/src/app.py", {"owner": "ada", "path": ["src", "app.py"]}),
        ("repo://{owner}{/path*}", "repo://ada", {"owner": "ada"}),
        ("search://items{?q,page}", "search://items?page=2&q=red%20shoes", {"q": "red shoes", "page": "2"}),
        ("search://items{?q,page}", "search://items", {}),
        ("search://items{?tag*}", "search://items?tag=a&tag=b", {"tag": ["a", "b"]}),
        ("search://items{?q}{&lang}", "search://items?q=x&lang=en", {"q": "x", "lang": "en"}),
        ("app://fixed", "app://fixed", {}),
        ("app://fixed", "app://fixed/more", None),
    ],
)
def test_a_uri_matches_a_template_with_its_variables(template: str, uri: str, expected: dict[str, Any] | None) -> None:
    assert UriTemplate(template).match(uri) == expected


def test_variables_are_listed_in_order_and_path_and_query_ones_are_optional() -> None:
    template = UriTemplate("repo://{owner}/{name}{/path*}{?ref}")
    assert template.variables == ("owner", "name", "path", "ref")
    assert template.optional == {"path", "ref"}


@pytest.mark.parametrize(
    "template",
    ["app://{a", "app://a}", "app://{;a}", "app://{?a}/b", "app://{a-b}", "app://{a}{a}", "app://{a:0}",
     "app://{=a}"],
)
def test_malformed_or_unsupported_templates_are_refused(template: str) -> None:
    with pytest.raises(ValueError):
        UriTemplate(template)


def test_a_uri_with_an_expression_is_a_template() -> None:
    assert is_template("app://items/{id}")
    assert not is_template("app://items/7")
