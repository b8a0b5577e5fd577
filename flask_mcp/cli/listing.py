"""``flask mcp list``: what the server offers, one line per feature, or
(``--json``) the full definitions exactly as a 2026-07-28 client reads them."""

from __future__ import annotations

import json
from typing import Any

import click
from flask.cli import with_appcontext

from .endpoint import Caller, Endpoint, caller_options

#: The lists a client reads: (method, result key, heading).
LISTS = (
    ("tools/list", "tools", "Tools"),
    ("resources/list", "resources", "Resources"),
    ("resources/templates/list", "resourceTemplates", "Resource templates"),
    ("prompts/list", "prompts", "Prompts"),
)


def gather(endpoint: Endpoint) -> dict[str, Any]:
    """``server/discover``'s result and every item of every list (capabilities
    the server does not declare are left out, as a client would)."""
    client = endpoint.client()
    discovered = endpoint.request("server/discover", client=client)
    capabilities = discovered.get("capabilities") or {}
    gathered: dict[str, Any] = {"discover": discovered}
    for method, key, _ in LISTS:
        if method.split("/")[0] in capabilities:
            gathered[key] = endpoint.list_all(method, key, client)
        else:
            gathered[key] = []
    return gathered


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the full definitions (schemas included) as JSON.")
@caller_options
@with_appcontext
def list_command(as_json: bool, caller: Caller) -> None:
    """List the tools, resources, resource templates and prompts."""
    gathered = gather(Endpoint(caller=caller))
    if as_json:
        click.echo(json.dumps(gathered, indent=2, ensure_ascii=False))
        return
    discovered = gathered["discover"]
    info = (discovered.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
    title = f"{info['title']} " if info.get("title") else ""
    click.echo(f"{title}({info.get('name', '?')} {info.get('version', '?')}), "
               f"protocol revisions {', '.join(discovered.get('supportedVersions') or [])}")
    formatters = {"tools": _tool, "resources": _resource, "resourceTemplates": _template, "prompts": _prompt}
    for _, key, heading in LISTS:
        items = gathered[key]
        click.echo(f"\n{heading} ({len(items)})")
        for item in items:
            line, description = formatters[key](item)
            click.echo(f"  {line}")
            if description:
                click.echo(f"      {description}")


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0]


def _type(schema: dict[str, Any]) -> str:
    """A short name for a JSON Schema: ``string``, ``integer|null``, ``"a"|"b"``."""
    if "enum" in schema:
        return "|".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(map(str, kind))
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"{_type(schema['items'])}[]"
    if kind:
        return str(kind)
    for combinator in ("anyOf", "oneOf"):
        if isinstance(schema.get(combinator), list):
            return "|".join(_type(option) for option in schema[combinator] if isinstance(option, dict))
    return "any"


def _tool(tool: dict[str, Any]) -> tuple[str, str]:
    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required") or [])
    params = []
    for name, prop in (schema.get("properties") or {}).items():
        text = f"{name}{'' if name in required else '?'}: {_type(prop)}"
        if "default" in prop:
            text += f" = {json.dumps(prop['default'])}"
        params.append(text)
    line = f"{tool['name']}({', '.join(params)})"
    if tool.get("outputSchema"):
        line += f" -> {_type(tool['outputSchema'])}"
    annotations = tool.get("annotations") or {}
    flags = [flag for hint, flag in (("readOnlyHint", "read-only"), ("destructiveHint", "destructive"),
                                     ("idempotentHint", "idempotent")) if annotations.get(hint) is True]
    view = ((tool.get("_meta") or {}).get("ui") or {}).get("resourceUri")
    if view:
        flags.append(f"view {view}")
    if flags:
        line += f"  [{', '.join(flags)}]"
    return line, _first_line(tool.get("description") or tool.get("title"))


def _resource(resource: dict[str, Any]) -> tuple[str, str]:
    line = "  ".join(filter(None, (resource["uri"], resource.get("mimeType"), resource.get("title"))))
    return line, _first_line(resource.get("description"))


def _template(template: dict[str, Any]) -> tuple[str, str]:
    line = "  ".join(filter(None, (template["uriTemplate"], template.get("mimeType"), template.get("title"))))
    return line, _first_line(template.get("description"))


def _prompt(prompt: dict[str, Any]) -> tuple[str, str]:
    arguments = [f"{a['name']}{'' if a.get('required') else '?'}" for a in prompt.get("arguments") or []]
    line = f"{prompt['name']}({', '.join(arguments)})"
    if prompt.get("title"):
        line += f"  {prompt['title']}"
    return line, _first_line(prompt.get("description"))
