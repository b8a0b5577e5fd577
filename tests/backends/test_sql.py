"""The SQL backend beyond the contract: one listening connection per process
(counted in ``pg_stat_activity``), a broken listener reported and replaced,
messages longer than a NOTIFY payload, tables made once by concurrent first
users or by the app's own migrations, concurrent writers, the app's
Flask-SQLAlchemy as ``MCP_BACKEND``, and a database that cannot be reached.
PostgreSQL is the test session's own cluster (tests/postgres_server.py);
the tests that are not about LISTEN/NOTIFY run on the session's MariaDB
server too (tests/mariadb_server.py, PyMySQL)."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from backend_cases import ROOT, full_session
from conftest import free_port
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from mariadb_server import MariaDBServer, shared_mariadb
from postgres_server import PostgresCluster, shared_postgres
from sqlalchemy import Connection, create_engine, event, inspect, select, text

from flask_mcp import MCP
from flask_mcp.backends import open_backend
from flask_mcp.backends.contracts import Backend, BackendUnavailable
from flask_mcp.backends.sql import PostgresMessageBus, SqlDatabase, SqlEventLog, SqlSessionStore, metadata
from flask_mcp.backends.sql.notify_bus import listener_name
from flask_mcp.backends.sql.sessions import stamps_file
from flask_mcp.backends.sql.tables import stream_events
from flask_mcp.config import ConfigError
from flask_mcp.testing import MCPTestClient


@pytest.fixture(scope="module")
def cluster() -> PostgresCluster:
    return shared_postgres()


@pytest.fixture
def url(cluster: PostgresCluster) -> str:
    """A fresh database of the session's cluster (its connections counted apart from other tests')."""
    return cluster.create_database("sql")


@pytest.fixture(params=["postgresql", "mariadb"])
def any_url(request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's PostgreSQL cluster or MariaDB server."""
    if request.param == "mariadb":
        return shared_mariadb().create_database("sql")
    return shared_postgres().create_database("sql")


def _open(url: str) -> Backend:
    return open_backend(url, timeout=60, instance_path=".")


def _dbname(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _eventually(condition: Callable[[], bool], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        time.sleep(0.05)


def test_sql_postgresql_holds_one_listening_connection_per_process_for_all_subscriptions(
    cluster: PostgresCluster, url: str
) -> None:
    backend = _open(url)
    assert backend.bus is not None
    subscriptions = [backend.bus.subscribe([f"channel-{n}"]) for n in range(20)]
    opened: list[object] = []
    threads = [threading.Thread(target=lambda: opened.append(backend.bus.subscribe(["threaded"])))  # type: ignore[union-attr]
               for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(opened) == 10
    assert len(cluster.listeners(_dbname(url))) == 1

    code = (
        "import sys\n"
        "from flask_mcp.backends import open_backend\n"
        f"backend = open_backend({url!r}, timeout=60, instance_path='.')\n"
        "subs = [backend.bus.subscribe([f'c{n}']) for n in range(5)]\n"
        "print('listening', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "listening"
        assert len(cluster.listeners(_dbname(url))) == 2  # this process's and the child's
        backend.bus.publish("channel-7", {"n": 7})
        assert subscriptions[7].get(5) == ("channel-7", {"n": 7})
        assert subscriptions[6].get(0.05) is None
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(15)
        assert child.stdout is not None
        child.stdout.close()
    for subscription in subscriptions:
        subscription.close()
    backend.close()
    _eventually(lambda: cluster.listeners(_dbname(url)) == [], "the listening connections closed")


def test_sql_a_broken_listener_reports_the_bus_unavailable_and_a_new_subscription_reconnects(
    cluster: PostgresCluster, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = _open(url)
    bus = backend.bus
    assert isinstance(bus, PostgresMessageBus)
    subscription = bus.subscribe(["a"])
    bus.publish("a", {"n": 1})
    [(listener, _)] = cluster.listeners(_dbname(url))
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (listener,))

    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        assert subscription.get(5) == ("a", {"n": 1})  # what arrived before the break is still read
        deadline = time.monotonic() + 10
        with pytest.raises(BackendUnavailable, match="lost its listening connection"):
            while time.monotonic() < deadline:
                subscription.get(0.5)
        with pytest.raises(BackendUnavailable):  # and stays so: messages may have been missed
            subscription.get(0)
    assert "subscribing again reconnects" in caplog.text

    again = bus.subscribe(["a"])
    bus.publish("a", {"n": 2})
    assert again.get(5) == ("a", {"n": 2})
    assert len(cluster.listeners(_dbname(url))) == 1
    backend.close()


def test_sql_a_message_longer_than_a_notify_payload_travels_through_the_table(url: str) -> None:
    backend = _open(url)
    assert backend.bus is not None
    big = {"text": "ü" * 20_000, "list": list(range(1000))}
    with backend.bus.subscribe(["big"]) as subscription:
        backend.bus.publish("big", big)
        backend.bus.publish("big", {"small": True})
        assert subscription.get(5) == ("big", big)
        assert subscription.get(5) == ("big", {"small": True})
    backend.close()


def test_sql_concurrent_first_users_create_the_tables_once_without_errors(any_url: str) -> None:
    """Eight engines (as eight workers' first requests) find the database empty at once."""
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def first_request(n: int) -> None:
        store = SqlSessionStore(SqlDatabase.from_url(any_url))
        barrier.wait(10)
        try:
            store.create(full_session(f"first-{n}"))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            store.database.close()

    threads = [threading.Thread(target=first_request, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    store = SqlSessionStore(any_url)
    assert all(store.get(f"first-{n}") is not None for n in range(8))
    store.database.close()


def test_sql_tables_an_app_migrated_itself_are_used_as_they_are(any_url: str) -> None:
    """The app creates flask-mcp's tables from ``metadata`` (as its Alembic
    migration would); the backend finds them and creates nothing."""
    engine = create_engine(any_url)
    metadata.create_all(engine)
    assert set(inspect(engine).get_table_names()) == {
        "flask_mcp_sessions", "flask_mcp_messages", "flask_mcp_stream_events", "flask_mcp_tasks",
        "flask_mcp_rate_limits", "flask_mcp_oauth_codes", "flask_mcp_oauth_used_codes", "flask_mcp_oauth_tokens",
        "flask_mcp_oauth_clients"}
    backend = open_backend(engine, timeout=60, instance_path=".")
    session = full_session()
    backend.sessions.create(session)
    assert backend.sessions.get(session.id) is not None
    backend.close()
    with engine.connect() as connection:  # the app's engine is the app's: still usable
        assert connection.exec_driver_sql("SELECT COUNT(*) FROM flask_mcp_sessions").scalar() == 1
    engine.dispose()


@pytest.mark.parametrize("how", ["url", "app-engine"])
def test_sql_concurrent_writers_all_succeed_and_every_increment_counts(any_url: str, how: str) -> None:
    """Eight threads at once on empty tables: the first increments of one rate
    limit counter, sessions made and events appended side by side. On MariaDB
    an engine the app made runs at InnoDB's REPEATABLE READ, whose gap locks
    deadlock such writers (a ``DELETE`` or ``UPDATE`` finding no row, then an
    ``INSERT``): the victim's transaction, rolled back whole, runs again."""
    engine = create_engine(any_url) if how == "app-engine" else None
    backend = open_backend(engine if engine is not None else any_url, timeout=60, instance_path=".")
    assert backend.events is not None
    counters = backend.sessions.rate_limit_storage()  # type: ignore[attr-defined]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            barrier.wait(10)
            for i in range(20):
                counters.incr("tool:shared", 60)
                backend.sessions.create(full_session(f"writer-{i}-{n}"))
                backend.events.append(f"writer-{n}/s", i, {"message": {"i": i}, "final": False})  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert counters.get("tool:shared") == 160
    assert all(backend.sessions.get(f"writer-{i}-{n}") is not None for i in range(20) for n in range(8))
    assert all([seq for seq, _ in backend.events.read(f"writer-{n}/s", 0) or []] == list(range(1, 20))
               for n in range(8))
    backend.close()
    if engine is not None:
        engine.dispose()


def _flask_sqlalchemy_app(url: str, backend: object) -> tuple[Flask, SQLAlchemy]:
    app = Flask(__name__)
    app.config.update(TESTING=True, SQLALCHEMY_DATABASE_URI=url)
    db = SQLAlchemy()
    db.init_app(app)
    app.config["MCP_BACKEND"] = db if backend == "db" else backend
    mcp = MCP(app, name="sql", version="1.0")

    @mcp.tool
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    return app, db


@pytest.mark.parametrize("spec", ["db", "flask-sqlalchemy"])
def test_sql_the_apps_flask_sqlalchemy_keeps_the_sessions_in_its_own_database(any_url: str, spec: str) -> None:
    app, db = _flask_sqlalchemy_app(any_url, spec)
    client = MCPTestClient(app, protocol_version="2025-11-25")
    assert client.initialize().status_code == 200
    assert client.call_tool("add", {"a": 2, "b": 3}).result["structuredContent"] == {"result": 5}
    with app.app_context():
        with db.engine.connect() as connection:
            stored = connection.exec_driver_sql("SELECT id FROM flask_mcp_sessions").scalars().all()
    assert stored == [client.session_id]
    bus = "polling bus" if any_url.startswith("mysql") else "LISTEN/NOTIFY"
    assert bus in app.extensions["mcp"].backend.describe()
    assert client.delete().status_code == 200
    app.extensions["mcp"].backend.close()
    with app.app_context():
        db.engine.dispose()  # the app's pool: the app would close it at its end


def test_sql_flask_sqlalchemy_must_be_initialised_on_the_app_first() -> None:
    app = Flask(__name__)
    app.config["MCP_BACKEND"] = SQLAlchemy()
    with pytest.raises(ConfigError, match="db.init_app"):
        MCP(app)


@pytest.mark.parametrize("scheme", [pytest.param("postgresql://postgres", id="postgresql"),
                                    pytest.param("mysql://root", id="mariadb")])
def test_sql_an_unreachable_database_is_unavailable_at_once_and_the_endpoint_answers_503(scheme: str) -> None:
    port = free_port()  # nothing listens there
    backend = open_backend(f"{scheme}@127.0.0.1:{port}/none", timeout=60, instance_path=".")
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match="unavailable"):
        backend.sessions.get("anything")
    with pytest.raises(BackendUnavailable):
        backend.bus.subscribe(["x"])  # type: ignore[union-attr]
    assert time.monotonic() - started < 5
    assert "127.0.0.1" in backend.describe()

    app = Flask(__name__)
    app.config.update(TESTING=True, MCP_BACKEND=f"{scheme}:secret@127.0.0.1:{port}/none")
    MCP(app)
    client = MCPTestClient(app, protocol_version="2025-11-25")
    answer = client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                           "clientInfo": {"name": "t", "version": "1"}})
    assert answer.status_code == 503
    assert "unavailable" in answer.error["message"].lower()
    assert "secret" not in str(answer.message)
    for where in (f"postgresql+psycopg://postgres@127.0.0.1:{port}/none",
                  f"postgresql+psycopg://postgres:***@127.0.0.1:{port}/none"):
        Path(stamps_file(where)).unlink(missing_ok=True)  # made by the first read, before the database was tried


def test_sql_mariadb_gone_mid_session_is_unavailable_and_served_again_once_back() -> None:
    """The server dies under the pool's open connections: the next call is
    :class:`BackendUnavailable` (503), never the driver's own error escaping
    (PyMySQL switching a dead connection to autocommit did, a 500), each call
    tries to connect once (it tried six times, each costing PyMySQL a TLS
    context), and once the server is back the session is served again."""
    server = MariaDBServer().start()
    try:
        backend = open_backend(server.url(), timeout=60, instance_path=".")
        assert isinstance(backend.sessions, SqlSessionStore)
        attempts: list[object] = []
        event.listen(backend.sessions.database.engine, "do_connect", lambda *args: attempts.append(args))
        session = full_session()
        backend.sessions.create(session)
        assert backend.sessions.get(session.id) is not None  # a connection in the pool
        server.crash(lose_data=False)
        for _ in range(3):
            attempts.clear()
            with pytest.raises(BackendUnavailable, match="unavailable"):
                backend.sessions.get(session.id)
            assert len(attempts) == 1
        server.recover()
        got = backend.sessions.get(session.id)
        assert got is not None and got.client_info == session.client_info
        backend.close()
    finally:
        server.stop()


@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
def test_sql_workers_creating_the_tables_at_once_all_succeed(database: str) -> None:
    """Six workers' first requests on an empty database (after a restore, or a
    crash that lost it), each with an engine of its own: they queue on the
    database's lock, so none fails on a table another has just made (on
    MariaDB a worker of the two-host test answered 503 with ``Table
    'flask_mcp_messages' already exists``)."""
    server = shared_mariadb() if database == "mariadb" else shared_postgres()
    for _round in range(3):
        url = server.create_database("race")
        workers = [SqlDatabase.from_url(url) for _ in range(6)]
        barrier = threading.Barrier(len(workers))
        failures: list[BaseException] = []

        def first_request(worker: SqlDatabase, barrier: threading.Barrier, failures: list[BaseException]) -> None:
            barrier.wait()
            try:
                worker.prepare()
            except BaseException as exc:  # reported below
                failures.append(exc)

        threads = [threading.Thread(target=first_request, args=(worker, barrier, failures)) for worker in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        try:
            assert failures == []
            assert set(metadata.tables) <= set(inspect(workers[0].engine).get_table_names())
        finally:
            for worker in workers:
                worker.close()


def test_sql_event_log_forgets_expired_streams_a_batch_at_a_time(
    any_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer prunes the streams past their retention, and only those, in
    batches (MySQL refuses the single ``DELETE`` with a subquery of its own
    table that pruning was)."""
    now = [1_000.0]
    log = SqlEventLog(any_url, retention=60, prune_interval=0, clock=lambda: now[0])
    monkeypatch.setattr(SqlEventLog, "PRUNE_BATCH", 2)
    try:
        for old in ("old-1", "old-2", "old-3", "old-4", "old-5"):
            log.append(old, 0, {"jsonrpc": "2.0", "method": "notifications/message"})
            log.append(old, 1, {"jsonrpc": "2.0", "method": "notifications/message"})
        now[0] += 30
        log.append("recent", 0, {"jsonrpc": "2.0", "method": "notifications/message"})
        now[0] += 45  # the old streams are 75 s old, the recent one 45 s
        log.append("new", 0, {"jsonrpc": "2.0", "method": "notifications/message"})

        def streams(connection: Connection) -> set[str]:
            return set(connection.execute(select(stream_events.c.stream)).scalars())

        assert log.database.run(streams) == {"recent", "new"}
        assert log.read("recent", 0) == []
    finally:
        log.database.close()


def test_sql_mariadb_url_engine_returns_connections_without_a_rollback() -> None:
    """Every call ends its own transaction, so the pool of an engine made from
    a URL sends no ROLLBACK when a connection comes back: PyMySQL sent one per
    call (a round trip), and when the server died in between SQLAlchemy logged
    it with a traceback (the two-host restart test caught one)."""
    backend = open_backend(shared_mariadb().create_database("reset"), timeout=60, instance_path=".")
    try:
        assert isinstance(backend.sessions, SqlSessionStore)
        database = backend.sessions.database

        def rollbacks() -> int:  # on this connection: one thread, one pooled connection
            status = database.run(lambda connection: connection.execute(
                text("SHOW SESSION STATUS LIKE 'Com_rollback'")).one())
            return int(status[1])

        before = rollbacks()
        for _ in range(5):
            assert database.run(lambda connection: connection.execute(text("SELECT 1")).scalar()) == 1
        assert rollbacks() == before
    finally:
        backend.close()


@pytest.mark.parametrize("database", ["sqlite", "mariadb"])
def test_sql_other_databases_get_the_polling_bus(tmp_path: Path, database: str) -> None:
    """An engine the app made (on MariaDB: InnoDB's default REPEATABLE READ,
    which each poll's transaction of its own sees past)."""
    url = shared_mariadb().create_database("poll") if database == "mariadb" else f"sqlite:///{tmp_path / 'app.sqlite3'}"
    engine = create_engine(url)
    backend = open_backend(engine, timeout=60, instance_path=".")
    assert "polling bus" in backend.describe()
    assert backend.bus is not None
    other_engine = create_engine(url)  # another process's, as it were
    other = open_backend(other_engine, timeout=60, instance_path=".")
    assert other.bus is not None
    with backend.bus.subscribe(["p"]) as subscription:
        backend.bus.publish("p", {"n": 1})
        assert subscription.get(5) == ("p", {"n": 1})
        other.bus.publish("p", {"n": 2})
        assert subscription.get(5) == ("p", {"n": 2})
    left_open = backend.bus.subscribe(["p"])
    other.close()
    backend.close()  # its poller stops: what was still subscribed hears so, and polls no disposed engine
    with pytest.raises(BackendUnavailable, match="closed"):
        left_open.get(1)
    with pytest.raises(BackendUnavailable, match="closed"):
        backend.bus.subscribe(["p"])
    other_engine.dispose()
    engine.dispose()


def test_sql_ids_postgresql_cannot_store_read_as_unknown_not_as_a_fault(any_url: str) -> None:
    """A client's made-up session or task id with a NUL in it (JSON can carry one) is
    simply unknown: PostgreSQL text cannot hold it, and the query must not fail with 503."""
    backend = _open(any_url)
    assert backend.tasks is not None and backend.events is not None
    assert backend.sessions.get("abc\x00def") is None
    assert backend.sessions.touch("abc\x00def") is False
    assert backend.sessions.delete("abc\x00def") is False
    assert backend.tasks.get("task\x00") is None
    assert backend.tasks.update("task\x00", lambda record: True) is None
    assert backend.events.read("s\x00/x", 0) is None
    long_id = "x" * 5000  # longer than the id column: unknown too
    assert backend.sessions.get(long_id) is None
    assert backend.tasks.get(long_id) is None
    backend.close()


def test_sql_a_session_copy_is_served_until_another_hosts_write_is_notified(url: str, tmp_path: Path) -> None:
    """Two "hosts" (their own engines, listeners and change-stamp files): a copy
    answers reads without the database, and a save or delete on the other host
    reaches it through NOTIFY alone (copies are trusted for a minute here)."""
    here, there = _open(url), _open(url)
    for backend, name in ((here, "here"), (there, "there")):
        store = backend.sessions
        assert isinstance(store, SqlSessionStore)
        store.stamps_path = str(tmp_path / f"{name}.stamps")
        store.cache_max_age = 60.0
    session = full_session()
    here.sessions.create(session)
    assert here.sessions.get(session.id) is not None  # read once: a copy is kept

    engine = create_engine(url)  # a write no flask-mcp makes: no notification
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE flask_mcp_sessions SET record = replace(record, 'debug', 'error')")
    copy = here.sessions.get(session.id)
    assert copy is not None and copy.log_level == "debug"  # served from the copy

    changed = there.sessions.get(session.id)
    assert changed is not None and changed.log_level == "error"
    changed.log_level = "warning"
    there.sessions.save(changed)
    _eventually(lambda: getattr(here.sessions.get(session.id), "log_level", None) == "warning",
                "the notified save reached the other host", within=5)
    there.sessions.delete(session.id)
    _eventually(lambda: here.sessions.get(session.id) is None, "the notified delete reached the other host", within=5)
    engine.dispose()
    here.close()
    there.close()


def test_sql_the_listening_connection_is_named_in_pg_stat_activity(cluster: PostgresCluster, url: str) -> None:
    backend = _open(url)
    assert backend.bus is not None
    subscription = backend.bus.subscribe(["named"])
    with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
        names = [row[0] for row in admin.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = %s AND query ILIKE 'LISTEN %%'",
            (_dbname(url),)).fetchall()]
    assert names == ["flask-mcp-listener"]
    subscription.close()
    backend.close()
    assert listener_name("shop") == "shop flask-mcp-listener"
    assert len(listener_name("é" * 40).encode()) <= 63


def test_sql_the_listener_lets_other_greenlets_run_when_psycopg_was_imported_before_gevent_patched(url: str) -> None:
    # gunicorn --preload: the app (and psycopg, which picks its blocking C wait
    # at import) is loaded before the gevent worker patches the process.
    code = (
        "from flask_mcp.backends import open_backend\n"
        f"backend = open_backend({url!r}, timeout=5, instance_path='.')\n"
        "import psycopg\n"
        "from gevent import monkey\n"
        "monkey.patch_all()\n"
        "import gevent\n"
        "ticks = []\n"
        "def tick():\n"
        "    while True:\n"
        "        ticks.append(1)\n"
        "        gevent.sleep(0.05)\n"
        "gevent.spawn(tick)\n"
        "subscription = backend.bus.subscribe(['greenlets'])\n"
        "gevent.sleep(2)\n"
        "backend.bus.publish('greenlets', {'n': 1})\n"
        "print(len(ticks), subscription.get(5), flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ticks, delivered = done.stdout.split(" ", 1)
    assert int(ticks) >= 20  # 40 when nothing blocks the hub; 0 when the listener's wait does
    assert delivered.strip() == "('greenlets', {'n': 1})"
