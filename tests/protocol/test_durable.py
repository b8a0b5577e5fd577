"""The queue worker's side of a durable call (flask_mcp/protocol/durable.py):
the writer continues a stream a dead worker left, sends no progress the client
already saw, refuses to re-run a tool that is not safe to repeat, does not run
a call that already ended, and keeps a quiet stream from expiring."""

from __future__ import annotations

import time
from typing import Any

from flask_mcp.backends.memory import MemoryEventLog, MemoryMessageBus
from flask_mcp.protocol.durable import NOT_REPEATED, DurableWriter, run_durable
from flask_mcp.protocol.events import Resume, follow
from flask_mcp.protocol.request_info import RequestInfo
from flask_mcp.protocol.versions import REVISIONS

KEY = "session/streamabc123"


def progress(value: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": value}}


def request() -> RequestInfo:
    return RequestInfo(REVISIONS["2025-11-25"], "tools/call", {"name": "x"}, {}, request_id=3)


def messages(log: MemoryEventLog) -> list[Any]:
    events = log.read(KEY, -1)
    assert events is not None
    return [event["message"] for _, event in events if event.get("message") is not None]


def test_a_rerun_continues_the_stream_and_sends_no_progress_the_client_saw() -> None:
    log = MemoryEventLog()
    log.append(KEY, 0, {"message": None, "final": False})  # primed by the web worker
    first = DurableWriter(log, KEY, None, keep_alive=0)
    first.begin()
    for value in (1, 2, 3):
        first.emit(progress(value))
    # The first worker dies here. The second one runs the tool from the top.
    second = DurableWriter(log, KEY, None, keep_alive=0)
    assert second.runs_before == 1 and second.next == first.next

    def answer(job: RequestInfo) -> dict[str, Any]:
        for value in (1, 2, 3, 4, 5):
            job.emit(progress(value))
        return {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}

    assert run_durable(answer, request(), second) == "completed"
    sent = messages(log)
    assert [m["params"]["progress"] for m in sent[:-1]] == [1, 2, 3, 4, 5]
    assert sent[-1]["id"] == 3
    events = log.read(KEY, -1)
    assert events is not None
    assert [seq for seq, _ in events] == list(range(len(events)))  # one writer at a time, no gap, no repeat


def test_a_tool_not_safe_to_repeat_is_answered_with_an_error_on_its_rerun() -> None:
    log = MemoryEventLog()
    log.append(KEY, 0, {"message": None, "final": False})
    DurableWriter(log, KEY, None, keep_alive=0).begin()
    ran: list[bool] = []
    outcome = run_durable(lambda job: ran.append(True), request(), DurableWriter(log, KEY, None, keep_alive=0),
                          repeatable=False)
    assert outcome == "refused" and ran == []
    assert messages(log)[-1]["error"]["message"] == NOT_REPEATED


def test_a_call_that_already_ended_is_not_run_again() -> None:
    log = MemoryEventLog()
    log.append(KEY, 0, {"message": None, "final": False})
    run_durable(lambda job: {"jsonrpc": "2.0", "id": 3, "result": {}}, request(),
                DurableWriter(log, KEY, None, keep_alive=0))
    ran: list[bool] = []
    assert run_durable(lambda job: ran.append(True), request(), DurableWriter(log, KEY, None, keep_alive=0)) == "ended"
    assert ran == []


def test_a_quiet_durable_stream_is_kept_alive_and_followers_skip_the_markers() -> None:
    log = MemoryEventLog(retention=0.3)
    log.append(KEY, 0, {"message": None, "final": False})
    writer = DurableWriter(log, KEY, None, keep_alive=0.1)

    def answer(job: RequestInfo) -> dict[str, Any]:
        time.sleep(0.6)  # twice the retention without a message of its own
        return {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}

    run_durable(answer, request(), writer)
    events = log.read(KEY, -1)
    assert events is not None  # not expired
    assert len(events) > 3  # priming, run marker, keep-alives, answer

    followed = list(follow(log, MemoryMessageBus(), Resume(KEY, "streamabc123", 0), idle=0.01))
    assert [item[1]["id"] for item in followed if item is not None] == [3]
