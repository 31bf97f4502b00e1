"""The staged decisions of ``dpkit describe``: what is worth releasing at this size.

:func:`dpkit.analytics.describe.describe` first releases the number of rows (and of
persons), and then plans everything else from those released numbers -- post-processing,
so the plan costs nothing more and leaks nothing more (issue 28: *release a number only
when its accuracy statement is useful; otherwise say why not, and spend that budget
where it helps*). The decisions live here, apart from the queries that act on them:

* :func:`choose_order_statistics` -- which percentiles (and whether the maximum) can be
  released with a rank accuracy of at most :data:`WITHHOLD_FRACTION` of the values, from
  the accuracy statements :meth:`dpkit.Session.explain` gives before anything runs;
* :func:`missing_share` -- the share of missing values with a confidence interval, from
  the released count of rows and count of values;
* :func:`categories_possible` -- whether any category of a text column can pass private
  key selection, from the released counts of rows and of distinct values;
* :func:`max_rows_from_counts` -- a bound on rows per person, from released counts of
  rows kept at growing bounds;
* :func:`numeric_alerts` -- the Overview's flags (constant, mostly zeros, skewed, ...).

Every input is a release or public; nothing here reads data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dpkit.analytics._describe_scales import normal_upper_quantile
from dpkit.report.model import Statistic

#: An order statistic whose accuracy is worse than this fraction of the values (its rank
#: radius, or for a maximum the values it may lie below) is withheld, not released.
WITHHOLD_FRACTION = 0.25
#: Percentile levels tried in turn: all five, then the quartiles, then the median alone
#: (fewer levels, more budget each, smaller rank radius).
LEVEL_LADDER: tuple[tuple[float, ...], ...] = (
    (0.05, 0.25, 0.5, 0.75, 0.95),
    (0.25, 0.5, 0.75),
    (0.5,),
)
#: A missing share whose interval is wider than this is withheld (a complete column
#: shown as "46% missing, 0-97%" would mislead more than it tells).
MISSING_USEFUL = 0.5
#: A mean is flagged in the Overview when clamping to the released range may move more
#: than this share of the values.
CLAMPED_ALERT = 0.10


@dataclass(frozen=True)
class OrderAccuracy:
    """The accuracy statement of one order-statistic query, before it runs."""

    rank_radius: int  # percentiles: ranks (0 when there are none)
    below: int  # the maximum: values it may lie below (0 when there is none)


#: ``explain(levels, with_max, scale)``: the accuracy of a query releasing ``levels``
#: (and the maximum when ``with_max``) at ``scale`` times the order statistics' share.
Explainer = Callable[[tuple[float, ...], bool, float], OrderAccuracy]


@dataclass(frozen=True)
class OrderChoice:
    """Which order statistics to release, and why the others are withheld."""

    levels: tuple[float, ...]
    with_max: bool
    percentile_reason: str = ""
    max_reason: str = ""


def choose_order_statistics(
    explain: Explainer, values: float, *, pure: bool, fraction: float = WITHHOLD_FRACTION
) -> OrderChoice:
    """The most order statistics whose accuracy is useful at ``values`` (a released
    lower bound of the number of values), from public accuracy statements only.

    Tried in turn: percentiles of :data:`LEVEL_LADDER` with the maximum (the query splits
    its budget between them); then percentiles alone; then the maximum alone. A
    percentile set passes when its rank radius is at most ``fraction * values``; the
    maximum when the values it may lie below are. The reasons name the accuracy at the
    budget available and about how much more budget would make it pass (the radius
    scales like 1 / epsilon: ``ratio`` times the budget under pure DP, ``ratio ** 2``
    times under zCDP, up to the mechanism's logarithmic term).
    """
    limit = fraction * max(values, 0.0)
    for levels in LEVEL_LADDER:
        both = explain(levels, True, 1.0)
        if both.rank_radius <= limit and both.below <= limit:
            return OrderChoice(levels, True)
    for levels in LEVEL_LADDER:
        alone = explain(levels, False, 1.0)
        if alone.rank_radius <= limit:
            below = explain((), True, 1.0).below
            reason = _reason("the max", below, values, limit, pure, "values (it may lie below)")
            return OrderChoice(levels, False, max_reason=reason)
    best = explain(LEVEL_LADDER[-1], False, 1.0)
    percentile_reason = _reason(
        "even the median alone", best.rank_radius, values, limit, pure, "ranks"
    )
    top = explain((), True, 1.0)
    if top.below <= limit:
        return OrderChoice((), True, percentile_reason=percentile_reason)
    max_reason = _reason("the max", top.below, values, limit, pure, "values (it may lie below)")
    return OrderChoice((), False, percentile_reason, max_reason)


def _reason(what: str, error: int, values: float, limit: float, pure: bool, unit: str) -> str:
    """Why an order statistic is withheld, and about what budget it would need."""
    ratio = error / max(limit, 1.0)
    factor = ratio if pure else ratio**2
    return (
        f"withheld: {what} would be accurate only to \u00b1{error:,} {unit} of about "
        f"{values:,.0f} values (more than {WITHHOLD_FRACTION:.0%}); about {factor:,.1f}x "
        "this column's budget would release it"
    )


def half_width(statistic: Statistic, level: float, *, laplace: bool) -> float | None:
    """Half-width of a noisy count's interval at ``level``, from its standard error
    (Gaussian noise, or Laplace noise under pure DP); ``None`` without one."""
    se = statistic.std_error
    if se is None:
        return None
    tail = 1.0 - level
    if laplace:  # Laplace(b): sd = b sqrt(2), P(|X| > t) = exp(-t / b)
        return se / math.sqrt(2.0) * math.log(1.0 / tail)
    return se * normal_upper_quantile(tail / 2.0)


def missing_share(
    rows: Statistic, values: Statistic, confidence: float, *, laplace: bool
) -> Statistic | None:
    """The share of rows whose value is missing, ``1 - values / rows``, with an interval.

    Post-processing of two released counts: each count's interval is taken at level
    ``1 - (1 - confidence) / 2``, so both hold together with probability at least
    ``confidence`` (union bound), and then the share lies between
    ``1 - values_high / rows_low`` and ``1 - values_low / rows_high`` (clamped to
    [0, 1]). A complete column reads about 0 with an interval from 0. An interval
    wider than :data:`MISSING_USEFUL` is withheld (``estimate`` None, with the reason).
    """
    level = 1.0 - (1.0 - confidence) / 2.0
    rows_half = half_width(rows, level, laplace=laplace)
    values_half = half_width(values, level, laplace=laplace)
    if rows_half is None or values_half is None or rows.estimate is None:
        return None
    assert values.estimate is not None  # a released count
    rows_low, rows_high = rows.estimate - rows_half, rows.estimate + rows_half
    values_low, values_high = values.estimate - values_half, values.estimate + values_half
    estimate = _clip(1.0 - values.estimate / max(rows.estimate, 1.0))
    low = _clip(1.0 - values_high / rows_low) if rows_low > 0 else 0.0
    high = _clip(1.0 - max(values_low, 0.0) / max(rows_high, 1.0))
    low, high = min(low, estimate), max(high, estimate)
    if high - low > MISSING_USEFUL:
        return Statistic(
            name="missing",
            estimate=None,
            withheld=(
                f"withheld: the counts are too noisy at this budget (the share's "
                f"{confidence:.0%} interval would span {low:.0%} to {high:.0%})"
            ),
            mechanism="post-processing of the counts of rows and of values",
        )
    return Statistic(
        name="missing",
        estimate=estimate,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        mechanism="post-processing of the counts of rows and of values",
    )


def _clip(share: float) -> float:
    return min(1.0, max(0.0, share))


def categories_possible(rows: float, distinct: float, threshold: int) -> float:
    """How many categories can pass key selection with ``threshold``, at most.

    ``k`` categories of at least ``threshold`` rows each and ``distinct - k`` others of
    at least one row need ``k * threshold + distinct - k <= rows``, so
    ``k <= (rows - distinct) / (threshold - 1)``. describe applies it to released
    estimates of the rows and of the distinct values: below 1, no category can pass (a
    column of (near-)unique values, an identifier).
    """
    if threshold <= 1:
        return math.inf
    return max(0.0, rows - max(distinct, 0.0)) / (threshold - 1)


#: Bounds on rows per person tried when the user gives none (powers of two).
MAX_ROWS_LADDER: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
#: The chosen bound keeps all rows of at least this share of the persons (about).
MAX_ROWS_QUANTILE = 0.9


def max_rows_from_counts(kept: Sequence[float]) -> int:
    """The bound on rows per person from noisy counts of rows kept at the bounds of
    :data:`MAX_ROWS_LADDER` (``kept[j]`` at ``MAX_ROWS_LADDER[j]``; may be shorter).

    ``kept(2k) - kept(k)`` sums ``min(r, 2k) - min(r, k)`` over persons with ``r`` rows:
    at least 1 for each person with more than ``k`` rows (exactly 1 when ``k = 1``). So
    the first ``k`` with ``kept(2k) - kept(k) <= (1 - MAX_ROWS_QUANTILE) * kept(1)``
    (``kept(1)`` counts the persons) keeps every row of at least about
    :data:`MAX_ROWS_QUANTILE` of the persons: a private, conservative estimate of that
    quantile of rows per person (it may be a power of two or more above it: persons
    just above ``k`` count once per row above it; post-processing only). The demo's
    sessions (about 15 per user, a long tail) get 64.
    """
    persons = max(kept[0], 1.0)
    for j in range(len(kept) - 1):
        if kept[j + 1] - kept[j] <= (1.0 - MAX_ROWS_QUANTILE) * persons:
            return MAX_ROWS_LADDER[j]
    return MAX_ROWS_LADDER[len(kept) - 1]


def numeric_alerts(
    statistics: Sequence[Statistic],
    low: float,
    missing: Statistic | None,
    moved: float | None = None,
) -> list[str]:
    """Flags of a numeric column for the Overview, from its releases."""
    alerts: list[str] = []
    named = {s.name: s for s in statistics}
    p5, p50, p95 = (_value(named.get(n)) for n in ("p5", "p50", "p95"))
    if p5 is not None and p95 is not None and p50 is not None:
        if p95 == p5:
            alerts.append("nearly constant (p5 = p95)")
        elif abs(p95 + p5 - 2.0 * p50) / (p95 - p5) > 0.5:
            alerts.append("skewed")
    if p50 == 0.0 and low >= 0.0:
        alerts.append("mostly zeros (median 0)")
    return alerts + common_alerts(statistics, missing, moved)


def common_alerts(
    statistics: Sequence[Statistic], missing: Statistic | None, moved: float | None = None
) -> list[str]:
    """Flags every kind of column can get: mostly missing, percentiles withheld, and a
    mean whose clamping may move more than :data:`CLAMPED_ALERT` of the values
    (``moved``: the released upper bound of that share)."""
    alerts: list[str] = []
    if missing is not None and missing.estimate is not None and missing.estimate > 0.5:
        alerts.append("mostly missing")
    if any(s.withheld and s.name.startswith("p") for s in statistics):
        alerts.append("percentiles withheld at this n")
    if moved is not None and moved > CLAMPED_ALERT:
        alerts.append(f"mean: clamping may move up to {moved:.0%} of the values")
    return alerts


def _value(statistic: Statistic | None) -> float | None:
    return None if statistic is None else statistic.estimate
