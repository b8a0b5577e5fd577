"""Sessions, messages, streams and tasks in a Redis Cluster
(``redis+cluster://host:port,host:port`` or an app-provided
``redis.cluster.RedisCluster``). The single-server classes of ``redis.py``
do the work; what a cluster changes is here:

* keys of one session share a slot: the session id is a hash tag
  (``flask-mcp:session:{id}``, ``flask-mcp:stream:{id}/stream``), so a
  session and its streams live, and fail, on one node;
* the bus is sharded pub/sub (``SPUBLISH``/``SSUBSCRIBE``, Redis 7.0+): a
  message goes to the one shard that owns its channel, where classic
  ``PUBLISH`` is copied to every node of the cluster;
* per-process session copies are kept per node, each node's invalidated by
  that node (``redis_cluster_tracking.py``);
* the client is built on first use (redis-py connects as it builds one),
  so an app starts while the cluster is down.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import parse_url
from redis.retry import Retry

from ..protocol.process_id import ProcessLock
from .contracts import (
    DEFAULT_IO_TIMEOUT,
    Backend,
    BackendOptions,
    BackendUnavailable,
    Message,
    redact_url,
)
from .redis import RedisEventLog, RedisSessionStore, RedisTaskStore
from .redis_bus import DEFAULT_CHANNEL_PREFIX
from .redis_cluster_tracking import ClusterCopies, node_pool
from .redis_faults import closed_bus, unavailable
from .redis_pubsub import RedisSubscription, SharedPubSub, connection_maker

#: redis-py's first release whose cluster client runs transactions (``WATCH``/``MULTI``
#: on one slot), which the event logs and task updates use.
REDIS_PY_MINIMUM = (6, 1)
_version = tuple(int(part) for part in redis.__version__.split(".")[:2] if part.isdigit())
if _version < REDIS_PY_MINIMUM:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"MCP_BACKEND 'redis+cluster://...' needs redis-py 6.1 or newer (transactions on a cluster); "
        f"this is {redis.__version__}: pip install 'redis>=6.1'"
    )

#: The URL schemes of a cluster: plain TCP and TLS.
SCHEMES = ("redis+cluster", "rediss+cluster")
#: Tries of a subscription whose node answers ``MOVED`` (the layout is re-read between tries).
_SUBSCRIBE_ATTEMPTS = 3


class ClusterClient:
    """A :class:`~redis.cluster.RedisCluster` made on first use and shared by
    the backend's parts; any other attribute is the cluster client's own."""

    #: Not a single server: ``redis.py`` reads this instead of a connection pool.
    connection_pool = None

    def __init__(self, make: Callable[[], RedisCluster], description: str) -> None:
        self.flask_mcp_description = description
        self._make = make
        self._cluster: RedisCluster | None = None
        self._lock = threading.Lock()

    @classmethod
    def wrap(cls, cluster: RedisCluster) -> ClusterClient:
        primaries: list[ClusterNode] = cluster.get_primaries()
        nodes = ",".join(f"{node.host}:{node.port}" for node in primaries)
        client = cls(lambda: cluster, f"redis cluster {nodes}")
        client._cluster = cluster
        return client

    @property
    def cluster(self) -> RedisCluster:
        """The cluster client (made now if need be; unreachable nodes -> ``ConnectionError``)."""
        if self._cluster is None:
            with self._lock:
                if self._cluster is None:
                    try:
                        self._cluster = self._make()
                    except redis.exceptions.RedisClusterException as exc:  # no node answered
                        raise redis.exceptions.ConnectionError(str(exc)) from exc
        return self._cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()


def _tag(identifier: str) -> str:
    """``{identifier}``: Redis hashes only what is between the braces, so every
    key carrying the same tag is in the same slot."""
    return "{" + identifier + "}"


class ClusterSessionStore(RedisSessionStore):
    """:class:`RedisSessionStore` with the session id as hash tag, and its
    per-process copies kept per node (``redis_cluster_tracking.py``)."""

    def _tracked_cache(self, client: redis.Redis, io_timeout: float) -> Any:
        return ClusterCopies(cast(ClusterClient, client), size=self.cache_size, io_timeout=io_timeout)

    def _key(self, session_id: str) -> str:
        return self.key_prefix + _tag(session_id)


class ClusterEventLog(RedisEventLog):
    """:class:`RedisEventLog` whose streams share their session's hash tag
    (a stream is named ``<session id>/<stream id>``)."""

    def _key(self, stream: str) -> str:
        session_id, slash, rest = stream.partition("/")
        return self.key_prefix + _tag(session_id) + slash + rest


class ClusterMessageBus:
    """Sharded pub/sub on prefixed channels. A process's subscriptions share
    one connection per node (redis_pubsub.py), to the node owning each
    channel's slot (the cluster's layout is re-read when a node answers
    ``MOVED``); a subscription the server ends (its slot moved to another
    node) raises :class:`BackendUnavailable`, as a lost connection does."""

    def __init__(
        self,
        client: ClusterClient,
        *,
        channel_prefix: str = DEFAULT_CHANNEL_PREFIX,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
    ) -> None:
        self.client = client
        self.channel_prefix = channel_prefix
        self.io_timeout = io_timeout
        self.where = client.flask_mcp_description
        #: Node name -> this process's pub/sub connection to it.
        self._shares: dict[str, SharedPubSub] = {}
        self._lock = ProcessLock()  # held while a node's client is made (I/O)
        #: Set by :meth:`close` (``Backend.close``).
        self.closed = False

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps(message)
        with unavailable(self.where):
            self.client.spublish(self.channel_prefix + channel, payload)

    def subscribe(self, channels: Sequence[str]) -> RedisSubscription:
        if self.closed:
            raise closed_bus(self.where)
        subscription = RedisSubscription(self.channel_prefix, channels)
        try:
            for attempt in range(_SUBSCRIBE_ATTEMPTS):
                try:
                    with unavailable(self.where):
                        self._subscribe(subscription)
                    return subscription
                except redis.exceptions.AskError as exc:  # MOVED or ASK: the slot map is out of date
                    subscription.leave()
                    if attempt == _SUBSCRIBE_ATTEMPTS - 1:
                        raise BackendUnavailable(
                            f"Redis ({self.where}): the cluster kept moving a slot: {exc}"
                        ) from exc
                    with unavailable(self.where):
                        self.client.nodes_manager.initialize()
        except BaseException:
            subscription.close()
            raise
        return subscription  # pragma: no cover - the loop returns or raises

    def _subscribe(self, subscription: RedisSubscription) -> None:
        by_node: dict[str, tuple[ClusterNode, list[str]]] = {}
        for name in subscription.names:
            node = self.client.get_node_from_key(name)
            by_node.setdefault(node.name, (node, []))[1].append(name)
        for node, names in by_node.values():
            self.share_for(node).add(subscription, names)

    def share_for(self, node: ClusterNode) -> SharedPubSub:
        """This process's pub/sub connection to ``node`` (made like the node's own)."""
        with self._lock:
            if self.closed:
                raise closed_bus(self.where)
            share = self._shares.get(node.name)
            if share is None:
                maker = connection_maker(node_pool(self.client, node, max_connections=1))
                share = self._shares[node.name] = SharedPubSub(
                    maker, where=f"{self.where}, node {node.name}", io_timeout=self.io_timeout, sharded=True
                )
            return share

    def close(self) -> None:
        """Close every subscription connection; no new subscription after this."""
        with self._lock:
            self.closed = True
            shares, self._shares = list(self._shares.values()), {}
        for share in shares:
            share.close()


def parse_cluster_url(url: str) -> tuple[list[ClusterNode], dict[str, Any]]:
    """The startup nodes and client options of
    ``redis+cluster://[user:password@]host:port[,host:port...][/][?option=value...]``
    (``rediss+cluster://`` for TLS; the options are redis-py's URL options)."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in SCHEMES:
        raise ValueError(f"{scheme!r} is not a Redis Cluster scheme ({', '.join(SCHEMES)})")
    split = urllib.parse.urlsplit("//" + rest)
    userinfo, at, hosts = split.netloc.rpartition("@")
    nodes = []
    for location in hosts.split(","):
        try:
            parsed = urllib.parse.urlsplit("//" + location.strip())
            host, port = parsed.hostname, parsed.port or 6379
        except ValueError as exc:
            raise ValueError(f"bad node {location!r}: {exc}") from None
        if not host:
            raise ValueError(f"a node has no host ({location!r}); write host:port,host:port")
        nodes.append(ClusterNode(host, port))
    single = "rediss" if scheme.lower() == "rediss+cluster" else "redis"
    query = "?" + split.query if split.query else ""
    options: dict[str, Any] = parse_url(f"{single}://{userinfo}{at}{nodes[0].host}:{nodes[0].port}{split.path}{query}")
    if options.pop("db", 0) != 0:
        raise ValueError("a Redis Cluster has only database 0")
    options.pop("host", None)
    options.pop("port", None)
    return nodes, options


def client_from_url(url: str, *, io_timeout: float = DEFAULT_IO_TIMEOUT) -> ClusterClient:
    """A cluster client (made on first use) whose calls are bounded as
    ``redis.client_from_url``'s: socket timeouts of ``io_timeout``, one
    immediate retry (after which redis-py has re-read the cluster's layout)."""
    nodes, options = parse_cluster_url(url)

    def make() -> RedisCluster:
        return RedisCluster(
            startup_nodes=nodes,
            socket_timeout=io_timeout,
            socket_connect_timeout=io_timeout,
            retry=Retry(NoBackoff(), 1),
            **options,
        )

    return ClusterClient(make, redact_url(url))


def backend_from_client(
    client: ClusterClient, *, timeout: float, io_timeout: float, owned: bool, retention: float = 600.0
) -> Backend:
    """A :class:`Backend` over ``client``; closed by ``Backend.close`` only if ``owned``."""
    # The single-server classes only call commands a cluster client has too.
    shared = cast(redis.Redis, client)

    def check() -> None:
        with unavailable(client.flask_mcp_description):
            client.cluster.ping(target_nodes=RedisCluster.ALL_NODES)

    bus = ClusterMessageBus(client, io_timeout=io_timeout)

    def close() -> None:
        bus.close()
        if owned:
            client.close()

    return Backend(
        sessions=ClusterSessionStore(shared, timeout=timeout, io_timeout=io_timeout),
        bus=bus,
        events=ClusterEventLog(shared, retention=retention),
        tasks=RedisTaskStore(shared),
        description=client.flask_mcp_description,
        check=check,
        close=close,
    )


def adopt(cluster: RedisCluster, options: BackendOptions) -> Backend:
    """A backend over the app's own cluster client (left open at close)."""
    return backend_from_client(
        ClusterClient.wrap(cluster),
        timeout=options.timeout,
        io_timeout=options.io_timeout,
        owned=False,
        retention=options.retention,
    )


def open_uri(uri: str, options: BackendOptions) -> Backend:
    """``redis+cluster://host:port,host:port`` and ``rediss+cluster://...``."""
    try:
        client = client_from_url(uri, io_timeout=options.io_timeout)
    except ValueError as exc:
        raise ValueError(f"MCP_BACKEND {redact_url(uri)!r} is not a valid Redis Cluster URL: {exc}") from exc
    backend = backend_from_client(
        client, timeout=options.timeout, io_timeout=options.io_timeout, owned=True, retention=options.retention
    )
    return dataclasses.replace(backend, description=redact_url(uri))


def rate_limit_storage(client: ClusterClient, key_prefix: str) -> Any:
    """A ``limits`` storage counting in the same cluster (``limits``' own
    ``redis+cluster`` storage, given the nodes and options of ``client``)."""
    from limits.storage import storage_from_string

    cluster = client.cluster
    skipped = (
        "redis_connect_func",
        "connection_pool",
        "oss_cluster_maint_notifications_handler",
        "maint_notifications_config",
    )
    kwargs = {k: v for k, v in cluster.nodes_manager.connection_kwargs.items() if k not in skipped}
    primaries: list[ClusterNode] = cluster.get_primaries()
    kwargs["startup_nodes"] = [ClusterNode(node.host, node.port) for node in primaries]
    return storage_from_string(
        f"redis+cluster://{primaries[0].host}:{primaries[0].port}",
        key_prefix=key_prefix,
        wrap_exceptions=True,
        **kwargs,
    )
