"""The :class:`~flask_mcp.auth.oauth.store.OAuthStore` for several hosts: Redis.
Each token is a hash (its record, and the ``revoked`` / ``rotated`` flags
set atomically), indexed by refresh token, family and user; everything
expires with its refresh token, codes with their own short lifetime."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from typing import Any

from .store import CodeRecord, Connection, TokenRecord

#: Set a flag of a token hash from 0 to 1; 1 only for the caller that changed it.
#: A hash that expired is left absent (never recreated holding just the flag).
_RAISE_FLAG = """
if redis.call('HGET', KEYS[1], ARGV[1]) == '0' then
    redis.call('HSET', KEYS[1], ARGV[1], '1')
    return 1
end
return 0
"""

#: Set a field of a token hash that still exists (an expired token is not recreated).
_SET_IF_PRESENT = """
if redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 0
"""

#: Store a code: its record, not yet used, expiring with it (one key: atomic, one cluster slot).
_SAVE_CODE = """
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'used', '0', 'replayed', '0')
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

#: Mark a code used by the token family ARGV[1]; its record only for the caller that did.
_TAKE_CODE = """
local record = redis.call('HGET', KEYS[1], 'record')
if not record or redis.call('HGET', KEYS[1], 'used') ~= '0' then
    return false
end
redis.call('HSET', KEYS[1], 'used', '1', 'family', ARGV[1])
return record
"""

#: A used code presented again: flag it, and answer the family its first exchange produced.
_REPLAY_CODE = """
if redis.call('HGET', KEYS[1], 'used') ~= '1' then
    return false
end
redis.call('HSET', KEYS[1], 'replayed', '1')
return redis.call('HGET', KEYS[1], 'family')
"""


class RedisOAuthStore:
    """Codes and tokens in Redis (one server, Sentinel's primary, or a
    cluster), under ``prefix``. Every script touches one key, and no command
    spans keys atomically, so the keys need no shared hash slot on a cluster."""

    def __init__(self, client: Any, prefix: str = "flask-mcp:oauth:") -> None:
        self.redis = client
        self.prefix = prefix
        self._scripts: dict[str, Any] = {}

    @classmethod
    def from_url(cls, url: str, prefix: str = "flask-mcp:oauth:") -> RedisOAuthStore:
        """Any URL ``MCP_BACKEND`` accepts for Redis (see :func:`redis_client`)."""
        return cls(redis_client(url), prefix)

    def _script(self, source: str) -> Any:
        """Registered on first use: a cluster client connects when first asked anything."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.redis.register_script(source)
        return script

    def _raise_flag(self, *, keys: list[str], args: list[str]) -> Any:
        return self._script(_RAISE_FLAG)(keys=keys, args=args)

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def save_client(self, client_id: str, document: dict[str, Any]) -> None:
        self.redis.set(self._key("client", client_id), json.dumps(document))

    def client_document(self, client_id: str) -> dict[str, Any] | None:
        raw = self.redis.get(self._key("client", client_id))
        return json.loads(raw) if raw else None

    def save_code(self, record: CodeRecord) -> None:
        ttl = max(1, int(record.expires_at - time.time()) + 1)
        self._script(_SAVE_CODE)(keys=[self._key("code", record.code_hash)], args=[json.dumps(asdict(record)), ttl])

    def take_code(self, code_hash: str, family: str) -> CodeRecord | None:
        raw = self._script(_TAKE_CODE)(keys=[self._key("code", code_hash)], args=[family])
        return CodeRecord(**json.loads(raw)) if raw else None

    def replay_code(self, code_hash: str) -> str | None:
        family = self._script(_REPLAY_CODE)(keys=[self._key("code", code_hash)], args=[])
        return family.decode() if isinstance(family, bytes) else family

    def code_replayed(self, code_hash: str) -> bool:
        return bool(self.redis.hget(self._key("code", code_hash), "replayed") == b"1")

    def save_token(self, record: TokenRecord, client_name: str) -> None:
        ttl = max(1, int(record.refresh_expires_at - time.time()) + 1)
        key = self._key("token", record.access_hash)
        pipe = self.redis.pipeline()
        pipe.hset(key, mapping={"record": json.dumps(asdict(record)), "client_name": client_name,
                                "revoked": int(record.revoked), "rotated": int(record.rotated)})
        pipe.expire(key, ttl)
        if record.refresh_hash:
            pipe.set(self._key("refresh", record.refresh_hash), record.access_hash, ex=ttl)
        for index in (self._key("family", record.family), self._key("user", record.user_id)):
            pipe.sadd(index, record.access_hash)
            pipe.expire(index, ttl, gt=True)
            pipe.expire(index, ttl, nx=True)
        pipe.execute()

    def _load(self, access_hash: str) -> tuple[TokenRecord, str, float | None] | None:
        """The token's record, client name and last use."""
        fields = self.redis.hgetall(self._key("token", access_hash))
        if b"record" not in fields:  # gone, or (written by an older version) only a flag left
            return None
        record = TokenRecord(**json.loads(fields[b"record"]))
        record = replace(record, revoked=fields[b"revoked"] == b"1", rotated=fields[b"rotated"] == b"1")
        used = fields.get(b"last_used")
        return record, fields[b"client_name"].decode(), float(used) if used else None

    def token_by_access(self, access_hash: str) -> TokenRecord | None:
        found = self._load(access_hash)
        return found[0] if found else None

    def token_by_refresh(self, refresh_hash: str) -> TokenRecord | None:
        access_hash = self.redis.get(self._key("refresh", refresh_hash))
        return self.token_by_access(access_hash.decode()) if access_hash else None

    def _flag(self, access_hashes: Any, flag: str) -> int:
        """Raise ``flag`` on each token still stored; how many this call changed."""
        changed = 0
        for access_hash in access_hashes:
            key = self._key("token", access_hash.decode() if isinstance(access_hash, bytes) else access_hash)
            changed += int(self._raise_flag(keys=[key], args=[flag]))
        return changed

    def claim_rotation(self, refresh_hash: str) -> bool:
        # The refresh -> access index never changes, so only the flag needs the atomic step.
        access_hash = self.redis.get(self._key("refresh", refresh_hash))
        return bool(access_hash) and self._flag([access_hash], "rotated") == 1

    def revoke_family(self, family: str) -> None:
        # A second look catches a token saved into the family while the first pass ran.
        first = self.redis.smembers(self._key("family", family))
        self._flag(first, "revoked")
        self._flag(self.redis.smembers(self._key("family", family)) - first, "revoked")

    def mark_used(self, access_hash: str, when: float) -> None:
        self._script(_SET_IF_PRESENT)(keys=[self._key("token", access_hash)], args=["last_used", repr(when)])

    def connections(self, user_id: str) -> list[Connection]:
        now = time.time()
        found: dict[str, Connection] = {}
        for access_hash in self.redis.smembers(self._key("user", user_id)):
            loaded = self._load(access_hash.decode())
            if loaded is None or loaded[0].revoked or loaded[0].refresh_expires_at <= now:
                continue
            record, name, used = loaded
            seen = found.get(record.client_id)
            uses = [t for t in (used, seen.last_used if seen else None) if t is not None]
            found[record.client_id] = Connection(
                record.client_id, name, record.scope,
                min(record.issued_at, seen.first_connected) if seen else record.issued_at,
                max(record.issued_at, seen.last_issued) if seen else record.issued_at,
                max(uses) if uses else None,
            )
        return [found[k] for k in sorted(found)]

    def revoke_client(self, user_id: str, client_id: str) -> int:
        live = []
        for access_hash in self.redis.smembers(self._key("user", user_id)):
            loaded = self._load(access_hash.decode())
            if loaded is not None and loaded[0].client_id == client_id and not loaded[0].revoked:
                live.append(access_hash)
        return self._flag(live, "revoked")


def redis_client(spec: Any) -> Any:
    """A Redis client for ``MCP_OAUTH_STORE``, built as ``MCP_BACKEND`` builds
    its own (flask_mcp.backends): ``redis://``, ``rediss://``, ``unix://``,
    ``redis+unix://``, ``redis+sentinel://``, ``redis+cluster://``,
    ``rediss+cluster://``, or the app's ``redis.Redis`` / ``RedisCluster``."""
    if not isinstance(spec, str):
        import redis
        from redis.cluster import RedisCluster

        if isinstance(spec, redis.Redis):
            if getattr(spec.connection_pool, "is_master", True) is False:
                raise ValueError(f"MCP_OAUTH_STORE {spec!r} reads from Sentinel replicas, which refuse writes: "
                                 "give Sentinel.master_for(...) instead")
            return spec
        if isinstance(spec, RedisCluster):
            return spec
        raise ValueError(f"MCP_OAUTH_STORE {spec!r} is not a Redis client")
    scheme, _, rest = spec.partition("://")
    scheme = scheme.lower()
    if scheme in ("redis", "rediss", "unix", "redis+unix"):
        from ...backends.redis import client_from_url

        return client_from_url("unix://" + rest if scheme == "redis+unix" else spec)
    if scheme == "redis+sentinel":
        from ...backends.redis_sentinel import client_from_sentinel_url

        return client_from_sentinel_url(spec)
    if scheme in ("redis+cluster", "rediss+cluster"):
        from ...backends.redis_cluster import client_from_url as cluster_client_from_url

        return cluster_client_from_url(spec)
    raise ValueError(f"MCP_OAUTH_STORE {spec!r} is not a Redis URL")
