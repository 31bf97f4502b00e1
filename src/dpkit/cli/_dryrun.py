"""``dpkit describe --dry-run``: the plan, its budget split and its expected accuracy.

Everything here is computed from public information -- the schema, the options and
the budget -- by :func:`dpkit.analytics.describe.plan_describe` and
:meth:`dpkit.Session.explain`; no query runs and nothing is charged.

Each column's share follows its weight (``--weight COL=W``, default 1; the row
count's weight is 1), as :func:`~dpkit.analytics.describe.plan_describe` computes it;
with weights, a "weight" column is shown. With date columns, the public date range
(``--date-range``) is printed.

Expected accuracy is shown where it does not depend on the data: the half-width of
the row count's interval, of each numeric column's count of values and of each
category's count, the rank radius of the percentiles, and the threshold of private
category selection. Intervals of means and histograms depend on the range found
privately at run time, so they are not predicted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpkit.accounting.guarantees import ZCDP, Guarantee, PureDP
from dpkit.errors import DPError

if TYPE_CHECKING:
    from dpkit.analytics.describe import DescribePlan
    from dpkit.analytics.query import Query
    from dpkit.analytics.session import Session

__all__ = ["PlanLine", "describe_plan", "plan_payload", "print_plan", "size_warnings"]

#: Queries per column kind, as :attr:`DescribePlan.steps` counts them.
_QUERIES = {"numeric": 4, "date": 4, "categorical": 1}


@dataclass(frozen=True)
class PlanLine:
    """One group of queries of the plan: the row count, or one column."""

    target: str
    kind: str
    fraction: float
    budget: Guarantee
    queries: int
    accuracy: tuple[str, ...]
    weight: float = 1.0


def guarantee_text(guarantee: Guarantee) -> str:
    """``ε = 0.25`` or ``ρ = 0.01 (zCDP)``."""
    if isinstance(guarantee, PureDP):
        return f"ε = {guarantee.epsilon:.4g}"
    if isinstance(guarantee, ZCDP):
        return f"ρ = {guarantee.rho:.4g} (zCDP)"
    return str(guarantee)


def _scaled(guarantee: Guarantee, fraction: float) -> Guarantee:
    # Rounded down, as describe() splits the budget.
    if isinstance(guarantee, PureDP):
        return PureDP(math.nextafter(guarantee.epsilon * fraction, 0.0))
    if isinstance(guarantee, ZCDP):
        return ZCDP(math.nextafter(guarantee.rho * fraction, 0.0))
    return guarantee


def _split() -> dict[str, Any]:
    """describe()'s per-query constants, where it still defines them."""
    from dpkit.analytics import describe as module

    names = (
        "ORDER_SHARE",
        "MEAN_SHARE",
        "GRID_SIZE",
        "PERCENTILES",
        "MAX_GROUPS_PER_PERSON",
        "INTEGER_CHECK_SHARE",
    )
    return {name: getattr(module, name, None) for name in names}


def _integer_type(session: Session, name: str) -> bool:
    from dpkit.analytics.describe import is_integer_type

    return is_integer_type(session.columns[name])


def describe_plan(
    session: Session,
    plan: DescribePlan,
    confidence: float = 0.95,
    assume_rows: int | None = None,
) -> list[PlanLine]:
    """The plan's groups of queries with their budgets and expected accuracy; with
    ``assume_rows``, also what describe's staged plan would release at that many rows
    (a stated, public number: the real run decides from the released count)."""
    from dpkit.analytics.describe import count_name, derive
    from dpkit.analytics.query import Query

    total = session.remaining
    split = _split()
    base = Query()
    if plan.max_rows is not None:
        base = base.bound(max_rows=plan.max_rows)

    def explain(query: Query, budget: Guarantee) -> Any:
        try:
            return session.explain(query, budget=budget, confidence=confidence)
        except DPError:
            return None

    lines: list[PlanLine] = []
    share = _scaled(total, plan.share)  # the row count's (weight 1)
    rows = base.count(name="rows")
    if plan.max_rows is not None:
        rows = rows.count_distinct(name="persons")
    found = explain(rows, share)
    accuracy = (
        tuple(f"{s.aggregation} ±{s.half_width:,.4g}" for s in found.statistics) if found else ()
    )
    lines.append(PlanLine("rows", "count", plan.share, share, 1, accuracy))
    groups = split["MAX_GROUPS_PER_PERSON"] if plan.max_rows is not None else None
    for (name, kind), fraction, weight in zip(plan.columns, plan.shares, plan.weights, strict=True):
        share = _scaled(total, fraction)
        quoted = '"' + name.replace('"', '""') + '"'
        notes: list[str] = []
        if kind == "categorical":
            query = base.group_by(name, keys="private").count(name=count_name(name))
            if isinstance(groups, int):
                query = query.bound(max_groups=groups)
            found = explain(query, share)
            if found is not None and found.selection_threshold is not None:
                notes.append(f"categories kept if noisy count ≥ {found.selection_threshold}")
                if assume_rows is not None and found.selection_threshold > assume_rows:
                    notes.append(f"at {assume_rows:,} rows: skipped (threshold above the rows)")
            if found is not None:
                notes.extend(
                    f"each category's {s.aggregation} ±{s.half_width:,.4g}"
                    for s in found.statistics
                    if not s.aggregation.startswith("__")  # the selection's own count
                )
        elif isinstance(split["MEAN_SHARE"], float) and isinstance(split["ORDER_SHARE"], float):
            count = base.filter(f"{quoted} IS NOT NULL").count(name="count")
            found = explain(count, _scaled(total, fraction * split["MEAN_SHARE"]))
            if found is not None:
                notes.extend(f"values ±{s.half_width:,.4g}" for s in found.statistics)
            column, query = name, base
            if kind == "date":
                query, column = derive(query, session.columns, f"{name}__epoch", f"epoch({quoted})")
            levels = split["PERCENTILES"] or (0.5,)
            grid = split["GRID_SIZE"] or 10_001
            order = query.quantile(column, tuple(levels), bounds=(0.0, 1.0), grid_size=grid)
            found = explain(order, _scaled(total, fraction * split["ORDER_SHARE"]))
            radii = [o.rank_radius for o in found.orders if o.rank_radius] if found else []
            if radii:
                notes.append(f"percentiles within ±{max(radii):,} ranks")
            if assume_rows is not None:
                notes.append(
                    _released_at(session, query, column, grid, assume_rows, plan.max_rows,
                                 _scaled(total, fraction * split["ORDER_SHARE"]), confidence)
                )  # fmt: skip
            check = split["INTEGER_CHECK_SHARE"]
            if kind == "numeric" and isinstance(check, float) and not _integer_type(session, name):
                notes.append(
                    f"if its range holds few integers: {check:.0%} of its share counts "
                    "values that are not integers (found integer-valued: counts per value)"
                )
        queries = _QUERIES.get(kind, 1)
        lines.append(PlanLine(name, kind, fraction, share, queries, tuple(notes), weight))
    return lines


def _released_at(
    session: Session,
    base: Query,
    column: str,
    grid: int,
    rows: int,
    max_rows: int | None,
    budget: Guarantee,
    confidence: float,
) -> str:
    """What describe would release of a column's order statistics at ``rows`` values
    (its rule, :func:`~dpkit.analytics._describe_stages.choose_order_statistics`, on
    the accuracy :meth:`Session.explain` states at the largest grid)."""
    from dpkit.analytics._describe_stages import OrderAccuracy, choose_order_statistics

    fraction = budget.rho if isinstance(budget, ZCDP) else getattr(budget, "epsilon", 0.0)

    def explain(levels: tuple[float, ...], with_max: bool, scale: float) -> OrderAccuracy:
        query = base
        if levels:
            query = query.quantile(column, levels, bounds=(0.0, 1.0), grid_size=grid, name="q")
        if with_max:
            query = query.max(column, bounds=(0.0, 1.0), grid_size=grid, name="max")
        part = PureDP(fraction * scale) if isinstance(budget, PureDP) else ZCDP(fraction * scale)
        found = session.explain(query, budget=part, confidence=confidence)
        radius = [o.rank_radius or 0 for o in found.orders if o.role == "quantile"]
        removals = [o.removals or 0 for o in found.orders if o.role == "max"]
        return OrderAccuracy(max(radius, default=0), max(removals, default=0) * (max_rows or 1))

    choice = choose_order_statistics(explain, float(rows), pure=isinstance(budget, PureDP))
    shown = ", ".join(f"p{round(q * 100)}" for q in choice.levels)
    if choice.with_max:
        shown = ", ".join(t for t in (shown, "max") if t)
    return f"at {rows:,} rows: " + (
        f"{shown} released" if shown else "percentiles and max withheld"
    )


def size_warnings(lines: list[PlanLine], assume_rows: int | None) -> list[str]:
    """A warning when the assumed row count is too small for the plan: most numeric
    columns would withhold their percentiles, or text columns could not select any
    category (public: the plan's accuracy at a stated row count)."""
    if assume_rows is None:
        return []
    at = f"at {assume_rows:,} rows"
    numeric = [line for line in lines if line.kind in ("numeric", "date")]
    withheld = [
        line
        for line in numeric
        if any(f"{at}: percentiles and max withheld" == a for a in line.accuracy)
    ]
    skipped = [line for line in lines if any(a.startswith(f"{at}: skipped") for a in line.accuracy)]
    columns = len(lines) - 1  # the first line is the row count
    if (numeric and len(withheld) > len(numeric) / 2) or skipped:
        return [
            f"This table is too small for {columns} columns at this budget: {at}, "
            f"{len(withheld)} of {len(numeric)} numeric or date columns would withhold "
            f"their percentiles and max, and {len(skipped)} text column(s) could select no "
            "category. Give a larger budget, fewer columns (--columns, --exclude) or "
            "weights (--weight)."
        ]
    return []


def _day(seconds: float) -> str:
    """An ISO date from seconds since the Unix epoch (a day boundary)."""
    return (date(1970, 1, 1) + timedelta(days=round(seconds / 86_400))).isoformat()


def print_plan(
    session: Session, plan: DescribePlan, lines: list[PlanLine], console: Console
) -> None:
    """The plan as a Rich table (what ``--dry-run`` prints)."""
    console.print(
        f"Dry run: nothing was spent. Budget left: {guarantee_text(session.remaining)}; "
        f"{plan.steps} queries would spend it.",
        highlight=False,
    )
    if plan.max_rows is not None:
        console.print(
            f"Each query keeps at most {plan.max_rows} rows per person "
            f"(privacy unit {session.privacy_unit!r}).",
            highlight=False,
        )
    if any(name_kind[1] == "date" for name_kind in plan.columns):
        start, stop = (_day(seconds) for seconds in plan.date_range)
        console.print(
            f"Public date range (dates outside are clamped): {start} to {stop}.", highlight=False
        )
    weighted = any(line.weight != 1.0 for line in lines)
    table = Table(title="Plan (expected accuracy: 95% intervals, public information only)")
    headers = ("summarised", "kind", *(("weight",) if weighted else ()), "share", "budget")
    for header in (*headers, "queries", "expected accuracy"):
        table.add_column(header, overflow="fold")
    for line in lines:
        cells = (
            line.target,
            line.kind,
            *((f"{line.weight:g}",) if weighted else ()),
            f"{line.fraction:.1%}",
            guarantee_text(line.budget),
            str(line.queries),
            "; ".join(line.accuracy) or "found at run time",
        )
        table.add_row(*(Text(cell) for cell in cells))  # Text: a name is not markup
    console.print(table)
    for name, reason in plan.skipped:
        console.print(f"skipped {name}: {reason}", highlight=False, markup=False)


def plan_payload(session: Session, plan: DescribePlan, lines: list[PlanLine]) -> dict[str, Any]:
    """The plan as JSON-ready data (``--dry-run --json``)."""

    def budget(guarantee: Guarantee) -> dict[str, float]:
        if isinstance(guarantee, PureDP):
            return {"epsilon": guarantee.epsilon}
        if isinstance(guarantee, ZCDP):
            return {"rho": guarantee.rho}
        return {}

    return {
        "dry_run": True,
        "spent": False,
        "remaining": budget(session.remaining),
        "privacy_unit": session.privacy_unit,
        "max_rows": plan.max_rows,
        "date_range": [_day(seconds) for seconds in plan.date_range],
        "queries": plan.steps,
        "plan": [
            {
                "target": line.target,
                "kind": line.kind,
                "weight": line.weight,
                "share": line.fraction,
                "budget": budget(line.budget),
                "queries": line.queries,
                "expected_accuracy": list(line.accuracy),
            }
            for line in lines
        ],
        "skipped": [{"column": name, "reason": reason} for name, reason in plan.skipped],
    }
