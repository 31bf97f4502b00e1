"""The engine-neutral plan: what an engine must compute, as exact integers per group.

A :class:`Plan` says which rows to read (filters, derived columns, group columns, the
public keys to keep), how to bound contributions (privacy unit, max groups per unit,
max rows per unit and group, max rows per unit in all, a secret salt), and which
integer statistics to compute per group. Every statistic is an integer so that noise
can be added exactly:

``rows``       number of rows (after bounding)
``units``      number of distinct privacy units
``values``     number of rows whose value is neither NULL nor NaN
``fixed_sum``  sum over rows of ``round(clamp(x, lo, hi) * inv) - center``, NULL/NaN
               rows skipped; with ``square=True`` the summand is
               ``round(clamp((clamp(x, lo, hi) - mid)^2, 0, r^2) * inv) - center``
``distinct``   number of distinct non-NULL values of a column (with a privacy unit, at most
               ``max_rows`` distinct values per person and group, by keyed hash)

The fixed-point grid ``1 / inv`` is a power of two: clamped values are rounded to it
per row and summed as exact integers by the engine (HUGEINT in DuckDB), so the sum does
not depend on the order of a floating-point summation (Casacuberta, Shoemate, Vadhan &
Wagaman 2022), and the rounding is inside the sensitivity: a rounded value lies in
``[floor(lo * inv), ceil(hi * inv)]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpkit.analytics.query import KeySet

__all__ = ["PartScope", "Plan", "Statistic"]


@dataclass(frozen=True, slots=True)
class Statistic:
    """One integer statistic per group (see the module docstring)."""

    op: str
    expression: str | None = None  # SQL over the (derived) columns; None for rows/units
    low: float = 0.0
    high: float = 0.0
    inv: float = 1.0  # 1 / grid step, a power of two
    center: int = 0
    square: bool = False
    mid: float = 0.0

    def unit_range(self) -> tuple[int, int]:
        """Integer range of one row's summand (``fixed_sum``)."""
        if self.square:
            r2 = ((self.high - self.low) / 2.0) ** 2
            low, high = 0.0, r2
        else:
            low, high = self.low, self.high
        return math.floor(low * self.inv) - self.center, math.ceil(high * self.inv) - self.center

    def row_bound(self) -> int:
        """Largest absolute contribution of one row (in the statistic's integer units)."""
        if self.op == "fixed_sum":
            low, high = self.unit_range()
            return max(abs(low), abs(high), 1)
        return 1


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything an engine needs; no noise, no budget, no data."""

    filters: tuple[str, ...]
    derived: tuple[tuple[str, str], ...]
    group_columns: tuple[str, ...]
    keys: KeySet | None
    unit: str | None
    max_groups: int
    max_rows: int
    salt: int
    statistics: tuple[Statistic, ...]
    bins: tuple[tuple[str, str, tuple[float, ...]], ...] = ()
    #: The parts a sub-Session reads, outermost first: each keeps the rows of the one
    #: before with ``column = key`` (and, with a privacy unit, only the units assigned to
    #: that part; see DuckDBEngine). Empty for a Session's whole table.
    partitions: tuple[PartScope, ...] = ()
    #: Rows per unit over all groups (``Query.bound(max_total_rows=)``), applied after
    #: the per-group bounds by scaling; None when it cannot bind (no groups, one group
    #: per unit, or at least ``max_groups * max_rows``). See SqlEngine._bounded.
    max_total_rows: int | None = None


@dataclass(frozen=True, slots=True)
class PartScope:
    """One level of a (nested) partition: the part ``column = key``.

    ``key`` is canonical for the column's type (:mod:`dpkit.analytics._keys`); ``salt``
    is the partition's secret, stored in the ledger, of the rule that assigns each
    privacy unit to exactly one part.
    """

    column: str
    key: object
    salt: int
    #: In a Session over several tables, the private table whose rows decide each
    #: person's part (dpkit.analytics._joins); None for a single-table Session.
    table: str | None = None
