"""A tool's questions (elicitation), asked of the person at the terminal.

``flask mcp call`` declares the elicitation capability, so a tool that asks
gets its question to the command (an ``input_required`` result on
2026-07-28, or a task waiting in ``input_required``). When standard input is
a terminal, the question is shown on standard error and each field of the
requested schema is one typed prompt (strings, numbers, integers, booleans,
single and multiple choices; defaults, required fields, bounds), after the
choice of accepting, declining or cancelling. Elsewhere the command cannot
ask, and :class:`CannotAsk` says in plain words what the tool wanted.
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

import click

#: The answers a person may give to an elicitation (``ElicitResult.action``).
ACTIONS = ("accept", "decline", "cancel")
#: What the command answers: form questions (and URL ones: the person opens the address).
CAPABILITY: dict[str, dict[str, Any]] = {"form": {}, "url": {}}

_SKIP = object()  # an optional field left empty


class CannotAsk(click.ClickException):
    """The tool asked something the command cannot ask here (exit status 3,
    like every request the command could not complete)."""

    exit_code = 3


def can_ask() -> bool:
    """Whether there is a person to ask: standard input is a terminal."""
    return sys.stdin.isatty()


def answer_all(tool: str, requests: dict[str, Any]) -> dict[str, Any]:
    """Each input request's answer, by key; :class:`CannotAsk` when one cannot be asked."""
    unanswerable = [r for r in requests.values() if not isinstance(r, dict) or r.get("method") != "elicitation/create"]
    if unanswerable or not can_ask():
        raise CannotAsk(describe(tool, list(requests.values()), terminal=not unanswerable))
    return {key: ask(request.get("params") or {}) for key, request in requests.items()}


def describe(tool: str, requests: list[Any], *, terminal: bool = True) -> str:
    """What the tool asked, and how to answer it, in a sentence or two."""
    asked = []
    for request in requests:
        method = request.get("method") if isinstance(request, dict) else None
        params = (request.get("params") or {}) if isinstance(request, dict) else {}
        if method == "elicitation/create":
            fields = _field_summary(params.get("requestedSchema") or {})
            asked.append(f"{params.get('message', '')!r}" + (f" ({fields})" if fields else ""))
        elif method == "sampling/createMessage":
            asked.append("for a completion from a language model (sampling)")
        elif method == "roots/list":
            asked.append("for the client's roots (roots/list)")
        else:
            asked.append(f"for {method!r}")
    what = f"The tool {tool!r} asked {'; and '.join(asked) or 'a question'}."
    if terminal:
        return (f"{what} flask mcp call can answer a question only when its standard input is a terminal: "
                "run the command in a terminal to answer it.")
    return f"{what} flask mcp call answers questions for a person (elicitation) only: use an MCP client that can."


def _field_summary(schema: dict[str, Any]) -> str:
    required = set(schema.get("required") or [])
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = _kind(prop) if isinstance(prop, dict) else "?"
        parts.append(f"{name}: {kind}{'' if name in required else ', optional'}")
    return "; ".join(parts)


def ask(params: dict[str, Any]) -> dict[str, Any]:
    """One ``elicitation/create`` asked at the terminal: its ``ElicitResult``."""
    echo = _echo
    echo("")
    echo(click.style(str(params.get("message") or "The tool asks:"), bold=True))
    if params.get("mode") == "url":
        echo(f"Open this address in your browser to continue: {params.get('url')}")
    action: str = click.prompt("Answer", type=click.Choice(ACTIONS), default="accept", err=True)
    if action != "accept" or params.get("mode") == "url":
        return {"action": action}
    schema = params.get("requestedSchema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        value = ask_field(name, prop if isinstance(prop, dict) else {}, name in required)
        if value is not _SKIP:
            content[name] = value
    return {"action": "accept", "content": content}


def ask_field(name: str, prop: dict[str, Any], required: bool) -> Any:
    """One field's value, typed by its schema; ``_SKIP`` for an optional one left empty."""
    choices = _choices(prop)
    if prop.get("type") == "array":
        return _ask_many(name, prop, choices or [], required)
    default = prop.get("default")
    kind = _kind(prop)
    hint = "/".join(str(c) for c in choices) if choices else kind + _bounds(prop)
    if default is not None:
        hint += f", default {json.dumps(default)}"
    elif not required:
        hint += ", optional: Enter skips it"
    label = str(prop.get("title") or name)
    if prop.get("description"):
        _echo(click.style(f"  {prop['description']}", dim=True))

    def convert(text: str) -> Any:
        if text == "":
            if default is not None:
                return default
            if not required:
                return _SKIP
            raise click.BadParameter("this field is required")
        return convert_value(text, prop, choices)

    return click.prompt(f"{label} ({hint})", default="", show_default=False, value_proc=convert, err=True)


def _ask_many(name: str, prop: dict[str, Any], choices: list[Any], required: bool) -> Any:
    label = str(prop.get("title") or name)
    default = prop.get("default")
    hint = f"any of {'/'.join(str(c) for c in choices)}, comma-separated"
    if default is not None:
        hint += f", default {','.join(str(d) for d in default)}"

    def convert(text: str) -> Any:
        if text == "":
            if default is not None:
                return default
            if not required:
                return _SKIP
        picked = [item.strip() for item in text.split(",") if item.strip()]
        unknown = [item for item in picked if item not in choices]
        if unknown:
            raise click.BadParameter(f"not among the choices: {', '.join(unknown)}")
        if len(picked) < int(prop.get("minItems", 0)):
            raise click.BadParameter(f"pick at least {prop['minItems']}")
        if "maxItems" in prop and len(picked) > int(prop["maxItems"]):
            raise click.BadParameter(f"pick at most {prop['maxItems']}")
        return picked

    return click.prompt(f"{label} ({hint})", default="", show_default=False, value_proc=convert, err=True)


def convert_value(text: str, prop: dict[str, Any], choices: list[Any] | None = None) -> Any:
    """``text`` as the value ``prop`` asks for, or :class:`click.BadParameter` saying why not."""
    if choices:
        if text not in [str(c) for c in choices]:
            raise click.BadParameter(f"choose one of {', '.join(str(c) for c in choices)}")
        return next(c for c in choices if str(c) == text)
    kind = prop.get("type")
    if kind == "boolean":
        return click.BOOL.convert(text, None, None)
    if kind in ("integer", "number"):
        try:
            value: float = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise click.BadParameter(f"{text!r} is not {'an integer' if kind == 'integer' else 'a number'}") from None
        if "minimum" in prop and value < prop["minimum"]:
            raise click.BadParameter(f"must be at least {prop['minimum']}")
        if "maximum" in prop and value > prop["maximum"]:
            raise click.BadParameter(f"must be at most {prop['maximum']}")
        return value
    if "minLength" in prop and len(text) < int(prop["minLength"]):
        raise click.BadParameter(f"must be at least {prop['minLength']} characters long")
    if "maxLength" in prop and len(text) > int(prop["maxLength"]):
        raise click.BadParameter(f"must be at most {prop['maxLength']} characters long")
    _check_format(text, prop.get("format"))
    return text


def _check_format(text: str, fmt: Any) -> None:
    if fmt == "email" and ("@" not in text or text.startswith("@") or text.endswith("@")):
        raise click.BadParameter("must be an email address")
    if fmt == "uri" and ":" not in text:
        raise click.BadParameter("must be a URI (such as https://example.com/)")
    try:
        if fmt == "date":
            datetime.date.fromisoformat(text)
        elif fmt == "date-time":
            datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"must be a {fmt} (ISO 8601)") from None


def _choices(prop: dict[str, Any]) -> list[Any] | None:
    """The values a single or multiple choice allows (``enum``, titled ``oneOf``/``anyOf``)."""
    items = prop.get("items")
    source: dict[str, Any] = items if prop.get("type") == "array" and isinstance(items, dict) else prop
    if isinstance(source.get("enum"), list):
        return list(source["enum"])
    for key in ("oneOf", "anyOf"):
        options = source.get(key)
        if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
            return [o["const"] for o in options]
    return None


def _kind(prop: dict[str, Any]) -> str:
    if prop.get("type") == "array":
        return "choices"
    if _choices(prop):
        return "choice"
    fmt = prop.get("format")
    return f"{prop.get('type', 'string')}{f' ({fmt})' if fmt else ''}"


def _bounds(prop: dict[str, Any]) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is None and high is None:
        return ""
    return f" {'' if low is None else low}..{'' if high is None else high}"


def _echo(text: str) -> None:
    click.echo(text, err=True)
