"""Matching URIs against RFC 6570 URI templates (resource templates).

Supported expressions: ``{var}`` (simple), ``{+var}`` (reserved: may span
``/``), ``{#var}`` (fragment), ``{.var}`` (label), ``{/var}`` (path segment),
``{?a,b}`` and ``{&c}`` (query), each with several variables, the explode
modifier ``*`` (a list: ``{/path*}`` matches ``/a/b/c``) and the prefix
modifier ``:n``. Values are percent-decoded. Path-style expressions
(``{/var}``, ``{.var}``) and query variables may be absent from a URI; the
others must match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARNAME = re.compile(r"^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$")

#: Operator -> (text before the first value, separator between values,
#: characters a value cannot contain, whether the expression may be absent).
_OPERATORS: dict[str, tuple[str, str, str, bool]] = {
    "": ("", ",", "/?#,", False),
    "+": ("", ",", ",", False),
    "#": ("#", ",", ",", False),
    ".": (".", ".", "/?#.", True),
    "/": ("/", "/", "/?#", True),
}
_QUERY_OPERATORS = ("?", "&")

Value = str | list[str]


@dataclass(frozen=True, slots=True)
class _Variable:
    name: str
    explode: bool
    prefix: int | None


class UriTemplate:
    """One parsed template; :meth:`match` gives a URI's variables or ``None``."""

    def __init__(self, template: str) -> None:
        self.template = template
        self._variables: list[_Variable] = []
        self._query: list[_Variable] = []
        self._groups: dict[str, _Variable] = {}
        self._separators: dict[str, str] = {}
        self._optional: set[str] = set()
        pattern = []
        position = 0
        for expression in _EXPRESSION.finditer(template):
            literal = template[position:expression.start()]
            if "{" in literal or "}" in literal:
                raise ValueError(f"URI template {template!r} has an unbalanced brace")
            if self._query and literal:
                raise ValueError(f"URI template {template!r}: query expressions ({{?...}}) must come last")
            pattern.append(re.escape(literal))
            pattern.append(self._expression(expression.group(1)))
            position = expression.end()
        rest = template[position:]
        if "{" in rest or "}" in rest:
            raise ValueError(f"URI template {template!r} has an unbalanced brace")
        if self._query and rest:
            raise ValueError(f"URI template {template!r}: query expressions ({{?...}}) must come last")
        pattern.append(re.escape(rest))
        self._regex = re.compile("".join(pattern) + r"\Z", re.DOTALL)

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable name, in order of appearance."""
        return tuple(v.name for v in self._variables + self._query)

    @property
    def optional(self) -> frozenset[str]:
        """Variables a matching URI may lack (path-style and query expressions)."""
        return frozenset(self._optional) | {v.name for v in self._query}

    def match(self, uri: str) -> dict[str, Value] | None:
        """The variables of ``uri`` if it fits this template, else ``None``."""
        path, query = uri, ""
        if self._query:
            path, _, query = uri.partition("?")
        found = self._regex.match(path)
        if found is None:
            return None
        values: dict[str, Value] = {}
        for group, var in self._groups.items():
            raw = found.group(group)
            if raw is None:
                continue
            separator = self._separators[group]
            if var.explode:
                values[var.name] = [unquote(part) for part in raw.split(separator) if part != ""]
            else:
                values[var.name] = unquote(raw)
        if self._query:
            fields = parse_qs(query, keep_blank_values=True)
            for var in self._query:
                if var.name in fields:
                    items = fields[var.name]
                    values[var.name] = items if var.explode else items[-1]
        return values

    # ------------------------------------------------------------------ parsing

    def _expression(self, body: str) -> str:
        operator = body[:1] if body[:1] in "+#./;?&=,!@|" else ""
        names = body[len(operator):]
        if operator in _QUERY_OPERATORS:
            self._query.extend(self._parse_variable(spec) for spec in names.split(","))
            return ""
        if operator not in _OPERATORS:
            raise ValueError(f"URI template {self.template!r}: operator {operator!r} is not supported")
        first, separator, forbidden, optional = _OPERATORS[operator]
        parts = []
        for index, spec in enumerate(names.split(",")):
            var = self._parse_variable(spec)
            group = f"v{len(self._groups)}"
            self._groups[group] = var
            self._variables.append(var)
            self._separators[group] = separator
            value = f"[^{re.escape(forbidden)}]"
            if var.explode:
                value = f"{value}+(?:{re.escape(separator)}{value}+)*"
            else:
                # Lazy, so that a later expression gets its share: {name}{.ext}.
                value = f"{value}{{1,{var.prefix}}}?" if var.prefix else f"{value}+?"
            lead = re.escape(first if index == 0 else separator)
            piece = f"{lead}(?P<{group}>{value})"
            if optional:
                self._optional.add(var.name)
                piece = f"(?:{piece})?"
            parts.append(piece)
        return "".join(parts)

    def _parse_variable(self, spec: str) -> _Variable:
        explode = spec.endswith("*")
        name = spec[:-1] if explode else spec
        prefix = None
        if ":" in name:
            name, _, length = name.partition(":")
            if not length.isdigit() or not 0 < int(length) < 10000:
                raise ValueError(f"URI template {self.template!r}: bad prefix modifier in {{{spec}}}")
            prefix = int(length)
        if not _VARNAME.match(name) or not name.isidentifier():
            raise ValueError(
                f"URI template {self.template!r}: variable {name!r} must be a Python identifier "
                "(it becomes a parameter of the function)"
            )
        if name in {v.name for v in self._variables + self._query}:
            raise ValueError(f"URI template {self.template!r}: variable {name!r} appears twice")
        return _Variable(name, explode, prefix)


def is_template(uri: str) -> bool:
    """Whether a resource URI is a template (it has an ``{expression}``)."""
    return _EXPRESSION.search(uri) is not None
