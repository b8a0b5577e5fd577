"""``flask_mcp/config.py``: the ``MCP_*`` keys, their documentation, the
settings they become and the start-up errors for bad values.

test_extension.py checks that ``init_app`` writes the defaults into
``app.config`` and refuses a handful of bad values; this file holds the whole
table to account: each key documented where the docs read it, each key
reaching the setting named after it, and every validated key refusing a bad
value with a message that names the key, the rule and the value."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from typing import Any

import pytest
from conftest import ROOT
from flask import Flask

from flask_mcp import MCP, config
from flask_mcp.config import DEFAULTS, ConfigError, Settings, load_settings

#: The Sphinx extension that generates the configuration reference from config.py.
REFERENCE_EXTENSION = ROOT / "docs" / "_ext" / "mcp_config_reference.py"


def reference_pattern() -> re.Pattern[str]:
    """The pattern the docs extension reads a key's line with, taken from its
    source (not imported: Sphinx is not a test dependency), so this test and
    the generated page apply one rule."""
    tree = ast.parse(REFERENCE_EXTENSION.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_KEY" for t in node.targets)
                and isinstance(node.value, ast.Call) and isinstance(node.value.args[0], ast.Constant)
                and isinstance(node.value.args[0].value, str)):
            return re.compile(node.value.args[0].value)
    raise AssertionError(f"no _KEY pattern in {REFERENCE_EXTENSION}")


def reference_tables() -> tuple[str, ...]:
    """The tables of config.py the docs extension can show (its ``TABLES``)."""
    tree = ast.parse(REFERENCE_EXTENSION.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TABLES" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return value
    raise AssertionError(f"no TABLES in {REFERENCE_EXTENSION}")


def descriptions(lines: list[str], table: str = "DEFAULTS") -> dict[str, str]:
    """Each key's description as the docs extension reads it: the comment on
    the key's own line inside the ``DEFAULTS = {...}`` block (or ``table``'s) of ``lines``."""
    key_line = reference_pattern()
    start = next(i for i, line in enumerate(lines) if line.startswith((f"{table}:", f"{table} =")))
    described: dict[str, str] = {}
    for line in lines[start + 1:]:
        if line.startswith("}"):
            break
        if match := key_line.match(line):
            described[match["key"]] = (match["comment"] or "").strip()
    return described


def new_app(**config_values: Any) -> Flask:
    app = Flask("config_test")
    app.config.update(MCP_BACKEND="memory://", **config_values)
    return app


# ---------------------------------------------------------------------- documentation


@pytest.mark.parametrize("table", ["DEFAULTS", "OAUTH_DEFAULTS"])
def test_every_key_is_on_a_line_of_its_own_with_a_description(table: str) -> None:
    described = descriptions(inspect.getsourcelines(config)[0], table)
    assert list(described) == list(getattr(config, table)), f"each key of {table} on a line of its own, in order"
    undescribed = [key for key, text in described.items() if len(text) < 10]
    assert undescribed == [], f"add a comment on the line of {undescribed} in flask_mcp/config.py"


def test_a_comment_above_a_key_does_not_describe_it() -> None:
    """What the rule above catches: only the comment on the key's line counts."""
    lines = [
        "DEFAULTS = {\n",
        "    # a comment of its own, above the key\n",
        '    "MCP_A": 1,\n',
        '    "MCP_B": (),  # the key\'s description\n',
        '    "MCP_C": {\n',
        "}\n",
    ]
    assert descriptions(lines) == {"MCP_A": "", "MCP_B": "the key's description", "MCP_C": ""}


# ---------------------------------------------------------------------- defaults and settings

#: A valid value other than the default for every key, and the setting it gives.
NON_DEFAULT: dict[str, tuple[Any, Any]] = {
    "MCP_URL_PREFIX": ("/api/mcp", "/api/mcp"),
    "MCP_NAME": ("orders", "orders"),
    "MCP_VERSION": ("2.1.0", "2.1.0"),
    "MCP_INSTRUCTIONS": ("Look orders up by id.", "Look orders up by id."),
    "MCP_BACKEND": ("memory://", "memory://"),
    "MCP_SESSION_TIMEOUT": (60, 60),
    "MCP_MAX_CONTENT_LENGTH": (2048, 2048),
    "MCP_PAGE_SIZE": (5, 5),
    "MCP_DNS_REBINDING_PROTECTION": (False, False),
    "MCP_ALLOWED_ORIGINS": (["https://a.example"], ("https://a.example",)),
    "MCP_ALLOWED_HOSTS": ("mcp.example, mcp2.example", ("mcp.example", "mcp2.example")),
    "MCP_SSE_HEARTBEAT": (5, 5),
    "MCP_SSE_PROBE_INTERVAL": (2, 2),
    "MCP_STREAM_SHARE": (1, 1.0),
    "MCP_WORKER_THREADS": (8, 8),
    "MCP_CLIENT_TIMEOUT": (30, 30),
    "MCP_SSE_RETRY_MS": (250, 250),
    "MCP_SSE_RETENTION": (60, 60),
    "MCP_SSE_POLL_AFTER": (10, 10),
    "MCP_CACHE_TTL_MS": (0, 0),
    "MCP_CACHE_SCOPE": ("private", "private"),
    "MCP_AUTH": (True, True),
    "MCP_TOKEN_VERIFIER": ("presence", "presence"),
    "MCP_AUTH_SERVERS": ("https://auth.example", ("https://auth.example",)),
    "MCP_AUTH_SCOPES": (["orders:read"], ("orders:read",)),
    "MCP_RESOURCE_URL": ("https://mcp.example/mcp", "https://mcp.example/mcp"),
    "MCP_AUTH_AUDIENCE": ("orders-api", "orders-api"),
    "MCP_INTROSPECTION_URL": ("https://auth.example/introspect", "https://auth.example/introspect"),
    "MCP_INTROSPECTION_CLIENT_ID": ("mcp", "mcp"),
    "MCP_INTROSPECTION_CLIENT_SECRET": ("s3cret", "s3cret"),
    "MCP_JWKS_URL": ("https://auth.example/jwks", "https://auth.example/jwks"),
    "MCP_JWT_ISSUER": ("https://auth.example", "https://auth.example"),
    "MCP_JWT_ALGORITHMS": ("EdDSA", ("EdDSA",)),
    "MCP_AUTH_CACHE_TTL": (0, 0),
    "MCP_AUTH_TIMEOUT": (1, 1),
    "MCP_ACCOUNT_HEADER": ("X-Tenant", "X-Tenant"),
    "MCP_RATE_LIMIT": ("10/minute", "10/minute"),
    "MCP_RATE_LIMIT_STORAGE": ("memory://", "memory://"),
    "MCP_CORS_ORIGINS": (["https://app.example/"], ("https://app.example",)),
    "MCP_MAX_JSON_DEPTH": (8, 8),
    "MCP_MAX_CLIENT_INFO_BYTES": (4096, 4096),
    "MCP_TASK_TTL": (None, None),
    "MCP_TASK_POLL_INTERVAL_MS": (50, 50),
    "MCP_TASK_MAX_RUNNING": (None, None),
    "MCP_TASK_RUNNER": ("celery", "celery"),
    "MCP_SKILLS_DIRECTORY_READ": (True, True),
    "MCP_TELEMETRY": (False, False),
    "MCP_STRICT_CONFIG": (True, True),
}


def setting_name(key: str) -> str:
    """``MCP_PAGE_SIZE`` -> ``page_size``: each key's setting is named after it."""
    return key.removeprefix("MCP_").lower()


def test_every_key_has_a_setting_named_after_it_and_every_setting_a_key() -> None:
    assert sorted(setting_name(key) for key in DEFAULTS) == sorted(f.name for f in dataclasses.fields(Settings))
    assert set(NON_DEFAULT) == set(DEFAULTS), "give a new key a value in NON_DEFAULT"


@pytest.mark.parametrize("key", list(DEFAULTS))
def test_each_key_reaches_its_setting(key: str) -> None:
    value, expected = NON_DEFAULT[key]
    assert value != DEFAULTS[key]
    settings = load_settings({key: value}, {}, "app")
    assert getattr(settings, setting_name(key)) == expected


def test_the_defaults_become_the_settings_and_name_and_version_are_derived() -> None:
    settings = load_settings({}, {}, "shop")
    assert (settings.name, settings.version) == ("shop", "0.0.0")
    for key, default in DEFAULTS.items():
        if default is not None:
            assert getattr(settings, setting_name(key)) == default, key


def test_a_constructor_argument_of_none_leaves_the_configured_value() -> None:
    settings = load_settings({"MCP_NAME": "configured"}, {"MCP_NAME": None, "MCP_VERSION": "9"}, "app")
    assert (settings.name, settings.version) == ("configured", "9")


def test_settings_are_frozen_and_their_repr_keeps_the_client_secret_out() -> None:
    settings = load_settings({"MCP_INTROSPECTION_CLIENT_SECRET": "s3cret"}, {}, "app")
    assert "s3cret" not in repr(settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.page_size = 1  # type: ignore[misc]


def test_cors_origins_join_an_allowed_origins_check_without_replacing_it() -> None:
    def partner(origin: str) -> bool:
        return origin == "https://partner.example"

    settings = load_settings({"MCP_ALLOWED_ORIGINS": partner, "MCP_CORS_ORIGINS": ["https://app.example/"]}, {}, "app")
    allowed = settings.allowed_origins
    assert callable(allowed)
    assert allowed("https://partner.example") and allowed("https://app.example") and allowed("https://app.example/")
    assert not allowed("https://evil.example")


def test_a_wildcard_cors_origin_lets_every_origin_pass() -> None:
    allowed = load_settings({"MCP_CORS_ORIGINS": "*"}, {}, "app").allowed_origins
    assert callable(allowed) and allowed("https://anything.example")


# ---------------------------------------------------------------------- bad values, refused at init_app

#: A value of the wrong type or out of range for every key config.py checks.
BAD: list[tuple[str, Any]] = [
    ("MCP_URL_PREFIX", "/mcp/"),
    ("MCP_NAME", ["orders"]),
    ("MCP_VERSION", 1.0),
    ("MCP_SESSION_TIMEOUT", "3600"),
    ("MCP_MAX_CONTENT_LENGTH", 1023),
    ("MCP_PAGE_SIZE", True),
    ("MCP_ALLOWED_ORIGINS", {"https://a.example": True}),
    ("MCP_ALLOWED_HOSTS", 5),
    ("MCP_SSE_HEARTBEAT", 0.01),
    ("MCP_SSE_PROBE_INTERVAL", None),
    ("MCP_STREAM_SHARE", 1.01),
    ("MCP_WORKER_THREADS", 0.5),
    ("MCP_CLIENT_TIMEOUT", 0),
    ("MCP_SSE_RETRY_MS", -1),
    ("MCP_SSE_RETENTION", 0),
    ("MCP_SSE_POLL_AFTER", 0),
    ("MCP_CACHE_TTL_MS", 1.5j),
    ("MCP_CACHE_SCOPE", "PUBLIC"),
    ("MCP_AUTH", "true"),
    ("MCP_AUTH_SERVERS", ["https://auth.example", "ftp://auth.example"]),
    ("MCP_AUTH_SCOPES", [1]),
    ("MCP_RESOURCE_URL", "mcp.example/mcp"),
    ("MCP_AUTH_AUDIENCE", ""),
    ("MCP_INTROSPECTION_URL", "https://auth.example/introspect#x"),
    ("MCP_INTROSPECTION_CLIENT_ID", 5),
    ("MCP_INTROSPECTION_CLIENT_SECRET", b"secret"),
    ("MCP_JWKS_URL", "file:///keys.json"),
    ("MCP_JWT_ISSUER", 7),
    ("MCP_JWT_ALGORITHMS", None),
    ("MCP_AUTH_CACHE_TTL", -1),
    ("MCP_AUTH_TIMEOUT", "5"),
    ("MCP_ACCOUNT_HEADER", None),
    ("MCP_RATE_LIMIT", "  "),
    ("MCP_RATE_LIMIT_STORAGE", 5),
    ("MCP_CORS_ORIGINS", [None]),
    ("MCP_MAX_JSON_DEPTH", 1),
    ("MCP_MAX_CLIENT_INFO_BYTES", 100),
    ("MCP_TASK_TTL", 0),
    ("MCP_TASK_POLL_INTERVAL_MS", 0),
    ("MCP_TASK_MAX_RUNNING", -1),
    ("MCP_TASK_RUNNER", "process"),
    ("MCP_SKILLS_DIRECTORY_READ", 2),
    ("MCP_TELEMETRY", "no"),
    ("MCP_INSTRUCTIONS", 42),
    ("MCP_DNS_REBINDING_PROTECTION", "false"),
    ("MCP_STRICT_CONFIG", "on"),
]

#: Keys config.py takes as they are: others check them (the backend registry,
#: the token verifiers), or any value will do.
NOT_CHECKED_HERE = {"MCP_BACKEND", "MCP_TOKEN_VERIFIER"}


def test_every_key_is_either_checked_here_or_knowingly_not() -> None:
    assert {key for key, _ in BAD} | NOT_CHECKED_HERE == set(DEFAULTS)


@pytest.mark.parametrize(("key", "value"), BAD, ids=[key for key, _ in BAD])
def test_a_bad_value_fails_init_app_saying_which_key_what_it_must_be_and_what_it_got(key: str, value: Any) -> None:
    app = new_app(**{key: value})
    with pytest.raises(ConfigError) as raised:
        MCP(app)
    message = str(raised.value)
    assert message.startswith(key), message
    assert " must " in message, message
    shown = value[-1] if key == "MCP_AUTH_SERVERS" else value  # a list of URLs: the one refused
    assert f"(got {shown!r})" in message, message
    assert "mcp" not in app.extensions


def test_empty_instructions_mean_none() -> None:
    assert load_settings({"MCP_INSTRUCTIONS": ""}, {}, "app").instructions is None
    assert load_settings({"MCP_INSTRUCTIONS": "Be brief."}, {}, "app").instructions == "Be brief."


# ---------------------------------------------------------------------- every key the code reads, defined once

PACKAGE = ROOT / "flask_mcp"
#: A whole string that is a key: what a config lookup, a setdefault or a table names.
KEY_LITERAL = re.compile(r"MCP_[A-Z0-9_]*[A-Z0-9]")
#: Key-like words the pages and docstrings use on purpose: typos shown as examples, and the
#: FLASK_MCP_X__Y -> MCP_X pattern of from_prefixed_env.
EXAMPLES = {"MCP_SESION_TIMEOUT", "MCP_PAGESIZE", "MCP_X"}


def keys_read_by_the_package() -> set[str]:
    """Every string literal in flask_mcp/ that is an ``MCP_*`` key and nothing else
    (``config["MCP_OAUTH_ISSUER"]``, ``value("MCP_PAGE_SIZE")``, a table's keys)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY_LITERAL.fullmatch(node.value):
                found.add(node.value)
    return found


def shown_by_the_reference() -> set[str]:
    """The keys the generated configuration reference lists: the rows of each table
    docs/configuration.md shows with the ``mcp-config`` directive, as the extension reads them."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    tables = [match.group(1) or "DEFAULTS" for match in re.finditer(r"^```\{mcp-config\}[ \t]*(\w*)$", page, re.M)]
    assert set(tables) <= set(reference_tables()), tables
    lines = inspect.getsourcelines(config)[0]
    return {key for table in tables for key in descriptions(lines, table)}


def test_every_key_the_package_reads_is_defined_and_in_the_generated_reference() -> None:
    read = keys_read_by_the_package()
    assert len(read) > 60 and "MCP_OAUTH_ISSUER" in read and "MCP_PAGE_SIZE" in read  # the scan finds them
    assert read == set(config.KEYS), (
        f"read but not defined in flask_mcp/config.py: {sorted(read - set(config.KEYS))}; "
        f"defined but never read: {sorted(set(config.KEYS) - read)}")
    assert shown_by_the_reference() == set(config.KEYS)


def test_the_tables_define_each_key_once() -> None:
    assert not set(config.DEFAULTS) & set(config.OAUTH_DEFAULTS)
    assert config.KEYS == {**config.DEFAULTS, **config.OAUTH_DEFAULTS}


def test_every_key_the_code_and_the_pages_mention_exists() -> None:
    """A message, a docstring or a page naming a key that does not exist sends a
    reader to set something that does nothing."""
    texts = [p for p in PACKAGE.rglob("*.py")] + [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    texts += sorted((ROOT / "example").rglob("*.py"))
    unknown = {
        f"{path.relative_to(ROOT)}: {word}"
        for path in texts
        for word in re.findall(r"(?<![A-Z0-9_])MCP_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8"))
        if word not in config.KEYS and word not in EXAMPLES
    }
    assert unknown == set()
