"""The MCP tools, written against Flask-Login's ``current_user`` like the
app's own views: registered on the unbound ``mcp`` at import, before
``init_app``."""

from __future__ import annotations

import os
import threading

from flask_login import current_user
from sqlalchemy import select

from flask_mcp import Context

from .extensions import db, mcp
from .models import Note


@mcp.tool
def add_note(text: str) -> dict[str, object]:
    """Writes a note as the caller."""
    note = Note(author_id=current_user.id, text=text)
    db.session.add(note)
    db.session.commit()
    return {"id": note.id, "author": current_user.name, "pid": os.getpid()}


@mcp.tool
def my_notes() -> list[str]:
    """The caller's own notes."""
    return list(db.session.scalars(select(Note.text).where(Note.author_id == current_user.id).order_by(Note.id)))


@mcp.tool
def whoami(ctx: Context) -> dict[str, object]:
    """Who Flask-Login, the context and the token say is calling."""
    user = ctx.user
    return {"current_user": current_user.name if current_user.is_authenticated else None,
            "ctx_user": user.name if user is not None else None,
            "subject": ctx.principal.subject if ctx.principal is not None else None}


@mcp.tool
def slow_note(text: str, ctx: Context) -> str:
    """Reports progress first (the answer becomes an event stream, the tool runs on a thread of its own)."""
    ctx.report_progress(1, 2, "writing")
    note = Note(author_id=current_user.id, text=text)
    db.session.add(note)
    db.session.commit()
    return f"{current_user.name} on {threading.current_thread().name}"


@mcp.tool
async def add_note_async(text: str) -> str:
    """The same as add_note, as an async def tool."""
    note = Note(author_id=current_user.id, text=text)
    db.session.add(note)
    db.session.commit()
    return f"note {note.id} by {current_user.name}"
