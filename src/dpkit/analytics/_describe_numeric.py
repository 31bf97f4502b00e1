"""Numeric and date columns in ``dpkit describe``: range, count and mean, the order
statistics worth releasing, and a histogram (or counts per value).

Each column's share is split in fixed fractions (below); what is released after the
range is decided by post-processing of the releases before it (issue 28): see
:mod:`dpkit.analytics._describe_stages`. The value scales are in
:mod:`dpkit.analytics._describe_scales`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from dpkit.accounting.guarantees import Guarantee, PureDP
from dpkit.analytics._describe_common import (
    RunnerBase,
    Steps,
    _quote,
    _released,
    _scaled,
    _statistic,
)
from dpkit.analytics._describe_scales import (
    RANGE_FALLBACK_WINDOWS,
    RANGE_WINDOWS,
    _occupied,
    _range_z,
    _Scale,
    _whole_days,
    consistent_order_statistics,
    integer_bins,
    is_integer_type,
    normal_upper_quantile,
)
from dpkit.analytics._describe_stages import (
    WITHHOLD_FRACTION,
    OrderAccuracy,
    OrderChoice,
    choose_order_statistics,
    common_alerts,
    numeric_alerts,
)
from dpkit.analytics.query import Query
from dpkit.report.model import (
    EPOCH_SECONDS,
    ColumnKind,
    ColumnSummary,
    HistogramSummary,
    Statistic,
)

#: Percentiles released for numeric and date columns; the outer two bound the histogram.
PERCENTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
#: How a numeric column's share is split between its four queries.
RANGE_SHARE, ORDER_SHARE, MEAN_SHARE, HISTOGRAM_SHARE = 0.15, 0.5, 0.15, 0.2
#: Integer columns whose released range holds at most this many integers get counts
#: per value instead of percentiles (a post-processing of the range release) ...
LOW_CARDINALITY = 32
#: ... and their share after the range goes to the count and mean, and the counts.
FEW_MEAN_SHARE, FEW_COUNTS_SHARE = 0.25, 0.6
#: A non-integer column (DOUBLE, FLOAT, DECIMAL(p, s > 0)) whose released range holds
#: at most LOW_CARDINALITY integers may still hold integers only (0/1 flags, 1-5
#: ratings stored as DOUBLE): this share of its column's budget counts, noisily, its
#: values that are not integers (the rest of the column's queries are scaled down to
#: make room), and it is summarised as an integer column when that count is within
#: INTEGER_CHECK_Z standard errors of 0 -- with probability 1 - INTEGER_CHECK_FALSE
#: (Gaussian noise; about 1 - 0.006 for Laplace noise) when the values are integers.
INTEGER_CHECK_SHARE = 0.05
INTEGER_CHECK_FALSE = 1e-3
INTEGER_CHECK_Z = normal_upper_quantile(INTEGER_CHECK_FALSE)
#: A column whose range came out [0, 1] is labelled "share of 1" only when its count of
#: values outside [0, 1] and its under- and overflow bins are each at most this many
#: standard errors (a 0/1 column passes all three with probability ~1 - 1e-5; a
#: population column whose range came out [0, 1] fails: issue 28). Otherwise its mean
#: is labelled "mean clamped to [0, 1]".
ZERO_ONE_Z = 4.5
#: ... and when the upper confidence limit of its values outside [0, 1] is at most this
#: share of the lower limit of its count (stated next to the mean: "clamping to the
#: range may move up to x% of the values"): noise alone must not hide many 2s, 3s, ...
#: (sklearn's digits: pixel columns of 0-16 whose range came out [0, 1]; their limits
#: were 7% to 80%, MEPS's 0/1 columns' 0.7% to 4.1%). No release can show that no value
#: lies outside {0, 1}: "share of 1" is true up to the stated share; otherwise the mean
#: is labelled "mean clamped to [0, 1]", true in any case.
ZERO_ONE_OUTSIDE = 0.05
#: Weight (relative to the count's and the mean's 1) of the count of values outside the
#: range, in the count-and-mean query.
OUTSIDE_WEIGHT = 0.5


class NumericRunner(RunnerBase):
    """Summarises numeric and date columns (one method per stage)."""

    def numeric(
        self, name: str, kind: ColumnKind, tell: Callable[[str], None]
    ) -> Steps[ColumnSummary]:
        """Range, count, percentiles, max, clamped mean and histogram of one column: a
        generator of its queries, one stage at a time (:data:`Steps`)."""
        sql_type = self._session.columns[name]
        scale = _Scale.of(sql_type, self.plan.date_range)
        base = self._query()
        column = name
        if scale.date:
            # Points in time as seconds since the Unix epoch (a public, per-row map).
            base, column = self._derive(base, f"{name}__epoch", f"epoch({_quote(name)})")
        share = self._shares.of(name)
        notes: list[str] = list(scale.notes())

        # 1. Range: noisy counts of persons over public bins (powers of two; years of
        #    the public date range), each person in at most a few bins.
        budget = self._shares.take(share * RANGE_SHARE, f"{name}: range", "histogram")
        found = yield from self._range_by_counts(column, base, scale, budget)
        if found is None:
            # No range: spend the rest of the share on what needs none, the count of
            # values (and so the missing share), rather than leave it unused.
            notes.append(
                "Too few values for a range at this budget: only the count of values is "
                "released (the rest of the column's share)."
            )
            budget = self._shares.take(share * (1 - RANGE_SHARE), f"{name}: count", "count")
            count = yield from self._count_steps(name, budget)
            missing = self._missing(count)
            return ColumnSummary(
                name,
                kind,
                statistics=(count,),
                notes=tuple(notes),
                sql_type=sql_type,
                missing=missing,
                alerts=("no range at this budget", *common_alerts((), missing)),
            )
        low, high, rule = found
        # 2. A non-integer type with few integers in its range: are the values integers?
        #    (Decided from the schema, the range release and a noisy count.)
        rest, fractional = 1.0, None
        as_integer = replace(scale, integer=True)
        if (
            not scale.integer
            and not scale.date
            and as_integer.support(*as_integer.snap_range(low, high)) <= LOW_CARDINALITY
        ):
            budget = self._shares.take(
                share * INTEGER_CHECK_SHARE, f"{name}: values not integers", "count"
            )
            fractional = yield from self._fractional(column, base, budget)
            rest = (1.0 - RANGE_SHARE - INTEGER_CHECK_SHARE) / (1.0 - RANGE_SHARE)
            if _within_noise_of_zero(fractional):
                scale = as_integer
                notes.append(_integer_valued_note(sql_type, fractional))
            else:
                notes.append(_not_integer_valued_note(sql_type, fractional))
        low, high = scale.snap_range(low, high)
        notes.append(
            f"Range found privately: [{scale.show(low)}, {scale.show(high)}] ({rule}); "
            "values outside are clamped for the percentiles and the mean."
        )
        extra = () if fractional is None else (fractional,)
        if scale.support(low, high) <= LOW_CARDINALITY:
            return (
                yield from self._few_values(
                    name, column, base, scale, (low, high), notes, sql_type, rest, extra
                )
            )
        return (
            yield from self._spread(
                name, kind, column, base, scale, (low, high), notes, tell, sql_type, rest, extra
            )
        )

    def _fractional(self, column: str, base: Query, budget: Guarantee) -> Steps[Statistic]:
        """A noisy count of the column's values that are not integers (a sum of 0/1)."""
        x = _quote(column)
        flagged, flag = self._derive(
            base.filter(f"{x} IS NOT NULL"),
            f"{column}__fractional",
            f"CASE WHEN {x} = round({x}) THEN 0 ELSE 1 END",
        )
        query = flagged.sum(flag, bounds=(0.0, 1.0), name="fractional")
        result = yield from self._ask(query, budget)
        return _statistic(
            result,
            "fractional",
            "not integers",
            self._confidence,
            budget,
            unit="values" + self._kept,
        )

    def _range_by_counts(
        self, column: str, base: Query, scale: _Scale, budget: Guarantee
    ) -> Steps[tuple[float, float, str] | None]:
        """Noisy counts of persons per public bin; the occupied span is the range."""
        edges = scale.range_edges()
        result = yield from self._ask(
            self._grouped(base.group_by_bins(column, edges).count_distinct(name="count")), budget
        )
        counts = np.asarray(result.columns["count"], dtype=np.float64)
        se = np.asarray(result.columns["count_se"], dtype=np.float64)
        order = np.argsort(np.asarray(result.columns[f"{column}_bin"]), kind="stable")
        counts, se = counts[order], se[order]
        # Integer values stored in a non-integer type: the windows also run over the
        # bins integers fall in, which joins 0, 1, 2-3 across the fractional bins.
        passes = [list(range(len(counts)))]
        if not scale.integer and not scale.date:
            passes.append(integer_bins(edges))
        z = _range_z(isinstance(self._session.budget, PureDP))
        occupied = _occupied(counts, se, z, passes, RANGE_WINDOWS)
        widths: tuple[int, ...] = RANGE_WINDOWS
        if not occupied:
            occupied = _occupied(counts, se, z, passes, RANGE_FALLBACK_WINDOWS)
            widths = RANGE_FALLBACK_WINDOWS
        if not occupied:
            return None
        rule = (
            f"{scale.range_rule} whose noisy count of persons, alone or summed over up to "
            f"{widths[-1]} adjacent bins, exceeds {z:.3g} standard errors"
        )
        return edges[occupied[0]], edges[occupied[-1] + 1], rule

    def _count_mean(
        self, column: str, base: Query, bounds: tuple[float, float], budget: Guarantee, unit: str
    ) -> Steps[tuple[Statistic, Statistic, Statistic, float]]:
        """The count of values, their mean clamped to ``bounds``, a noisy count of the
        values outside ``bounds`` (an indicator's sum, :data:`OUTSIDE_WEIGHT` of this
        query's budget), and the estimated share of values the clamping moves. Next to
        the mean, the share it may move: that count's upper confidence limit over the
        count's lower one."""
        x = _quote(column)
        low, high = (repr(float(b)) for b in bounds)
        flagged, outside = self._derive(
            base.filter(f"{x} IS NOT NULL"),
            f"{column}__outside",
            f"CASE WHEN {x} < {low} OR {x} > {high} THEN 1 ELSE 0 END",
        )
        query = (
            flagged.count(name="count")
            .mean(column, bounds=bounds, name="mean")
            .sum(outside, bounds=(0.0, 1.0), name="outside", weight=OUTSIDE_WEIGHT)
        )
        result = yield from self._ask(query, budget)
        count = _statistic(
            result, "count", "count", self._confidence, budget, unit="values" + self._kept
        )
        mean = _statistic(result, "mean", "mean", self._confidence, budget, unit=unit)
        out = _statistic(result, "outside", "outside", self._confidence, budget)
        if out.ci_high is not None and count.ci_low is not None:
            most = min(1.0, max(0.0, out.ci_high) / max(count.ci_low, 1.0))
            mean = replace(
                mean, caveat=f"clamping to the range may move up to {most:.1%} of the values"
            )
        # The Overview's flag uses the point estimate: at small budgets the upper
        # limit above is large for every column, and a flag on all says nothing.
        moved = min(1.0, max(0.0, _released(out)) / max(_released(count), 1.0))
        return count, mean, out, moved

    def _few_values(
        self,
        name: str,
        column: str,
        base: Query,
        scale: _Scale,
        bounds: tuple[float, float],
        notes: list[str],
        sql_type: str,
        rest: float = 1.0,
        extra: tuple[Statistic, ...] = (),
    ) -> Steps[ColumnSummary]:
        """An integer(-valued) column with few values in its released range: counts per
        value. ``rest`` scales the shares (after an integer check); ``extra`` holds that
        check's release."""
        share = self._shares.of(name) * rest
        low, high = bounds
        first, last = scale.support_bounds(low, high)
        budget = self._shares.take(share * FEW_MEAN_SHARE, f"{name}: count, mean", "count, mean")
        bounds = (first, last) if last > first else (first, first + 1.0)
        count, mean, outside, moved = yield from self._count_mean(column, base, bounds, budget, "")
        edges = [first - 1.0, *np.arange(first, last + 2.0).tolist(), last + 2.0]
        counted, values = column, base
        if not is_integer_type(sql_type):
            # Integer values only: a value between integers (the integer check bounds
            # how many) is in no bin, rather than in the bin of the integer below it.
            x = _quote(column)
            values, counted = self._derive(
                base, f"{column}__integer", f"CASE WHEN {x} = round({x}) THEN {x} ELSE NULL END"
            )
        budget = self._shares.take(share * FEW_COUNTS_SHARE, f"{name}: counts per value", "counts")
        histogram = yield from self._histogram(counted, values, edges, budget, "", integer=True)
        if bounds == (0.0, 1.0):
            # "Share of 1" only when the releases show the column is 0/1: the values
            # outside [0, 1] and the under- and overflow bins all within noise of 0
            # (issue 28: a population column whose range came out [0, 1] was shown a
            # "share of 1" of 0.76; its true share of 1 was 2%).
            zero_one = (
                _within_noise_of_zero(outside, ZERO_ONE_Z)
                and _ends_empty(histogram)
                and _at_most_share(outside, count, ZERO_ONE_OUTSIDE)
            )
            mean = replace(mean, name="share of 1 (mean)" if zero_one else "mean clamped to [0, 1]")
        notes.append(
            f"{int(last - first) + 1} possible values in the released range: counts per value "
            "(with under- and overflow bins) instead of percentiles."
        )
        missing = self._missing(count)
        alerts = _value_alerts(histogram) + common_alerts((mean,), missing, moved)
        return ColumnSummary(
            name,
            "numeric",
            statistics=(count, mean, *extra),
            histogram=histogram,
            notes=tuple(notes),
            sql_type=sql_type,
            missing=missing,
            alerts=tuple(alerts),
        )

    def _histogram(
        self,
        column: str,
        base: Query,
        edges: Sequence[float],
        budget: Guarantee,
        unit: str,
        *,
        integer: bool,
    ) -> Steps[HistogramSummary]:
        query = base.group_by_bins(column, list(edges))
        if self.plan.max_rows is not None:
            # Each person's rows over all bins count at most max_rows (scaled down where
            # more: Query.bound's max_total_rows), in every bin there is -- as the
            # report's note says of every query, and with less noise than up to
            # MAX_GROUPS_PER_PERSON bins of max_rows rows each (L2 sensitivity max_rows
            # instead of sqrt(5) times it), keeping the rows of persons in more bins.
            # No bin is ranked (the bins are at most max_groups), so the engine adds
            # the rows of persons with at most max_rows as they are, and sends only
            # the others through its pair step (SqlEngine._light_rows; issue 34).
            query = query.bound(max_groups=len(edges) - 1, max_total_rows=self.plan.max_rows)
        result = yield from self._ask(query.count(), budget)
        cols = result.columns
        order = np.argsort(np.asarray(cols[f"{column}_bin"]), kind="stable")
        return HistogramSummary(
            edges=tuple(float(e) for e in edges),
            counts=tuple(np.asarray(cols["count"], dtype=np.float64)[order].tolist()),
            ci_low=tuple(np.asarray(cols["count_low"], dtype=np.float64)[order].tolist()),
            ci_high=tuple(np.asarray(cols["count_high"], dtype=np.float64)[order].tolist()),
            confidence=self._confidence,
            mechanism=", ".join(sorted({r.mechanism for r in result.releases})),
            budget=budget,
            unit=unit,
            open_ended=True,
            integer=integer,
        )

    def _order_query(
        self,
        column: str,
        base: Query,
        levels: tuple[float, ...],
        with_max: bool,
        bounds: tuple[float, float],
        grid: int,
    ) -> Query:
        query = base
        if levels:
            query = query.quantile(column, levels, bounds=bounds, grid_size=grid, name="q")
        if with_max:
            query = query.max(column, bounds=bounds, grid_size=grid, name="max")
        return query

    def _order_choice(
        self,
        column: str,
        base: Query,
        bounds: tuple[float, float],
        grid: int,
        share: float,
        values: float,
    ) -> OrderChoice:
        """Which order statistics are worth their share at ``values`` (public accuracy
        statements of :meth:`dpkit.Session.explain`; nothing is spent)."""
        rows_per_person = self.plan.max_rows or 1

        def explain(levels: tuple[float, ...], with_max: bool, scale: float) -> OrderAccuracy:
            query = self._order_query(column, base, levels, with_max, bounds, grid)
            budget = _scaled(self._shares.currency, share * scale)
            found = self._session.explain(query, budget=budget, confidence=self._confidence)
            radius = [o.rank_radius or 0 for o in found.orders if o.role == "quantile"]
            removals = [o.removals or 0 for o in found.orders if o.role == "max"]
            return OrderAccuracy(max(radius, default=0), max(removals, default=0) * rows_per_person)

        pure = isinstance(self._shares.currency, PureDP)
        return choose_order_statistics(explain, values, pure=pure)

    def _spread(
        self,
        name: str,
        kind: ColumnKind,
        column: str,
        base: Query,
        scale: _Scale,
        bounds: tuple[float, float],
        notes: list[str],
        tell: Callable[[str], None],
        sql_type: str,
        rest: float = 1.0,
        extra: tuple[Statistic, ...] = (),
    ) -> Steps[ColumnSummary]:
        """Count, mean, then the percentiles and max worth releasing at the released
        count, and a histogram (which gets the share of what is withheld)."""
        share = self._shares.of(name) * rest
        low, high = bounds
        unit = EPOCH_SECONDS if scale.date else ""

        # 2. Count and mean (clamped to the released range) first: the released count
        #    decides which order statistics can be useful (post-processing).
        budget = self._shares.take(share * MEAN_SHARE, f"{name}: count, mean", "count, mean")
        count, mean, _, moved = yield from self._count_mean(column, base, (low, high), budget, unit)
        if scale.date == "DATE":
            mean = _whole_days(mean)
        values = max(1.0, count.ci_low if count.ci_low is not None else count.estimate or 0.0)

        # 3. Percentiles (inverse sensitivity) and maximum (shifted inverse sensitivity),
        #    those whose accuracy at this count is useful (issue 28: withhold, don't
        #    mislead); what is withheld goes to the histogram.
        tell(f"{name} percentiles")
        grid = scale.grid_size(low, high)
        choice = self._order_choice(column, base, (low, high), grid, share * ORDER_SHARE, values)
        order_share = share * ORDER_SHARE if (choice.levels or choice.with_max) else 0.0
        level = f"{self._confidence:.0%}"
        rounding = scale.rounding(low, high)
        released: dict[float, float] = {}
        raw_max: float | None = None
        radius = below = 0
        if order_share:
            budget = self._shares.take(order_share, f"{name}: percentiles, max", "quantiles")
            query = self._order_query(
                column, base, choice.levels, choice.with_max, (low, high), grid
            )
            result = yield from self._ask(query, budget)
            for q in choice.levels:
                key = "q" if len(choice.levels) == 1 else f"q_{q:g}"
                released[q] = scale.snap(float(result.columns[key][0]), low, high)
            if choice.with_max:
                raw_max = scale.snap(float(result.columns["max"][0]), low, high)
            for r in result.releases:
                radius = max(radius, int(getattr(r.error, "rank_radius", 0) or 0))
                below = max(below, int(getattr(r.error, "removals", 0) or 0))
            below *= self.plan.max_rows or 1
        # Post-processing: consistent order statistics (see consistent_order_statistics).
        levels_out = [released[q] for q in sorted(released)]
        maximum = None
        if levels_out or raw_max is not None:
            trust = raw_max is not None and (not levels_out or below <= radius)
            top = raw_max if raw_max is not None else high
            levels_out, top = consistent_order_statistics(
                levels_out, top, low, high, trust_max=trust
            )
            maximum = top if raw_max is not None else None
        by_level = dict(zip(sorted(released), levels_out, strict=True))
        grid_note = (
            f"values rounded to \u00b1{scale.show_rounding(rounding)} (grid)" if rounding else ""
        )
        statistics: list[Statistic] = [count]
        for q in PERCENTILES:
            statistics.append(
                Statistic(
                    name=f"p{round(q * 100)}",
                    estimate=by_level.get(q),
                    mechanism="inverse sensitivity (exponential mechanism)",
                    unit=unit,
                    caveat=grid_note if q in by_level else "",
                    rounding=rounding if q in by_level else 0.0,
                    withheld="" if q in by_level else _percentile_withheld(choice),
                    rank_radius=radius if q in by_level else None,
                    rank_count=values if q in by_level else None,
                )
            )
        max_note = ""
        if maximum is not None and raw_max is not None and maximum > raw_max:
            max_note = (
                f"raised to p95: its own release may lie below up to {below:,} values ({level})"
            )
        statistics.append(
            Statistic(
                name="max",
                estimate=maximum,
                mechanism="shifted inverse sensitivity (noisy binary search)",
                unit=unit,
                limit="lower" if maximum is not None else "",
                caveat=", ".join(t for t in (max_note, grid_note) if t and maximum is not None),
                rounding=rounding if maximum is not None else 0.0,
                withheld="" if maximum is not None else choice.max_reason,
                rank_radius=below if maximum is not None else None,
                rank_count=values if maximum is not None else None,
            )
        )
        if released or maximum is not None:
            notes.append(ORDER_NOTE)
        if rounding and (released or maximum is not None):
            notes.append(
                f"Percentiles and max are points of a grid over the range: their accuracy "
                f"holds for the values rounded to it (each moved by up to "
                f"{scale.show_rounding(rounding)}), so on tied data a release may lie up to "
                f"{scale.show_rounding(rounding)} from a block of equal values of the stated "
                "rank."
            )
        statistics.append(mean)
        statistics.extend(extra)

        # 4. Histogram between the released 5th and 95th percentiles (else over the
        #    released range), with under- and overflow bins.
        lo, hi = by_level.get(0.05, low), by_level.get(0.95, high)
        edges = scale.histogram_edges(lo, hi, low, high)
        between = "p5-p95 range" if 0.05 in by_level else "range"
        notes.append(
            f"Mean of values clamped to the released range; histogram over the released "
            f"{between} [{scale.show(edges[1])}, {scale.show(edges[-2])}), with "
            "under- and overflow bins."
        )
        hist_share = share * (1.0 - RANGE_SHARE - MEAN_SHARE) - order_share
        budget = self._shares.take(hist_share, f"{name}: histogram", "histogram")
        histogram = yield from self._histogram(
            column, base, edges, budget, unit, integer=scale.integer
        )
        missing = self._missing(count)
        alerts = numeric_alerts(statistics, low, missing, moved)
        return ColumnSummary(
            name,
            kind,
            statistics=tuple(statistics),
            histogram=histogram,
            notes=tuple(notes),
            sql_type=sql_type,
            missing=missing,
            alerts=tuple(alerts),
        )


#: The note on percentiles and maxima, said once per column that releases one.
ORDER_NOTE = (
    "Percentiles and max: accuracy is a rank / down-sensitivity bound, not an "
    "interval (\u00b1 ranks of the released count of values). The max is a lower bound "
    "of the true maximum (with high probability). Post-processing makes them "
    "consistent: percentiles are increasing and inside the released range; at the top, "
    "the more accurate of the max and the 95th percentile bounds the other. A "
    "statistic whose accuracy would exceed "
    f"{WITHHOLD_FRACTION:.0%} of the values is withheld, and its share goes to the "
    "histogram."
)


def _percentile_withheld(choice: OrderChoice) -> str:
    if choice.percentile_reason:
        return choice.percentile_reason
    return (
        "withheld: fewer percentiles, each with more budget, keep their rank accuracy "
        f"within {WITHHOLD_FRACTION:.0%} of the values"
    )


def _at_most_share(part: Statistic, whole: Statistic, share: float) -> bool:
    """Whether a count's upper limit is at most ``share`` of another's lower limit."""
    if part.ci_high is None or whole.ci_low is None or whole.ci_low <= 0.0:
        return False
    return max(part.ci_high, 0.0) <= share * whole.ci_low


def _ends_empty(histogram: HistogramSummary) -> bool:
    """Whether the under- and overflow bins are within noise of 0 (post-processing of
    the histogram release): each count at most INTEGER_CHECK_Z standard errors, the
    standard error read off the interval's half-width (Gaussian; for Laplace noise the
    same rule is stricter than it needs to be)."""
    if not histogram.ci_low or histogram.confidence is None:
        return False
    per_se = normal_upper_quantile((1.0 - histogram.confidence) / 2.0)
    for i in (0, -1):
        half = (histogram.ci_high[i] - histogram.ci_low[i]) / 2.0
        if histogram.counts[i] > ZERO_ONE_Z * half / per_se:
            return False
    return True


def _value_alerts(histogram: HistogramSummary) -> list[str]:
    """Overview flags of a counts-per-value column: constant, mostly zeros."""
    counts = np.maximum(np.asarray(histogram.counts[1:-1], dtype=np.float64), 0.0)
    total = float(counts.sum())
    if total <= 0.0:
        return []
    values = histogram.edges[1:-2]
    alerts = []
    top = int(np.argmax(counts))
    if counts[top] >= 0.99 * total:
        alerts.append(f"constant ({values[top]:g})" if len(values) > top else "constant")
    elif 0.0 in values and counts[values.index(0.0)] >= 0.5 * total:
        alerts.append("mostly zeros")
    return alerts


def _within_noise_of_zero(statistic: Statistic, z: float = INTEGER_CHECK_Z) -> bool:
    """Whether a noisy count is at most ``z`` standard errors (post-processing)."""
    se = statistic.std_error
    return se is not None and _released(statistic) <= z * se


def _upper_text(statistic: Statistic) -> str:
    level = round(100 * (statistic.confidence or 0.0))
    if statistic.ci_high is None:
        return f"about {max(0.0, _released(statistic)):,.0f}"
    estimate, high = max(0.0, _released(statistic)), max(0.0, statistic.ci_high)
    return f"about {estimate:,.0f}, at most {high:,.0f} at {level}%"


def _integer_valued_note(sql_type: str, fractional: Statistic) -> str:
    return (
        f"Stored as {sql_type}, summarised as integers: its range holds few integers and a "
        "noisy count of its values that are not integers is within "
        f"{INTEGER_CHECK_Z:.3g} standard errors of 0 ({_upper_text(fractional)}). Such "
        "values are counted in no value's count, and in the mean as they are."
    )


def _not_integer_valued_note(sql_type: str, fractional: Statistic) -> str:
    return (
        f"Stored as {sql_type} with few integers in its range, but a noisy count of its "
        f"values that are not integers ({_upper_text(fractional)}) exceeds "
        f"{INTEGER_CHECK_Z:.3g} standard errors: summarised by percentiles."
    )
