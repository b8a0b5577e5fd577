"""A ``GET`` with ``Last-Event-ID``: where a session's event stream picks up
again after the client lost its connection (2025-11-25 resumable streams, and
durable calls of the revisions that carry event ids)."""

from __future__ import annotations

from .errors import InvalidRequest
from .events import EventLog, Resume, parse_event_id, stream_key
from .session import Session, StoreUnavailable
from .transport import Reply, error_reply, store_unavailable
from .versions import REVISIONS


def resume_reply(events: EventLog | None, session: Session, last_event_id: str) -> Reply:
    """The stream to replay and follow, or a 400 saying why there is none
    (a 503 when the event log cannot be read)."""
    parsed = parse_event_id(last_event_id)
    revision = REVISIONS.get(session.protocol_version)
    resumable = revision is not None and (revision.resumable_streams or revision.durable_streams)
    if parsed is not None and resumable and events is not None:
        stream_id, after = parsed
        key = stream_key(session.id, stream_id)
        try:
            if events.read(key, after) is not None:
                return Reply(200, resume=Resume(key, stream_id, after))
        except StoreUnavailable as exc:
            return store_unavailable(exc)
    error = InvalidRequest(
        f"Last-Event-ID {last_event_id!r} names no stream this server can resume for this session "
        "(unknown or expired, or this protocol version has no resumable streams); send the request again."
    )
    return error_reply(None, error, 400)
