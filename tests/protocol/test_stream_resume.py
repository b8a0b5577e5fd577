"""resume_reply on its own, over a real in-memory event log."""

from __future__ import annotations

from flask_mcp.backends.memory import MemoryEventLog
from flask_mcp.protocol.events import StreamRecorder
from flask_mcp.protocol.session import Session
from flask_mcp.protocol.stream_resume import resume_reply


def test_the_last_event_id_of_a_kept_stream_resumes_it_after_that_event() -> None:
    events = MemoryEventLog()
    recorder = StreamRecorder(events, "s1")
    first = recorder.record({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
    reply = resume_reply(events, Session("s1", "2025-11-25"), first)
    assert reply.status == 200 and reply.resume is not None
    assert (reply.resume.stream, reply.resume.stream_id, reply.resume.after) == (recorder.key, recorder.stream_id, 1)


def test_another_sessions_stream_is_not_found() -> None:
    events = MemoryEventLog()
    last = StreamRecorder(events, "owner").record(None, final=True)
    reply = resume_reply(events, Session("other", "2025-11-25"), last)
    assert reply.status == 400
    assert "names no stream" in reply.body["error"]["message"]


def test_without_an_event_log_or_a_readable_id_nothing_is_resumed() -> None:
    session = Session("s1", "2025-11-25")
    assert resume_reply(None, session, "abcdefgh/1").status == 400
    assert resume_reply(MemoryEventLog(), session, "not an event id").status == 400


def test_a_revision_without_event_ids_is_told_so() -> None:
    events = MemoryEventLog()
    last = StreamRecorder(events, "s1").record(None, final=True)
    reply = resume_reply(events, Session("s1", "2025-03-26"), last)
    assert reply.status == 400
    assert "no resumable streams" in reply.body["error"]["message"]
