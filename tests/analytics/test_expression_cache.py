"""``validate_expression`` remembers its results: the same answers as checking anew.

The check is a function of the expression, the column names and the owner; the cache
must key on all three, and must never turn a refusal into an acceptance.
"""

from __future__ import annotations

import re

import pytest

from dpkit.analytics._expr import _checked, validate_expression
from dpkit.errors import DataError, InvalidParameter


def test_the_same_expression_over_other_columns_is_checked_against_them() -> None:
    assert validate_expression("a + 1", {"a"}, "Query.filter") == _checked("a + 1", {"a"}, "q")
    with pytest.raises(DataError):
        validate_expression("a + 1", {"b"}, "Query.filter")
    # Accepted again over columns that hold it, in another order of the same set.
    assert validate_expression("a + 1", ["b", "a"], "Query.filter").startswith("TRY(")


def test_a_refusal_is_raised_every_time_and_names_its_owner() -> None:
    for owner in ("Query.filter", "Query.with_column", "Query.filter"):
        with pytest.raises(InvalidParameter, match=re.escape(owner)):
            validate_expression("a; DROP TABLE t", {"a"}, owner)


def test_the_owner_in_an_accepted_expression_does_not_leak_into_another_owners_errors() -> None:
    validate_expression("length(a)", {"a"}, "SQL")
    with pytest.raises(DataError, match=re.escape("Query.with_column")):
        validate_expression("length(b)", {"a"}, "Query.with_column")


def test_non_strings_are_refused_as_before() -> None:
    with pytest.raises(InvalidParameter):
        validate_expression(None, {"a"}, "Query.filter")  # type: ignore[arg-type]
