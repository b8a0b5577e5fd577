"""The default :class:`~flask_mcp.auth.oauth.store.OAuthStore`: one SQLite file,
shared by every worker process on the host (WAL, short transactions)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import astuple, fields
from typing import Any

from .store import CodeRecord, Connection, TokenRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS oauth_codes (
    code_hash TEXT PRIMARY KEY, client_id TEXT, user_id TEXT, redirect_uri TEXT, scope TEXT,
    resource TEXT, code_challenge TEXT, code_challenge_method TEXT, expires_at REAL);
CREATE TABLE IF NOT EXISTS oauth_used_codes (
    code_hash TEXT PRIMARY KEY, family TEXT, replayed INTEGER, expires_at REAL);
CREATE TABLE IF NOT EXISTS oauth_tokens (
    access_hash TEXT PRIMARY KEY, refresh_hash TEXT UNIQUE, family TEXT, client_id TEXT, user_id TEXT,
    scope TEXT, resource TEXT, issued_at REAL, expires_at REAL, refresh_expires_at REAL,
    revoked INTEGER, rotated INTEGER, client_name TEXT);
CREATE INDEX IF NOT EXISTS oauth_tokens_family ON oauth_tokens (family);
CREATE TABLE IF NOT EXISTS oauth_clients (client_id TEXT PRIMARY KEY, document TEXT, created_at REAL);
CREATE INDEX IF NOT EXISTS oauth_tokens_user ON oauth_tokens (user_id, client_id);
"""

_TOKEN_COLUMNS = ", ".join(f.name for f in fields(TokenRecord))


class SQLiteOAuthStore:
    """Codes and tokens in a SQLite file (a connection per thread), created
    on first use: importing an app touches no disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            directory = os.path.dirname(self.path)
            if directory:
                os.makedirs(directory, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            _add_last_used(db)
            self._local.db = db
        return db

    def save_client(self, client_id: str, document: dict[str, Any]) -> None:
        self._db().execute("INSERT INTO oauth_clients VALUES (?, ?, ?)", (client_id, json.dumps(document), time.time()))

    def client_document(self, client_id: str) -> dict[str, Any] | None:
        row = self._db().execute("SELECT document FROM oauth_clients WHERE client_id = ?", (client_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def save_code(self, record: CodeRecord) -> None:
        self._db().execute("INSERT INTO oauth_codes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", astuple(record))

    def take_code(self, code_hash: str, family: str) -> CodeRecord | None:
        db = self._db()
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT * FROM oauth_codes WHERE code_hash = ?", (code_hash,)).fetchone()
            db.execute("DELETE FROM oauth_codes WHERE code_hash = ? OR expires_at < ?", (code_hash, now))
            db.execute("DELETE FROM oauth_used_codes WHERE expires_at < ?", (now,))
            if row is not None:
                record = CodeRecord(*row)
                db.execute("INSERT OR REPLACE INTO oauth_used_codes VALUES (?, ?, 0, ?)",
                           (code_hash, family, record.expires_at))
        finally:
            db.execute("COMMIT")
        return CodeRecord(*row) if row else None

    def replay_code(self, code_hash: str) -> str | None:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT family FROM oauth_used_codes WHERE code_hash = ? AND expires_at >= ?",
                             (code_hash, time.time())).fetchone()
            db.execute("UPDATE oauth_used_codes SET replayed = 1 WHERE code_hash = ?", (code_hash,))
        finally:
            db.execute("COMMIT")
        return str(row[0]) if row else None

    def code_replayed(self, code_hash: str) -> bool:
        row = self._db().execute("SELECT replayed FROM oauth_used_codes WHERE code_hash = ?",
                                 (code_hash,)).fetchone()
        return bool(row and row[0])

    def save_token(self, record: TokenRecord, client_name: str) -> None:
        self._db().execute(f"INSERT INTO oauth_tokens ({_TOKEN_COLUMNS}, client_name) "
                           f"VALUES ({', '.join('?' * (len(fields(TokenRecord)) + 1))})",
                           (*astuple(record), client_name))

    def _token(self, column: str, value: str) -> TokenRecord | None:
        row = self._db().execute(f"SELECT {_TOKEN_COLUMNS} FROM oauth_tokens WHERE {column} = ?",
                                 (value,)).fetchone()
        if row is None:
            return None
        values = list(row)
        values[-2], values[-1] = bool(values[-2]), bool(values[-1])
        return TokenRecord(*values)

    def token_by_access(self, access_hash: str) -> TokenRecord | None:
        return self._token("access_hash", access_hash)

    def token_by_refresh(self, refresh_hash: str) -> TokenRecord | None:
        return self._token("refresh_hash", refresh_hash)

    def claim_rotation(self, refresh_hash: str) -> bool:
        # One conditional UPDATE (its own transaction): the row count says who won.
        cursor = self._db().execute(
            "UPDATE oauth_tokens SET rotated = 1 WHERE refresh_hash = ? AND rotated = 0 AND revoked = 0",
            (refresh_hash,))
        return cursor.rowcount == 1

    def revoke_family(self, family: str) -> None:
        self._db().execute("UPDATE oauth_tokens SET revoked = 1 WHERE family = ?", (family,))

    def mark_used(self, access_hash: str, when: float) -> None:
        self._db().execute("UPDATE oauth_tokens SET last_used = ? WHERE access_hash = ?", (when, access_hash))

    def connections(self, user_id: str) -> list[Connection]:
        rows = self._db().execute(
            "SELECT client_id, MAX(client_name), MAX(scope), MIN(issued_at), MAX(issued_at), MAX(last_used) "
            "FROM oauth_tokens "
            "WHERE user_id = ? AND revoked = 0 AND refresh_expires_at > ? GROUP BY client_id ORDER BY client_id",
            (user_id, time.time()),
        ).fetchall()
        return [Connection(*row) for row in rows]

    def revoke_client(self, user_id: str, client_id: str) -> int:
        cursor = self._db().execute(
            "UPDATE oauth_tokens SET revoked = 1 WHERE user_id = ? AND client_id = ? AND revoked = 0",
            (user_id, client_id),
        )
        return cursor.rowcount


def _add_last_used(db: sqlite3.Connection) -> None:
    """The ``last_used`` column, added to a file an earlier version created without it."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(oauth_tokens)")}
    if "last_used" not in columns:
        try:
            db.execute("ALTER TABLE oauth_tokens ADD COLUMN last_used REAL")
        except sqlite3.OperationalError as exc:  # another worker added it first
            if "duplicate column" not in str(exc):
                raise
