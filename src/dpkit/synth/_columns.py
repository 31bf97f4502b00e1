"""How each column of a table becomes integer codes over a public domain, and back.

A synthetic table is built over codes: a categorical column's public values are codes
``0 .. n - 1``; a numeric, date or timestamp column is cut into ``bins`` equal-width bins
over public bounds ``[low, high]`` (values outside are clamped into the end bins), or --
a numeric column whose domain is found privately (:class:`PrivateBins`) -- at edges
released inside the run (``Cuts``: private quantiles, post-processed by
:func:`dpkit.analytics._synthesis_domains.quantile_cuts`). With
``nulls=True`` (the default) one more code holds NULL, NaN and -- for a categorical
column -- every value outside the public list; such rows come back as NULL. With
``nulls=False`` there is no such code and those rows are dropped before anything is
measured (a filter on each row alone: stable, so the guarantee is unchanged).

The codes are computed in SQL from the column's canonical form
(:mod:`dpkit.analytics._canonical`), so the engine's equality decides which value a row
has (rule 2 of the Session's threat model), and decoding draws a value inside the bin
(uniformly; integers for integer columns, days for dates) -- post-processing.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from dpkit.analytics._canonical import (
    DAYS_RANGE,
    MICROS_RANGE,
    from_engine,
    key_category,
    to_engine,
)
from dpkit.analytics._keys import canonical_keys
from dpkit.analytics.query import KeySet
from dpkit.errors import InvalidParameter
from dpkit.synth._specs import DEFAULT_BINS, Bins, Categories, Cuts, PrivateBins

__all__ = [
    "DEFAULT_BINS",
    "Bins",
    "Categories",
    "ColumnCode",
    "Cuts",
    "PrivateBins",
    "code_of",
    "plan_columns",
]

#: The most codes one column may have (a marginal's cells grow as the product).
MAX_CODES = 10_000
_BINNABLE = ("integer", "double", "decimal", "date", "timestamp", "timestamptz")


@dataclass(frozen=True, slots=True)
class ColumnCode:
    """One column's coding: its public domain and how it is computed and decoded."""

    name: str
    type_name: str
    category: str  # the canonical category (dpkit.analytics._canonical.key_category)
    values: tuple[Any, ...] = ()  # categorical: canonical keys, code = position
    low: float = 0.0  # binned: bounds on the canonical number line
    high: float = 0.0
    bins: int = 0
    width: int = 0  # binned integer-like columns: integers per bin (0 for real bins)
    nulls: bool = True
    #: Inner edges of bins cut at released values (``Cuts``): bin ``i`` is
    #: ``[e_i, e_{i+1})`` of ``e = (low, *cuts, high)``, the last closed; for integer
    #: columns the integers ``e_i .. e_{i+1} - 1`` (the last up to ``high``). Empty for
    #: equal-width bins.
    cuts: tuple[float, ...] = ()

    @property
    def whole(self) -> bool:
        """Whether the bins hold whole numbers (integer columns with cuts; dates, whose
        canonical numbers are whole days)."""
        return bool(self.cuts) and self.category in ("integer", "date")

    @property
    def categorical(self) -> bool:
        return self.bins == 0

    @property
    def size(self) -> int:
        """Number of codes (the NULL code last, when there is one)."""
        return (len(self.values) if self.categorical else self.bins) + int(self.nulls)

    def labels(self) -> list[str]:
        """A readable label per code, for reports."""
        if self.categorical:
            out = [str(v) for v in self.values]
        elif self.whole:
            edges = self.edges()
            out = []
            for i in range(self.bins):
                start = edges[i]
                stop = edges[i + 1] - 1 if i < self.bins - 1 else self.high
                out.append(
                    _show(start, self)
                    if start == stop
                    else f"{_show(start, self)} to {_show(stop, self)}"
                )
        elif self.width:
            # Whole numbers (or days): inclusive ranges, never past the upper bound.
            out = []
            for i in range(self.bins):
                start = self.low + i * self.width
                stop = min(start + self.width - 1, self.high)
                out.append(
                    _show(start, self)
                    if start == stop
                    else f"{_show(start, self)} to {_show(stop, self)}"
                )
        else:
            edges = self.edges()
            out = [
                f"[{_show(edges[i], self)}, {_show(edges[i + 1], self)})" for i in range(self.bins)
            ]
        return [*out, "NULL"] if self.nulls else out

    def range_text(self) -> str:
        """The public bounds, as text (binned columns)."""
        return f"[{_show(self.low, self)}, {_show(self.high, self)}]"

    def edges(self) -> list[float]:
        if self.cuts:
            return [self.low, *self.cuts, self.high]
        if self.width:
            return [self.low + i * self.width for i in range(self.bins)] + [self.high]
        step = (self.high - self.low) / self.bins
        return [self.low + i * step for i in range(self.bins)] + [self.high]

    def decode(self, codes: npt.NDArray[np.int64], rng: np.random.Generator) -> pd.Series:
        """Synthetic values of this column for ``codes`` (post-processing)."""
        null = codes == len(self.values) if self.categorical else codes == self.bins
        if self.categorical:
            table = np.array([*self.values, None], dtype=object)
            values = table[codes]
            return _typed(values, self, null)
        safe = np.where(null, 0, codes)
        if self.cuts:
            return _typed(self._decode_cuts(safe, rng), self, null)
        if self.width:
            # Whole numbers in int64 (bounds within +-2^53: exact, no float rounding).
            start = int(self.low) + safe.astype(np.int64) * self.width
            stop = np.minimum(start + self.width, int(self.high) + 1)
            return _typed(rng.integers(start, stop), self, null)
        step = (self.high - self.low) / self.bins
        drawn = np.minimum(self.low + (safe + rng.random(len(codes))) * step, self.high)
        return _typed(drawn, self, null)

    def _decode_cuts(self, codes: npt.NDArray[np.int64], rng: np.random.Generator) -> Any:
        """Values drawn inside bins cut at ``cuts``: whole numbers ``e_i .. e_{i+1} - 1``
        (the last bin up to ``high``) for integer columns, else uniform on
        ``[e_i, e_{i+1})`` (the last bin up to ``high``)."""
        edges = np.asarray(self.edges(), dtype=np.float64)
        start, stop = edges[codes], edges[codes + 1]
        last = codes == self.bins - 1
        if self.whole:
            # Integers within +-2^53 (checked by the coding): exact in int64.
            first = start.astype(np.int64)
            end = np.where(last, int(self.high) + 1, stop.astype(np.int64))
            return rng.integers(first, end)
        drawn = start + rng.random(len(codes)) * (stop - start)
        # Rounding may reach the next edge: stay inside the bin (post-processing).
        inside = np.where(last, drawn <= stop, drawn < stop)
        return np.where(inside, drawn, start)

    def code_numbers(self, numbers: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Codes of numbers on the canonical line (evaluation only; the private path
        codes in SQL): clamped to the bounds, then binned."""
        x = np.clip(np.nan_to_num(numbers), self.low, self.high)
        if self.cuts:
            index = np.searchsorted(np.asarray(self.cuts), x, side="right")
        elif self.width:
            index = np.floor((x - self.low) / self.width)
        else:
            index = np.floor((x - self.low) * self.bins / (self.high - self.low))
        return np.clip(index, 0, self.bins - 1).astype(np.int64)


def _calendar(category: str) -> tuple[int, int]:
    """The canonical integers of Python's years 1 to 9999: days for a date,
    microseconds for a timestamp."""
    return DAYS_RANGE if category == "date" else MICROS_RANGE


def _show(x: float, column: ColumnCode) -> str:
    if column.category in ("date", "timestamp", "timestamptz"):
        # A bound at the calendar's end is a float, which may round past it
        # (253402300799999999 us is 2.534023008e17 as a float64): clamped back.
        low, high = _calendar(column.category)
        return str(from_engine(min(max(int(x), low), high), column.category))
    return f"{x:g}"


def _typed(values: npt.NDArray[Any], column: ColumnCode, null: npt.NDArray[np.bool_]) -> pd.Series:
    category = column.category
    if column.categorical:
        out = pd.Series(values, dtype=object)
        out[null] = None
        if category == "integer":
            return out.astype("Int64")
        if category == "double":
            return out.astype("float64")
        if category == "boolean":
            return out.astype("boolean")
        if category in ("date", "timestamp"):
            return pd.to_datetime(out)
        if category == "timestamptz":
            return pd.to_datetime(out, utc=True)  # the schema's type, even if all NULL
        return out
    if category == "integer":
        whole = values if values.dtype.kind == "i" else np.round(values).astype(np.int64)
        series = pd.Series(whole).astype("Int64")
        series[null] = pd.NA
        return series
    if category == "decimal":
        # Decimal values at the column's scale (DECIMAL(p, s)), as the source had them.
        match = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", column.type_name.upper().strip())
        step = Decimal(1).scaleb(-int(match.group(2))) if match else Decimal(1)
        decimals = [
            None if missing else Decimal(repr(float(v))).quantize(step)
            for v, missing in zip(values, null, strict=True)
        ]
        return pd.Series(decimals, dtype=object)
    if category == "double":
        series = pd.Series(values.astype(np.float64))
        series[null] = np.nan
        return series
    # Dates and timestamps: the canonical number line is days or microseconds.
    unit = "D" if category == "date" else "us"
    whole = values if values.dtype.kind == "i" else np.floor(values).astype(np.int64)
    whole = np.clip(whole, *_calendar(category))  # a bound's float may round past the end
    series = pd.Series(pd.to_datetime(whole, unit=unit))
    if category == "timestamptz":
        series = series.dt.tz_localize("UTC")
    series[null] = pd.NaT
    return series


def _number(value: Any, category: str, what: str) -> float:
    """A public bound on the canonical number line of ``category``."""
    if category == "date":
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise InvalidParameter(f"{what} must be a datetime.date; got {value!r}.")
        return float(to_engine(value, "date"))
    if category in ("timestamp", "timestamptz"):
        if not isinstance(value, dt.datetime):
            raise InvalidParameter(f"{what} must be a datetime.datetime; got {value!r}.")
        if category == "timestamptz" and value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        if category == "timestamp" and value.tzinfo is not None:
            value = value.replace(tzinfo=None)
        return float(to_engine(value, category))
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidParameter(f"{what} must be a finite number; got {value!r}.")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidParameter(f"{what} must be a finite float64; got {value!r}.") from None
    if not math.isfinite(number):
        raise InvalidParameter(f"{what} must be a finite number; got {value!r}.")
    return number


def _code_of(name: str, type_name: str, spec: object, owner: str) -> ColumnCode:
    category = key_category(type_name)
    if category is None:
        raise InvalidParameter(
            f"{owner}: column {name!r} has type {type_name}, which synthesis does not "
            "support (integers, floating-point numbers, decimals, strings, booleans, dates "
            "and timestamps are supported); leave it out with columns=[...]."
        )
    if spec is None and category == "boolean":
        spec = Categories([False, True])
    if isinstance(spec, KeySet) or (
        isinstance(spec, Sequence) and not isinstance(spec, str | bytes) and not _is_bounds(spec)
    ):
        spec = Categories(spec)
    if _is_bounds(spec):
        assert isinstance(spec, tuple | list)
        spec = Bins(spec[0], spec[1])
    if isinstance(spec, Categories):
        values = canonical_keys(list(spec.values), type_name, name, owner)
        if not values:
            raise InvalidParameter(f"{owner}: the public categories of {name!r} are empty.")
        code = ColumnCode(name, type_name, category, values=tuple(values), nulls=spec.nulls)
    elif isinstance(spec, Bins):
        if category not in _BINNABLE:
            raise InvalidParameter(
                f"{owner}: column {name!r} ({type_name}) cannot be binned; give its public "
                "categories instead, e.g. domains={" + repr(name) + ": ['a', 'b']}."
            )
        if isinstance(spec.bins, bool) or not isinstance(spec.bins, int) or spec.bins < 1:
            raise InvalidParameter(f"{owner}: bins of {name!r} must be a positive integer.")
        low = _number(spec.low, category, f"{owner}: the lower bound of {name!r}")
        high = _number(spec.high, category, f"{owner}: the upper bound of {name!r}")
        if not low < high:
            raise InvalidParameter(
                f"{owner}: the bounds of {name!r} must satisfy low < high; got "
                f"({spec.low!r}, {spec.high!r})."
            )
        if category in ("integer", "date", "decimal") and max(abs(low), abs(high)) > 2**53:
            raise InvalidParameter(
                f"{owner}: the bounds of {name!r} must lie within +-2^53 (synthetic values "
                f"are drawn as float64); got ({spec.low!r}, {spec.high!r})."
            )
        if category in ("integer", "date"):
            low, high = float(math.ceil(low)), float(math.floor(high))
            if not low < high:
                raise InvalidParameter(
                    f"{owner}: the bounds of {name!r} hold fewer than two whole values; got "
                    f"({spec.low!r}, {spec.high!r})."
                )
            span = int(high - low) + 1
            width = max(1, -(-span // spec.bins))
            bins = -(-span // width)
            code = ColumnCode(
                name,
                type_name,
                category,
                low=low,
                high=high,
                bins=bins,
                width=width,
                nulls=spec.nulls,
            )
        else:
            step = (high - low) / spec.bins
            if not (
                math.isfinite(high - low)
                and step >= 2**-1000
                and math.isfinite(spec.bins / (high - low))
            ):
                raise InvalidParameter(
                    f"{owner}: the bins of {name!r} would be too narrow or too wide to compute "
                    f"(bounds ({spec.low!r}, {spec.high!r}), {spec.bins} bins)."
                )
            code = ColumnCode(
                name, type_name, category, low=low, high=high, bins=spec.bins, nulls=spec.nulls
            )
    elif isinstance(spec, Cuts):
        code = _cuts_code(name, type_name, category, spec, owner)
    elif spec is None:
        kind = "bounds, e.g. (0, 100)" if category in _BINNABLE else "categories, e.g. ['a', 'b']"
        raise InvalidParameter(
            f"{owner}: column {name!r} needs a public domain: give its {kind} in "
            f"domains={{{name!r}: ...}}, or leave it out with columns=[...]. Domains must "
            "not come from the private data."
        )
    else:
        raise InvalidParameter(
            f"{owner}: the domain of {name!r} must be a list of values, a KeySet, (low, "
            f"high), Categories(...) or Bins(...); got {spec!r}."
        )
    if code.size > MAX_CODES:
        raise InvalidParameter(
            f"{owner}: column {name!r} would have {code.size} codes (at most {MAX_CODES}); "
            "use fewer categories or bins."
        )
    return code


def _cuts_code(name: str, type_name: str, category: str, spec: Cuts, owner: str) -> ColumnCode:
    """The coding of bins cut at released edges (checked as public bounds are: finite,
    within +-2^53, strictly increasing inside ``[low, high]``; whole numbers for
    integer columns; dates for date columns, coded as whole days; datetimes for
    timestamps, on their microseconds)."""
    if category not in ("integer", "double", "decimal", "date", "timestamp", "timestamptz"):
        raise InvalidParameter(f"{owner}: column {name!r} ({type_name}) cannot be cut at edges.")
    low = _number(spec.low, category, f"{owner}: the lower bound of {name!r}")
    high = _number(spec.high, category, f"{owner}: the upper bound of {name!r}")
    cuts = tuple(_number(c, category, f"{owner}: an edge of {name!r}") for c in spec.cuts)
    if category != "double" and max(abs(v) for v in (low, high, *cuts)) > 2**53:
        # As for Bins: integer-like values are drawn exactly within +-2^53.
        raise InvalidParameter(f"{owner}: the edges of {name!r} must lie within +-2^53.")
    ends: tuple[float | int, ...] = (low, *cuts, high)
    if category in ("integer", "date"):
        if not all(float(v).is_integer() for v in ends):
            raise InvalidParameter(f"{owner}: the edges of {name!r} must be whole numbers.")
        # Integer bins hold e_i .. e_{i+1} - 1, the last up to high: a cut may be high
        # (compared as Python integers, exact at 2^53).
        ends = (*(int(v) for v in ends[:-1]), int(high) + 1)
    if not cuts or any(not a < b for a, b in itertools.pairwise(ends)):
        raise InvalidParameter(
            f"{owner}: the edges of {name!r} must increase strictly inside its bounds; got "
            f"{(low, *cuts, high)!r}."
        )
    return ColumnCode(
        name,
        type_name,
        category,
        low=low,
        high=high,
        bins=len(cuts) + 1,
        nulls=spec.nulls,
        cuts=cuts,
    )


def _is_bounds(spec: object) -> bool:
    return (
        isinstance(spec, tuple)
        and len(spec) == 2
        and not any(isinstance(v, str | bytes) for v in spec)
    )


def plan_columns(
    schema: Mapping[str, str],
    columns: Sequence[str] | None,
    domains: Mapping[str, object] | None,
    unit: str | None,
    owner: str,
    *,
    private: bool = False,
) -> tuple[ColumnCode | None, ...]:
    """The coding of every synthesized column, from the schema and public domains only.

    With ``private=True`` a column with no domain (or the domain ``"private"``) is
    ``None``: its domain is to be found privately (booleans always have one); without,
    it is refused."""
    if domains is None:
        domains = {}
    if not isinstance(domains, Mapping):
        raise InvalidParameter.for_parameter("domains", owner, "a dict {column: domain}", domains)
    if columns is None:
        names = [c for c in schema if c != unit]
    else:
        if isinstance(columns, str) or not isinstance(columns, Sequence):
            raise InvalidParameter.for_parameter(
                "columns", owner, "a list of column names", columns
            )
        names = list(columns)
    if len(names) < 1 or len(set(names)) != len(names):
        raise InvalidParameter(f"{owner}: columns must be distinct and non-empty; got {names!r}.")
    for name in [*names, *domains]:
        if name not in schema:
            raise InvalidParameter(
                f"{owner}: unknown column {name!r}. Available columns: {sorted(schema)}."
            )
        if name == unit:
            raise InvalidParameter(
                f"{owner}: the privacy unit {name!r} cannot be synthesized (it identifies "
                "persons); leave it out of columns."
            )
    extra = set(domains) - set(names)
    if extra:
        raise InvalidParameter(
            f"{owner}: domains given for columns not synthesized: {sorted(extra)}."
        )
    out: list[ColumnCode | None] = []
    for name in names:
        if schema[name].strip('"').upper() == "NULL":
            # The schema (public) says every value is NULL: nothing to synthesize.
            raise InvalidParameter(
                f"{owner}: column {name!r} has type NULL (every value is NULL, e.g. a "
                "pandas column of only None); leave it out of columns, or give the Session "
                "a typed column."
            )
        spec = domains.get(name)
        if isinstance(spec, PrivateBins):
            if key_category(schema[name]) not in _BINNABLE:
                raise InvalidParameter(
                    f"{owner}: PrivateBins applies to integer, floating-point, decimal, "
                    f"date and timestamp columns; {name!r} is {schema[name]}."
                )
            spec = "private"
        if isinstance(spec, str) and spec == "private":
            if not private:
                raise InvalidParameter(
                    f"{owner}: the domain of {name!r} cannot be found privately here."
                )
            spec = None
        if spec is None and private and key_category(schema[name]) != "boolean":
            out.append(None)
            continue
        out.append(_code_of(name, schema[name], spec, owner))
    return tuple(out)


def code_of(name: str, type_name: str, spec: object, owner: str) -> ColumnCode:
    """One column's coding from a domain (public, or released by a private query)."""
    return _code_of(name, type_name, spec, owner)
