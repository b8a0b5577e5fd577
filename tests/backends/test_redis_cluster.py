"""What a Redis Cluster changes (flask_mcp/backends/redis_cluster.py), on real
cluster nodes this module starts on free loopback ports: the URL form, a
session's keys in one slot, sharded pub/sub, keys counted on every node, no
per-process copies, rate-limit counters in the cluster, an app's own
``RedisCluster``, and a node going down answering 503, never 500. The
contract every backend meets runs on a cluster in tests/test_backends.py and
tests/test_task_stores.py; two hosts on a cluster in tests/test_e2e_multihost.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import JSON_HEADERS
from flask import Flask
from redis.cluster import ClusterNode, RedisCluster
from redis_server import RedisClusterNodes, shared_cluster

from flask_mcp import MCP
from flask_mcp.backends import BackendUnavailable, open_backend
from flask_mcp.backends.redis_cluster import SCHEMES, ClusterSessionStore, parse_cluster_url
from flask_mcp.protocol.session import Session

LEGACY = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "cluster", "version": "1"}},
}


@pytest.fixture
def cluster_url() -> str:
    return shared_cluster().url


@pytest.fixture
def raw(cluster_url: str) -> Iterator[RedisCluster]:
    """A plain redis-py cluster client, to look at what the backend wrote."""
    nodes, _ = parse_cluster_url(cluster_url)
    client = RedisCluster(startup_nodes=nodes, socket_timeout=5)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def make_app() -> Iterator[Callable[..., Flask]]:
    """Apps on a cluster, their backends closed after the test (before a
    private cluster goes: else their cancellation listeners go on calling it)."""
    made: list[Flask] = []

    def make(backend: object, folder: Path, **config: Any) -> Flask:
        app = Flask("cluster", instance_path=str(folder))
        app.config.update(TESTING=True, MCP_BACKEND=backend, **config)
        mcp = MCP(app, name="cluster", version="1.0")

        @mcp.tool(rate_limit="3/minute")
        def limited() -> str:
            """Three calls a minute per caller."""
            return "ok"

        made.append(app)
        return app

    yield make
    for app in made:
        app.extensions["mcp"].backend.close()


# ------------------------------------------------------------------ the URL


def test_the_url_names_every_startup_node_and_takes_redis_py_options() -> None:
    nodes, options = parse_cluster_url("redis+cluster://user:s3cret@h1:7000,h2:7001,[::1]:7002/?socket_keepalive=yes")
    assert [(n.host, n.port) for n in nodes] == [("h1", 7000), ("h2", 7001), ("::1", 7002)]
    assert options["username"] == "user" and options["password"] == "s3cret"
    assert options["socket_keepalive"] is True
    _, tls = parse_cluster_url("rediss+cluster://h1:7000")
    assert tls["connection_class"] is redis.SSLConnection
    nodes, _ = parse_cluster_url("redis+cluster://cache.example")
    assert [(n.host, n.port) for n in nodes] == [("cache.example", 6379)]
    assert set(SCHEMES) == {"redis+cluster", "rediss+cluster"}


@pytest.mark.parametrize(
    ("uri", "complaint"),
    [
        ("redis+cluster://h1:7000/3", "only database 0"),
        ("redis+cluster://h1:7000,:7001", "has no host"),
        ("redis+cluster://h1:notaport", "bad node"),
    ],
)
def test_a_bad_cluster_url_is_refused_with_what_is_accepted(tmp_path: Path, uri: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint) as refused:
        open_backend(uri, timeout=60, instance_path=str(tmp_path))
    assert "redis+cluster://host:port,host:port" in str(refused.value)


def test_a_password_in_the_url_is_never_in_the_description(tmp_path: Path) -> None:
    backend = open_backend("redis+cluster://:s3cret@127.0.0.1:1,127.0.0.1:2", timeout=60, instance_path=str(tmp_path))
    assert "s3cret" not in backend.describe() and "127.0.0.1:1,127.0.0.1:2" in backend.describe()
    backend.close()


def test_an_app_starts_while_no_node_answers_and_requests_get_503(
    make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    """Nothing connects until first use; then a quick 503 with a JSON-RPC error."""
    started = time.monotonic()
    backend = open_backend("redis+cluster://127.0.0.1:1,127.0.0.1:2", timeout=60, instance_path=str(tmp_path))
    with pytest.raises(BackendUnavailable, match="127.0.0.1:1"):
        backend.check()
    app = make_app(backend, tmp_path)
    response = app.test_client().post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)
    assert response.status_code == 503, response.get_data(as_text=True)[:500]
    assert "error" in response.get_json()
    assert time.monotonic() - started < 10
    backend.close()


# ------------------------------------------------------------------ layout


def test_the_keys_of_one_session_share_a_slot(cluster_url: str, raw: RedisCluster, tmp_path: Path) -> None:
    backend = open_backend(cluster_url, timeout=60, instance_path=str(tmp_path))
    try:
        session_ids = [uuid.uuid4().hex for _ in range(8)]
        for session_id in session_ids:
            backend.sessions.create(Session(id=session_id, protocol_version=LEGACY))
            assert backend.events is not None
            for stream in ("1", "2"):
                backend.events.append(f"{session_id}/{stream}", 0, {"message": None, "final": False})
        nodes = set()
        for session_id in session_ids:
            keys = [k.decode() for k in raw.scan_iter(match=f"flask-mcp:*{{{session_id}}}*")]
            assert sorted(keys) == sorted(
                [f"flask-mcp:session:{{{session_id}}}"] + [f"flask-mcp:stream:{{{session_id}}}/{s}" for s in "12"]
            )
            assert len({raw.keyslot(key) for key in keys}) == 1
            nodes.add(raw.get_node_from_key(keys[0]).name)
        assert len(nodes) > 1  # eight sessions spread over the nodes (8 on one of 3: about 1 in 2000)
        assert backend.sessions.count().live >= 8  # type: ignore[attr-defined]  # SCAN on every node
    finally:
        for session_id in session_ids:
            backend.sessions.delete(session_id)
        backend.close()


def test_a_process_holds_one_pub_sub_connection_per_shard(cluster_url: str, raw: RedisCluster, tmp_path: Path) -> None:
    """Subscriptions spread over every shard: each node sees one subscriber
    of this backend, whatever the number of subscriptions (issue #34)."""
    backend = open_backend(cluster_url, timeout=60, instance_path=str(tmp_path))
    assert backend.bus is not None
    run = uuid.uuid4().hex
    channels = [f"spread-{run}-{i}" for i in range(40)]
    subscriptions = [backend.bus.subscribe([channel]) for channel in channels for _ in range(3)]
    try:
        owners = {raw.get_node_from_key("flask-mcp:bus:" + channel).name for channel in channels}
        assert len(owners) > 1  # the channels are spread over several shards
        for node in raw.get_primaries():
            ours = [client for client in raw.get_redis_connection(node).client_list()
                    if int(client.get("ssub", 0)) > 0]
            assert len(ours) == (1 if node.name in owners else 0), (node.name, ours)
        for i in (0, 39):
            backend.bus.publish(channels[i], {"i": i})
            assert [s.get(5) for s in subscriptions[3 * i : 3 * i + 3]] == [(channels[i], {"i": i})] * 3
    finally:
        for subscription in subscriptions:
            subscription.close()
        backend.close()


def test_the_bus_is_sharded_pub_sub(cluster_url: str, raw: RedisCluster, tmp_path: Path) -> None:
    """SSUBSCRIBE on the node owning the channel, nothing in classic pub/sub."""
    backend = open_backend(cluster_url, timeout=60, instance_path=str(tmp_path))
    assert backend.bus is not None
    channel = f"sharded-{uuid.uuid4().hex}"
    name = "flask-mcp:bus:" + channel
    try:
        with backend.bus.subscribe([channel]) as subscription:
            owner = raw.get_node_from_key(name)
            shard_channels = raw.execute_command("PUBSUB SHARDCHANNELS", name, target_nodes=owner)
            assert [c.decode() for c in shard_channels] == [name]
            classic = raw.execute_command("PUBSUB CHANNELS", "flask-mcp:bus:*", target_nodes=RedisCluster.ALL_NODES)
            assert not classic, classic  # merged over every node
            backend.bus.publish(channel, {"n": 1})
            assert subscription.get(5) == (channel, {"n": 1})
    finally:
        backend.close()


def _until(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the propagation window"
        time.sleep(0.001)


def test_copies_are_kept_per_node_and_invalidated_by_the_node(
    cluster_url: str, raw: RedisCluster, tmp_path: Path
) -> None:
    """Another host's change or DELETE drops this host's copy within the
    window of docs/redis.md (one second at most); the deleting host sees it at once."""
    here = open_backend(cluster_url, timeout=600, instance_path=str(tmp_path))
    there = open_backend(cluster_url, timeout=600, instance_path=str(tmp_path))
    session_id = uuid.uuid4().hex
    key = f"flask-mcp:session:{{{session_id}}}"
    owner = raw.get_redis_connection(raw.get_node_from_key(key))

    def gets() -> int:
        return int(owner.info("commandstats").get("cmdstat_get", {}).get("calls", 0))

    try:
        assert isinstance(there.sessions, ClusterSessionStore)
        here.sessions.create(Session(id=session_id, protocol_version=LEGACY, data={"n": 1}))
        deadline = time.monotonic() + 10
        while not there.sessions._copies.live:  # the owner's listener starts on the first read
            assert time.monotonic() < deadline, there.sessions._copies.refused
            there.sessions.get(session_id)
            time.sleep(0.01)
        there.sessions.get(session_id)
        before = gets()
        for _ in range(20):
            got = there.sessions.get(session_id)
            assert got is not None and got.data == {"n": 1}
        assert gets() == before  # answered from the copy

        changed = Session(id=session_id, protocol_version=LEGACY, data={"n": 2})
        here.sessions.save(changed)
        _until(lambda: there.sessions.get(session_id).data == {"n": 2}, seconds=1.0)  # type: ignore[union-attr]
        stored = raw.get(key)
        assert isinstance(stored, bytes)
        raw.set(key, stored.replace(b'"n": 2', b'"n": 3'), keepttl=True)
        _until(lambda: there.sessions.get(session_id).data == {"n": 3}, seconds=1.0)  # type: ignore[union-attr]

        assert here.sessions.delete(session_id) is True
        assert here.sessions.get(session_id) is None  # at once where it was deleted
        _until(lambda: there.sessions.get(session_id) is None, seconds=1.0)
    finally:
        here.close()
        there.close()


# ------------------------------------------------------------------ the app's own client, rate limits


def test_an_app_provided_cluster_client_is_used_and_left_open(cluster_url: str, tmp_path: Path) -> None:
    nodes, _ = parse_cluster_url(cluster_url)
    client = RedisCluster(  # RESP3, decoded answers: what the backend makes itself is neither
        startup_nodes=[ClusterNode(n.host, n.port) for n in nodes], decode_responses=True, protocol=3
    )
    backend = open_backend(client, timeout=60, instance_path=str(tmp_path))
    session_id = uuid.uuid4().hex
    try:
        assert backend.describe().startswith("redis cluster 127.0.0.1:")
        backend.check()
        backend.sessions.create(Session(id=session_id, protocol_version=LEGACY, data={"k": "ü"}))
        got = backend.sessions.get(session_id)
        assert got is not None and got.data == {"k": "ü"}
        assert client.exists(f"flask-mcp:session:{{{session_id}}}") == 1
        deadline = time.monotonic() + 10
        while not backend.sessions._copies.live:  # type: ignore[attr-defined]  # RESP3 invalidations
            assert time.monotonic() < deadline, backend.sessions._copies.refused  # type: ignore[attr-defined]
            backend.sessions.get(session_id)
            time.sleep(0.01)
        client.delete(f"flask-mcp:session:{{{session_id}}}")  # behind the store's back
        _until(lambda: backend.sessions.get(session_id) is None, seconds=1.0)
        backend.sessions.create(Session(id=session_id, protocol_version=LEGACY))
        assert backend.bus is not None
        with backend.bus.subscribe(["own"]) as subscription:
            backend.bus.publish("own", {"ü": 1})
            assert subscription.get(5) == ("own", {"ü": 1})
        assert backend.sessions.delete(session_id) is True
    finally:
        backend.close()
    assert client.ping() is True  # not ours to close
    client.close()


def test_rate_limits_count_in_the_cluster_for_every_app_sharing_it(
    cluster_url: str, raw: RedisCluster, make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    """Two apps (two hosts, as far as counting goes) share one budget."""
    apps = [make_app(cluster_url, tmp_path / name) for name in ("a", "b")]
    clients = [app.test_client() for app in apps]
    address = f"127.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250 + 1}"
    environ = {"REMOTE_ADDR": address}  # a caller of its own: counts outlive the test by a minute
    made = clients[0].post("/mcp", json=INITIALIZE, headers=JSON_HEADERS, environ_base=environ)
    assert made.status_code == 200, made.get_data(as_text=True)[:500]
    headers = {**JSON_HEADERS, "Mcp-Session-Id": made.headers["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert clients[1].post("/mcp", json=initialized, headers=headers, environ_base=environ).status_code == 202
    statuses = []
    for i in range(5):
        call = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "limited", "arguments": {}}}
        statuses.append(clients[i % 2].post("/mcp", json=call, headers=headers, environ_base=environ).status_code)
    assert statuses == [200, 200, 200, 429, 429], statuses
    assert any(True for _ in raw.scan_iter(match=f"flask-mcp-ratelimit*{address}*"))


def test_a_closed_bus_opens_no_subscription_again(cluster_url: str, tmp_path: Path) -> None:
    """Backend.close: a cancellations reader that outlives it (its app was not
    torn down) must not subscribe again and open node pools in the background."""
    backend = open_backend(cluster_url, timeout=60, instance_path=str(tmp_path))
    assert backend.bus is not None
    subscription = backend.bus.subscribe(["c"])
    backend.close()
    with pytest.raises(BackendUnavailable, match="closed"):
        backend.bus.subscribe(["c"])
    subscription.close()


# ------------------------------------------------------------------ faults


@pytest.fixture
def private_cluster() -> Iterator[RedisClusterNodes]:
    """A cluster of this test's own: it stops and restarts a node."""
    cluster = RedisClusterNodes(node_timeout_ms=500)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


def test_a_node_down_answers_503_never_500_and_heals(
    private_cluster: RedisClusterNodes, make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    app = make_app(private_cluster.url, tmp_path)
    client = app.test_client()

    def initialize() -> int:
        return client.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS).status_code

    assert [initialize() for _ in range(6)] == [200] * 6
    private_cluster.stop_node(2)
    refused = [initialize() for _ in range(12)]  # some sessions land on the dead node's slots
    assert set(refused) <= {200, 503} and 503 in refused, refused
    time.sleep(2)  # past the node timeout: the cluster is down for every slot
    assert [initialize() for _ in range(4)] == [503] * 4
    private_cluster.start_node(2)
    private_cluster.wait_until_ok()
    deadline = time.monotonic() + 10
    while initialize() != 200:
        assert time.monotonic() < deadline, "the app never recovered from the node's outage"
        time.sleep(0.1)
    assert [initialize() for _ in range(6)] == [200] * 6


def test_every_node_down_is_503_on_every_path_never_500(
    private_cluster: RedisClusterNodes, make_app: Callable[..., Flask], tmp_path: Path
) -> None:
    """With no node reachable redis-py raises its general RedisClusterException
    (from the connection error): that is "unavailable" too, on every operation."""
    app = make_app(private_cluster.url, tmp_path)
    client = app.test_client()
    answered = client.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)
    assert answered.status_code == 200
    backend = open_backend(private_cluster.url, timeout=600, instance_path=str(tmp_path))
    try:
        session = Session(id=uuid.uuid4().hex, protocol_version="2025-06-18")
        backend.sessions.create(session)
        bus, events, tasks = backend.bus, backend.events, backend.tasks
        assert bus is not None and events is not None and tasks is not None
        private_cluster.crash(lose_data=False)
        calls: list[Any] = [
            lambda: backend.sessions.get(session.id), lambda: backend.sessions.touch(session.id),
            lambda: backend.sessions.create(Session(id=uuid.uuid4().hex, protocol_version="2025-06-18")),
            lambda: bus.publish("c", {}), lambda: bus.subscribe(["c"]), lambda: events.read("s", 0),
            lambda: tasks.get("t"), backend.check,
        ]
        for call in calls:
            with pytest.raises(BackendUnavailable):
                call()
        session_id = answered.headers["Mcp-Session-Id"]
        listed = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                             headers={**JSON_HEADERS, "Mcp-Session-Id": session_id,
                                      "MCP-Protocol-Version": LEGACY})
        assert listed.status_code == 503
        assert client.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS).status_code == 503
    finally:
        backend.close()


def move_slot_of(key: str, cluster: RedisClusterNodes) -> None:
    """Give ``key``'s (empty) slot to another primary, as a resharding
    (``redis-cli --cluster reshard``) does: the new owner importing and the old
    one migrating first, so the new owner's ``SETSLOT ... NODE`` bumps its config
    epoch and its claim wins over the old one still gossiped (without that, a
    node could be told the old owner again, and answer ``MOVED`` the old way)."""
    nodes, _ = parse_cluster_url(cluster.url)
    raw = RedisCluster(startup_nodes=nodes, socket_timeout=5)
    try:
        slot = raw.keyslot(key)
        owner = raw.get_node_from_key(key)
        primaries = raw.get_primaries()
        target = next(node for node in primaries if node.name != owner.name)

        def on(node: ClusterNode, *command: Any) -> Any:
            return raw.get_redis_connection(node).execute_command("CLUSTER", *command)

        owner_id, target_id = on(owner, "MYID"), on(target, "MYID")
        on(target, "SETSLOT", slot, "IMPORTING", owner_id)
        on(owner, "SETSLOT", slot, "MIGRATING", target_id)
        others = [node for node in primaries if node.name not in (owner.name, target.name)]
        for node in [target, owner, *others]:  # the new owner first, as redis-cli does
            on(node, "SETSLOT", slot, "NODE", target_id)
    finally:
        raw.close()


def test_a_slot_moving_ends_its_subscriptions_and_new_ones_find_the_new_owner(
    private_cluster: RedisClusterNodes, tmp_path: Path
) -> None:
    backend = open_backend(private_cluster.url, timeout=60, instance_path=str(tmp_path))
    assert backend.bus is not None
    try:
        subscription = backend.bus.subscribe(["moving"])
        move_slot_of("flask-mcp:bus:moving", private_cluster)
        with pytest.raises(BackendUnavailable, match="slot moved"):
            subscription.get(5)
        subscription.close()
        # This backend still maps the slot to the old owner, which answers MOVED: it re-reads the map.
        with backend.bus.subscribe(["moving"]) as again:
            backend.bus.publish("moving", {"n": 1})
            assert again.get(5) == ("moving", {"n": 1})
    finally:
        backend.close()


def test_a_failover_promotes_a_replica_and_its_sessions_are_served_again(tmp_path: Path) -> None:
    """A primary dies; its replica takes over within the node timeout. Its
    sessions answer 'unavailable' meanwhile (never 'unknown'), then are served
    again, and a DELETE made afterwards on another host reaches this one's copies."""
    cluster = RedisClusterNodes(replicas=1, node_timeout_ms=500)
    backend = other = None
    try:
        cluster.start()
        backend = open_backend(cluster.url, timeout=600, instance_path=str(tmp_path))
        other = open_backend(cluster.url, timeout=600, instance_path=str(tmp_path))
        ids = [uuid.uuid4().hex for _ in range(30)]
        for session_id in ids:
            backend.sessions.create(Session(id=session_id, protocol_version=LEGACY))
        nodes, _ = parse_cluster_url(cluster.url)
        raw = RedisCluster(startup_nodes=nodes, socket_timeout=2)
        victim = raw.get_node_from_key(f"flask-mcp:session:{{{ids[0]}}}")
        on_victim = [i for i in ids if raw.get_node_from_key(f"flask-mcp:session:{{{i}}}").name == victim.name]
        primary = raw.get_redis_connection(victim)
        deadline = time.monotonic() + 10
        while True:  # every write reached the replica
            replication = primary.info("replication")
            if replication.get("slave0", {}).get("offset") == replication["master_repl_offset"]:
                break
            assert time.monotonic() < deadline, replication
            time.sleep(0.02)
        raw.close()
        for session_id in on_victim:
            assert backend.sessions.get(session_id) is not None

        cluster.stop_node(cluster.ports.index(victim.port))
        started = time.monotonic()
        outcomes: list[str] = []
        while True:
            round_ = []
            for session_id in on_victim:
                try:
                    round_.append("served" if backend.sessions.get(session_id) is not None else "unknown")
                except BackendUnavailable:
                    round_.append("unavailable")
            outcomes.extend(round_)
            if set(round_) == {"served"}:
                break
            assert time.monotonic() - started < 30, round_
            time.sleep(0.05)
        assert "unknown" not in outcomes  # the replica had every session
        assert "unavailable" in outcomes  # the outage was seen (not hidden by copies past their age)

        cluster.wait_until_agreed()  # else `other` may read the old layout from a node that has not heard
        assert other.sessions.delete(on_victim[0]) is True  # on the promoted replica
        _until(lambda: backend.sessions.get(on_victim[0]) is None, seconds=1.0)
    finally:
        for opened in (backend, other):
            if opened is not None:
                opened.close()
        cluster.remove()
