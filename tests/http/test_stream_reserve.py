"""The pieces that keep streams from starving a worker, each on its own: the
look at a client's socket (real socket pairs), the share of threads streams
may hold (Flask's test client, with ``MCP_WORKER_THREADS`` set), its config
keys, and the fallback where the socket is out of reach (short comments).
The whole, under real gunicorn: tests/e2e/test_e2e_stream_reserve.py."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from werkzeug.test import TestResponse

from flask_mcp import MCP
from flask_mcp.config import ConfigError
from flask_mcp.http.capacity import StreamSlots, gunicorn_worker_threads
from flask_mcp.http.peer import Peer

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "reserve", "version": "1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
           "Mcp-Method": "subscriptions/listen"}


# ---------------------------------------------------------------- the peer


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    try:
        yield server, client
    finally:
        server.close()
        client.close()


def environ(sock: Any, protocol: str = "HTTP/1.1", key: str = "gunicorn.socket") -> dict[str, Any]:
    return {"SERVER_PROTOCOL": protocol, key: sock}


@pytest.mark.parametrize("key", ["gunicorn.socket", "werkzeug.socket"])
def test_a_client_that_closed_its_connection_is_gone(pair: tuple[socket.socket, socket.socket], key: str) -> None:
    server, client = pair
    peer = Peer(environ(server, key=key))
    assert peer.observable
    assert not peer.gone()
    client.close()
    assert peer.gone()


def test_a_client_that_sent_more_is_still_there_and_its_bytes_stay_unread(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    peer = Peer(environ(server))
    client.sendall(b"GET /next HTTP/1.1\r\n")  # a pipelined request: the server's parser must still see it
    assert not peer.gone()
    assert server.recv(100) == b"GET /next HTTP/1.1\r\n"


def test_a_reset_connection_is_gone() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    try:
        peer = Peer(environ(server))
        assert not peer.gone()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()  # linger 0: a reset instead of an orderly close
        deadline = time.monotonic() + 2
        while not peer.gone():
            assert time.monotonic() < deadline, "the reset went unnoticed"
            time.sleep(0.01)
    finally:
        server.close()
        listener.close()


def test_where_the_socket_says_nothing_the_peer_cannot_tell(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    assert not Peer({}).observable  # Flask's test client, most servers
    assert not Peer(environ(server, protocol="HTTP/2")).observable  # one socket carries many streams
    raw = socket.socket()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).wrap_socket(raw, server_hostname="localhost",
                                                              do_handshake_on_connect=False)
    try:
        assert not Peer(environ(tls)).observable  # the bytes on the wire are TLS records
    finally:
        tls.close()
        raw.close()
    client.close()
    assert not Peer({}).gone()


def test_a_socket_the_server_closed_is_not_taken_for_a_gone_client(pair: tuple[socket.socket, socket.socket]) -> None:
    server, _ = pair
    peer = Peer(environ(server))
    server.close()
    assert not peer.gone()


# ---------------------------------------------------------------- the share of threads


def test_the_share_of_threads_makes_the_limit() -> None:
    assert StreamSlots(0.5, 16).limit == 8
    assert StreamSlots(0.75, 8).limit == 6
    assert StreamSlots(0.5, 1).limit == 0  # a sync worker: a stream would take its only thread
    assert StreamSlots(1.0, 4).limit == 4
    assert StreamSlots(0.5, None).limit is None  # outside gunicorn, nothing configured: no limit


def test_slots_are_taken_up_to_the_limit_and_given_back() -> None:
    slots = StreamSlots(0.5, 4)
    assert [slots.take() for _ in range(3)] == [True, True, False]
    slots.give_back()
    assert slots.take()
    assert slots.held == 2


def test_outside_gunicorn_the_thread_count_is_unknown() -> None:
    assert gunicorn_worker_threads() is None
    assert StreamSlots(0.5).threads is None


def listen_app(**config: Any) -> Flask:
    app = Flask(__name__)
    app.config.update({"MCP_BACKEND": "memory://", "MCP_SSE_HEARTBEAT": 15, **config})
    app.testing = True
    MCP(app)
    return app


def open_listen(app: Flask, listen_id: str) -> TestResponse:
    body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
    return app.test_client().post("/mcp", json=body, headers=HEADERS, buffered=False)


def test_past_its_share_a_worker_refuses_new_listen_streams_with_503() -> None:
    app = listen_app(MCP_WORKER_THREADS=4, MCP_STREAM_SHARE=0.5)
    held = [open_listen(app, f"l{i}") for i in range(2)]
    try:
        assert [r.status_code for r in held] == [200, 200]
        refused = open_listen(app, "l-third")
        assert refused.status_code == 503
        assert refused.headers["Retry-After"] == "1"
        assert refused.mimetype == "application/json"
        body = refused.get_json()
        assert body["id"] == "l-third" and body["error"]["code"] == -32603
        assert "MCP_STREAM_SHARE=0.5" in body["error"]["message"] and "4 threads" in body["error"]["message"]
        held.pop().close()  # a client leaves: its slot is free again
        again = open_listen(app, "l-again")
        assert again.status_code == 200
        held.append(again)
    finally:
        for response in held:
            response.close()
    assert app.extensions["mcp"].stream_slots.held == 0


def test_a_worker_with_no_thread_to_spare_refuses_streams_without_inviting_a_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = listen_app(MCP_WORKER_THREADS=1)  # gunicorn's sync worker: half of one thread is none
    with caplog.at_level("WARNING", logger="flask_mcp"):
        refused = [open_listen(app, f"l{i}") for i in range(2)]
    for response in refused:
        assert response.status_code == 503
        assert "Retry-After" not in response.headers  # retrying would be refused the same, forever
        body = response.get_json()
        assert body["error"]["code"] == -32603 and "--threads" in body["error"]["message"]
    told = [r for r in caplog.records if "Long-lived MCP streams are refused" in r.getMessage()]
    assert len(told) == 1  # said once per process, not once per request


def test_without_a_known_thread_count_listen_streams_are_not_limited() -> None:
    app = listen_app()
    held = [open_listen(app, f"l{i}") for i in range(20)]
    try:
        assert {r.status_code for r in held} == {200}
    finally:
        for response in held:
            response.close()


@pytest.mark.parametrize(("key", "value"), [
    ("MCP_STREAM_SHARE", 0), ("MCP_STREAM_SHARE", 1.5), ("MCP_STREAM_SHARE", "half"), ("MCP_STREAM_SHARE", True),
    ("MCP_WORKER_THREADS", 0), ("MCP_WORKER_THREADS", "many"),
    ("MCP_SSE_PROBE_INTERVAL", 0), ("MCP_SSE_PROBE_INTERVAL", "often"),
])
def test_bad_reserve_settings_fail_at_start_up(key: str, value: Any) -> None:
    app = Flask(__name__)
    app.config.update({"MCP_BACKEND": "memory://", key: value})
    with pytest.raises(ConfigError, match=key):
        MCP(app)


# ---------------------------------------------------------------- the fallback


def test_where_the_socket_is_out_of_reach_an_idle_stream_writes_a_comment_every_probe_interval() -> None:
    """Flask's test client exposes no socket: the listen stream writes short
    comments (a write is how a WSGI app learns that its client left)."""
    app = listen_app(MCP_SSE_PROBE_INTERVAL=0.05)
    response = open_listen(app, "fallback")
    try:
        chunks = response.iter_encoded()
        assert b"notifications/subscriptions/acknowledged" in next(chunks)
        started = time.monotonic()
        comments = [next(chunks) for _ in range(3)]
        elapsed = time.monotonic() - started
    finally:
        response.close()
    assert comments == [b": \n\n"] * 3
    assert elapsed < 2.0  # three probe intervals, not a 15 s heartbeat
