"""What a deployment set that flask-mcp would ignore is named in a warning at
init_app, and only then: MCP_* keys it does not read (with the key it most
likely meant), and FLASK_MCP_* variables the app never loaded (flask-mcp reads
only app.config, as Flask does). MCP_STRICT_CONFIG makes them errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from flask import Flask

from flask_mcp import MCP
from flask_mcp.config import ConfigError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("FLASK_MCP_"):
            monkeypatch.delenv(name)


def make_app(tmp_path: Path, *, load_env: bool) -> Flask:
    app = Flask(__name__, instance_path=str(tmp_path))
    if load_env:
        app.config.from_prefixed_env()
    MCP(app)
    return app


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "flask_mcp" and r.levelno == logging.WARNING]


def test_unloaded_variables_are_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_BACKEND", "memory://")
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    monkeypatch.setenv("FLASK_SECRET_KEY", "not an MCP setting")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        app = make_app(tmp_path, load_env=False)
    [message] = warnings_of(caplog)
    assert message.startswith("FLASK_MCP_BACKEND, FLASK_MCP_PAGE_SIZE are set in the environment")
    assert "app.config.from_prefixed_env()" in message and "FLASK_SECRET_KEY" not in message
    # ... and the warning tells the truth: they were ignored.
    settings = app.extensions["mcp"].settings
    assert settings.page_size == 100 and settings.backend == "sqlite://"


def test_loaded_variables_apply_without_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        app = make_app(tmp_path, load_env=True)
    assert warnings_of(caplog) == []
    assert app.extensions["mcp"].settings.page_size == 7


def test_a_key_the_app_set_itself_is_its_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config["MCP_PAGE_SIZE"] = 5
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        MCP(app)
    assert warnings_of(caplog) == []
    assert app.extensions["mcp"].settings.page_size == 5


def test_nested_variables_are_checked_by_their_top_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_ALLOWED_HOSTS__0", "mcp.example.com")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        make_app(tmp_path, load_env=False)
    [message] = warnings_of(caplog)
    assert message.startswith("FLASK_MCP_ALLOWED_HOSTS__0 is set in the environment") and "ignores it" in message


def test_no_variables_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        make_app(tmp_path, load_env=False)
    assert warnings_of(caplog) == []


# ---------------------------------------------------------------------- unknown MCP_* keys


def test_a_mistyped_key_is_warned_about_once_at_init_app_with_the_key_it_meant(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config.update(MCP_SESION_TIMEOUT=60, MCP_PAGESIZE=5, MCP_ZZZ=1, MCP_PAGE_SIZE=7)
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        MCP(app)
    assert warnings_of(caplog) == [
        "MCP_PAGESIZE is not a flask-mcp setting and is ignored (did you mean MCP_PAGE_SIZE?)",
        "MCP_SESION_TIMEOUT is not a flask-mcp setting and is ignored (did you mean MCP_SESSION_TIMEOUT?)",
        "MCP_ZZZ is not a flask-mcp setting and is ignored",
    ]
    # ... telling the truth: the typo left the setting at its default.
    assert app.extensions["mcp"].settings.session_timeout == 3600
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="flask_mcp"), app.test_client() as client:
        client.get("/mcp/health")
    assert warnings_of(caplog) == []  # at init_app, not per request


def test_the_authorization_server_keys_are_known(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config.update(MCP_OAUTH_ACCESS_TOKEN_TTL=600, MCP_OAUTH_DYNAMIC_REGISTRATION=True)  # MCP_OAUTH off
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        MCP(app)
    assert warnings_of(caplog) == []


def test_strict_config_refuses_to_start_naming_every_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLASK_MCP_BACKEND", "memory://")  # never loaded
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config.update(MCP_STRICT_CONFIG=True, MCP_SESION_TIMEOUT=60)
    with pytest.raises(ConfigError) as raised:
        MCP(app)
    message = str(raised.value)
    assert message.startswith("MCP_STRICT_CONFIG is on: MCP_SESION_TIMEOUT is not a flask-mcp setting")
    assert "(did you mean MCP_SESSION_TIMEOUT?)" in message
    assert "FLASK_MCP_BACKEND is set in the environment" in message
    assert "mcp" not in app.extensions


def test_strict_config_from_the_environment_starts_a_correct_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_STRICT_CONFIG", "true")
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        app = make_app(tmp_path, load_env=True)
    assert app.extensions["mcp"].settings.strict_config is True
    assert warnings_of(caplog) == []


def test_a_variable_that_names_no_setting_gets_the_one_it_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_PAGESIZE", "20")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        make_app(tmp_path, load_env=False)
    assert warnings_of(caplog) == ["FLASK_MCP_PAGESIZE is set in the environment, but MCP_PAGESIZE is not a "
                                   "flask-mcp setting (did you mean FLASK_MCP_PAGE_SIZE?)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):  # loaded, it is an unknown key like any other
        make_app(tmp_path, load_env=True)
    assert warnings_of(caplog) == [
        "MCP_PAGESIZE is not a flask-mcp setting and is ignored (did you mean MCP_PAGE_SIZE?)"]
