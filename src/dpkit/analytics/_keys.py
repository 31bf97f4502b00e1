"""Public keys (group keys, partition keys) made canonical for a column's engine type.

A key is compared with the column in SQL, where the engine casts: ``1``, ``'1'``,
``'01'`` and ``1.0`` all select the rows ``region = 1`` of an INTEGER column, and
``-0.0 = 0.0`` of a DOUBLE column. Keys de-duplicated in Python by their Python value
would then be *aliases*: two parts of a partition reading the same rows, each with its
own full budget while the parent pays once (measured before this module: a likelihood
ratio of 8.48 against a claimed e^1), or a group key that silently matches nothing.

So every key is converted here, before de-duplication and before anything is charged,
to the one Python value of the column's type that the engine compares exactly
(int for integer types, float for DOUBLE, Decimal at the column's scale for DECIMAL,
str for VARCHAR, bool, date, datetime), and a key that cannot be of that type is
refused with :class:`~dpkit.errors.InvalidParameter`. Everything here reads the
public schema only.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import numpy as np

from dpkit.errors import InvalidParameter

__all__ = ["canonical_key", "canonical_key_tuples", "canonical_keys"]

_INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def _refuse(value: object, type_name: str, column: str, owner: str, why: str) -> InvalidParameter:
    return InvalidParameter(
        f"{owner}: the key {value!r} cannot be a value of column {column!r} "
        f"(type {type_name}): {why}. Give keys of the column's type, e.g. int for an "
        "INTEGER column, str for a VARCHAR column, datetime.date for a DATE column."
    )


def _as_integer(value: object) -> int | None:
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def _datetime(value: object, type_name: str, column: str, owner: str) -> dt.datetime:
    """A datetime key given as a datetime or an ISO string."""
    if not isinstance(value, dt.datetime | str):
        raise _refuse(value, type_name, column, owner, "it is not a datetime.datetime")
    try:
        return value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)
    except ValueError:
        raise _refuse(value, type_name, column, owner, "it is not an ISO timestamp") from None


def canonical_key(value: object, type_name: str, column: str, owner: str) -> Any:
    """The canonical Python value of ``value`` as a key of a column of ``type_name``.

    Raises
    ------
    InvalidParameter
        The value cannot be a value of that type (wrong type, out of range, NaN, not
        exactly representable), or keys on that type are not supported.
    """
    upper = type_name.upper()
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)):
        raise _refuse(value, type_name, column, owner, "keys cannot be None or NaN")
    if upper in _INTEGER_RANGES:
        integer = _as_integer(value)
        if integer is None:
            raise _refuse(value, type_name, column, owner, "it is not an integer")
        low, high = _INTEGER_RANGES[upper]
        if not low <= integer <= high:
            raise _refuse(value, type_name, column, owner, f"it is outside [{low}, {high}]")
        return integer
    if upper in ("DOUBLE", "FLOAT", "REAL"):
        if isinstance(value, bool | np.bool_) or not isinstance(
            value, int | float | np.integer | np.floating
        ):
            raise _refuse(value, type_name, column, owner, "it is not a number")
        number = float(value)
        if not math.isfinite(number) or (isinstance(value, int) and int(number) != value):
            raise _refuse(value, type_name, column, owner, "it is not a finite double")
        if upper != "DOUBLE" and float(np.float32(number)) != number:
            raise _refuse(value, type_name, column, owner, "it is not exactly a FLOAT")
        return number + 0.0  # -0.0 + 0.0 is 0.0: the engine has one zero
    match = _DECIMAL.fullmatch(upper)
    if match is not None:
        precision, scale = int(match.group(1)), int(match.group(2))
        if isinstance(value, bool | np.bool_) or not isinstance(
            value, int | float | str | Decimal | np.integer | np.floating
        ):
            raise _refuse(value, type_name, column, owner, "it is not a decimal number")
        try:
            exact = Decimal(value if isinstance(value, str | Decimal) else repr(value))
            # Enough digits for any DECIMAL(p<=38, s) (the default context has 28).
            with localcontext() as context:
                context.prec = 100
                quantized = exact.quantize(Decimal(1).scaleb(-scale))
        except (InvalidOperation, ValueError):
            raise _refuse(value, type_name, column, owner, "it is not a decimal number") from None
        if not exact.is_finite() or quantized != exact:
            raise _refuse(value, type_name, column, owner, f"it has more than {scale} decimals")
        if len(quantized.as_tuple().digits) > precision:
            raise _refuse(value, type_name, column, owner, f"it has over {precision} digits")
        return quantized
    if upper == "VARCHAR" or upper.startswith("ENUM"):
        if not isinstance(value, str):
            raise _refuse(value, type_name, column, owner, "it is not a str")
        return value
    if upper == "BOOLEAN":
        if not isinstance(value, bool | np.bool_):
            raise _refuse(value, type_name, column, owner, "it is not a bool")
        return bool(value)
    if upper == "DATE":
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date | str):
            raise _refuse(value, type_name, column, owner, "it is not a datetime.date")
        try:
            return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)
        except ValueError:
            raise _refuse(value, type_name, column, owner, "it is not an ISO date") from None
    if upper.startswith("TIMESTAMP") and isinstance(value, dt.datetime):
        # pandas.Timestamp is a datetime with nanoseconds: the engine keeps microseconds,
        # so two keys a nanosecond apart would be two parts over the same rows.
        if getattr(value, "nanosecond", 0):
            raise _refuse(value, type_name, column, owner, "it is finer than a microsecond")
        to_python = getattr(value, "to_pydatetime", None)
        if to_python is not None:
            value = to_python()
    if upper == "TIMESTAMP":
        stamp = _datetime(value, type_name, column, owner)
        if stamp.tzinfo is not None:
            raise _refuse(value, type_name, column, owner, "a TIMESTAMP has no time zone")
        return stamp
    if upper == "TIMESTAMP WITH TIME ZONE":
        # An instant: the key must say which one. A naive datetime would be read in
        # some time zone (the driver's, the session's) that the analyst does not see.
        stamp = _datetime(value, type_name, column, owner)
        if stamp.tzinfo is None or stamp.utcoffset() is None:
            raise _refuse(
                value, type_name, column, owner, "an instant needs a time zone (e.g. UTC)"
            )
        try:
            return stamp.astimezone(dt.UTC)
        except OverflowError:
            raise _refuse(value, type_name, column, owner, "it is outside years 1-9999") from None
    raise _refuse(value, type_name, column, owner, "keys on this type are not supported")


def canonical_key_tuples(
    keys: list[tuple[object, ...]], columns: tuple[str, ...], types: tuple[str, ...], owner: str
) -> list[tuple[Any, ...]]:
    """Canonical keys of several columns, in the order given; two keys naming the same
    values are refused (they would alias one part or one group)."""
    out: list[tuple[Any, ...]] = []
    seen: dict[tuple[Any, ...], tuple[object, ...]] = {}
    for key in keys:
        canonical = tuple(
            canonical_key(value, type_name, column, owner)
            for value, type_name, column in zip(key, types, columns, strict=True)
        )
        if canonical in seen:
            raise InvalidParameter(
                f"{owner}: the keys {seen[canonical]!r} and {key!r} name the same value "
                f"{canonical!r} of {list(columns)} ({', '.join(types)}); give each key once."
            )
        seen[canonical] = key
        out.append(canonical)
    return out


def canonical_keys(values: list[object], type_name: str, column: str, owner: str) -> list[Any]:
    """Canonical keys of one column (see :func:`canonical_key_tuples`)."""
    keys = canonical_key_tuples([(v,) for v in values], (column,), (type_name,), owner)
    return [key[0] for key in keys]
