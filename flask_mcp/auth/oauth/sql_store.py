"""The authorization server's store in the app's SQL database
(``MCP_OAUTH_STORE`` = the app's Flask-SQLAlchemy ``db``, an SQLAlchemy
engine, or ``postgresql://...``): the ``flask_mcp_oauth_*`` tables of
``flask_mcp.backends.sql.metadata``, shared by every host. Each method is
one transaction; the atomic steps (taking a code, claiming a rotation) are
one conditional statement whose row count says who won."""

from __future__ import annotations

import json
import time
from dataclasses import astuple, fields
from typing import Any

from sqlalchemy import Connection as SqlConnection
from sqlalchemy import Engine, delete, func, insert, select, update

from ...backends.sql import SqlDatabase
from ...backends.sql.tables import oauth_clients, oauth_codes, oauth_tokens, oauth_used_codes
from .store import CodeRecord, Connection, TokenRecord

_TOKEN_FIELDS = [f.name for f in fields(TokenRecord)]
_CODE_FIELDS = [f.name for f in fields(CodeRecord)]
_TOKEN_COLUMNS = [oauth_tokens.c[name] for name in _TOKEN_FIELDS]
_CODE_COLUMNS = [oauth_codes.c[name] for name in _CODE_FIELDS]


class SqlOAuthStore:
    """Codes and tokens as rows; the tables are made on first use (or by the
    app's migrations, see docs/backends.md)."""

    def __init__(self, database: SqlDatabase | Engine | str) -> None:
        if isinstance(database, SqlDatabase):
            self.database = database
        elif isinstance(database, Engine):
            self.database = SqlDatabase(database, owned=False)
        else:
            self.database = SqlDatabase.from_url(database)

    def save_client(self, client_id: str, document: dict[str, Any]) -> None:
        values = {"client_id": client_id, "document": json.dumps(document), "created_at": time.time()}
        self.database.run(lambda c: c.execute(insert(oauth_clients).values(**values)))

    def client_document(self, client_id: str) -> dict[str, Any] | None:
        found = self.database.run(lambda c: c.execute(
            select(oauth_clients.c.document).where(oauth_clients.c.client_id == client_id)).scalar())
        return json.loads(found) if found is not None else None

    def save_code(self, record: CodeRecord) -> None:
        values = dict(zip(_CODE_FIELDS, astuple(record), strict=True))
        self.database.run(lambda c: c.execute(insert(oauth_codes).values(**values)))

    def take_code(self, code_hash: str, family: str) -> CodeRecord | None:
        now = time.time()

        def take(c: SqlConnection) -> CodeRecord | None:
            # The DELETE is the atomic step: of two exchanges of one code, one deletes the row.
            row = c.execute(select(*_CODE_COLUMNS).where(oauth_codes.c.code_hash == code_hash)).first()
            taken = c.execute(delete(oauth_codes).where(oauth_codes.c.code_hash == code_hash)).rowcount
            c.execute(delete(oauth_codes).where(oauth_codes.c.expires_at < now))
            c.execute(delete(oauth_used_codes).where(oauth_used_codes.c.expires_at < now))
            if row is None or not taken:
                return None
            record = CodeRecord(*row)
            c.execute(delete(oauth_used_codes).where(oauth_used_codes.c.code_hash == code_hash))
            c.execute(insert(oauth_used_codes).values(code_hash=code_hash, family=family, replayed=0,
                                                      expires_at=record.expires_at))
            return record

        return self.database.run(take)

    def replay_code(self, code_hash: str) -> str | None:
        now = time.time()

        def replay(c: SqlConnection) -> str | None:
            row = c.execute(select(oauth_used_codes.c.family).where(
                oauth_used_codes.c.code_hash == code_hash, oauth_used_codes.c.expires_at >= now)).first()
            c.execute(update(oauth_used_codes).where(oauth_used_codes.c.code_hash == code_hash).values(replayed=1))
            return str(row[0]) if row else None

        return self.database.run(replay)

    def code_replayed(self, code_hash: str) -> bool:
        found = self.database.run(lambda c: c.execute(
            select(oauth_used_codes.c.replayed).where(oauth_used_codes.c.code_hash == code_hash)).scalar())
        return bool(found)

    def save_token(self, record: TokenRecord, client_name: str) -> None:
        values = dict(zip(_TOKEN_FIELDS, astuple(record), strict=True))
        values.update(revoked=int(record.revoked), rotated=int(record.rotated), client_name=client_name)
        self.database.run(lambda c: c.execute(insert(oauth_tokens).values(**values)))

    def _token(self, column: str, value: str) -> TokenRecord | None:
        row = self.database.run(lambda c: c.execute(
            select(*_TOKEN_COLUMNS).where(oauth_tokens.c[column] == value)).first())
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
        t = oauth_tokens.c
        claimed = self.database.run(lambda c: c.execute(
            update(oauth_tokens).where(t.refresh_hash == refresh_hash, t.rotated == 0, t.revoked == 0)
            .values(rotated=1)).rowcount)
        return bool(claimed == 1)

    def revoke_family(self, family: str) -> None:
        """Two passes, each its own transaction. Under READ COMMITTED (PostgreSQL's
        default) an UPDATE misses a row committed after it started: a token pair
        saved into the family by a racing rotation while the first pass ran. The
        rotation checks the family after saving (``revoke_old_credential``), but
        may look before the first pass commits; the second pass starts after that
        commit, so one of the two always sees the other."""
        revoke = update(oauth_tokens).where(oauth_tokens.c.family == family).values(revoked=1)
        self.database.run(lambda c: c.execute(revoke))
        self.database.run(lambda c: c.execute(revoke))

    def mark_used(self, access_hash: str, when: float) -> None:
        self.database.run(lambda c: c.execute(
            update(oauth_tokens).where(oauth_tokens.c.access_hash == access_hash).values(last_used=when)))

    def connections(self, user_id: str) -> list[Connection]:
        t = oauth_tokens.c
        now = time.time()
        rows = self.database.run(lambda c: c.execute(
            select(t.client_id, func.max(t.client_name), func.max(t.scope), func.min(t.issued_at),
                   func.max(t.issued_at), func.max(t.last_used))
            .where(t.user_id == user_id, t.revoked == 0, t.refresh_expires_at > now)
            .group_by(t.client_id).order_by(t.client_id)).all())
        return [Connection(*row) for row in rows]

    def revoke_client(self, user_id: str, client_id: str) -> int:
        t = oauth_tokens.c
        return int(self.database.run(lambda c: c.execute(
            update(oauth_tokens).where(t.user_id == user_id, t.client_id == client_id, t.revoked == 0)
            .values(revoked=1)).rowcount))
