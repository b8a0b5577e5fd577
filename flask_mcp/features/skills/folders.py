"""Skills read from folders: every folder holding a ``SKILL.md`` under a
directory becomes a skill, snapshotted at registration.

What the extension forbids is refused here, before anything is served: a
``SKILL.md`` without front matter ``name`` and ``description``, a name that
breaks the naming rules or differs from its folder's, a symbolic link leading
outside the skill's folder, and skills over the per-skill limits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...auth.scopes import validate_scopes
from .catalog import MAX_BYTES, MAX_FILES, SKILL_FILE, Skill, SkillFile, check_frontmatter, check_name, skill_path
from .frontmatter import FrontMatterError, parse

#: Scopes for every skill found, or per skill (by name or skill path).
ScopesSpec = Sequence[str] | Mapping[str, Sequence[str]] | None


def _skipped(name: str) -> bool:
    """Hidden files and folders (``.git``, ``.DS_Store``) and byte-code caches are not part of a skill."""
    return name.startswith(".") or name == "__pycache__"


def find_skill_folders(directory: Path) -> list[Path]:
    """``directory`` itself when it holds a ``SKILL.md``, and every folder under it
    that does (nested skills included), in a stable order."""
    found = []
    for current, folders, files in os.walk(directory):
        folders[:] = sorted(f for f in folders if not _skipped(f))
        if SKILL_FILE in files:
            found.append(Path(current))
    return found


def load_directory(
    directory: str | os.PathLike[str],
    *,
    prefix: str | None = None,
    scopes: ScopesSpec = None,
    ttl_ms: int | None = None,
    cache_scope: str | None = None,
) -> list[Skill]:
    """The skills under ``directory``; their skill paths are their folders' paths
    relative to it (``directory``'s own name when it is a skill itself), after ``prefix``."""
    base = Path(directory)
    if not base.is_dir():
        raise ValueError(f"Skills directory {str(base)!r} is not a directory")
    folders = find_skill_folders(base)
    if not folders:
        raise ValueError(f"No {SKILL_FILE} found in {str(base)!r} or its subfolders")
    top = base.parent if (base / SKILL_FILE).is_file() else base
    skills = []
    for folder in folders:
        relative = folder.relative_to(top).as_posix()
        parent, _, name = relative.rpartition("/")
        where = f"Skill folder {str(folder)!r}"
        full_prefix = "/".join(p for p in ((prefix or "").strip("/"), parent) if p)
        path = skill_path(full_prefix, check_name(name, where), where)
        skills.append(load_skill(folder, path, _scopes_for(scopes, name, path, where), ttl_ms, cache_scope))
    _check_scope_names(scopes, skills)
    return skills


def load_skill(
    folder: Path, path: str, scopes: Sequence[str] | None, ttl_ms: int | None, cache_scope: str | None
) -> Skill:
    """One skill folder, read once: the bytes read are the bytes served and digested."""
    where = f"Skill folder {str(folder)!r}"
    root = f"skill://{path}"
    files = [SkillFile.build(root, relative, data) for relative, data in _read_files(folder, where)]
    skill_md = next(f for f in files if f.path == SKILL_FILE)
    try:
        text = skill_md.data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: {SKILL_FILE} is not UTF-8 text") from None
    try:
        frontmatter = parse(text, f"{where}: {SKILL_FILE}")
    except FrontMatterError as exc:
        raise ValueError(str(exc)) from None
    name = frontmatter.get("name")
    if name is None:
        raise ValueError(f"{where}: the {SKILL_FILE} front matter has no name (it must equal the folder's name)")
    check_frontmatter(frontmatter, f"{where}: {SKILL_FILE}")
    if name != folder.name:
        raise ValueError(
            f"{where}: the {SKILL_FILE} front matter names the skill {name!r}, but its folder is {folder.name!r}; "
            "the Agent Skills specification wants them equal (rename one)"
        )
    files.sort(key=lambda f: (f.path != SKILL_FILE, f.path))
    return Skill(path, frontmatter, validate_scopes(scopes, where), tuple(files), ttl_ms=ttl_ms,
                 cache_scope=cache_scope)


def _read_files(folder: Path, where: str) -> list[tuple[str, bytes]]:
    """Every file of the skill as (path inside, bytes). Links are followed only to
    files inside the skill's folder; one leading elsewhere is refused."""
    real_root = folder.resolve()
    found: list[tuple[str, bytes]] = []
    total = 0
    for current, folders, names in os.walk(folder):
        here = Path(current)
        for name in list(folders):
            if not _skipped(name) and (here / name).is_symlink():
                _inside(here / name, real_root, where)  # refused when it leads outside; never descended
        folders[:] = sorted(f for f in folders if not _skipped(f))
        for name in sorted(names):
            if _skipped(name):
                continue
            full = here / name
            target = _inside(full, real_root, where)
            if not target.is_file():
                raise ValueError(f"{where}: {str(full)!r} is not a regular file")
            data = target.read_bytes()
            total += len(data)
            found.append((full.relative_to(folder).as_posix(), data))
            if len(found) > MAX_FILES or total > MAX_BYTES:
                raise ValueError(
                    f"{where}: the skill exceeds the extension's limits ({MAX_FILES} files, {MAX_BYTES} bytes), "
                    "which hosts need not accept; split it or leave large files out"
                )
    return found


def _inside(path: Path, real_root: Path, where: str) -> Path:
    target = path.resolve()
    if target != real_root and not target.is_relative_to(real_root):
        raise ValueError(
            f"{where}: {str(path)!r} is a link to {str(target)!r}, outside the skill's folder; "
            "a skill serves only its own files (copy the file in instead)"
        )
    return target


def _scopes_for(scopes: ScopesSpec, name: str, path: str, where: str) -> Sequence[str] | None:
    if scopes is None or isinstance(scopes, str) or not isinstance(scopes, Mapping):
        return scopes
    if path in scopes:
        return scopes[path]
    return scopes.get(name)


def _check_scope_names(scopes: ScopesSpec, skills: Sequence[Skill]) -> None:
    """A scopes mapping must name skills that exist (a typo would leave one unprotected)."""
    if not isinstance(scopes, Mapping):
        return
    known = {s.path for s in skills} | {s.name for s in skills}
    unknown = sorted(set(scopes) - known)
    if unknown:
        raise ValueError(f"scopes= names {unknown}, which are not skills found here (found: {sorted(known)})")
