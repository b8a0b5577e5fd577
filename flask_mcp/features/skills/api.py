"""The skills half of the extension's API (SEP-2640), a mixin of
:class:`~flask_mcp.MCP` (whose ``__init__`` sets it up): skills served from
folders, and skills whose files a function generates."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar, Unpack

from ..options import SkillOptions, check_options
from ..resources import check_cache_hints
from ..schema import describe
from .catalog import SkillRegistry, generated_skill
from .folders import ScopesSpec, load_directory

F = TypeVar("F", bound=Callable[..., Any])


class SkillsMixin:
    """Registration of skills (the ``io.modelcontextprotocol/skills`` extension)."""

    def __init__(self, on_list_changed: Callable[[str], None]) -> None:
        """Create the registry; ``on_list_changed(kind)`` hears every change of
        the skill list."""
        self._skills = SkillRegistry()
        self._skills.on_list_changed.append(on_list_changed)

    @property
    def skills(self) -> SkillRegistry:
        return self._skills

    # ------------------------------------------------------------------ skills

    def skills_from_directory(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str | None = None,
        scopes: ScopesSpec = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
    ) -> list[str]:
        """Serve every skill under ``path`` (each folder holding a ``SKILL.md``,
        ``path`` itself included) through the skills extension; returns their
        ``SKILL.md`` URIs, ``skill://<prefix>/<folder path>/SKILL.md``.

        The files are read now and served from memory, with a manifest of their
        SHA-256 digests and sizes. Refused here: a ``SKILL.md`` without front
        matter ``name`` and ``description``, a name unlike its folder's, a link
        leading outside the skill's folder, a skill over 512 files or 16 MiB.
        Hidden files and ``__pycache__`` are left out. ``scopes``: what a caller's
        token must grant to see and read the skills (one list for all, or a dict
        by skill name); ``ttl_ms``/``cache_scope``: cache hints of their reads.
        Needs PyYAML (``pip install 'flask-mcp[skills]'``): without it, ``ImportError``.
        """
        check_cache_hints(ttl_ms, cache_scope, f"Skills in {str(path)!r}")
        skills = load_directory(path, prefix=prefix, scopes=scopes, ttl_ms=ttl_ms, cache_scope=cache_scope)
        self._skills.add(skills)
        return [skill.uri for skill in skills]

    def skill(self, name: str | None = None, **options: Unpack[SkillOptions]) -> Callable[[F], F]:
        """Register a function that generates a skill's files on each read; its
        manifest is ``"dynamic"`` (no digests). It returns the ``SKILL.md`` body
        (markdown; the front matter is written from ``name``, ``description`` and
        ``frontmatter``) or a dict ``{"SKILL.md": body, "path/file": text or bytes}``.

        ``name`` defaults to the function's name with ``-`` for ``_``,
        ``description`` to its docstring; ``frontmatter``: further fields
        (``license``, ``metadata``...); ``scopes``, ``ttl_ms``, ``cache_scope`` as
        for :meth:`skills_from_directory`. The function may take a ``Context``.
        """
        check_options("skill()", options, SkillOptions)

        def register(fn: F) -> F:
            self.add_skill(fn, name=name, **options)
            return fn

        return register

    def add_skill(self, fn: Callable[..., Any], *, name: str | None = None, **options: Unpack[SkillOptions]) -> str:
        """Register a generated skill at any time (see :meth:`skill`); returns its ``SKILL.md`` URI."""
        check_options("add_skill()", options, SkillOptions)
        chosen = name or fn.__name__.replace("_", "-")
        summary, _ = describe(fn)
        ttl_ms, cache_scope = options.get("ttl_ms"), options.get("cache_scope")
        check_cache_hints(ttl_ms, cache_scope, f"Skill {chosen!r}")
        skill = generated_skill(
            fn, name=chosen, description=options.get("description") or summary or "", prefix=options.get("prefix"),
            frontmatter=options.get("frontmatter"), scopes=options.get("scopes"), ttl_ms=ttl_ms,
            cache_scope=cache_scope,
        )
        self._skills.add([skill])
        return skill.uri

    def remove_skill(self, uri: str) -> None:
        """Stop serving the skill whose ``SKILL.md`` is at ``uri``."""
        self._skills.remove(uri)
