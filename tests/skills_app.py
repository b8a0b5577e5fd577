"""A server with skills for the end-to-end skills tests (tests/e2e/test_e2e_skills.py):
skills from tests/skill_fixtures/ (one needing the ``payroll:read`` scope) and a
generated one, behind bearer tokens:

    gunicorn -w 2 tests.skills_app:app
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.auth import Principal

TOKENS = {
    "plain-token": Principal(subject="plain", scopes=frozenset()),
    "payroll-token": Principal(subject="clerk", scopes=frozenset({"payroll:read"})),
}

app = Flask(__name__)
app.config.update({
    "MCP_AUTH": True,
    "MCP_AUTH_SERVERS": ["https://auth.example.com"],
    "MCP_SKILLS_DIRECTORY_READ": True,
})
app.config.from_prefixed_env()
mcp = MCP(app, name="skills-e2e", version="1.0")
mcp.token_verifier(TOKENS.get)
mcp.skills_from_directory(Path(__file__).parent / "skill_fixtures", scopes={"payroll-guide": ["payroll:read"]})


@mcp.skill(frontmatter={"metadata": {"generated": "per read"}})
def caller_card(ctx: Context) -> dict[str, str]:
    """Say who is calling (generated on each read)."""
    subject = ctx.principal.subject if ctx.principal else "anonymous"
    return {"SKILL.md": f"# Caller\n\nYou are {subject}.\n", "notes/who.txt": subject}
