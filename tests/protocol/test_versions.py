"""The revision table and version negotiation (spec digest sections 2 and 8)."""

from __future__ import annotations

import dataclasses

import pytest

import flask_mcp
from flask_mcp.protocol import versions
from flask_mcp.protocol.versions import (
    DEFAULT_LEGACY_VERSION,
    LEGACY_VERSIONS,
    REVISIONS,
    STATELESS_VERSIONS,
    SUPPORTED_VERSIONS,
    negotiate,
)

ALL = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26")
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")


def test_supported_versions_lists_all_four_revisions_newest_first() -> None:
    assert SUPPORTED_VERSIONS == ALL
    assert list(SUPPORTED_VERSIONS) == sorted(SUPPORTED_VERSIONS, reverse=True)


def test_legacy_versions_are_the_initialize_based_revisions_newest_first() -> None:
    assert LEGACY_VERSIONS == LEGACY


def test_only_2026_07_28_is_stateless() -> None:
    assert STATELESS_VERSIONS == ("2026-07-28",)


def test_every_supported_version_is_either_stateless_or_legacy_not_both() -> None:
    assert set(STATELESS_VERSIONS) | set(LEGACY_VERSIONS) == set(SUPPORTED_VERSIONS)
    assert not set(STATELESS_VERSIONS) & set(LEGACY_VERSIONS)


def test_public_supported_versions_is_the_protocol_one() -> None:
    assert flask_mcp.SUPPORTED_VERSIONS == SUPPORTED_VERSIONS


def test_default_legacy_version_is_2025_03_26() -> None:
    assert DEFAULT_LEGACY_VERSION == "2025-03-26"


def test_revision_table_has_exactly_one_entry_per_supported_version() -> None:
    assert set(REVISIONS) == set(SUPPORTED_VERSIONS)
    for version, revision in REVISIONS.items():
        assert revision.version == version
        assert revision.stateless == (version in STATELESS_VERSIONS)


def test_revisions_are_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        REVISIONS["2025-03-26"].batching = False  # type: ignore[misc]


def test_only_2025_03_26_accepts_batches() -> None:
    assert {v for v, r in REVISIONS.items() if r.batching} == {"2025-03-26"}


def test_structured_output_starts_with_2025_06_18() -> None:
    assert {v for v, r in REVISIONS.items() if not r.structured_output} == {"2025-03-26"}


def test_invalid_arguments_are_tool_results_from_2025_11_25() -> None:
    assert {v for v, r in REVISIONS.items() if r.argument_errors_as_results} == {"2025-11-25", "2026-07-28"}


def test_result_type_and_cache_hints_only_in_2026_07_28() -> None:
    assert {v for v, r in REVISIONS.items() if r.result_type} == {"2026-07-28"}
    assert {v for v, r in REVISIONS.items() if r.cache_hints} == {"2026-07-28"}


def test_unknown_method_is_http_404_only_in_2026_07_28() -> None:
    for version, revision in REVISIONS.items():
        assert revision.method_not_found_status == (404 if version == "2026-07-28" else 200)


@pytest.mark.parametrize(
    "version,present,absent",
    [
        (
            "2025-03-26",
            {"name", "description", "inputSchema", "annotations"},
            {"title", "outputSchema", "_meta", "icons"},
        ),
        ("2025-06-18", {"name", "title", "outputSchema", "_meta"}, {"icons"}),
        ("2025-11-25", {"name", "title", "outputSchema", "_meta", "icons"}, set()),
        ("2026-07-28", {"name", "title", "outputSchema", "_meta", "icons"}, set()),
    ],
)
def test_tool_fields_follow_the_difference_table(version: str, present: set[str], absent: set[str]) -> None:
    fields = REVISIONS[version].tool_fields
    assert present <= fields
    assert not absent & fields


@pytest.mark.parametrize(
    "version,expected",
    [
        ("2025-03-26", {"name", "version"}),
        ("2025-06-18", {"name", "version", "title"}),
        ("2025-11-25", {"name", "version", "title", "description", "icons", "websiteUrl"}),
        ("2026-07-28", {"name", "version", "title", "description", "icons", "websiteUrl"}),
    ],
)
def test_server_info_fields_follow_the_difference_table(version: str, expected: set[str]) -> None:
    assert REVISIONS[version].implementation_fields == expected


def test_resource_links_exist_from_2025_06_18() -> None:
    assert "resource_link" not in REVISIONS["2025-03-26"].content_types
    for version in ("2025-06-18", "2025-11-25", "2026-07-28"):
        assert "resource_link" in REVISIONS[version].content_types
    for revision in REVISIONS.values():
        assert {"text", "image", "audio", "resource"} <= revision.content_types


def test_2026_methods_drop_the_handshake_and_add_discover() -> None:
    methods = REVISIONS["2026-07-28"].core_methods
    assert "server/discover" in methods
    assert not {"initialize", "ping", "logging/setLevel"} & methods


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_methods_have_the_handshake_and_no_discover(version: str) -> None:
    methods = REVISIONS[version].core_methods
    assert {"initialize", "ping", "tools/list", "tools/call", "logging/setLevel"} <= methods
    assert "server/discover" not in methods


@pytest.mark.parametrize("version", LEGACY)
def test_negotiate_answers_a_supported_legacy_version_with_itself(version: str) -> None:
    assert negotiate(version) == version


def test_negotiate_counter_offers_the_newest_legacy_version_for_2026_07_28() -> None:
    assert negotiate("2026-07-28") == "2025-11-25"


@pytest.mark.parametrize("requested", ["1999-01-01", "2024-11-05", "2099-12-31", "", "latest", "2025-11-25 "])
def test_negotiate_counter_offers_the_newest_legacy_version_for_unknown_versions(requested: str) -> None:
    assert negotiate(requested) == "2025-11-25"


@pytest.mark.parametrize("requested", [None, 20251125, ["2025-06-18"], {"v": "2025-06-18"}])
def test_negotiate_counter_offers_for_non_string_values(requested: object) -> None:
    assert negotiate(requested) == LEGACY_VERSIONS[0]


def test_negotiated_version_is_always_a_revision_we_serve_over_sessions() -> None:
    for requested in (*ALL, "x"):
        chosen = negotiate(requested)
        assert chosen in versions.LEGACY_VERSIONS
        assert not REVISIONS[chosen].stateless
