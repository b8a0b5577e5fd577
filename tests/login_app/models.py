"""Users with a password (the browser's login) and an API token (stored as a
hash: what MCP clients send as their bearer token), and their notes."""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy import ForeignKey, String, select
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash

from .extensions import Base, db


# Declared on the DeclarativeBase itself (db.Model's base, same metadata): mypy cannot see db.Model as a class.
class User(Base):
    __tablename__ = "user"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(80), unique=True)
    password_hash: Mapped[str] = mapped_column(String(256))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)

    # What Flask-Login asks of a user class (its UserMixin, written out: flask_login ships no types).
    is_authenticated = True
    is_active = True
    is_anonymous = False

    def get_id(self) -> str:
        return str(self.id)

    def check_password(self, password: str) -> bool:
        return check_password_hash(self.password_hash, password)

    @staticmethod
    def hash_token(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def check_token(cls, token: str) -> User | None:
        """The user an API token belongs to (looked up by its hash), or None."""
        digest = cls.hash_token(token)
        user = db.session.scalar(select(cls).where(cls.token_hash == digest))
        return user if user is not None and hmac.compare_digest(user.token_hash, digest) else None


class Note(Base):
    __tablename__ = "note"

    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("user.id"))
    text: Mapped[str] = mapped_column(String(500))
