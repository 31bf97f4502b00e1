"""Adding the noise, estimating per cell, and the result and explanation objects."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.guarantees import ZCDP, PureDP
from dpkit.analytics._accounting import BudgetKind, Noise, selection_threshold
from dpkit.analytics._compile import CompiledQuery, StatisticSpec
from dpkit.analytics._order import ACCURACY_SUFFIX, OrderSpec, order_columns, release_order
from dpkit.analytics.engines import EngineResult
from dpkit.analytics.query import Query
from dpkit.errors import DPWarning, InvalidParameter
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.random import Random

__all__ = [
    "Explanation",
    "OrderExplanation",
    "QueryResult",
    "SmallGroupWarning",
    "StatisticExplanation",
]

Key = tuple[Any, ...]


@functools.lru_cache(maxsize=256)
def _normal_quantile(confidence: float) -> float:
    # Two-sided standard normal quantile by bisection on erfc (no SciPy import); a
    # pure function of the public confidence, memoised (every release computes it).
    alpha = 1.0 - confidence
    low, high = 0.0, 40.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        if math.erfc(mid / math.sqrt(2.0)) > alpha:
            low = mid
        else:
            high = mid
    return high


class SmallGroupWarning(DPWarning):
    """``Session.explain``: groups are likely too small for a mean's or variance's
    ratio to say more than its bounds (public information only: the noise scales, the
    bounds, and the group size the analyst expects or the key-selection threshold)."""


@dataclass(frozen=True, slots=True)
class StatisticExplanation:
    """One noisy statistic of a query, before it runs (value units)."""

    aggregation: str
    role: str
    mechanism: str
    sensitivity: float  # per group, value units
    max_groups: int
    noise_scale: float  # discrete Laplace scale or discrete Gaussian sigma, value units
    standard_deviation: float
    half_width: float
    confidence: float
    budget: PureDP | ZCDP
    #: The mechanism object that will release this statistic (integer units): the
    #: same object :meth:`Session.evaluate` releases through.
    releaser: Mechanism | None = None
    #: One person's largest contribution summed over all groups (value units), where
    #: ``Query.bound(max_total_rows=)`` makes it less than ``max_groups * sensitivity``.
    total_sensitivity: float | None = None


@dataclass(frozen=True, slots=True)
class OrderExplanation:
    """One quantile/median/max/min aggregation (or private-bounds step), before it runs.

    ``role`` is ``"quantile"``, ``"max"``, ``"min"`` or ``"bounds"`` (the quantiles
    released to find an aggregation's clamping bounds). The grid is ``grid_size``
    points from ``grid_low`` to ``grid_high`` (step ``grid_step``). Each group gets
    ``releases_per_group`` releases (one per level), each with ``release_epsilon``
    (exponential mechanism, per row; quantiles and PureDP max/min) or ``release_rho``
    (discrete Gaussian binary search; zCDP max/min); ``budget`` is the whole step's
    cost per person. Accuracy, each release at ``confidence``: quantiles lie within
    ``rank_radius`` ranks of the exact one (ranks of the rows kept by contribution
    bounding); max (min) is at most (at least) the exact value and at least (most)
    what it becomes after removing the ``removals`` persons that lower (raise) it most.
    """

    aggregation: str
    role: str
    mechanism: str
    levels: tuple[float, ...]
    grid_low: float
    grid_high: float
    grid_size: int
    grid_step: float
    release_epsilon: float | None
    release_rho: float | None
    releases_per_group: int
    max_groups: int
    max_rows: int
    rank_radius: int | None
    removals: int | None
    confidence: float
    budget: PureDP | ZCDP


@dataclass(frozen=True, slots=True)
class Explanation:
    """What a query runs and how accurate it is expected to be; nothing was spent.

    ``statistics`` lists the noisy statistics (counts and sums); ``orders`` the
    quantile, median, max and min aggregations and the private-bounds steps.
    """

    statistics: tuple[StatisticExplanation, ...]
    charge: str
    selection_threshold: int | None
    selection_delta: float | None
    notes: tuple[str, ...]
    orders: tuple[OrderExplanation, ...] = ()
    #: A query over several tables: the joins, their multiplicities or truncations,
    #: and where the contribution bound applies (dpkit.analytics._joins).
    source: tuple[str, ...] = ()
    #: Per mean or variance: the fewest rows a group needs for its interval to be
    #: narrower than what the bounds allow and its noisy count to stay clear of zero
    #: (smaller groups get the note ``too few rows``; :func:`min_group_rows`).
    min_group_rows: tuple[tuple[str, int], ...] = ()

    def __str__(self) -> str:
        lines = [*self.source, f"Charge: {self.charge}"]
        header = (
            f"{'aggregation':<20} {'statistic':<16} {'mechanism':<17} {'scale':>12} "
            f"{'sd':>12} {'CI +-':>12}"
        )
        lines.append(header)
        for s in self.statistics:
            lines.append(
                f"{s.aggregation:<20} {s.role:<16} {s.mechanism:<17} {s.noise_scale:>12.4g} "
                f"{s.standard_deviation:>12.4g} {s.half_width:>12.4g}"
            )
        for o in self.orders:
            param = (
                f"epsilon {o.release_epsilon:.4g}"
                if o.release_epsilon is not None
                else f"rho {o.release_rho:.4g}"
            )
            accuracy = (
                f"rank radius {o.rank_radius}"
                if o.rank_radius is not None
                else f"down-sensitivity removals {o.removals}"
            )
            levels = "" if not o.levels else " levels " + ", ".join(f"{q:g}" for q in o.levels)
            lines.append(
                f"{o.aggregation:<20} {o.role:<16} {o.mechanism}{levels}: grid "
                f"[{o.grid_low:g}, {o.grid_high:g}] x {o.grid_size} (step {o.grid_step:.4g}), "
                f"{param} per release, {o.releases_per_group} per group, {accuracy} "
                f"at {o.confidence:.4g}"
            )
        if self.selection_threshold is not None:
            lines.append(
                f"key selection: keep keys with noisy distinct-person count >= "
                f"{self.selection_threshold} (delta {self.selection_delta:.3g})"
            )
        lines.extend(self.notes)
        return "\n".join(lines)


def _mechanism_name(spec: StatisticSpec) -> str:
    return type(spec.noise.mechanism).__name__


def _guarantee(noise: Noise) -> PureDP | ZCDP:
    value = fraction_up(noise.cost)
    return PureDP(value) if noise.kind == "laplace" else ZCDP(value)


def min_group_rows(
    kind: str, specs: list[StatisticSpec], bounds: tuple[float, float], confidence: float
) -> int:
    """The fewest rows for which a mean's (variance's) interval is narrower than the
    bounds allow, whatever the values, and the noisy count's lower limit is a row.

    From the delta-method standard errors of :func:`_estimate` at their worst over
    values in the bounds (half-range ``h``; a centred mean is at most ``h``, a variance
    at most ``h^2``): a mean's half-width ``z sqrt(sd_s^2 + h^2 sd_n^2) / n`` is below
    ``h`` when ``n > z sqrt(sd_s^2 + h^2 sd_n^2) / h``; a variance's
    ``z sqrt(sd_q^2 + 4 h^2 sd_s^2 + h^4 sd_n^2) / n`` below ``h^2 / 2`` when ``n`` exceeds
    twice that over ``h^2``. Public parameters only.
    """
    z = _normal_quantile(confidence)
    n_spec, s_spec = specs[0], specs[1]
    h = bounds[1] / 2.0 - bounds[0] / 2.0
    sd_n = n_spec.noise.standard_deviation()
    sd_s = s_spec.noise.standard_deviation() * s_spec.unit
    if kind == "mean":
        needed = z * math.hypot(sd_s, h * sd_n) / h
    else:
        q_spec = specs[2]
        sd_q = q_spec.noise.standard_deviation() * q_spec.unit
        needed = 2.0 * z * math.sqrt(sd_q**2 + (2.0 * h * sd_s) ** 2 + (h * h * sd_n) ** 2)
        needed /= h * h
    count_floor = n_spec.noise.half_width(confidence) + 1
    if not math.isfinite(needed):
        return 2**63 - 1
    return int(max(count_floor, math.floor(needed) + 1))


def explain(
    compiled: CompiledQuery,
    query: Query,
    kind: BudgetKind,
    confidence: float,
    group_size: int | None = None,
) -> Explanation:
    rows = []
    for spec in compiled.specs:
        unit = spec.unit
        rows.append(
            StatisticExplanation(
                aggregation=spec.aggregation,
                role=spec.role,
                mechanism=_mechanism_name(spec),
                sensitivity=spec.noise.sensitivity * unit,
                max_groups=spec.noise.groups,
                noise_scale=spec.noise.scale * unit,
                standard_deviation=spec.noise.standard_deviation() * unit,
                half_width=spec.noise.half_width(confidence) * unit,
                confidence=confidence,
                budget=_guarantee(spec.noise),
                releaser=spec.noise.mechanism,
                total_sensitivity=None if spec.noise.total is None else spec.noise.total * unit,
            )
        )
    threshold = delta = None
    if compiled.selection_noise is not None and compiled.selection_delta is not None:
        # The delta charged: what the integer threshold costs (at most the one asked).
        threshold, delta = selection_threshold(compiled.selection_noise, compiled.selection_delta)
    notes = [
        "Means and variances: estimates are ratios of noisy statistics; their standard "
        "errors are delta-method approximations.",
    ]
    if compiled.plan.max_total_rows is not None:
        notes.append(
            f"Each person contributes at most {compiled.plan.max_total_rows:,} rows over all "
            "groups: a person with more has every kept group scaled by the same factor "
            "(Query.bound(max_total_rows=)); counts and sums are calibrated to that total."
        )
    orders = [_explain_order(o, o.kind, compiled, confidence) for o in compiled.orders]
    for bound in compiled.bound_orders:
        orders.append(_explain_order(bound, "bounds", compiled, confidence))
        notes.append(
            f"{bound.aggregation}: clamping bounds found privately; its noise scales above "
            "are upper bounds (at the search range), the ones used are computed at the "
            "released bounds."
        )
    needs = _ratio_rows(compiled, query, confidence)
    for name, rows_needed in needs:
        notes.append(
            f"{name}: a group needs at least {rows_needed:,} rows for its interval to be "
            "narrower than its bounds; a group whose noisy count may be below one row gets "
            "the middle of the bounds and the note 'too few rows in this group'."
        )
    _warn_small_groups(needs, compiled, threshold, group_size)
    return Explanation(
        tuple(rows),
        kind.show(compiled.charge),
        threshold,
        delta,
        tuple(notes),
        tuple(orders),
        min_group_rows=tuple(needs),
    )


def _ratio_rows(compiled: CompiledQuery, query: Query, confidence: float) -> list[tuple[str, int]]:
    needs = []
    for agg in query.aggregations:
        if agg.kind not in ("mean", "variance"):
            continue
        bounds = agg.bounds
        if bounds is None and agg.private is not None:
            bounds = agg.private.search_range  # the widest the released bounds can be
        specs = [s for s in compiled.specs if s.aggregation == agg.name]
        if bounds is None or len(specs) < 2:
            continue
        needs.append((agg.name, min_group_rows(agg.kind, specs, bounds, confidence)))
    return needs


def _warn_small_groups(
    needs: list[tuple[str, int]],
    compiled: CompiledQuery,
    threshold: int | None,
    group_size: int | None,
) -> None:
    """Warn when the groups are likely too small for a ratio: smaller than the
    ``group_size`` the analyst expects, or -- with keys selected privately -- when a
    group at the selection threshold cannot hold enough rows (public numbers only)."""
    if group_size is not None:
        small = [(n, r) for n, r in needs if group_size < r]
        why = f"the expected group size, {group_size:,} rows"
    elif threshold is not None:
        largest = threshold * max(compiled.plan.max_rows or 1, 1)
        small = [(n, r) for n, r in needs if largest < r]
        why = (
            f"the {largest:,} rows at most of a group at the key-selection threshold "
            f"({threshold} persons)"
        )
    else:
        return
    if small:
        listed = ", ".join(f"{n} needs {r:,}" for n, r in small)
        warnings.warn(
            f"Session.explain: groups are likely too small for a ratio: {listed} rows for an "
            f"interval narrower than the bounds, more than {why}. Spend more budget on it, "
            "group more coarsely, or release a count and a sum instead.",
            SmallGroupWarning,
            stacklevel=3,
        )


def _explain_order(
    spec: OrderSpec, role: str, compiled: CompiledQuery, confidence: float
) -> OrderExplanation:
    """Public-only accuracy of an order statistic, as :func:`release_order` will state it."""
    from dpkit.estimators.inverse_sensitivity import loss_radius
    from dpkit.selection import ExponentialMechanism
    from dpkit.selection.binary_search import plan_search

    plan = compiled.bounds_plan if role == "bounds" else compiled.plan
    assert plan is not None
    epsilon = rho = radius = removals = None
    if spec.kind == "quantile":
        epsilon = spec.parameter
        coefficient = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0).coefficient
        radius = loss_radius(spec.size, coefficient=coefficient, confidence=confidence)
        mechanism = "InverseSensitivityQuantile"
    else:
        if spec.noise == "laplace":
            epsilon = spec.parameter
        else:
            rho = spec.parameter
        # The release searches the grid plus its bottom sentinel (release_order).
        search = plan_search(spec.size + 1, epsilon=epsilon, rho=rho, beta=1.0 - confidence)
        removals, confidence = search.removals, search.confidence
        mechanism = "ShiftedInverseSensitivity"
    value = fraction_up(spec.share)
    return OrderExplanation(
        aggregation=spec.aggregation,
        role=role,
        mechanism=mechanism,
        levels=spec.qs,
        grid_low=spec.low,
        grid_high=spec.high,
        grid_size=spec.size,
        grid_step=spec.step,
        release_epsilon=epsilon,
        release_rho=rho,
        releases_per_group=max(1, len(spec.qs)),
        max_groups=plan.max_groups,
        max_rows=plan.max_rows if spec.kind == "quantile" else 1,
        rank_radius=radius,
        removals=removals,
        confidence=confidence,
        budget=PureDP(value) if spec.noise == "laplace" else ZCDP(value),
    )


@dataclass(frozen=True)
class QueryResult:
    """A released query result.

    Attributes
    ----------
    group_columns:
        Names of the key columns.
    columns:
        Column name -> numpy array: the keys, and for each aggregation ``name``,
        ``name_se`` (standard error), ``name_low`` and ``name_high`` (confidence
        interval at ``confidence``). A mean's interval never leaves its bounds, a
        variance's never leaves ``[0, ((high - low) / 2)^2]``; a mean or variance also
        has ``name_note``: ``""``, or, in a group whose noisy count's lower confidence
        limit is below one row, "too few rows in this group for a mean" (the value is
        then the middle of that range, the interval the whole range and ``_se`` half its
        width). A quantile, median, max or min has no standard error (``_se`` is NaN);
        its interval is what its own guarantee implies: ``[value, high]`` for a max
        (the release is at most the exact maximum), ``[low, value]`` for a min, and the
        bounds ``[low, high]`` for a quantile (a rank guarantee implies no narrower
        value interval: the data between the ranks is not released). It states its
        accuracy in one more integer column,
        the same in every group (it depends on public parameters only):
        ``name_rank_radius`` for a quantile or median (at ``confidence``, the release
        lies within that many ranks of the exact one, ranks of the rows kept by
        contribution bounding: :class:`~dpkit.mechanisms.RankErrorBound`; the count
        of values those ranks are out of is released by adding ``.count()`` to the
        same query, as ``dpkit describe`` does for its ``rank_count``),
        ``name_removals`` for a max (min): at the binary search's confidence (at least
        ``confidence``), at most (least) the exact value and at least (most) what it
        becomes without the ``removals`` persons that lower (raise) it most
        (:class:`~dpkit.mechanisms.DownSensitivityBound`). Several quantile levels
        give ``name_<q>`` and ``name_<q>_rank_radius`` per level (``q_0.5``,
        ``q_0.5_rank_radius``). Clamping bounds released privately are
        ``name_clamp_low`` and ``name_clamp_high``.
    releases:
        One :class:`~dpkit.Release` per noisy statistic (integer units), for audit.
    confidence:
        Level of the intervals.
    selection_threshold:
        The key-selection threshold, if keys were selected privately.
    """

    group_columns: tuple[str, ...]
    columns: dict[str, npt.NDArray[Any]]
    releases: tuple[Release[Any], ...]
    confidence: float
    selection_threshold: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def dataframe(self) -> Any:
        """The result as a pandas DataFrame (pandas is imported on first use)."""
        import pandas as pd  # type: ignore[import-untyped]

        return pd.DataFrame({k: v for k, v in self.columns.items()})

    def to_pandas(self) -> Any:
        return self.dataframe


def _released(
    spec: StatisticSpec, exact: npt.NDArray[Any], random: Random, confidence: float
) -> Release[Any]:
    """The statistic's mechanism releases its exact per-group column."""
    mechanism = spec.noise.mechanism
    if exact.size == 0:
        empty = mechanism.release(np.zeros(1, dtype=np.int64), confidence=confidence, rng=random)
        return dataclasses.replace(empty, value=exact.copy())
    if exact.dtype != object:
        return mechanism.release(exact, confidence=confidence, rng=random)
    # Exact sums beyond int64 (HUGEINT in the engine): the mechanisms add noise to
    # int64 arrays, and releasing x is releasing 0 and adding x (the noise does not
    # depend on the value), so add the exact part as Python integers.
    noise_only = mechanism.release(
        np.zeros(exact.size, dtype=np.int64), confidence=confidence, rng=random
    )
    value = np.array(
        [int(e) + int(d) for e, d in zip(exact, noise_only.value, strict=True)], dtype=object
    )
    return dataclasses.replace(noise_only, value=value)


def rehearse(compiled: CompiledQuery, confidence: float, random: Random) -> None:
    """Run every mechanism of ``compiled`` once on data-free inputs (a zero, an empty
    histogram), before the charge: a noise parameter that a mechanism cannot release
    (a budget so large that a confidence half-width underflows, so small that a
    quantile's search refuses its scale) is refused here, spending nothing, rather than
    failing after the charge (found by the adversarial review of issue 27). Reads no
    data; ``random`` is a stream of its own, and what it draws is thrown away.

    Raises
    ------
    InvalidParameter
        A mechanism cannot run at this budget; the message names its error.
    """
    try:
        for spec in compiled.specs:
            spec.noise.mechanism.release(
                np.zeros(1, dtype=np.int64), confidence=confidence, rng=random
            )
        for order in (*compiled.orders, *compiled.bound_orders):
            release_order(order, {}, random, confidence)
    except Exception as err:
        raise InvalidParameter(
            "Session.evaluate: the query's noise cannot be released at this budget "
            f"({type(err).__name__}: {err}). Nothing was spent: use a budget closer to "
            "the usual range (e.g. epsilon between 1e-6 and 1e3)."
        ) from None


def release(
    compiled: CompiledQuery,
    query: Query,
    exact: EngineResult,
    threshold: int | None,
    confidence: float,
    random: Random,
    histograms: list[dict[Key, dict[int, int]]] | None = None,
) -> QueryResult:
    specs = compiled.specs
    width = len(query.group_columns)
    if compiled.plan.keys is not None:
        # The canonical keys (of the columns' types), as the engine returns them.
        keys: list[Key] = list(compiled.plan.keys.keys)
    elif width == 0:
        keys = [()]
    else:
        keys = sorted(exact, key=repr)
    if not specs and query.keys is None and width:
        # Only order statistics: the engine's keys are those with values (private
        # key selection always adds a statistic, so this is public keys or none).
        keys = sorted({k for h in histograms or [] for k in h}, key=repr)
    zeros = [0] * len(specs)
    table = np.array([exact.get(k, zeros) for k in keys], dtype=object).reshape(
        len(keys), len(specs)
    )
    noisy: dict[int, npt.NDArray[Any]] = {}
    releases: list[Release[Any]] = []
    order = list(range(len(specs)))
    sel_index = next((i for i, s in enumerate(specs) if s.aggregation == "__selection"), None)
    if sel_index is not None:
        # Key selection first: only selected keys' statistics are released.
        column = np.array([int(v) for v in table[:, sel_index]], dtype=np.int64)
        counts = _released(specs[sel_index], column, random, confidence).value
        assert threshold is not None
        keep = np.asarray(counts >= threshold, dtype=bool)
        keys = [k for k, kept in zip(keys, keep, strict=True) if kept]
        table = table[keep]
        order.remove(sel_index)
    for i in order:
        column = (
            np.array([int(v) for v in table[:, i]], dtype=object)
            if len(keys)
            else np.zeros(0, dtype=np.int64)
        )
        with contextlib.suppress(OverflowError):
            column = column.astype(np.int64)
        release_i = _released(specs[i], column, random, confidence)
        noisy[i] = np.asarray(release_i.value)
        releases.append(release_i)
    columns: dict[str, npt.NDArray[Any]] = {}
    for j, name in enumerate(query.group_columns):
        columns[name] = np.array([k[j] for k in keys])
    z = _normal_quantile(confidence)
    orders = {o.aggregation: (o, h) for o, h in zip(compiled.orders, histograms or [], strict=True)}
    for agg in query.aggregations:
        if agg.name in orders:
            spec, histogram = orders[agg.name]
            per_key = [release_order(spec, histogram.get(k, {}), random, confidence) for k in keys]
            names = order_columns(agg.name, spec)
            nan = np.full(len(keys), np.nan)
            accuracy = ACCURACY_SUFFIX[spec.kind]
            for level, column_name in enumerate(names):
                values = [r[level] for r in per_key]
                releases.extend(values)
                released = np.array([r.value for r in values], dtype=np.float64)
                columns[column_name] = released
                columns[f"{column_name}_se"] = nan.copy()
                low, high = _order_interval(spec, released)
                columns[f"{column_name}_low"] = low
                columns[f"{column_name}_high"] = high
                # The accuracy each release states (public: the same in every group).
                columns[f"{column_name}_{accuracy}"] = np.array(
                    [getattr(r.error, accuracy) for r in values], dtype=np.int64
                )
            continue
        idx = [i for i in order if specs[i].aggregation == agg.name]
        # Post-processing of released values: with extreme public bounds a standard
        # error may overflow to inf, which is the honest answer (not a warning).
        with np.errstate(over="ignore", invalid="ignore"):
            est, se, low, high, note = _estimate(
                agg.kind,
                [specs[i] for i in idx],
                [noisy[i] for i in idx],
                confidence,
                z,
                agg.bounds,
            )
        columns[agg.name] = est
        columns[f"{agg.name}_se"] = se
        columns[f"{agg.name}_low"] = low
        columns[f"{agg.name}_high"] = high
        if note is not None:
            columns[f"{agg.name}_note"] = note
    return QueryResult(query.group_columns, columns, tuple(releases), confidence, threshold)


def _f(values: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    return np.array([float(v) for v in values], dtype=np.float64)


def _order_interval(
    spec: OrderSpec, released: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The value interval an order statistic's own accuracy statement implies.

    Max (min): the release is at most (least) the exact maximum (minimum) of the
    clamped values, at the search's confidence (:class:`DownSensitivityBound`), and
    that is at most ``high`` (least ``low``): ``[value, high]`` (``[low, value]``).
    Quantile: the release lies between the data's values at ranks ``r - radius`` and
    ``r + radius`` (:class:`RankErrorBound`); the values between those ranks are not
    released, and the data may jump anywhere in the bounds between two ranks, so no
    value interval narrower than the bounds follows from it: ``[low, high]``, which
    holds with certainty (values are clamped). The rank accuracy is ``_rank_radius``.
    """
    low = np.full(released.shape, spec.low)
    high = np.full(released.shape, spec.high)
    if spec.kind == "max":
        return np.fmin(np.fmax(released, spec.low), spec.high), high
    if spec.kind == "min":
        return low, np.fmax(np.fmin(released, spec.high), spec.low)
    return low, high


#: The ``<name>_note`` of a mean or variance whose group's noisy count is too small
#: for a ratio (:func:`_estimate`); empty where the ratio is estimated.
TOO_FEW_ROWS = (
    "too few rows in this group for a {kind}: its noisy count's confidence interval "
    "reaches below one row; shown: the middle of the {kind}'s possible range, with that "
    "range as its interval"
)


def _estimate(
    kind: str,
    specs: list[StatisticSpec],
    values: list[npt.NDArray[Any]],
    confidence: float,
    z: float,
    bounds: tuple[float, float] | None,
) -> tuple[
    npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any] | None
]:
    """Estimate, standard error, interval and note (None for counts and sums) per group.

    Means and variances are ratios of noisy statistics over the group's noisy count.
    Their intervals (delta method) are intersected with what the public bounds allow:
    ``[low, high]`` for a mean, ``[0, ((high - low) / 2)^2]`` for a variance. Where the
    noisy count's lower confidence limit is below one row the group may be empty, and
    a ratio over it says nothing: such a group gets the middle of that range, the whole
    range as its interval, half its width as the standard error (the largest error
    the middle can have) and the note :data:`TOO_FEW_ROWS`. Post-processing of
    released values only; nothing here can raise on them.
    """
    if kind in ("count", "count_distinct", "sum"):
        spec, value = specs[0], values[0]
        est = _f(value) * spec.unit
        sd = spec.noise.standard_deviation() * spec.unit
        hw = spec.noise.half_width(confidence) * spec.unit
        se = np.full(est.shape, sd)
        return est, se, est - hw, est + hw, None
    assert bounds is not None
    low, high = bounds
    n_spec, s_spec = specs[0], specs[1]
    counted = _f(values[0])
    n = np.maximum(counted, 1.0)
    sd_n = n_spec.noise.standard_deviation()
    centre = s_spec.statistic.center * s_spec.unit
    m1 = _f(values[1]) * s_spec.unit / n  # mean of centred values
    sd_s = s_spec.noise.standard_deviation() * s_spec.unit
    if kind == "mean":
        floor, ceiling = low, high
        est = np.clip(centre + m1, low, high)
        se = np.sqrt((sd_s / n) ** 2 + (m1 * sd_n / n) ** 2)
    else:
        q_spec = specs[2]
        q_centre = q_spec.statistic.center * q_spec.unit
        m2 = _f(values[2]) * q_spec.unit / n + q_centre  # mean of squared deviations from mid
        # Values are centred at the grid's rounding of mid: shift m1 to be about mid.
        shift = centre - s_spec.statistic.mid
        d = m1 + shift
        floor, ceiling = 0.0, ((high - low) / 2.0) ** 2
        est = np.clip(m2 - d * d, floor, ceiling)
        sd_q = q_spec.noise.standard_deviation() * q_spec.unit
        se = np.sqrt((sd_q / n) ** 2 + (2.0 * d * sd_s / n) ** 2 + ((m2 - d * d) * sd_n / n) ** 2)
    # fmax/fmin: a NaN or infinite standard error gives the whole range, never NaN.
    lower = np.fmin(np.fmax(est - z * se, floor), est)
    upper = np.fmax(np.fmin(est + z * se, ceiling), est)
    collapsed = counted - n_spec.noise.half_width(confidence) < 1.0
    middle = floor / 2.0 + ceiling / 2.0
    est = np.where(collapsed, middle, est)
    se = np.where(collapsed, ceiling / 2.0 - floor / 2.0, se)
    lower = np.where(collapsed, floor, lower)
    upper = np.where(collapsed, ceiling, upper)
    note = np.where(collapsed, TOO_FEW_ROWS.format(kind=kind), "").astype(object)
    return est, se, lower, upper, note
