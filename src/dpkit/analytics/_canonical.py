"""The one canonical form of a key: what the engine compares, groups and returns.

Rule 2 of the Session's threat model (docs/analytics.md): *the engine's equality is the
only equality*. Python and the engine must never disagree on whether two keys are the
same, and a released key must never carry the bits of one row's spelling of it. So a
group, key or partition column is compared, grouped and returned in a canonical form
computed **in SQL** (``SqlEngine.canonical_key_sql``), and what crosses from the engine
into Python is only:

========== =================================== ===================================
category   canonical form in SQL               Python value released
========== =================================== ===================================
integer    the integer itself                  ``int``
double     ``x + 0.0`` (one zero), NaN -> NULL ``float`` (never ``-0.0`` or NaN)
decimal    the decimal itself                  ``decimal.Decimal`` at the scale
text       ``x COLLATE "binary"`` (DuckDB)     ``str``, compared byte by byte
boolean    the boolean itself                  ``bool``
date       days since 1970-01-01 (BIGINT)      ``datetime.date``
timestamp  microseconds since the epoch        naive ``datetime.datetime``
           of the wall clock (BIGINT)
timestamp  microseconds since the epoch        ``datetime.datetime`` in UTC
with zone  of the instant (BIGINT)
========== =================================== ===================================

Temporal keys cross as fixed-width integers, so no time zone -- the driver's, the
session's, the connection's -- ever touches them, and keys given by the analyst are
bound as those integers too. A date or timestamp outside Python's range (years 1 to
9999) is treated as missing (NULL): a row-level rule, so dropping such rows is stable,
and converting the integer back to a Python value can never fail. A NaN key is missing
for the same reason (NaN is not equal to itself, and its payload bits are a row's).

Every other type -- LIST, STRUCT, MAP, INTERVAL, BLOB, UUID, TIME, a Spark string
with a non-binary collation, ... -- is refused as a group, key or partition column
before anything is charged (:func:`key_category` and :func:`check_key_type`): the
refusal reads the public schema only. A column can be converted to a supported type in
a derived column (``CAST(x AS VARCHAR)``) by the analyst.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from dpkit.errors import InvalidParameter

__all__ = [
    "DAYS_RANGE",
    "MICROS_RANGE",
    "check_key_type",
    "crossing_type",
    "from_engine",
    "key_category",
    "to_engine",
]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

#: Days since 1970-01-01 of Python's first and last dates (years 1 and 9999).
DAYS_RANGE = ((dt.date.min - _EPOCH_DATE).days, (dt.date.max - _EPOCH_DATE).days)
#: Microseconds since the epoch of Python's first and last datetimes.
MICROS_RANGE = (
    (dt.datetime.min - _EPOCH) // dt.timedelta(microseconds=1),
    (dt.datetime.max - _EPOCH) // dt.timedelta(microseconds=1),
)

# UHUGEINT is not a key type: DuckDB compares a UHUGEINT column with an integer
# parameter below 2^63 as BIGINT, a cast that raises on a row above 2^63 -- after the
# charge, on the tables that hold one only (found by the adversarial review).
_INTEGER = frozenset(
    {
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
        "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
    }
)  # fmt: skip
_DECIMAL = re.compile(r"DECIMAL\(\d+,\s*\d+\)")

#: Category -> the type of its canonical form in SQL (what the keyed hash reads).
_CROSSING = {
    "double": "DOUBLE",
    "text": "VARCHAR",
    "boolean": "BOOLEAN",
    "date": "BIGINT",
    "timestamp": "BIGINT",
    "timestamptz": "BIGINT",
}


def key_category(type_name: str) -> str | None:
    """The canonical category of a column type (dpkit's DuckDB type names), or None
    if keys of that type are not supported."""
    upper = type_name.upper().strip()
    if upper in _INTEGER:
        return "integer"
    if upper in ("DOUBLE", "FLOAT", "REAL"):
        return "double"
    if _DECIMAL.fullmatch(upper):
        return "decimal"
    if upper == "VARCHAR" or upper.startswith("ENUM("):
        return "text"
    if upper == "BOOLEAN":
        return "boolean"
    if upper == "DATE":
        return "date"
    if upper == "TIMESTAMP":
        return "timestamp"
    if upper == "TIMESTAMP WITH TIME ZONE":
        return "timestamptz"
    return None


def check_key_type(type_name: str, column: str, owner: str, role: str = "group") -> str:
    """The category of ``column``'s type; InvalidParameter if it cannot be a key.

    Reads the public schema only, so the refusal happens before anything is charged
    and is the same on every table of the schema.
    """
    category = key_category(type_name)
    if category is None:
        raise InvalidParameter(
            f"{owner}: column {column!r} has type {type_name}, which cannot be a {role} "
            "column: keys are compared, grouped and released in one canonical form, which "
            "exists for integers (but UHUGEINT), floating-point numbers, decimals, strings "
            "(compared byte by byte), booleans, dates and timestamps only. Derive a column "
            "of one of those types first, e.g. Query().with_column('k', 'CAST(col AS VARCHAR)')."
        )
    return category


def crossing_type(type_name: str) -> str:
    """The type of the canonical SQL form of a key column of ``type_name``."""
    category = key_category(type_name)
    assert category is not None, type_name
    return _CROSSING.get(category, type_name)


def to_engine(value: Any, category: str) -> Any:
    """A canonical Python key (:mod:`dpkit.analytics._keys`) as the engine's canonical
    form, to bind as a parameter."""
    if category == "date":
        return (value - _EPOCH_DATE).days
    if category == "timestamp":
        return (value - _EPOCH) // dt.timedelta(microseconds=1)
    if category == "timestamptz":
        return (value - _EPOCH_UTC) // dt.timedelta(microseconds=1)
    return value


def from_engine(value: Any, category: str) -> Any:
    """The engine's canonical form of a key as its Python value. Total on what the
    canonical SQL can return (temporal integers are range-checked in SQL)."""
    if value is None:
        return None
    if category == "date":
        return _EPOCH_DATE + dt.timedelta(days=int(value))
    if category == "timestamp":
        return _EPOCH + dt.timedelta(microseconds=int(value))
    if category == "timestamptz":
        return _EPOCH_UTC + dt.timedelta(microseconds=int(value))
    if category == "double":
        return float(value) + 0.0
    if category == "integer":
        return int(value)
    if category == "boolean":
        return bool(value)
    return value
