"""The one contract every backend passes (memory, SQLite, Redis, cachelib):
sessions, the message bus and the event logs, each test run on every backend
that offers the feature (backend_cases.py lists them). A new backend adds its
Case there; its own behaviour goes in a file of its own beside this one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_cases import (
    ALL,
    CLOCKED_EVENTS,
    RETENTION,
    ROOT,
    SHARED,
    SHARED_BUS,
    TIMEOUT,
    WITH_BUS,
    WITH_CLOCK,
    Case,
    cases,
    full_session,
    open_case,
    run_child,
)

from flask_mcp.backends.contracts import BusNotSupported
from flask_mcp.protocol.session import Session


@pytest.fixture(params=ALL)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    with open_case(request.param, tmp_path, request) as opened:
        yield opened


# ------------------------------------------------------------------ sessions


def test_a_created_session_reads_back_with_every_field(case: Case) -> None:
    session = full_session()
    before = time.time()
    case.backend.sessions.create(session)

    got = case.backend.sessions.get(session.id)

    assert got is not None
    expected = session.to_dict()
    actual = got.to_dict()
    assert actual.pop("last_seen") >= expected.pop("last_seen")
    assert actual == expected
    if case.clock is not None:
        assert got.created_at == case.clock.now
    else:
        assert before <= got.created_at <= time.time()


def test_get_returns_a_copy_so_changes_count_only_once_saved(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)

    got = case.backend.sessions.get(session.id)
    assert got is not None
    got.log_level = "error"
    got.data["cursor"] = "changed"
    got.client_info["name"] = "changed"

    again = case.backend.sessions.get(session.id)
    assert again is not None
    assert again.log_level == "debug"
    assert again.data["cursor"] == "abc"
    assert again.client_info["name"] == "inspector"


def test_nested_containers_are_copied_on_create_get_and_save(case: Case) -> None:
    """Changes deep inside a session count only once saved, whether made to the
    object handed to ``create``/``save`` afterwards or to one ``get`` returned."""
    session = full_session()
    case.backend.sessions.create(session)
    session.data["numbers"].append("after create")

    got = case.backend.sessions.get(session.id)
    assert got is not None
    got.data["numbers"].append("after get")
    got.client_info["nested"]["ünïcode"].append("after get")
    got.client_capabilities["roots"]["listChanged"] = False
    again = case.backend.sessions.get(session.id)
    assert again is not None
    assert again.data["numbers"] == [1, 2, 3]
    assert again.client_info["nested"]["ünïcode"] == [1, 2.5, None, True]
    assert again.client_capabilities["roots"] == {"listChanged": True}

    again.data["numbers"].append(4)
    case.backend.sessions.save(again)
    again.data["numbers"].append("after save")
    last = case.backend.sessions.get(session.id)
    assert last is not None
    assert last.data["numbers"] == [1, 2, 3, 4]


def test_save_persists_changes(case: Case) -> None:
    session = Session(id=uuid.uuid4().hex, protocol_version="2025-11-25")
    case.backend.sessions.create(session)

    got = case.backend.sessions.get(session.id)
    assert got is not None
    got.initialized = True
    got.log_level = "warning"
    got.data["k"] = {"v": 1}
    case.backend.sessions.save(got)

    again = case.backend.sessions.get(session.id)
    assert again is not None
    assert (again.initialized, again.log_level, again.data) == (True, "warning", {"k": {"v": 1}})


def test_delete_reports_whether_there_was_a_session(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)

    assert case.backend.sessions.delete(session.id) is True
    assert case.backend.sessions.delete(session.id) is False
    assert case.backend.sessions.get(session.id) is None


def test_saving_a_deleted_session_does_not_bring_it_back(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)
    case.backend.sessions.delete(session.id)

    case.backend.sessions.save(session)

    assert case.backend.sessions.get(session.id) is None


def test_an_unknown_session_id_reads_as_none(case: Case) -> None:
    assert case.backend.sessions.get("no-such-session") is None
    assert case.backend.sessions.get("") is None


def test_touch_refreshes_a_live_session_and_reports_unknown_ones(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)
    touch = case.backend.sessions.touch

    assert touch(session.id) is True
    assert touch("no-such-session") is False


@cases(WITH_CLOCK)
def test_a_session_idle_past_the_timeout_expires(case: Case) -> None:
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)

    clock.advance(TIMEOUT - 1)
    assert case.backend.sessions.get(session.id) is not None  # refreshes the idle timer
    clock.advance(TIMEOUT - 1)
    assert case.backend.sessions.get(session.id) is not None
    clock.advance(TIMEOUT + 1)
    assert case.backend.sessions.get(session.id) is None
    # Gone for good, even once the clock no longer says so.
    clock.advance(-(TIMEOUT + 1))
    assert case.backend.sessions.get(session.id) is None


@cases(WITH_CLOCK)
def test_saving_an_expired_session_does_not_bring_it_back(case: Case) -> None:
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)
    clock.advance(TIMEOUT + 1)

    case.backend.sessions.save(session)

    assert case.backend.sessions.get(session.id) is None


@cases(WITH_CLOCK)
def test_touch_keeps_a_session_alive(case: Case) -> None:
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)
    touch = case.backend.sessions.touch

    clock.advance(TIMEOUT - 1)
    assert touch(session.id) is True
    clock.advance(TIMEOUT - 1)
    assert case.backend.sessions.get(session.id) is not None
    clock.advance(TIMEOUT + 1)
    assert touch(session.id) is False


@cases(WITH_CLOCK)
def test_saving_a_session_read_earlier_does_not_set_its_idle_timer_back(case: Case) -> None:
    """Two requests of one session: the first saves what it read after the
    second refreshed the timer; the session stays as fresh as the second left it."""
    clock = case.clock_
    session = full_session()
    case.backend.sessions.create(session)
    clock.advance(10)
    first = case.backend.sessions.get(session.id)
    assert first is not None
    clock.advance(30)
    assert case.backend.sessions.get(session.id) is not None

    first.log_level = "error"
    case.backend.sessions.save(first)
    clock.advance(TIMEOUT - 5)  # idle past TIMEOUT since the first read, not since the second

    got = case.backend.sessions.get(session.id)
    assert got is not None
    assert got.log_level == "error"


@cases(SHARED)
def test_a_session_created_by_a_process_that_then_crashes_is_still_there(case: Case) -> None:
    session = full_session()
    code = (
        "import os, signal\n"
        "from flask_mcp.protocol.session import Session\n"
        f"backend.sessions.create(Session.from_dict({session.to_dict()!r}))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )

    child = run_child(case, code)

    assert child.returncode == -signal.SIGKILL, child.stderr
    got = case.backend.sessions.get(session.id)
    assert got is not None
    assert (got.principal, got.client_info, got.data) == (session.principal, session.client_info, session.data)


@cases(SHARED)
def test_a_change_saved_here_is_seen_by_another_process(case: Case) -> None:
    session = full_session()
    case.backend.sessions.create(session)
    session.log_level = "critical"
    case.backend.sessions.save(session)
    code = (
        "import json\n"
        f"got = backend.sessions.get({session.id!r})\n"
        "print(json.dumps(got.to_dict()))\n"
        "backend.close()\n"
    )

    child = run_child(case, code)

    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout)["log_level"] == "critical"


@cases(SHARED)
def test_workers_in_several_processes_share_sessions_without_errors(case: Case) -> None:
    code = (
        "import sys\n"
        "from flask_mcp.protocol.session import Session\n"
        "for n in range(60):\n"
        "    session = Session(id=f'{sys.argv[1]}-{n}', protocol_version='2025-06-18')\n"
        "    backend.sessions.create(session)\n"
        "    got = backend.sessions.get(session.id)\n"
        "    got.data['n'] = n\n"
        "    backend.sessions.save(got)\n"
        "backend.close()\n"
    )
    assert case.child_setup is not None
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", case.child_setup + code, f"w{i}"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(4)
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=60)
        assert worker.returncode == 0, stderr.decode()

    for i in range(4):
        for n in (0, 59):
            got = case.backend.sessions.get(f"w{i}-{n}")
            assert got is not None
            assert got.data == {"n": n}


# ------------------------------------------------------------------ message bus


@cases(WITH_BUS)
def test_a_published_message_reaches_subscribers_of_its_channel_only(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["a", "b"]) as subscription:
        bus.publish("elsewhere", {"n": 0})
        bus.publish("b", {"n": 1, "nested": {"list": [1, "x", None]}})
        bus.publish("a", {"n": 2})

        got = [subscription.get(5), subscription.get(5)]
        if case.name == "redis-cluster":  # sharded pub/sub keeps the order per channel only (docs/redis.md)
            got.sort(key=lambda item: item is None or item[0] != "b")
        assert got == [("b", {"n": 1, "nested": {"list": [1, "x", None]}}), ("a", {"n": 2})]
        assert subscription.get(0.05) is None


@cases(WITH_BUS)
def test_every_subscriber_of_a_channel_gets_the_message(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["c"]) as first, bus.subscribe(["c"]) as second:
        bus.publish("c", {"hello": "all"})

        assert first.get(5) == ("c", {"hello": "all"})
        assert second.get(5) == ("c", {"hello": "all"})


@cases(WITH_BUS)
def test_messages_published_before_subscribing_are_not_delivered(case: Case) -> None:
    bus = case.bus
    bus.publish("early", {"n": 1})
    with bus.subscribe(["early"]) as subscription:
        assert subscription.get(0.1) is None


@cases(WITH_BUS)
def test_a_subscription_waits_no_longer_than_its_timeout(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["quiet"]) as subscription:
        started = time.monotonic()
        assert subscription.get(0.2) is None
        assert 0.15 <= time.monotonic() - started < 2
        started = time.monotonic()
        assert subscription.get(0) is None
        assert time.monotonic() - started < 1


@cases(WITH_BUS)
def test_a_waiting_subscriber_wakes_when_another_thread_publishes(case: Case) -> None:
    bus = case.bus
    with bus.subscribe(["wake"]) as subscription:
        publisher = threading.Thread(target=bus.publish, args=("wake", {"from": "thread"}))
        started = time.monotonic()
        publisher.start()
        try:
            assert subscription.get(10) == ("wake", {"from": "thread"})
        finally:
            publisher.join(10)
        assert time.monotonic() - started < 5


@cases(SHARED_BUS)
def test_a_message_published_by_another_process_is_received(case: Case) -> None:
    with case.bus.subscribe(["cross"]) as subscription:
        child = run_child(case, "backend.bus.publish('cross', {'from': 'child'})\nbackend.close()\n")
        assert child.returncode == 0, child.stderr

        assert subscription.get(5) == ("cross", {"from": "child"})


# ------------------------------------------------------------------ event logs (resumable streams)


@cases(WITH_BUS)
def test_an_event_log_reads_back_the_events_after_a_sequence_number(case: Case) -> None:
    case.events.append("s/a", 0, {"message": None, "final": False})
    case.events.append("s/a", 1, {"message": {"n": 1}, "final": False})
    case.events.append("s/a", 2, {"message": {"n": 2}, "final": True})
    case.events.append("s/b", 0, {"message": None, "final": False})
    assert case.events.read("s/a", 0) == [
        (1, {"message": {"n": 1}, "final": False}),
        (2, {"message": {"n": 2}, "final": True}),
    ]
    assert case.events.read("s/a", 1) == [(2, {"message": {"n": 2}, "final": True})]
    assert case.events.read("s/a", 2) == []
    assert case.events.read("s/b", 0) == []  # known, nothing after the priming event
    assert case.events.read("s/c", 0) is None  # unknown


@cases(WITH_BUS)
def test_an_event_log_keeps_its_own_copy(case: Case) -> None:
    event: dict[str, object] = {"message": {"n": 1}, "final": False}
    case.events.append("copy", 0, event)
    event["message"] = "changed"
    assert case.events.read("copy", -1) == [(0, {"message": {"n": 1}, "final": False})]


@cases(CLOCKED_EVENTS)
def test_a_stream_is_forgotten_a_retention_after_its_last_event(case: Case) -> None:
    case.events.append("old", 0, {"message": None, "final": False})
    case.clock_.advance(RETENTION - 1)
    case.events.append("old", 1, {"message": {"n": 1}, "final": False})  # refreshes the whole stream
    case.clock_.advance(2)
    assert case.events.read("old", 0) == [(1, {"message": {"n": 1}, "final": False})]
    case.clock_.advance(RETENTION)
    assert case.events.read("old", 0) is None


@cases(SHARED_BUS)
def test_events_appended_by_another_process_are_read(case: Case) -> None:
    code = (
        "backend.events.append('cross/s', 0, {'message': None, 'final': False})\n"
        "backend.events.append('cross/s', 1, {'message': {'from': 'child'}, 'final': True})\n"
        "backend.close()\n"
    )
    child = run_child(case, code)
    assert child.returncode == 0, child.stderr
    assert case.events.read("cross/s", 0) == [(1, {"message": {"from": "child"}, "final": True})]


def test_a_backend_without_a_bus_says_so_and_refuses_bus_features(case: Case) -> None:
    if case.backend.bus is not None:
        assert case.backend.supports_bus
        assert case.backend.require_bus("subscriptions/listen") is case.backend.bus
        return
    assert not case.backend.supports_bus
    with pytest.raises(BusNotSupported, match="subscriptions/listen needs a message bus"):
        case.backend.require_bus("subscriptions/listen")
