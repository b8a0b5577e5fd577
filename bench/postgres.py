"""A PostgreSQL of the benchmark's own for the PostgreSQL rows: Debian's
binaries (``/usr/lib/postgresql/*/bin``, or ``MCP_BENCH_POSTGRES_BIN``),
``initdb`` into a temporary folder, ``postgres`` on a free loopback port
with trust authentication, stopped by its PID at the end. As root both run
as ``nobody`` (initdb refuses root). Durability as a production server's
default minus fsync: commits still wait for their WAL write."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path


def _binaries() -> Path | None:
    configured = os.environ.get("MCP_BENCH_POSTGRES_BIN")
    for folder in [configured] if configured else sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "postgres").is_file():
            return Path(folder)
    return None


class BenchPostgres:
    """``start()`` returns once it accepts connections; ``database()`` makes an empty one."""

    def __init__(self) -> None:
        found = _binaries()
        if found is None:
            raise RuntimeError("PostgreSQL binaries not found (apt install postgresql, or set MCP_BENCH_POSTGRES_BIN)")
        self.bin = found
        self.folder = Path(tempfile.mkdtemp(prefix="flask-mcp-bench-pg-"))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.process: subprocess.Popen[bytes] | None = None
        self.urls: list[str] = []
        self._prefix: list[str] = []
        if os.getuid() == 0:
            shutil.chown(self.folder, "nobody", "nogroup")
            self._prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--reset-env"]

    def start(self) -> BenchPostgres:
        data = self.folder / "data"
        subprocess.run([*self._prefix, str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                        "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], check=True, capture_output=True,
                       cwd=self.folder)
        log = open(self.folder / "postgres.log", "ab")  # noqa: SIM115 - the server writes it until stopped
        self.process = subprocess.Popen(
            [*self._prefix, str(self.bin / "postgres"), "-D", str(data), "-k", str(self.folder), "-h", "127.0.0.1",
             "-p", str(self.port), "-c", "fsync=off"],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._psql("SELECT 1").returncode == 0:
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("postgres did not start")

    def _psql(self, sql: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(self.bin / "psql") if (self.bin / "psql").exists() else "psql",
                               "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                               "-Atc", sql], capture_output=True)

    def database(self) -> str:
        """A new, empty database's URL (one per server start, as SQLite's rows get a fresh file)."""
        name = f"bench_{uuid.uuid4().hex[:12]}"
        done = self._psql(f'CREATE DATABASE "{name}" STRATEGY = FILE_COPY')
        if done.returncode != 0:
            raise RuntimeError(f"CREATE DATABASE failed: {done.stderr.decode(errors='replace')}")
        url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"
        self.urls.append(url)
        return url

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)
        from flask_mcp.backends.sql.sessions import stamps_file  # the servers' session change stamps

        for url in self.urls:
            Path(stamps_file(url)).unlink(missing_ok=True)
