"""The 2026-07-28 standard request headers: ``Mcp-Method``, ``Mcp-Name`` and
``Mcp-Param-*`` must agree with the body they travel with (SEP-2243).

Headers arrive here as a mapping with lower-case names.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import HeaderMismatch

#: Methods whose target travels in ``Mcp-Name``, and the param that holds it.
NAME_PARAM = {
    "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
    # The tasks extension (SEP-2663): Mcp-Name carries params.taskId.
    "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}

_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)
# Visible ASCII, space and tab: what a header value may carry unencoded.
_BAD_VALUE_CHARS = re.compile(r"[^\t\x20-\x7e]")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@dataclass(frozen=True, slots=True)
class HeaderParam:
    """A tool argument mirrored into ``Mcp-Param-{header}``."""

    header: str
    path: tuple[str, ...]
    type: str  # "string", "integer" or "boolean"


def is_header_token(name: str) -> bool:
    return bool(_TOKEN.match(name))


def decode_value(value: str, header: str) -> str:
    """A header value as text: the ``=?base64?...?=`` form decoded, others literal."""
    if value.isascii() and value.isprintable() and not value.startswith("=?"):
        return value  # the usual case, without the regular expressions
    if _BAD_VALUE_CHARS.search(value):
        raise HeaderMismatch(f"Header {header} has characters that are not allowed in a header value.")
    match = _SENTINEL.match(value)
    if not match:
        return value
    try:
        raw = base64.b64decode(match.group(1), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        raise HeaderMismatch(
            f"Header {header} uses the =?base64?...?= form but is not valid Base64 of UTF-8 text."
        ) from None


def check_standard_headers(headers: Mapping[str, str], method: str, params: dict[str, Any]) -> None:
    """``Mcp-Method`` must equal the method; ``Mcp-Name`` the target, where one exists."""
    sent = headers.get("mcp-method")
    if sent is None:
        raise HeaderMismatch(f"Missing Mcp-Method header: it must repeat the method ({method}).")
    if not (sent == method and method in LITERAL_VALUES) and not _carries(sent, method, "Mcp-Method"):
        raise HeaderMismatch(
            f"Mcp-Method header {sent.strip()!r} does not match the body's method {method!r}."
        )
    param = NAME_PARAM.get(method)
    if param is None:
        return
    target = params.get(param)
    if not isinstance(target, str):
        return  # the method's own validation reports the missing name
    name = headers.get("mcp-name")
    if name is None:
        raise HeaderMismatch(f"Missing Mcp-Name header: it must repeat params.{param} ({target!r}).")
    if not (name == target and target in LITERAL_VALUES) and not _carries(name, target, "Mcp-Name"):
        raise HeaderMismatch(
            f"Mcp-Name header {name.strip()!r} does not match params.{param} {target!r}."
        )


#: Values a header was seen to carry as they are (no surrounding space, nothing
#: to decode): the same header again needs no decoding. Method and tool names,
#: a few dozen; bounded in number and length, since clients choose them.
LITERAL_VALUES: set[str] = set()
_LITERAL_MAX = 512
_LITERAL_MAX_LENGTH = 128


def _carries(sent: str, value: str, header: str) -> bool:
    """Whether the header value ``sent`` carries ``value`` (decoded, without
    surrounding space); remembers a value that stands for itself."""
    if decode_value(sent.strip(), header) != value:
        return False
    if sent == value and len(value) <= _LITERAL_MAX_LENGTH and len(LITERAL_VALUES) < _LITERAL_MAX:
        LITERAL_VALUES.add(value)  # decoding the same text again gives the same answer
    return True


def check_param_headers(
    headers: Mapping[str, str], params: tuple[HeaderParam, ...], arguments: dict[str, Any]
) -> None:
    """Every argument marked ``x-mcp-header`` that has a value must be mirrored."""
    for param in params:
        value = _lookup(arguments, param.path)
        if value is None:
            continue
        header = f"Mcp-Param-{param.header}"
        sent = headers.get(header.lower())
        if sent is None:
            raise HeaderMismatch(f"Missing {header} header: it must repeat argument {'.'.join(param.path)}.")
        text = decode_value(sent.strip(), header)
        if not _same(text, value):
            raise HeaderMismatch(
                f"{header} header {sent.strip()!r} does not match argument "
                f"{'.'.join(param.path)} ({value!r})."
            )


def _lookup(arguments: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = arguments
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _same(text: str, value: Any) -> bool:
    """Strings compare exactly, booleans as true/false, numbers numerically."""
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if isinstance(value, (int, float)):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return isinstance(value, str) and text == value


def collect_header_params(schema: dict[str, Any]) -> tuple[HeaderParam, ...]:
    """Find ``x-mcp-header`` annotations reachable through ``properties`` chains,
    checking the authoring rules clients enforce (they drop tools that break them)."""
    found: list[HeaderParam] = []
    _walk(schema, (), found)
    if _count_annotations(schema) != len(found):
        raise ValueError(
            "x-mcp-header is only allowed on properties reached from the root through "
            "'properties' keys (not inside items, anyOf/oneOf/allOf/not, if/then/else or $ref targets)"
        )
    seen: set[str] = set()
    for param in found:
        key = param.header.lower()
        if key in seen:
            raise ValueError(f"x-mcp-header {param.header!r} is used twice (names are case-insensitive)")
        seen.add(key)
    return tuple(found)


def _count_annotations(node: Any) -> int:
    """Every ``x-mcp-header`` anywhere in a schema, reachable or not."""
    if isinstance(node, list):
        return sum(_count_annotations(item) for item in node)
    if not isinstance(node, dict):
        return 0
    return int("x-mcp-header" in node) + sum(_count_annotations(value) for value in node.values())


def _walk(schema: dict[str, Any], path: tuple[str, ...], found: list[HeaderParam]) -> None:
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        here = path + (name,)
        header = prop.get("x-mcp-header")
        if header is not None:
            if not isinstance(header, str) or not is_header_token(header):
                raise ValueError(
                    f"x-mcp-header on {'.'.join(here)} must be a non-empty HTTP token "
                    "(letters, digits and !#$%&'*+-.^_`|~)"
                )
            kind = prop.get("type")
            if kind not in ("string", "integer", "boolean"):
                raise ValueError(
                    f"x-mcp-header on {'.'.join(here)} needs a string, integer or boolean "
                    f"property, not {kind!r}"
                )
            found.append(HeaderParam(header, here, kind))
        _walk(prop, here, found)
