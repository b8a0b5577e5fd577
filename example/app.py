"""A small bookshop exposed to AI hosts as an MCP server: tools, resources
(the catalogue, and each book through a URI template), a prompt, an MCP
App -- a shelf view that hosts show next to search results -- and a skill,
the desk runbook for its own tools (example/skills/).

    flask --app example.app run                      # development server
    gunicorn -c example/gunicorn.conf.py example.app:app

Any MCP setting can come from the environment as FLASK_MCP_*, e.g.
FLASK_MCP_PAGE_SIZE=20.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

from flask import Flask, render_template
from pydantic import BaseModel, Field

from flask_mcp import MCP, Context, EmbeddedResource, ToolError, UserMessage

app = Flask(__name__)
app.config["MCP_SKILLS_DIRECTORY_READ"] = True  # hosts may list a skill's folders (resources/directory/read)
app.config.from_prefixed_env()

mcp = MCP(app, name="bookshop", version="1.0.0", title="Corner Bookshop")


class Book(BaseModel):
    isbn: str
    title: str
    author: str
    year: int
    price_eur: float
    in_stock: int


class SearchResult(BaseModel):
    query: str
    books: list[Book]


class Reservation(BaseModel):
    isbn: str
    customer: str
    pick_up_by: date
    status: Literal["reserved"] = "reserved"


CATALOGUE = {
    b.isbn: b
    for b in [
        Book(isbn="9780141439518", title="Pride and Prejudice", author="Jane Austen", year=1813,
             price_eur=7.5, in_stock=4),
        Book(isbn="9780451524935", title="1984", author="George Orwell", year=1949, price_eur=9.9, in_stock=0),
        Book(isbn="9780547928227", title="The Hobbit", author="J. R. R. Tolkien", year=1937,
             price_eur=12.0, in_stock=2),
        Book(isbn="9780140449136", title="Crime and Punishment", author="Fyodor Dostoevsky", year=1866,
             price_eur=11.0, in_stock=1),
    ]
}


@mcp.instructions
def instructions(ctx: Context) -> str:
    client = ctx.client_info.get("name", "an MCP client")
    text = f"You are helping a customer of the Corner Bookshop through {client}. Prices are in euros."
    return f"{text} Before using the tools, load the skill {RUNBOOK[0]}." if RUNBOOK else text


@mcp.tool(annotations={"readOnlyHint": True}, ui="ui://bookshop/shelf")
def search_books(
    query: Annotated[str, Field(description="Words from the title or the author's name")],
    limit: Annotated[int, Field(ge=1, le=20)] = 5,
) -> SearchResult:
    """Search the catalogue by title or author."""
    words = query.lower().split()
    found = [b for b in CATALOGUE.values() if all(w in f"{b.title} {b.author}".lower() for w in words)]
    return SearchResult(query=query, books=found[:limit])


@mcp.tool(annotations={"readOnlyHint": True})
def get_book(isbn: str) -> Book:
    """Look up one book by its ISBN-13.

    Args:
        isbn: the 13-digit ISBN, without dashes
    """
    book = CATALOGUE.get(isbn)
    if book is None:
        raise ToolError(f"No book with ISBN {isbn}; use search_books to find one.")
    return book


@mcp.tool(title="Reserve a book", annotations={"destructiveHint": False, "idempotentHint": False})
def reserve_book(isbn: str, customer: Annotated[str, Field(min_length=1)]) -> Reservation:
    """Hold a copy of a book for a customer to pick up within three days."""
    book = get_book(isbn)
    if book.in_stock < 1:
        raise ToolError(f"{book.title!r} is out of stock; it cannot be reserved right now.")
    today = date.today()
    return Reservation(isbn=isbn, customer=customer, pick_up_by=date.fromordinal(today.toordinal() + 3))


@mcp.tool(annotations={"readOnlyHint": True})
def opening_hours() -> str:
    """When the shop is open."""
    return "Monday to Saturday, 9:00 to 19:00; closed on Sundays."


# ---------------------------------------------------------------------- resources and prompts


@mcp.resource("bookshop://catalogue", title="Catalogue", mime_type="application/json")
def catalogue() -> list[Book]:
    """Every book in the shop, with its price and how many copies are in stock."""
    return list(CATALOGUE.values())


@mcp.resource("bookshop://books/{isbn}", name="book", title="A book", mime_type="application/json",
              complete={"isbn": sorted(CATALOGUE)})
def book_by_isbn(isbn: str) -> Book | None:
    """One book, by its ISBN-13 (None: there is no such book)."""
    return CATALOGUE.get(isbn)


@mcp.prompt(title="Recommend a book", complete={"mood": ["adventurous", "classic", "dark", "romantic"]})
def recommend(
    mood: Annotated[str, Field(description="What the reader is in the mood for")],
    budget_eur: Annotated[float, Field(description="The most the reader wants to spend, in euros")] = 15.0,
) -> list[UserMessage]:
    """Ask the model to pick a book from the shelf for a mood and a budget."""
    affordable = [b.model_dump() for b in CATALOGUE.values() if b.price_eur <= budget_eur and b.in_stock]
    shelf = EmbeddedResource("bookshop://catalogue", text=json.dumps(affordable), mime_type="application/json")
    return [
        UserMessage(shelf),
        UserMessage(f"I feel {mood} and can spend up to {budget_eur:.2f} EUR. Which of these books "
                    "would you recommend, and why?"),
    ]


# ---------------------------------------------------------------------- MCP App


@mcp.ui_resource("ui://bookshop/shelf", title="Bookshop shelf", prefers_border=True)
def shelf() -> str:
    """The shelf view: the catalogue, then the books a search found.

    It needs no network (no csp). Its domain is left on "auto": Claude's stable
    sandbox origin for the URL the client reached this server at.
    """
    return render_template("shelf.html", books=[b.model_dump() for b in CATALOGUE.values()])



# ---------------------------------------------------------------------- skills


# The desk runbook for the tools above, served with them (the skills extension;
# its SKILL.md front matter is YAML: the "skills" extra installs PyYAML). Without
# the extra the shop opens without its runbook, and says so once.
try:
    RUNBOOK = mcp.skills_from_directory(Path(__file__).parent / "skills")
except ImportError as exc:
    RUNBOOK = []
    app.logger.warning("The bookshop-desk skill is left out: %s", exc)


# ---------------------------------------------------------------------- long jobs on Celery

if app.config["MCP_TASK_RUNNER"] == "celery":  # FLASK_MCP_TASK_RUNNER=celery: docs/celery.md
    from example.reports import init_reports

    celery_app = init_reports(app, mcp, CATALOGUE)
