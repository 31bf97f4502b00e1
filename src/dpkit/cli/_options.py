"""``dpkit describe --weight COL=W`` and ``--date-range START:END``: parsed and checked
before the file is read (errors exit with code 2 and spend nothing).

Both are public choices of the analyst, passed to
:func:`dpkit.analytics.describe.describe` as ``weights`` and ``date_range``; whether a
weighted column exists and is summarised is checked there, from the schema, before
any query runs.
"""

from __future__ import annotations

import math
from datetime import date

from dpkit.errors import InvalidParameter

__all__ = ["date_range_from_option", "weights_from_options"]


def weights_from_options(items: list[str] | None) -> dict[str, float] | None:
    """Column weights from ``--weight COL=W`` options (repeatable; W a positive finite
    number, the column's share of the budget relative to the others' 1)."""
    if not items:
        return None
    weights: dict[str, float] = {}
    for item in items:
        column, sep, text = item.rpartition("=")
        column, text = column.strip(), text.strip()
        if not sep or not column or not text:
            raise InvalidParameter(f"--weight takes COLUMN=WEIGHT (e.g. income=4). Got {item!r}.")
        try:
            weight = float(text)
        except ValueError:
            raise InvalidParameter(
                f"--weight {item!r}: the weight must be a number (e.g. income=4)."
            ) from None
        if not (math.isfinite(weight) and weight > 0.0):
            raise InvalidParameter(
                f"--weight {item!r}: the weight must be a positive finite number."
            )
        if column in weights:
            raise InvalidParameter(f"--weight gives column {column!r} twice.")
        weights[column] = weight
    return weights


def date_range_from_option(text: str | None) -> tuple[date, date] | None:
    """The public range of date columns from ``--date-range START:END`` (ISO dates,
    START before END)."""
    if text is None:
        return None
    start_text, sep, stop_text = text.strip().partition(":")
    usage = "--date-range takes START:END, two ISO dates (e.g. 2012-01-01:2016-01-01)"
    if not sep or ":" in stop_text:
        raise InvalidParameter(f"{usage}. Got {text!r}.")
    try:
        start, stop = date.fromisoformat(start_text.strip()), date.fromisoformat(stop_text.strip())
    except ValueError:
        raise InvalidParameter(f"{usage}. Got {text!r}.") from None
    if not start < stop:
        raise InvalidParameter(f"--date-range: START must be before END. Got {text!r}.")
    return start, stop
