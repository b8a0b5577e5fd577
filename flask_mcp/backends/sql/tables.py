"""flask-mcp's own tables in the app's SQL database, on a :class:`MetaData`
of their own (:data:`metadata`): an app that migrates its schema with
Alembic or Flask-Migrate adds it to ``target_metadata`` and gets these
tables in its migrations; an app that does not gets them created on first
use (``database.py``). Every name starts with ``flask_mcp_``, so they never
collide with the app's."""

from __future__ import annotations

from sqlalchemy import Column, Double, Index, Integer, MetaData, String, Table, Text

#: The tables flask-mcp keeps in the app's database (include it in Alembic's
#: ``target_metadata`` to migrate them with the app's own).
metadata = MetaData()

#: Legacy sessions: the record as JSON text; ``last_seen`` is the idle timer.
sessions = Table(
    "flask_mcp_sessions",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("record", Text, nullable=False),
    Column("last_seen", Double, nullable=False),
    Index("flask_mcp_sessions_last_seen", "last_seen"),
)

#: Bus messages: every message where the bus polls (databases without
#: LISTEN/NOTIFY), and on PostgreSQL those too long for a NOTIFY payload.
messages = Table(
    "flask_mcp_messages",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("channel", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("created", Double, nullable=False),
    Index("flask_mcp_messages_created", "created"),
)

#: Resumable streams' events; a stream's priming row (``seq`` 0) carries the
#: time of its newest event, which decides when the whole stream is dropped.
stream_events = Table(
    "flask_mcp_stream_events",
    metadata,
    Column("stream", String(200), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("event", Text, nullable=False),
    Column("created", Double, nullable=False),
    Index("flask_mcp_stream_events_created", "created"),
)

#: Task records as JSON with their expiry; ``version`` makes an update a
#: compare-and-set, so concurrent workers never overwrite each other on any database.
tasks = Table(
    "flask_mcp_tasks",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("record", Text, nullable=False),
    Column("expires", Double, nullable=True),
    Column("version", Integer, nullable=False, default=0),
    Index("flask_mcp_tasks_expires", "expires"),
)

#: Rate limit counters (``MCP_RATE_LIMIT``, ``@mcp.tool(rate_limit=...)``):
#: one fixed window per key, counted across every host sharing the database.
rate_limits = Table(
    "flask_mcp_rate_limits",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("count", Integer, nullable=False),
    Column("expires", Double, nullable=False),
    Index("flask_mcp_rate_limits_expires", "expires"),
)

#: The OAuth authorization server's state (``MCP_OAUTH``), when its store is
#: this database (``flask_mcp/auth/oauth/sql_store.py``): codes, used codes,
#: tokens (all as SHA-256 hashes) and dynamically registered clients.
oauth_codes = Table(
    "flask_mcp_oauth_codes",
    metadata,
    Column("code_hash", String(128), primary_key=True),
    Column("client_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("redirect_uri", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("code_challenge", Text, nullable=False),
    Column("code_challenge_method", Text, nullable=False),
    Column("expires_at", Double, nullable=False),
)
oauth_used_codes = Table(
    "flask_mcp_oauth_used_codes",
    metadata,
    Column("code_hash", String(128), primary_key=True),
    Column("family", Text, nullable=False),
    Column("replayed", Integer, nullable=False, default=0),
    Column("expires_at", Double, nullable=False),
)
oauth_tokens = Table(
    "flask_mcp_oauth_tokens",
    metadata,
    Column("access_hash", String(128), primary_key=True),
    Column("refresh_hash", String(128), nullable=True, unique=True),
    Column("family", String(128), nullable=False),
    Column("client_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("scope", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("issued_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    Column("refresh_expires_at", Double, nullable=False),
    Column("revoked", Integer, nullable=False, default=0),
    Column("rotated", Integer, nullable=False, default=0),
    Column("client_name", Text, nullable=False),
    Column("last_used", Double, nullable=True),
    Index("flask_mcp_oauth_tokens_family", "family"),
    Index("flask_mcp_oauth_tokens_user", "user_id", "client_id"),
)
oauth_clients = Table(
    "flask_mcp_oauth_clients",
    metadata,
    Column("client_id", String(255), primary_key=True),
    Column("document", Text, nullable=False),
    Column("created_at", Double, nullable=False),
)
