"""The differential-privacy clause of GoogleSQL, read before SQLGlot parses the rest.

``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, ...)`` is
GoogleSQL's (BigQuery's) syntax for a private aggregate query. SQLGlot (30) does not
parse it, so :func:`split_clause` finds it with SQLGlot's own tokenizer, reads the
options, and hands SQLGlot the statement with the clause replaced by spaces -- the same
length, so every position SQLGlot reports is a position in the analyst's text. An
``EXPLAIN`` in front is read the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dpkit.errors import SqlError

__all__ = ["Clause", "SqlError", "position_of", "split_clause"]

_EXPLAIN = re.compile(r"\s*(EXPLAIN)\b", re.IGNORECASE)

#: Longest statement accepted (a public constant: parsing time is bounded by it).
MAX_STATEMENT = 100_000


@dataclass
class Clause:
    """What :func:`split_clause` found."""

    #: The statement with ``EXPLAIN`` and the DP clause blanked out (same length).
    rest: str
    explain: bool = False
    private: bool = False
    #: OPTIONS, lower-case keys -> Python values (numbers, strings, booleans, names).
    options: dict[str, Any] = field(default_factory=dict)
    #: Where each option's value starts, for errors.
    positions: dict[str, int] = field(default_factory=dict)
    #: Where ``SELECT`` starts.
    select_at: int = 0


def position_of(node: Any) -> int | None:
    """The character offset where a SQLGlot node starts: the leftmost located token
    of the node and its children (``day >= 5`` starts at ``day``, not at ``5``, which a
    breadth-first walk reaches first)."""
    starts = [getattr(child, "meta", {}).get("start") for child in node.walk()]
    located = [start for start in starts if isinstance(start, int)]
    return min(located) if located else None


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` replaced by spaces (line ends kept)."""
    middle = "".join(c if c in "\r\n" else " " for c in text[start:end])
    return text[:start] + middle + text[end:]


def split_clause(text: str) -> Clause:
    """Find ``[EXPLAIN] SELECT WITH DIFFERENTIAL_PRIVACY [OPTIONS (...)]`` at the start
    of ``text`` (case-insensitive) and read its options."""
    from sqlglot.dialects.bigquery import BigQuery
    from sqlglot.errors import TokenError

    if not isinstance(text, str) or not text.strip():
        raise SqlError("Give a SQL statement (a non-empty string).")
    if len(text) > MAX_STATEMENT:
        raise SqlError(f"The statement is longer than {MAX_STATEMENT} characters.")
    clause = Clause(rest=text)
    explain = _EXPLAIN.match(text)
    if explain is not None:
        # SQLGlot's tokenizer reads EXPLAIN as a command swallowing the rest.
        clause.explain = True
        clause.rest = _blank(text, explain.start(1), explain.end(1))
    try:
        tokens = BigQuery().tokenize(clause.rest)
    except TokenError as err:
        raise SqlError(f"Cannot read the statement: {err}") from None
    i = 0
    if i < len(tokens):
        clause.select_at = tokens[i].start
    words = [t.text.upper() for t in tokens[i : i + 3]]
    if words[:1] != ["SELECT"] or words[1:3] != ["WITH", "DIFFERENTIAL_PRIVACY"]:
        return clause
    clause.private = True
    start, end = tokens[i + 1].start, tokens[i + 2].end + 1
    j = i + 3
    if j < len(tokens) and tokens[j].text.upper() == "OPTIONS":
        end = _read_options(text, tokens, j + 1, clause)
    clause.rest = _blank(clause.rest, start, end)
    return clause


def _read_options(text: str, tokens: list[Any], j: int, clause: Clause) -> int:
    """Read ``( key = value, ... )`` from token ``j``; returns the end offset."""
    if j >= len(tokens) or tokens[j].text != "(":
        at = tokens[j].start if j < len(tokens) else len(text)
        raise SqlError("OPTIONS must be followed by ( key = value, ... ).", text, at)
    j += 1
    while True:
        if j >= len(tokens):
            raise SqlError("OPTIONS ( ... ) is not closed.", text, len(text))
        if tokens[j].text == ")":
            return int(tokens[j].end) + 1
        key_token = tokens[j]
        key = key_token.text.lower()
        if not key.replace("_", "").isalnum():
            raise SqlError("Expected an option name.", text, key_token.start)
        if j + 1 >= len(tokens) or tokens[j + 1].text != "=":
            raise SqlError(f"Expected '=' after option {key}.", text, key_token.end + 1)
        j += 2
        value, j = _value(text, tokens, j)
        if key in clause.options:
            raise SqlError(f"Option {key} is given twice.", text, key_token.start)
        clause.options[key] = value
        clause.positions[key] = key_token.start
        if j < len(tokens) and tokens[j].text == ",":
            j += 1
        elif j < len(tokens) and tokens[j].text != ")":
            raise SqlError("Expected ',' or ')' in OPTIONS.", text, tokens[j].start)


def _value(text: str, tokens: list[Any], j: int, nested: int = 0) -> tuple[Any, int]:
    """One option value: a number (with a sign), a string, TRUE/FALSE/NULL, a name, or a
    list ``[v, ...]`` of scalars or of tuples ``(v, ...)`` (the KEYS hint
    ``group_keys = [...]``)."""
    from sqlglot import TokenType

    if j >= len(tokens):
        raise SqlError("Expected an option value.", text, len(text))
    if tokens[j].text in ("[", "(") and nested < 2 and (tokens[j].text == "[") == (nested == 0):
        close = "]" if tokens[j].text == "[" else ")"
        items: list[Any] = []
        j += 1
        while True:
            if j >= len(tokens):
                raise SqlError(f"Expected '{close}'.", text, len(text))
            if tokens[j].text == close and (items or close == "]"):
                return (items if close == "]" else tuple(items)), j + 1
            item, j = _value(text, tokens, j, nested + 1)
            if isinstance(item, _Name):
                raise SqlError(
                    "A key is a number, a string or a boolean.", text, tokens[j - 1].start
                )
            items.append(item)
            if j < len(tokens) and tokens[j].text == ",":
                j += 1
            elif j < len(tokens) and tokens[j].text != close:
                raise SqlError(f"Expected ',' or '{close}'.", text, tokens[j].start)
    sign = 1.0
    token = tokens[j]
    if token.text in ("-", "+"):
        sign = -1.0 if token.text == "-" else 1.0
        j += 1
        if j >= len(tokens):
            raise SqlError("Expected a number.", text, len(text))
        token = tokens[j]
    if token.token_type == TokenType.NUMBER:
        number = float(token.text)
        value: Any = sign * number
        if number.is_integer() and all(c.isdigit() for c in token.text):
            value = int(sign) * int(token.text)
        return value, j + 1
    if sign != 1.0:
        raise SqlError("Expected a number after the sign.", text, token.start)
    if token.token_type == TokenType.STRING:
        return token.text, j + 1
    upper = token.text.upper()
    if upper in ("TRUE", "FALSE"):
        return upper == "TRUE", j + 1
    if upper == "NULL":
        return None, j + 1
    if token.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or token.text.isidentifier():
        return _Name(token.text), j + 1
    raise SqlError("Expected a number, a string or a name.", text, token.start)


class _Name(str):
    """An option value written as a name (``privacy_unit_column = uid``)."""
