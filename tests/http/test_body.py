"""The POST body within both limits (flask_mcp/http/body.py): Flask's
``MAX_CONTENT_LENGTH``, from the config or set for one request, is honoured
on the shortcut and with it off, and a request class with a property of its
own is asked; the shortcut is on with the Flask installed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask, Request, request
from werkzeug.test import TestResponse

from flask_mcp import MCP
from flask_mcp.http import body
from flask_mcp.http.body import flask_limit

V = "2026-07-28"
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V,
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}
HEADERS = {"MCP-Protocol-Version": V, "Mcp-Method": "server/discover",
           "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TERMINATED = {"wsgi.input_terminated": True}  # what gunicorn sets: the view may read wsgi.input itself
PER_REQUEST = getattr(Request.max_content_length, "fset", None) is not None  # Flask 3.1 on


def build_app(**config: Any) -> Flask:
    app = Flask("body")
    app.config.update(config)
    MCP(app, name="body")
    return app


def post(app: Flask) -> TestResponse:
    return app.test_client().post("/mcp", data=json.dumps(DISCOVER), headers=HEADERS, environ_overrides=TERMINATED)


@pytest.fixture(params=[True, False], ids=["shortcut", "property"])
def shortcut(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(body, "_SHORTCUT", body._SHORTCUT and request.param)
    return bool(request.param)


def test_the_shortcut_is_on_with_this_flask() -> None:
    assert body._SHORTCUT  # if a Flask upgrade turns this off, the tests below say what differs


def test_without_a_limit_the_body_is_read(shortcut: bool) -> None:
    response = post(build_app())
    assert response.status_code == 200
    assert response.get_json()["result"]["resultType"] == "complete"


def test_flasks_configured_limit_is_a_413(shortcut: bool) -> None:
    response = post(build_app(MAX_CONTENT_LENGTH=100))
    assert response.status_code == 413
    assert response.get_json()["error"]["message"]


@pytest.mark.skipif(not PER_REQUEST, reason="Flask 3.1 made max_content_length per request")
def test_a_limit_set_for_one_request_is_a_413(shortcut: bool) -> None:
    app = build_app(MAX_CONTENT_LENGTH=10_000)
    app.before_request(lambda: setattr(request, "max_content_length", 100))
    assert post(app).status_code == 413


@pytest.mark.skipif(not PER_REQUEST, reason="Flask 3.1 made max_content_length per request")
def test_a_limit_lifted_for_one_request_lets_the_body_through(shortcut: bool) -> None:
    app = build_app(MAX_CONTENT_LENGTH=100)
    app.before_request(lambda: setattr(request, "max_content_length", 10_000))
    assert post(app).status_code == 200


def test_a_request_class_with_its_own_limit_is_asked(shortcut: bool) -> None:
    class SmallRequests(Request):
        @property
        def max_content_length(self) -> int | None:
            return 100

        @max_content_length.setter
        def max_content_length(self, value: int | None) -> None:
            pass

    app = build_app()
    app.request_class = SmallRequests
    assert post(app).status_code == 413


@pytest.mark.parametrize("config", [None, 0, 100, 5_000_000])
def test_the_shortcut_answers_what_flask_does(config: int | None) -> None:
    app = Flask("limits")
    app.config["MAX_CONTENT_LENGTH"] = config
    with app.test_request_context(method="POST"):
        req = request._get_current_object()  # type: ignore[attr-defined]
        assert flask_limit(req, app) == req.max_content_length == config
        if PER_REQUEST:
            req.max_content_length = 7
            assert flask_limit(req, app) == req.max_content_length == 7
