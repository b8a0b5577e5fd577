"""The public API did not move when the package was grouped by concern: every
public name of ``flask_mcp`` and ``flask_mcp.auth`` is still there, and every
module that moved still imports from its old path, as the very same module,
with a ``DeprecationWarning`` that names the new one."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import flask_mcp
import flask_mcp.auth
from flask_mcp import MOVED_MODULES, moved_to

PACKAGE = Path(flask_mcp.__file__).parent

#: What ``flask_mcp.auth`` offered when it was one module (auth.py), by name.
AUTH_NAMES = (
    "MAX_TOKEN_LENGTH", "WELL_KNOWN", "AuthenticationRequired", "Authenticator", "AuthorizationServerUnavailable",
    "DetailedRefusal", "FunctionVerifier", "InsufficientScope", "InvalidToken", "MalformedAuthorization",
    "Principal", "TokenVerifier", "VerifierUnavailable", "as_verifier", "challenge", "metadata_url", "permits",
    "register_metadata", "require_scopes", "resource_url", "scope_granted", "token_hash", "validate_scopes",
)


def _forget(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Import ``name`` afresh in this test (the alias warns on first import only)."""
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, loaded)


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_moved_module_imports_from_its_old_path_as_the_same_module_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, old: str
) -> None:
    new = importlib.import_module(f"flask_mcp.{MOVED_MODULES[old]}")
    _forget(monkeypatch, f"flask_mcp.{old}")
    with pytest.warns(DeprecationWarning, match=rf"flask_mcp\.{old} has moved to flask_mcp\.{MOVED_MODULES[old]}"):
        aliased = importlib.import_module(f"flask_mcp.{old}")
    assert aliased is new


def test_the_warning_points_at_the_line_that_imports_the_old_path(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "flask_mcp.verifiers")
    with pytest.warns(DeprecationWarning) as caught:
        from flask_mcp.verifiers import JWTVerifier  # type: ignore[import-not-found]  # the old path, on purpose
    assert caught[0].filename == __file__
    from flask_mcp.auth import verifiers

    assert JWTVerifier is verifiers.JWTVerifier


def test_a_submodule_of_a_moved_package_is_one_module_under_both_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from flask_mcp.auth.oauth.store import OAuthStore

    _forget(monkeypatch, "flask_mcp.oauth")
    with pytest.warns(DeprecationWarning) as caught:
        from flask_mcp.oauth.store import OAuthStore as old  # type: ignore[import-not-found]  # noqa: N813
    assert [str(w.message).split(":")[0] for w in caught] == [
        "flask_mcp.oauth has moved to flask_mcp.auth.oauth",
        "flask_mcp.oauth.store has moved to flask_mcp.auth.oauth.store",
    ]
    assert old is OAuthStore
    assert sys.modules["flask_mcp.oauth.store"] is sys.modules["flask_mcp.auth.oauth.store"]


def test_every_moved_module_exists_at_its_new_path_and_nothing_is_left_at_the_old_one() -> None:
    for old, new in MOVED_MODULES.items():
        new_path = PACKAGE.joinpath(*new.split("."))
        assert new_path.with_suffix(".py").is_file() or (new_path / "__init__.py").is_file(), new
        old_path = PACKAGE / old
        assert not old_path.with_suffix(".py").exists() and not old_path.exists(), f"{old} would shadow the alias"


def test_only_moved_paths_are_answered() -> None:
    assert moved_to("flask_mcp.tools") == "flask_mcp.features.tools"
    assert moved_to("flask_mcp.oauth.server") == "flask_mcp.auth.oauth.server"
    assert moved_to("flask_mcp.toolsmith") is None  # a prefix of a name is not the name
    assert moved_to("flask_mcp.auth") is None
    assert moved_to("flask_mcp.telemetry") is None  # the module became a package of the same name
    assert moved_to("tools") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("flask_mcp.no_such_module")


def test_every_public_name_of_flask_mcp_is_still_importable_from_it() -> None:
    for name in flask_mcp.__all__:
        assert getattr(flask_mcp, name) is not None, name


def test_flask_mcp_auth_keeps_every_name_it_had_as_a_module() -> None:
    missing = [name for name in AUTH_NAMES if not hasattr(flask_mcp.auth, name)]
    assert missing == []
    assert set(AUTH_NAMES) <= set(flask_mcp.auth.__all__)
