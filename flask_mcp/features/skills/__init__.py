"""Skills (the skills extension, SEP-2640): a skill is a ``SKILL.md`` with
YAML front matter plus files, served as resources. ``catalog`` holds the
skill, its files and the registry; ``folders`` reads skills from folders;
``frontmatter`` parses their front matter; ``api`` is the extension's
``@mcp.skill`` half.

May import what ``features`` may, and the rest of ``features``.
"""
