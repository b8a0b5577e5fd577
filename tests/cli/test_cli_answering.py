"""How ``flask mcp call`` asks a tool's question: each field of the requested
schema typed, checked and asked again until it fits, run against the text a
person types (click's runner gives the prompts their input). The terminal
itself: tests/cli/test_cli_terminal.py."""

from __future__ import annotations

import re
from typing import Any

import click
import pytest
from click.testing import CliRunner

from flask_mcp.cli.answering import ask, convert_value, describe


def asked(params: dict[str, Any], typed: str) -> tuple[dict[str, Any], str]:
    """``ask(params)`` with ``typed`` as the person's input; the answer and what was shown."""
    runner = CliRunner()
    with runner.isolation(input=typed) as (_, err, _):
        answer = ask(params)
        shown = err.getvalue().decode()
    return answer, shown


FORM: dict[str, Any] = {
    "message": "Your details",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "title": "Email"},
            "age": {"type": "integer", "minimum": 18},
            "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            "newsletter": {"type": "boolean", "default": False},
            "nickname": {"type": "string", "maxLength": 5},
        },
        "required": ["email", "age", "colour"],
    },
}


def test_each_field_is_asked_typed_and_asked_again_until_it_fits() -> None:
    answer, shown = asked(FORM, "accept\nann\nann@example.com\n12\nx\n30\nb\ng\n\n\n")
    assert answer == {"action": "accept", "content": {"email": "ann@example.com", "age": 30, "colour": "g",
                                                      "newsletter": False}}
    assert "Your details" in shown
    assert "Error: must be an email address" in shown
    assert "Error: must be at least 18" in shown
    assert "Error: 'x' is not an integer" in shown
    assert "Error: choose one of r, g" in shown
    assert "newsletter (boolean, default false): " in shown
    assert "nickname (string, optional: Enter skips it): " in shown  # left empty: not in the content


def test_a_required_field_cannot_be_left_empty() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer, shown = asked({"message": "Name?", "requestedSchema": schema}, "\n\nAda\n")
    assert answer == {"action": "accept", "content": {"name": "Ada"}}
    assert "Error: this field is required" in shown


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_declining_or_cancelling_sends_no_content(action: str) -> None:
    answer, shown = asked(FORM, f"{action}\n")
    assert answer == {"action": action}
    assert "Email" not in shown


def test_a_url_question_shows_the_address_and_answers_with_consent_only() -> None:
    params = {"mode": "url", "message": "Connect your calendar", "url": "https://calendar.example.com/connect"}
    answer, shown = asked(params, "\n")
    assert answer == {"action": "accept"}
    assert "Open this address in your browser to continue: https://calendar.example.com/connect" in shown


@pytest.mark.parametrize(("text", "prop", "value"), [
    ("3", {"type": "number"}, 3.0),
    ("-2.5", {"type": "number", "minimum": -3}, -2.5),
    ("yes", {"type": "boolean"}, True),
    ("0", {"type": "boolean"}, False),
    ("2026-07-28", {"type": "string", "format": "date"}, "2026-07-28"),
    ("2026-07-28T10:00:00+02:00", {"type": "string", "format": "date-time"}, "2026-07-28T10:00:00+02:00"),
    ("https://example.com/", {"type": "string", "format": "uri"}, "https://example.com/"),
])
def test_a_value_that_fits_is_converted(text: str, prop: dict[str, Any], value: Any) -> None:
    assert convert_value(text, prop) == value


@pytest.mark.parametrize(("text", "prop", "why"), [
    ("15", {"type": "integer", "maximum": 14}, "must be at most 14"),
    ("1.5", {"type": "integer"}, "is not an integer"),
    ("maybe", {"type": "boolean"}, "maybe"),
    ("28/07/2026", {"type": "string", "format": "date"}, "must be a date (ISO 8601)"),
    ("a", {"type": "string", "minLength": 2}, "at least 2 characters"),
    ("abcdef", {"type": "string", "maxLength": 5}, "at most 5 characters"),
])
def test_a_value_that_does_not_fit_says_why(text: str, prop: dict[str, Any], why: str) -> None:
    with pytest.raises(click.BadParameter, match=re.escape(why)):
        convert_value(text, prop)


def test_describe_says_what_the_tool_asked_and_how_to_answer_it() -> None:
    question = {"method": "elicitation/create", "params": FORM}
    text = describe("signup", [question])
    assert text.startswith("The tool 'signup' asked 'Your details' (email: string (email); age: integer; "
                           "colour: choice; newsletter: boolean, optional; nickname: string, optional).")
    assert text.endswith("run the command in a terminal to answer it.")
    sampling = describe("draft", [{"method": "sampling/createMessage", "params": {}}], terminal=False)
    assert sampling == ("The tool 'draft' asked for a completion from a language model (sampling). flask mcp "
                        "call answers questions for a person (elicitation) only: use an MCP client that can.")
