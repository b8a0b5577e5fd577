"""A private ``redis-server`` on a free loopback port, for tests that stop,
restart or reconfigure their server (the shared one at 127.0.0.1:6379 must
stay up for everybody else); private Sentinel deployments (a primary,
replicas and sentinels, each a ``redis-server`` of its own) for the tests of
``redis+sentinel://`` and of a failover; and a private Redis Cluster."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from conftest import free_port, unavailable


def start_redis_server(port: int, *options: str, why: str = "the test starts its own") -> subprocess.Popen[bytes]:
    """Start ``redis-server`` with no persistence and ``options``; return once it answers PING."""
    return _start(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *options],
        port,
        why,
    )


def start_tls_redis_server(port: int, cert: Path, key: Path, ca: Path) -> subprocess.Popen[bytes]:
    """Start ``redis-server`` speaking TLS only (no plain port) with ``cert``
    and ``key`` (signed by ``ca``); clients need no certificate of their own."""
    command = ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--tls-cert-file", str(cert), "--tls-key-file", str(key),
               "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]
    return _start(command, port, "the test starts its own TLS server", ssl=True, ssl_ca_certs=str(ca))


def start_sentinel(port: int, config: Path, *, why: str = "the test starts its own Sentinel",
                   ) -> subprocess.Popen[bytes]:
    """Start ``redis-server <config> --sentinel`` (Sentinel rewrites ``config``: it must be the test's own file)."""
    return _start(["redis-server", str(config), "--sentinel", "--port", str(port), "--bind", "127.0.0.1"], port, why)


def _start(command: list[str], port: int, why: str, **client: Any) -> subprocess.Popen[bytes]:
    if shutil.which("redis-server") is None:
        unavailable(f"redis-server is not installed ({why})")
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1, **client).ping()
            return server
        except redis.exceptions.RedisError:
            if server.poll() is not None:
                break
            time.sleep(0.02)
    stop_redis_server(server)
    raise RuntimeError(f"{command[0]} did not start on port {port}: {' '.join(command)}")


def stop_redis_server(server: subprocess.Popen[bytes]) -> None:
    """Kill it at once (what a crash looks like to its clients) and reap it."""
    if server.poll() is None:
        server.kill()
    server.wait(5)


def wait_until(condition: object, what: str, *, within: float = 30.0) -> None:
    """Poll ``condition()`` (a callable; Redis errors count as not yet) until it is true."""
    assert callable(condition)
    deadline = time.monotonic() + within
    while True:
        try:
            if condition():
                return
        except redis.exceptions.RedisError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        time.sleep(0.05)


def _client(port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=2, decode_responses=True)


class DataNode:
    """One ``redis-server`` holding data (a primary or a replica), in a folder
    of its own; with ``persistent`` it writes an append-only file, fsynced at
    every write (``appendfsync always``), so a crash loses nothing."""

    def __init__(self, folder: Path, *, persistent: bool) -> None:
        self.port = free_port()
        self.folder = folder / f"node-{self.port}"
        self.folder.mkdir(parents=True)
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, replica_of: int | None = None) -> None:
        options = ["--dir", str(self.folder)]
        if self.persistent:
            options += ["--appendonly", "yes", "--appendfsync", "always"]
        if replica_of is not None:
            options += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.process = start_redis_server(self.port, *options)

    def kill(self, *, lose_data: bool = False) -> None:
        """Crash it; with ``lose_data`` also delete what it wrote (a server without persistence)."""
        if self.process is not None:
            stop_redis_server(self.process)
            self.process = None
        if lose_data:
            shutil.rmtree(self.folder)
            self.folder.mkdir()

    def client(self) -> redis.Redis:
        return _client(self.port)

    # A topology (see SentinelDeployment): what the multi-host tests drive.
    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def crash(self, *, lose_data: bool) -> None:
        self.kill(lose_data=lose_data)

    def recover(self) -> None:
        self.start()

    def stop(self) -> None:
        self.kill()

    def role(self) -> str:
        return str(self.client().role()[0])


class SentinelDeployment:
    """A primary, ``replicas`` replicas and ``sentinels`` sentinels on free
    loopback ports, monitoring the service ``service`` (quorum: a majority).
    Sentinel marks a silent primary down after ``down_after_ms``."""

    def __init__(self, folder: Path, *, replicas: int = 1, sentinels: int = 1, service: str = "flask-mcp",
                 persistent: bool = False, down_after_ms: int = 1000) -> None:
        self.folder = folder
        self.service = service
        self.down_after_ms = down_after_ms
        self.nodes = [DataNode(folder, persistent=persistent) for _ in range(1 + replicas)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinel_processes: list[subprocess.Popen[bytes]] = []
        self._primary_before_crash = 0

    def url(self, db: int = 0) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.service}/{db}"

    def start(self) -> None:
        try:
            primary, *replicas = self.nodes
            primary.start()
            for node in replicas:
                node.start(replica_of=primary.port)
            self.wait_for_replicas(primary.port)
            quorum = len(self.sentinel_ports) // 2 + 1
            for port in self.sentinel_ports:
                config = self.folder / f"sentinel-{port}.conf"
                config.write_text(
                    f"dir {self.folder}\n"
                    f"sentinel monitor {self.service} 127.0.0.1 {primary.port} {quorum}\n"
                    f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {self.service} 10000\n"
                    f"sentinel parallel-syncs {self.service} 1\n"
                )
                self.sentinel_processes.append(start_sentinel(port, config))
            self.wait_until_sentinels_agree(primary.port)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for process in self.sentinel_processes:
            stop_redis_server(process)
        self.sentinel_processes.clear()
        for node in self.nodes:
            node.kill()

    def sentinel(self, index: int = 0) -> redis.Redis:
        return _client(self.sentinel_ports[index])

    def primary_port(self) -> int:
        """The primary's port as the first sentinel reports it."""
        address = self.sentinel().sentinel_get_master_addr_by_name(self.service)
        assert isinstance(address, tuple), address
        return int(address[1])

    def node(self, port: int) -> DataNode:
        return next(node for node in self.nodes if node.port == port)

    def primary(self) -> DataNode:
        return self.node(self.primary_port())

    def wait_for_replicas(self, primary_port: int) -> None:
        """Every other live node replicates ``primary_port`` and is in sync."""
        wait_until(lambda: self._replicas_in_sync(primary_port),
                   f"replicas in sync with the primary on port {primary_port}")

    def _replicas_in_sync(self, primary_port: int) -> bool:
        for node in self.nodes:
            if node.port == primary_port or node.process is None:
                continue
            info = node.client().info("replication")
            if info.get("master_port") != primary_port or info.get("master_link_status") != "up":
                return False
        return True

    def wait_until_sentinels_agree(self, primary_port: int) -> None:
        """Every sentinel names ``primary_port``, knows the other sentinels and
        counts every live replica as healthy (so that it could fail over)."""
        live_replicas = {node.port for node in self.nodes if node.port != primary_port and node.process is not None}

        def agreed() -> bool:
            for index in range(len(self.sentinel_ports)):
                sentinel = self.sentinel(index)
                address = sentinel.sentinel_get_master_addr_by_name(self.service)
                if not isinstance(address, tuple) or int(address[1]) != primary_port:
                    return False
                replicas = sentinel.sentinel_slaves(self.service)
                assert isinstance(replicas, list), replicas
                healthy = {int(r["port"]) for r in replicas if r["flags"] == "slave"}
                if not live_replicas <= healthy:
                    return False
                others = sentinel.sentinel_sentinels(self.service)
                assert isinstance(others, list), others
                if len(others) < len(self.sentinel_ports) - 1:
                    return False
            return True
        wait_until(agreed, f"sentinels agree on the primary {primary_port} and its replicas")

    def failover(self) -> int:
        """``SENTINEL FAILOVER``: a replica is promoted; returns its port once
        every sentinel names it (the old primary rejoins as a replica)."""
        old = self.primary_port()
        self.sentinel().execute_command("SENTINEL", "FAILOVER", self.service)
        wait_until(lambda: self.primary_port() != old, "a replica promoted")
        new = self.primary_port()
        wait_until(lambda: self.node(new).role() == "master", f"the node on {new} acting as primary")
        # Until Sentinel demotes it, the old primary still takes writes (which
        # its resync then drops): the failover is over once it replicates the new one.
        self.wait_for_replicas(new)
        return new

    def crash(self, *, lose_data: bool) -> None:
        """Crash every data node (the sentinels stay); with ``lose_data`` they
        will come back empty (a deployment without persistence)."""
        self._primary_before_crash = self.primary_port()
        for node in self.nodes:
            node.kill(lose_data=lose_data)

    def recover(self) -> None:
        """Start the crashed data nodes again in their roles."""
        primary_port = self._primary_before_crash
        self.node(primary_port).start()
        for node in self.nodes:
            if node.port != primary_port:
                node.start(replica_of=primary_port)
        # The sentinels stayed up while every node was down: they may have begun
        # a failover then and promote a restarted replica now (seen in CI under
        # load). The deployment has recovered once the nodes follow whichever
        # primary the sentinels name.
        wait_until(lambda: self._replicas_in_sync(self.primary_port()),
                   f"replicas in sync with the primary the sentinels name (was {primary_port})")
        self.wait_until_sentinels_agree(self.primary_port())


class RedisClusterNodes:
    """A private Redis Cluster of ``masters`` cluster-enabled ``redis-server``
    processes on free loopback ports, each with ``replicas`` replicas (none by
    default; no persistence unless ``persistent``: then an append-only file
    written on every command), their ``nodes.conf`` in a folder of their own so
    a stopped node restarts into the same cluster. ``node_timeout_ms`` is how
    long before the others declare a silent node failed (the cluster then
    answers ``CLUSTERDOWN``, or promotes a replica of it)."""

    def __init__(self, masters: int = 3, *, replicas: int = 0, node_timeout_ms: int = 1000,
                 persistent: bool = False) -> None:
        self.persistent = persistent
        for tool in ("redis-server", "redis-cli"):
            if shutil.which(tool) is None:
                unavailable(f"{tool} is not installed (needed for a private Redis Cluster)")
        nodes = masters * (1 + replicas)
        ports: list[int] = []
        while len(ports) < 2 * nodes:  # a client port and a cluster bus port each
            port = free_port()
            if port not in ports:
                ports.append(port)
        self.ports, self.bus_ports = ports[:nodes], ports[nodes:]
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.folder = Path(tempfile.mkdtemp(prefix="flask-mcp-cluster-"))
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * nodes
        self._created = False

    @property
    def url(self) -> str:
        """``MCP_BACKEND`` for this cluster (every node a startup node)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self) -> None:
        """Start every node that is not running (creating the cluster the first
        time); return once every node reports ``cluster_state:ok``. On any
        failure every node is stopped before the error is raised."""
        try:
            for index, process in enumerate(self.processes):
                if process is None:
                    self.start_node(index)
            if not self._created:
                created = subprocess.run(
                    ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                     "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                    capture_output=True, text=True, timeout=30,
                )
                if created.returncode != 0:
                    raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}\n{created.stderr}")
                self._created = True
            self.wait_until_ok()
        except BaseException:
            self.stop()
            raise

    def start_node(self, index: int) -> None:
        """Start node ``index`` (again), with its own folder and ``nodes.conf``."""
        folder = self.folder / str(self.ports[index])
        folder.mkdir(exist_ok=True)
        port = self.ports[index]
        self.processes[index] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             *(["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]),
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-port", str(self.bus_ports[index]), "--cluster-node-timeout", str(self.node_timeout_ms),
             "--dir", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1).ping()
                return
            except redis.exceptions.RedisError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"cluster node redis-server did not start on port {port}")

    def running_ports(self) -> list[int]:
        return [port for port, process in zip(self.ports, self.processes, strict=True) if process is not None]

    @staticmethod
    def cluster_command(port: int, *args: str) -> Any:
        """``CLUSTER <args>`` on one node, on a connection of its own (closed after)."""
        with redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1) as node:
            return node.execute_command("CLUSTER", *args)

    def wait_until_ok(self, within: float = 30.0) -> None:
        """Return once every running node reports ``cluster_state:ok``."""
        deadline = time.monotonic() + within
        while True:
            states = []
            running = self.running_ports()
            for port in running:
                try:
                    info = _text(self.cluster_command(port, "INFO"))
                    states.append(info.split("cluster_state:", 1)[1].split()[0])
                except (redis.exceptions.RedisError, IndexError):
                    states.append("unreachable")
            if states == ["ok"] * len(running):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster never became ok: {states}")
            time.sleep(0.05)

    def wait_until_agreed(self, within: float = 30.0) -> None:
        """Return once every running node's ``CLUSTER SLOTS`` names the same
        primaries, all running. After a failover the nodes hear of the promotion
        over the cluster bus one by one (tens of milliseconds apart here), and a
        client reading the layout from one that has not heard yet still routes
        to the dead primary."""
        deadline = time.monotonic() + within
        while True:
            running = self.running_ports()
            views = []
            for port in running:
                try:
                    slots = self.cluster_command(port, "SLOTS")
                    views.append(sorted((int(first), int(primary[1])) for first, _, primary, *_ in slots))
                except redis.exceptions.RedisError:
                    views.append([])
            if views and views[0] and all(view == views[0] for view in views) and all(
                port in running for _, port in views[0]
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster's nodes never agreed on their primaries: {views}")
            time.sleep(0.01)

    def stop_node(self, index: int) -> None:
        """Kill node ``index`` at once (a crash, to its clients) and reap it."""
        process, self.processes[index] = self.processes[index], None
        if process is not None:
            stop_redis_server(process)

    def stop(self) -> None:
        for index in range(len(self.processes)):
            self.stop_node(index)

    def crash(self, *, lose_data: bool) -> None:
        """Kill every node; with ``lose_data`` their append-only files go too
        (each keeps its ``nodes.conf``: it comes back into the same cluster, empty)."""
        self.stop()
        if lose_data:
            for folder in self.folder.iterdir():
                shutil.rmtree(folder / "appendonlydir", ignore_errors=True)

    def recover(self) -> None:
        """Start every node again, on the same ports; return once the cluster is ok."""
        self.start()

    def remove(self) -> None:
        """Stop every node and delete the cluster's folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_shared_cluster: RedisClusterNodes | None = None


def shared_cluster() -> RedisClusterNodes:
    """One private cluster for this test process (started on first use,
    stopped at exit), for the contract suites' cluster cases."""
    global _shared_cluster
    if _shared_cluster is None:
        cluster = RedisClusterNodes()
        try:
            cluster.start()
        except BaseException:
            cluster.remove()
            raise
        atexit.register(cluster.remove)
        _shared_cluster = cluster
    return _shared_cluster
