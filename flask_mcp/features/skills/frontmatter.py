"""A ``SKILL.md``'s YAML front matter: found, parsed as JSON-compatible data, and
written back for generated skills.

The skills extension sends the front matter "rendered verbatim as a JSON
object", and hosts compare it field by field with what their own YAML parser
reads from the file. So it is parsed with YAML 1.2's core schema (what current
parsers such as the JavaScript ``yaml`` package use), not PyYAML's YAML 1.1
defaults, which would turn ``yes`` into ``true``, ``2026-01-01`` into a date and
``017`` into 15; values JSON cannot carry, and duplicate keys, are refused.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: ``---`` on the first line (after an optional BOM), the YAML, then a ``---`` line.
_BLOCK = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_EMPTY_BLOCK = re.compile(r"\A\ufeff?---[ \t]*\r?\n---[ \t]*(?:\r?\n|\Z)")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class FrontMatterError(ValueError):
    """A ``SKILL.md`` whose front matter is missing or cannot be served."""


def split(text: str) -> tuple[str | None, str]:
    """The front matter block (``None`` when the file does not begin with one) and the body."""
    match = _BLOCK.match(text) or _EMPTY_BLOCK.match(text)
    if match is None:
        return None, text
    yaml_text = match.group(1) if match.re is _BLOCK else ""
    return yaml_text, text[match.end():]


def parse(text: str, where: str) -> dict[str, Any]:
    """The front matter of a ``SKILL.md`` as a JSON-compatible dict."""
    block, _ = split(text)
    if block is None:
        raise FrontMatterError(f"{where} does not begin with YAML front matter (a '---' line, YAML, a '---' line)")
    loader = _loader_class()
    try:
        import yaml

        value = yaml.load(block, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"{where}: the front matter is not valid YAML: {exc}") from None
    if not isinstance(value, dict):
        raise FrontMatterError(f"{where}: the front matter must be a YAML mapping (name: ..., description: ...)")
    check_json(value, where)
    return value


def render(frontmatter: dict[str, Any], body: str) -> str:
    """A ``SKILL.md`` for a generated skill: each key's value written as JSON,
    which is YAML 1.2 too, so every parser reads back exactly ``frontmatter``."""
    lines = []
    for key, value in frontmatter.items():
        label = key if _PLAIN_KEY.match(key) else json.dumps(key, ensure_ascii=False)
        lines.append(f"{label}: {json.dumps(value, ensure_ascii=False)}")
    return "---\n" + "\n".join(lines) + "\n---\n\n" + body


def check_json(value: Any, where: str, path: str = "front matter") -> None:
    """Refuse what JSON cannot carry (dates, binary, sets, NaN, non-string keys)."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FrontMatterError(f"{where}: {path} is {value}, which JSON cannot carry")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_json(item, where, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise FrontMatterError(f"{where}: {path} has the key {key!r}; keys must be strings")
            check_json(item, where, f"{path}.{key}")
        return
    raise FrontMatterError(
        f"{where}: {path} is a {type(value).__name__}, which JSON cannot carry; quote it to make it a string"
    )


_LOADER: Any = None


def _loader_class() -> Any:
    """A PyYAML ``SafeLoader`` that resolves plain scalars by YAML 1.2's core
    schema and refuses duplicate keys (built once, on first use)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    try:
        import yaml
    except ImportError:  # an ImportError still: an app may leave its folder skills out without the extra
        raise ImportError("Reading a SKILL.md needs PyYAML: pip install 'flask-mcp[skills]'", name="yaml") from None

    class CoreSchemaLoader(yaml.SafeLoader):
        yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    def int_value(loader: Any, node: Any) -> int:
        text = loader.construct_scalar(node)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    def float_value(loader: Any, node: Any) -> float:
        text = loader.construct_scalar(node).lower()
        if text.endswith(".inf"):
            return -math.inf if text.startswith("-") else math.inf
        if text == ".nan":
            return math.nan
        return float(text)

    def bool_value(loader: Any, node: Any) -> bool:
        return bool(loader.construct_scalar(node).lower() == "true")

    def null_value(loader: Any, node: Any) -> None:
        loader.construct_scalar(node)
        return None

    resolvers = (
        ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", list("~nN") + [""], null_value),
        ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF"), bool_value),
        ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789"), int_value),
        (
            "tag:yaml.org,2002:float",
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            list("-+.0123456789"),
            float_value,
        ),
    )
    for tag, pattern, first, constructor in resolvers:
        CoreSchemaLoader.add_implicit_resolver(tag, re.compile(pattern), first)
        CoreSchemaLoader.add_constructor(tag, constructor)
    _LOADER = CoreSchemaLoader
    return _LOADER
