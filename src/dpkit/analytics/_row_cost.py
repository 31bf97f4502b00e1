"""The per-row cost of the analyst's expressions, bounded by public constants.

Rule 3 of the Session's threat model (docs/analytics.md, "Timing"): what one row costs
to evaluate is bounded by public constants times the lengths of that row's own values,
so a secret predicate cannot choose between a cheap and an expensive branch of more
than a bounded size. This module holds the caps, a small parser of regular-expression
patterns (their size in states, and the structure the Spark engine reads to refuse
patterns that Java's matcher could backtrack on), and the per-query cost check
:func:`check_query_cost`, all computed from the query's text only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dpkit.errors import InvalidParameter

__all__ = [
    "MAX_CONCAT_WIDTH",
    "MAX_LITERAL_CHARS",
    "MAX_PATTERN_MATCHES",
    "MAX_PATTERN_STATES",
    "MAX_TOTAL_LITERAL_CHARS",
    "PatternItem",
    "RowCost",
    "check_query_cost",
    "parse_pattern",
    "pattern_states",
    "row_cost",
]


# --------------------------------------------------------------------- per-row cost
# Issue 27, section 3: a secret predicate that chooses between a cheap and an expensive
# value on one row (CASE WHEN name = 'alice' AND salary >= T THEN '<200 kB>' ELSE 'x'
# END) made that query 143 ms instead of 27 ms, a timing oracle read at 1e-9 per query.
# These caps bound what one row can cost, whatever the predicate chooses (the row's own
# values excepted); benchmarks/timing_residual.py measures what is left.

#: Characters of one literal (string or number).
MAX_LITERAL_CHARS = 1_000
#: Characters of all the literals of one expression, and of one query (its filters and
#: derived columns, each derived column counted as often as it is used).
MAX_TOTAL_LITERAL_CHARS = 4_000
#: Column values one string may be concatenated from (``concat``, ``||``), derived
#: columns counted with what they concatenate.
MAX_CONCAT_WIDTH = 32
#: States of a regular expression (:func:`pattern_states`): RE2's matching time per
#: character is proportional to them (measured ~5 ns per character and state where
#: its DFA gives up), Java's too for the patterns the Spark engine accepts.
MAX_PATTERN_STATES = 128
#: Regular-expression matches one query evaluates per row (derived columns counted as
#: often as they are used).
MAX_PATTERN_MATCHES = 16


def pattern_states(pattern: str) -> int:
    """An upper bound on the states of the automaton of ``pattern`` (RE2's program
    size, up to a constant): a character, class, escape or anchor counts one, a group
    its content, each ``|`` one, ``x{n,m}`` counts ``m`` copies of ``x`` (``x{n,}``:
    ``n + 1``), and a repetition that may vary one more. Unparseable text is counted
    as characters (the engine refuses it when the query is bound)."""
    branches = parse_pattern(pattern)
    return sum(_branch_states(b) for b in branches) + len(branches) - 1


@dataclass(frozen=True, slots=True)
class PatternItem:
    """One item of a parsed regular expression, with its repetition ``{low, high}``
    (``high`` None: unbounded; a plain item is ``{1, 1}``).

    ``kind``: ``"char"`` (a character, class or escape matching one character),
    ``"start"`` (``^``, ``\\A``), ``"anchor"`` (``$``, ``\\b``...: zero width),
    ``"group"`` (``branches``), ``"flags"`` (``(?i)``: zero width), ``"backref"``
    (``\\1``, ``\\k<x>``) or ``"lookaround"`` (``(?=``, ``(?!``, ``(?<=``, ``(?<!``,
    ``(?>``: their content is in ``branches``). ``flags``: the letters of ``(?i)`` or
    ``(?i:...)``; ``nested_class``: a character class holding ``[`` (Java reads nested
    classes and intersections where RE2 reads ``[:alpha:]``)."""

    kind: str
    low: int = 1
    high: int | None = 1
    branches: tuple[tuple[PatternItem, ...], ...] = ()
    quantifiers: int = 0  # quantifiers written on this item (a possessive '+' counts)
    flags: str = ""
    nested_class: bool = False


def _item_states(item: PatternItem) -> int:
    if item.kind in ("group", "lookaround"):
        one = sum(_branch_states(b) for b in item.branches) + len(item.branches) - 1
    else:
        one = 0 if item.kind == "flags" else 1
    copies = item.high if item.high is not None else item.low + 1
    return one * max(copies, 1) + (0 if item.low == item.high else 1)


def _branch_states(branch: tuple[PatternItem, ...]) -> int:
    return sum(_item_states(item) for item in branch)


#: Groups nested deeper are refused (the walks over the parsed pattern recurse).
_MAX_PATTERN_DEPTH = 100
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_PREFIX = re.compile(r"\?(?:P?<[A-Za-z_][A-Za-z0-9_]*>|[A-Za-z-]*:|[A-Za-z-]+\)|<?[=!]|>)?")


def _class_end(pattern: str, i: int) -> int:
    """Index after the character class opening at ``pattern[i] == '['``."""
    j = i + 1
    if pattern[j : j + 1] == "^":
        j += 1
    if pattern[j : j + 1] == "]":
        j += 1
    depth = 1
    while j < len(pattern):
        char = pattern[j]
        if char == "\\":
            j += 2
            continue
        if char == "[":
            if pattern[j + 1 : j + 2] in (":", ".", "="):
                close = pattern.find(pattern[j + 1] + "]", j + 2)
                if close != -1:
                    j = close + 2
                    continue
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(pattern)


def _escape_end(pattern: str, i: int) -> tuple[int, str]:
    """Index after the escape at ``pattern[i] == '\\'`` and its item kind."""
    letter = pattern[i + 1 : i + 2]
    if letter in ("p", "P", "x", "N", "k") and pattern[i + 2 : i + 3] in ("{", "<"):
        close = pattern.find("}" if pattern[i + 2] == "{" else ">", i + 3)
        end = len(pattern) if close == -1 else close + 1
        return end, "backref" if letter == "k" else "char"
    if letter.isdigit() and letter != "0":
        return i + 2, "backref"
    if letter == "A":
        return i + 2, "start"
    if letter in ("b", "B", "z", "Z", "G"):
        return i + 2, "anchor"
    if letter == "x":
        return min(i + 4, len(pattern)), "char"
    if letter == "u":
        return min(i + 6, len(pattern)), "char"
    return min(i + 2, len(pattern)), "char"


def parse_pattern(pattern: str) -> tuple[tuple[PatternItem, ...], ...]:
    """The top-level alternatives of a regular expression (RE2's and Java's common
    syntax), each a sequence of :class:`PatternItem`. Lenient: text the engines would
    refuse still parses (as characters), since only the engine's binding decides
    whether a pattern is valid; this reads the pattern's structure for its cost.

    Raises
    ------
    ValueError
        Groups nested more than 100 deep."""
    stack: list[tuple[list[tuple[PatternItem, ...]], list[PatternItem], str]] = [([], [], "")]
    i = 0
    while i < len(pattern):
        branches, items, _ = stack[-1]
        char = pattern[i]
        if char == "\\" and pattern[i + 1 : i + 2] == "Q":
            close = pattern.find("\\E", i + 2)
            end = len(pattern) if close == -1 else close
            items.extend(PatternItem("char") for _ in pattern[i + 2 : end])
            i = end + 2 if close != -1 else end
            continue
        if char == "\\":
            i, kind = _escape_end(pattern, i)
            items.append(PatternItem(kind))
            continue
        if char == "[":
            end = _class_end(pattern, i)
            inner = pattern[i + 1 : end - 1].lstrip("^")
            nested = "[" in inner or inner.startswith("]") or "&&" in inner
            items.append(PatternItem("char", nested_class=nested))
            i = end
            continue
        if char == "(":
            if len(stack) > _MAX_PATTERN_DEPTH:
                raise ValueError(f"groups nested more than {_MAX_PATTERN_DEPTH} deep")
            prefix = _GROUP_PREFIX.match(pattern, i + 1)
            text = prefix.group(0) if prefix else ""
            if text.endswith(")"):  # (?i): flags only
                items.append(PatternItem("flags", flags=text[1:-1]))
                i += 1 + len(text)
                continue
            kind = "lookaround" if text[1:] in ("=", "!", "<=", "<!", ">") else "group"
            flags = text[1:-1] if text.endswith(":") else ""
            stack.append(([], [], f"{kind}:{flags}"))
            i += 1 + len(text)
            continue
        if char == ")" and len(stack) > 1:
            group = _close(*stack.pop())
            stack[-1][1].append(group)
            i += 1
            continue
        if char == "|":
            branches.append(tuple(items))
            items.clear()
            i += 1
            continue
        repeat = _REPEAT.match(pattern, i) if char == "{" else None
        if items and (char in "*+?" or repeat is not None):
            item = items[-1]
            if char == "*":
                low, high, i = 0, None, i + 1
            elif char == "+":
                low, high, i = 1, None, i + 1
            elif char == "?":
                low, high, i = 0, 1, i + 1
            else:
                assert repeat is not None
                low = int(repeat.group(1))
                high = (
                    (int(repeat.group(3)) if repeat.group(3) else None) if repeat.group(2) else low
                )
                i = repeat.end()
            if pattern[i : i + 1] == "?":  # lazy: same states, same choices
                i += 1
            if item.quantifiers:  # x{2}{3}, x*+ (possessive): repeat the repeated item
                low *= item.low
                high = None if high is None or item.high is None else high * item.high
            items[-1] = PatternItem(
                item.kind,
                low,
                high,
                item.branches,
                item.quantifiers + 1,
                item.flags,
                item.nested_class,
            )
            continue
        items.append(PatternItem({"^": "start", "$": "anchor"}.get(char, "char")))
        i += 1
    while len(stack) > 1:  # an unclosed group: the engine refuses it at binding
        group = _close(*stack.pop())
        stack[-1][1].append(group)
    branches, items, _ = stack[0]
    return (*branches, tuple(items))


def _close(
    branches: list[tuple[PatternItem, ...]], items: list[PatternItem], kind: str
) -> PatternItem:
    name, _, flags = kind.partition(":")
    return PatternItem(name, branches=(*branches, tuple(items)), flags=flags)


@dataclass(frozen=True, slots=True)
class RowCost:
    """What one row of an expression costs, derived columns expanded where used:
    literal characters, the largest number of column values concatenated into one
    string (``width``), and regular-expression matches."""

    literal_chars: int = 0
    width: int = 0
    matches: int = 0

    def __add__(self, other: RowCost) -> RowCost:
        return RowCost(
            self.literal_chars + other.literal_chars,
            max(self.width, other.width),
            self.matches + other.matches,
        )


@lru_cache(maxsize=4096)
def parsed_expression(expression: str) -> Any:
    """SQLGlot's DuckDB parse of ``expression``, shared by every caller: read it only
    (walk, inspect), never transform it in place.

    A pure function of the text; remembered because a Session measures each query's
    expressions several times (:func:`row_cost`, ``_expr.expanded_size``), and
    ``describe`` parsed the same expressions ~2,000 times on a 65-column table (1.5 s
    of its 10)."""
    import sqlglot

    return sqlglot.parse_one(expression, read="duckdb")


def row_cost(expression: str, derived: Mapping[str, RowCost]) -> RowCost:
    """The :class:`RowCost` of ``expression``, each derived column it names (``derived``:
    name -> its cost) counted at its own cost, as often as it is named."""
    from sqlglot import exp

    tree = parsed_expression(expression)
    chars = matches = 0
    widest = 0
    width: dict[int, int] = {}
    # Reversed pre-order: every node after its descendants (no recursion on deep trees).
    for node in reversed(list(tree.walk(bfs=False))):
        children = [width.get(id(c), 0) for c in node.iter_expressions()]
        if isinstance(node, exp.Column):
            cost = derived.get(node.name)
            if cost is None:
                value = 1
            else:
                value = cost.width
                chars += cost.literal_chars
                matches += cost.matches
        elif isinstance(node, exp.Literal):
            value = 0
            chars += len(str(node.this))
        elif isinstance(node, exp.Concat | exp.DPipe):
            value = sum(children)
        else:
            # The grammar's other string functions (lower, substring, trim, CASE...)
            # return one of their inputs or less.
            value = max(children, default=0)
            if isinstance(node, exp.RegexpLike):
                matches += 1
        width[id(node)] = value
        widest = max(widest, value)
    return RowCost(chars, widest, matches)


def check_query_cost(
    derived: Sequence[tuple[str, str]], filters: Sequence[str], owner: str
) -> None:
    """Refuse a query whose per-row cost exceeds the caps (:data:`MAX_TOTAL_LITERAL_CHARS`,
    :data:`MAX_CONCAT_WIDTH`, :data:`MAX_PATTERN_MATCHES`), from its text only. Each
    derived column counts once for its own evaluation and once more wherever another
    expression names it (engines inline derived columns)."""
    costs: dict[str, RowCost] = {}
    total = RowCost()
    for name, expression in derived:
        costs[name] = row_cost(expression, costs)
        total += costs[name]
    for expression in filters:
        total += row_cost(expression, costs)
    why = (
        "a predicate on one row could choose it for that row only and make the row slow "
        "to evaluate, a timing side channel (docs/analytics.md, 'Timing')."
    )
    if total.literal_chars > MAX_TOTAL_LITERAL_CHARS:
        raise InvalidParameter(
            f"{owner}: the query's literals have {total.literal_chars} characters (each "
            f"derived column counted where it is used); at most {MAX_TOTAL_LITERAL_CHARS} "
            f"are allowed: {why}"
        )
    if total.width > MAX_CONCAT_WIDTH:
        raise InvalidParameter(
            f"{owner}: the query concatenates {total.width} column values into one string "
            f"(derived columns counted with what they concatenate); at most "
            f"{MAX_CONCAT_WIDTH} are allowed: {why}"
        )
    if total.matches > MAX_PATTERN_MATCHES:
        raise InvalidParameter(
            f"{owner}: the query matches {total.matches} regular expressions per row "
            f"(derived columns counted where they are used); at most {MAX_PATTERN_MATCHES} "
            f"are allowed: {why}"
        )
