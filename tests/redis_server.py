"""A private ``redis-server`` on a free loopback port, for tests that stop,
restart or reconfigure their server (the shared one at 127.0.0.1:6379 must
stay up for everybody else); and a private Redis Cluster of three of them."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from conftest import free_port, unavailable


def start_redis_server(port: int, *options: str, why: str = "the test starts its own") -> subprocess.Popen[bytes]:
    """Start ``redis-server`` with no persistence and ``options``; return once it answers PING."""
    if shutil.which("redis-server") is None:
        unavailable(f"redis-server is not installed ({why})")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1).ping()
            return server
        except redis.exceptions.RedisError:
            time.sleep(0.02)
    stop_redis_server(server)
    raise RuntimeError(f"redis-server did not start on port {port}")


def stop_redis_server(server: subprocess.Popen[bytes]) -> None:
    """Kill it at once (what a crash looks like to its clients) and reap it."""
    server.kill()
    server.wait(5)


class RedisClusterNodes:
    """A private Redis Cluster of ``masters`` cluster-enabled ``redis-server``
    processes on free loopback ports, each with ``replicas`` replicas (none by
    default; no persistence), their ``nodes.conf`` in a folder of their own so
    a stopped node restarts into the same cluster. ``node_timeout_ms`` is how
    long before the others declare a silent node failed (the cluster then
    answers ``CLUSTERDOWN``, or promotes a replica of it)."""

    def __init__(self, masters: int = 3, *, replicas: int = 0, node_timeout_ms: int = 1000) -> None:
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
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
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

    def wait_until_ok(self, within: float = 30.0) -> None:
        """Return once every running node reports ``cluster_state:ok``."""
        deadline = time.monotonic() + within
        while True:
            states = []
            running = [port for port, process in zip(self.ports, self.processes, strict=True) if process is not None]
            for port in running:
                try:
                    node = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=1)
                    info = _text(node.execute_command("CLUSTER", "INFO"))
                    states.append(info.split("cluster_state:", 1)[1].split()[0])
                except (redis.exceptions.RedisError, IndexError):
                    states.append("unreachable")
            if states == ["ok"] * len(running):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Redis Cluster never became ok: {states}")
            time.sleep(0.05)

    def stop_node(self, index: int) -> None:
        """Kill node ``index`` at once (a crash, to its clients) and reap it."""
        process, self.processes[index] = self.processes[index], None
        if process is not None:
            stop_redis_server(process)

    def stop(self) -> None:
        for index in range(len(self.processes)):
            self.stop_node(index)

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
