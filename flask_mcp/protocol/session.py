"""The legacy (initialize-based) session record and the store interface the
core talks to. Backends implement :class:`SessionStore`."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


class StoreUnavailable(Exception):
    """The session store cannot be reached right now (a backend's fault type
    derives from this). Transient: the request gets 503 and may be retried."""


def new_session_id() -> str:
    """A cryptographically random id (192 random bits) of visible ASCII only
    (0x21-0x7E), led by the millisecond it was made in fixed-width hex. Ids
    made later sort later, so an ordered index (SQLite's B-tree on the
    session id) takes each new session on its last page instead of a random
    one: a create then dirties the pages the previous creates dirtied, and a
    WAL checkpoint copies (and syncs) a few pages instead of hundreds. The
    prefix tells the client only when it initialized."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_urlsafe(24)}"


@dataclass(slots=True)
class Session:
    """What the server remembers about one legacy client between requests."""

    id: str
    protocol_version: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    principal: str | None = None
    initialized: bool = False
    created_at: float = 0.0
    last_seen: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The record a backend stores (it serializes or copies it, so the
        containers are shared, not copied: ``asdict`` took longer than the write)."""
        return {
            "id": self.id,
            "protocol_version": self.protocol_version,
            "client_info": self.client_info,
            "client_capabilities": self.client_capabilities,
            "log_level": self.log_level,
            "principal": self.principal,
            "initialized": self.initialized,
            "created_at": self.created_at,
            "last_seen": self.last_seen,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Session:
        """A session from its stored record; keys it does not know (written by
        another version) are ignored, and missing ones take their defaults."""
        try:
            # Positional: a parsed record's keys are not interned, so passing
            # them as keywords (matched to the parameters by string comparison)
            # took longer than parsing the record.
            return cls(
                record["id"],
                record["protocol_version"],
                record["client_info"],
                record["client_capabilities"],
                record["log_level"],
                record["principal"],
                record["initialized"],
                record["created_at"],
                record["last_seen"],
                record["data"],
            )
        except KeyError:
            known = {k: v for k, v in record.items() if k in cls.__dataclass_fields__}
            return cls(**known)


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live; every worker that serves the endpoint must share it.

    A store on the network may also offer ``begin_create(session)``: it sends
    the write and returns a function that waits for it (raising
    :class:`StoreUnavailable`); ``initialize`` then builds its answer meanwhile
    (the Redis store does)."""

    def create(self, session: Session) -> None:
        """Store a new session (its timestamps are set by the store)."""

    def get(self, session_id: str) -> Session | None:
        """The live session, refreshing its idle timer; ``None`` if unknown or expired."""

    def save(self, session: Session) -> None:
        """Write back a changed session (log level, initialized flag, app data)."""

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""

    def delete(self, session_id: str) -> bool:
        """End a session; ``False`` when there was none."""
