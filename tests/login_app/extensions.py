"""The extension objects, created unbound and initialised in ``create_app``
(factory.py): what the tools and views import, as in any Flask app laid out
with an application factory."""

from __future__ import annotations

from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import DeclarativeBase

from flask_mcp import MCP


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
login_manager = LoginManager()
mcp = MCP(name="notes")
