"""The linear programs of the noise design, built sparse and solved with HiGHS.

One generic LP covers the upper and lower bounds of the data-independent problem and
of the data-dependent one (Selvi, Liu & Wiesemann, arXiv 2304.12681, Prop. 1 and 3,
§3 and §4.1): ``D`` distributions ``p_d`` over the noise intervals
``I_i = [i beta, (i + 1) beta)``, ``i`` in ``[lo, hi)``, minimising
``sum_d w_d sum_i cost_i p_d(i)``. For every *pair constraint* ``(d, e, j)`` the
hockey-stick divergence of ``p_d`` from ``p_e`` shifted by ``j`` intervals is at most
``delta``::

    sum_{i in C} max(0, p_d(i) - e^eps p_e(i - j)) <= delta      (p_e := 0 outside [lo, hi))

which for piecewise-uniform noise is the paper's exponential family of constraints
over unions of intervals (the worst event takes exactly the intervals where the
bracket is positive; digest ``optimal-noise.md`` A.3). ``C`` is ``[lo, hi)`` for the
upper bound and the central intervals for the lower bound. Each positive part gets a
slack column ``s >= p_d(i) - e^eps p_e(i - j)``, so the constraint matrix has three
entries per slack and stays sparse (O(N k) entries for N intervals and k = Δf/β).

*Symmetric noise, folded.* With ``symmetric`` set and one distribution on a support
``[-h, h)``, interval ``i`` and its mirror ``-1 - i`` share one column, and only the
shifts ``j > 0`` are constrained: for symmetric masses the constraint at ``-j`` is the
one at ``j`` read backwards (substitute ``i -> -1 - i``). The same LP in half the
columns and half the slacks (about 2x faster at equal size).

*A window around 0.* Most of the N k slacks sit in the tails, where an optimal noise
is monotone and the largest shift ``k`` dominates. With ``window = (a, b)`` the shifts
``0 < |j| < k`` keep only their terms for ``i`` in ``[a, b)``: a *relaxation* (fewer
non-negative terms in each sum), whose optimum bounds the full LP's from below. With
``restrict_tails`` as well, the noise must be non-decreasing on ``[lo, a + k)`` and
non-increasing on ``[b - k, hi)``, and each shift ``0 < j < k`` also pays ``T_L``, the
sum of the shift-``k`` terms over ``i < a`` (``T_R`` and ``i >= b`` for ``j < 0``).
That is a *restriction*: every dropped term is bounded. For ``0 < j < k`` and
``i >= b``, ``i - j`` and ``i`` lie where ``p`` is non-increasing, so the term is 0;
for ``i < a``, either ``i - j < lo`` and the term is ``p(i)``, the shift-``k`` term
too, or ``i - k < i - j < a`` lie where ``p`` is non-decreasing (0 below ``lo``), so
``p(i - k) <= p(i - j)`` and the term is at most the shift-``k`` one. Negative shifts
mirror this. A design is solved restricted (feasible, private) and certified against
the relaxation of the same window (``_core.certified_window``), in about 4 (b - a) k
slacks instead of N k.

*Warm re-solves.* :class:`Solver` keeps HiGHS' basis, so re-solving for a smaller
``delta`` (the exact re-check's repair), or with the tail restriction switched off
(:meth:`Solver.restrict`), starts from the previous optimum.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.errors import InternalError, InvalidParameter

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Bytes per constraint-matrix entry and per row/column that HiGHS and this builder
#: need at peak (measured with benchmarks/design.py on HiGHS 1.16: about 0.6 kB per
#: entry at 10^6 entries; rounded up for a safety margin).
BYTES_PER_ENTRY = 1000


@dataclass(frozen=True)
class Problem:
    """One LP instance (see the module docstring)."""

    distributions: int
    lo: int
    hi: int
    central: tuple[int, int]
    costs: FloatArray
    weights: FloatArray
    pairs: list[tuple[int, int, int]]
    exp_epsilon: float
    delta: float
    tail_costs: tuple[float, float] | None = None
    symmetric: bool = False
    monotone: bool = False
    instance_costs: FloatArray | None = None
    instance_limits: FloatArray | None = None
    #: window relaxation / tail restriction: see the module docstring
    window: tuple[int, int] | None = None
    restrict_tails: bool = False

    @property
    def folded(self) -> bool:
        """Symmetric noise solved on half the columns (see the module docstring)."""
        return self.symmetric and self.distributions == 1 and self.lo == -self.hi

    @property
    def width(self) -> int:
        """Columns per distribution: its masses, then its tail masses if any."""
        tails = 0 if self.tail_costs is None else (1 if self.folded else 2)
        return (self.hi if self.folded else self.hi - self.lo) + tails

    def mass_columns(self, d: int, intervals: IntArray) -> IntArray:
        """Columns of the masses ``p_d(i)`` for the intervals ``i``."""
        if self.folded:
            return d * self.width + np.where(intervals >= 0, intervals, -1 - intervals)
        return d * self.width + intervals - self.lo

    def tail_columns(self, d: int) -> IntArray:
        """Columns of the left and right tail masses of distribution ``d``."""
        first = d * self.width + (self.hi if self.folded else self.hi - self.lo)
        return np.array([first, first] if self.folded else [first, first + 1], dtype=np.int64)

    def constrained_pairs(self) -> list[tuple[int, int, int]]:
        """The pairs that get constraints: folded, the shift ``-j`` is the shift ``j``."""
        if not self.folded:
            return list(self.pairs)
        present = set(self.pairs)
        return [(d, e, j) for d, e, j in self.pairs if j > 0 or (d, e, -j) not in present]

    def _term_range(self, j: int) -> tuple[int, int]:
        # With a window, shifts other than the largest keep only the terms inside it.
        c_lo, c_hi = self.central
        if self.window is not None and abs(j) < max(abs(pair[2]) for pair in self.pairs):
            c_lo, c_hi = max(c_lo, self.window[0]), min(c_hi, self.window[1])
        return c_lo, c_hi

    def terms(self, j: int) -> tuple[IntArray, IntArray]:
        """Intervals ``i`` whose term ``p(i) - e^eps p(i - j)`` the shift ``j`` constrains:
        (those with ``i - j`` in the support: a slack each; those without: the mass).

        With a ``window``, shifts other than the largest keep only the terms inside it
        (a relaxation: fewer non-negative terms in each sum)."""
        c_lo, c_hi = self._term_range(j)
        inside = np.arange(max(c_lo, self.lo + j), min(c_hi, self.hi + j), dtype=np.int64)
        outside = np.setdiff1d(np.arange(c_lo, c_hi, dtype=np.int64), inside)
        return inside, outside

    def slack_count(self) -> int:
        """Number of slack columns (= slack rows) the pair constraints need."""
        total = 0
        for _, _, j in self.constrained_pairs():
            c_lo, c_hi = self._term_range(j)
            total += max(0, min(c_hi, self.hi + j) - max(c_lo, self.lo + j))
        return total

    def memory_estimate(self) -> int:
        """Bytes the LP needs at peak (a conservative estimate, see BYTES_PER_ENTRY)."""
        entries = 3 * self.slack_count() + 2 * self.distributions * self.width
        return BYTES_PER_ENTRY * entries


def available_memory() -> int:
    """Physical memory of this machine in bytes (the default LP memory limit is half)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


@dataclass(frozen=True)
class Solution:
    masses: FloatArray  # (distributions, hi - lo)
    tails: FloatArray  # (distributions, 2); zeros without tails
    objective: float


class _Rows:
    """Accumulates sparse rows as COO triplets with their bounds."""

    def __init__(self) -> None:
        self.rows: list[IntArray] = []
        self.cols: list[IntArray] = []
        self.vals: list[FloatArray] = []
        self.lower: list[FloatArray] = []
        self.upper: list[FloatArray] = []
        self.count = 0
        self.restriction_rows: list[int] = []
        self.restriction_columns: list[int] = []

    def add(
        self,
        rows: IntArray,
        cols: IntArray,
        vals: FloatArray,
        lower: FloatArray,
        upper: FloatArray,
        *,
        restriction: bool = False,
    ) -> None:
        """Add ``len(lower)`` rows; ``rows`` are indices relative to this block.
        ``restriction``: rows that restrict the tails (Problem.restrict_tails)."""
        if restriction:
            self.restriction_rows.extend(range(self.count, self.count + lower.size))
        self.rows.append(rows + self.count)
        self.cols.append(cols)
        self.vals.append(vals)
        self.lower.append(lower)
        self.upper.append(upper)
        self.count += lower.size


def _pair_rows(problem: Problem, builder: _Rows, first_slack: int) -> tuple[int, IntArray]:
    """Slack rows and one delta row per constrained pair; returns (columns, delta rows)."""
    slack = first_slack
    delta_rows = []
    pairs = problem.constrained_pairs()
    largest = max(abs(j) for _, _, j in pairs)
    # restricted tails: the largest shifts first, so that their tail terms can be summed
    # into one column per side (see Problem.restrict_tails)
    pairs.sort(key=lambda pair: abs(pair[2]) != largest)
    tail_sums: dict[int, int] = {}
    for d, e, j in pairs:
        inside, outside = problem.terms(j)
        n = inside.size
        s_cols = np.arange(slack, slack + n, dtype=np.int64)
        slack += n
        local = np.arange(n, dtype=np.int64)
        # p_d(i) - e^eps p_e(i - j) - s <= 0  (folded, both masses may share a column:
        # the duplicate entries are summed when the matrix is assembled)
        builder.add(
            np.concatenate([local, local, local]),
            np.concatenate(
                [problem.mass_columns(d, inside), problem.mass_columns(e, inside - j), s_cols]
            ),
            np.concatenate([np.ones(n), np.full(n, -problem.exp_epsilon), -np.ones(n)]),
            np.full(n, -np.inf),
            np.zeros(n),
        )
        # sum of slacks, plus p_d(i) where p_e(i - j) = 0 (outside the support), <= delta
        cols = np.concatenate([s_cols, problem.mass_columns(d, outside)])
        if problem.restrict_tails and problem.window is not None:
            side = 1 if j > 0 else -1
            if abs(j) == largest:
                # the column T = sum of this shift's terms on the far tail (i < window
                # start for j > 0, i >= window end for j < 0) bounds every smaller
                # shift's terms there
                tail = (
                    np.concatenate([inside, outside]) < problem.window[0]
                    if j > 0
                    else np.concatenate([inside, outside]) >= problem.window[1]
                )
                tail_sums[side] = slack
                builder.restriction_columns.append(slack)
                slack += 1
                builder.add(
                    np.zeros(int(tail.sum()) + 1, dtype=np.int64),
                    np.concatenate([cols[tail], [tail_sums[side]]]),
                    np.concatenate([np.ones(int(tail.sum())), [-1.0]]),
                    np.array([-np.inf]),
                    np.zeros(1),
                    restriction=True,
                )
            else:
                cols = np.concatenate([cols, [tail_sums[side]]])
        delta_rows.append(builder.count)
        builder.add(
            np.zeros(cols.size, dtype=np.int64),
            cols,
            np.ones(cols.size),
            np.array([-np.inf]),
            np.array([problem.delta]),
        )
    return slack, np.asarray(delta_rows, dtype=np.int64)


def _shape_rows(problem: Problem, builder: _Rows) -> None:
    lo, hi = problem.lo, problem.hi
    size = hi - lo
    every = np.arange(lo, hi, dtype=np.int64)
    for d in range(problem.distributions):
        tails = problem.tail_columns(d) if problem.tail_costs is not None else np.zeros(0, int)
        # probabilities sum to one (tails included; folded columns count twice)
        cols = np.concatenate([problem.mass_columns(d, every), tails])
        builder.add(
            np.zeros(cols.size, dtype=np.int64), cols, np.ones(cols.size), np.ones(1), np.ones(1)
        )
        pairs: list[tuple[IntArray, IntArray, float, float, bool]] = []
        if problem.symmetric and not problem.folded:
            # interval i = [i b, (i+1) b) mirrors interval -1 - i
            left = np.arange(lo, min(0, hi), dtype=np.int64)
            left = left[(-1 - left >= lo) & (-1 - left < hi)]
            pairs.append((left, -1 - left, 0.0, 0.0, False))
        if problem.monotone or (problem.restrict_tails and problem.window is not None):
            # non-increasing from `start` on, non-decreasing up to `end` (exclusive)
            start, end = 0, 0
            if not problem.monotone and problem.window is not None:
                largest = max(abs(j) for _, _, j in problem.pairs)
                start, end = problem.window[1] - largest, problem.window[0] + largest
            right = np.arange(max(start, lo), hi - 1, dtype=np.int64)  # p(i + 1) <= p(i)
            pairs.append((right + 1, right, -np.inf, 0.0, not problem.monotone))
            if not problem.folded:  # folded, the left side is the right side
                left = np.arange(lo, min(end, hi) - 1, dtype=np.int64)  # p(i) <= p(i + 1)
                pairs.append((left, left + 1, -np.inf, 0.0, not problem.monotone))
        for a, b, low, high, restriction in pairs:
            n = a.size
            if n == 0:
                continue
            local = np.arange(n, dtype=np.int64)
            builder.add(
                np.concatenate([local, local]),
                np.concatenate([problem.mass_columns(d, a), problem.mass_columns(d, b)]),
                np.concatenate([np.ones(n), -np.ones(n)]),
                np.full(n, low),
                np.full(n, high),
                restriction=restriction,
            )
        if problem.symmetric and not problem.folded and problem.tail_costs is not None:
            builder.add(np.array([0, 0]), tails, np.array([1.0, -1.0]), np.zeros(1), np.zeros(1))
        if problem.instance_costs is not None and problem.instance_limits is not None:
            builder.add(
                np.zeros(size, dtype=np.int64),
                problem.mass_columns(d, every),
                problem.instance_costs,
                np.array([-np.inf]),
                np.array([problem.instance_limits[d]]),
            )


def _objective(problem: Problem, n_columns: int) -> FloatArray:
    costs = np.zeros(n_columns)
    every = np.arange(problem.lo, problem.hi, dtype=np.int64)
    for d in range(problem.distributions):
        # np.add.at: folded, interval i and its mirror add to one column
        np.add.at(costs, problem.mass_columns(d, every), problem.weights[d] * problem.costs)
        if problem.tail_costs is not None:
            np.add.at(
                costs,
                problem.tail_columns(d),
                problem.weights[d] * np.asarray(problem.tail_costs, dtype=np.float64),
            )
    return costs


def refuse_if_too_large(problem: Problem, max_memory: int, owner: str) -> None:
    """Raise InvalidParameter, with the size needed, for an LP above ``max_memory`` bytes."""
    need = problem.memory_estimate()
    if need > max_memory:
        raise InvalidParameter(
            f"{owner}: the linear program would need about {need / 2**30:.2f} GiB "
            f"({problem.slack_count()} slack variables), more than the limit of "
            f"{max_memory / 2**30:.2f} GiB. Use a coarser 'granularity' or a smaller "
            f"'support', or raise 'max_memory'."
        )


class Solver:
    """One LP built once and solved with HiGHS' dual simplex; :meth:`solve` can be
    called again for a smaller ``delta``, starting from the previous basis."""

    def __init__(self, problem: Problem, *, max_memory: int, owner: str) -> None:
        refuse_if_too_large(problem, max_memory, owner)
        import highspy  # heavy: imported only when a design is solved
        from scipy import sparse

        self._problem, self._owner, self._highspy = problem, owner, highspy
        self._first_slack = problem.distributions * problem.width
        builder = _Rows()
        n_columns, self._delta_rows = _pair_rows(problem, builder, self._first_slack)
        _shape_rows(problem, builder)
        self._restriction_rows = np.asarray(builder.restriction_rows, dtype=np.int32)
        self._restriction_columns = np.asarray(builder.restriction_columns, dtype=np.int32)
        self._restriction_upper = np.concatenate(builder.upper)[self._restriction_rows]
        matrix = sparse.csc_matrix(
            (
                np.concatenate(builder.vals),
                (np.concatenate(builder.rows), np.concatenate(builder.cols)),
            ),
            shape=(builder.count, n_columns),
        )
        matrix.sum_duplicates()

        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_columns, builder.count
        lp.col_cost_ = _objective(problem, n_columns)
        lp.col_lower_ = np.zeros(n_columns)
        lp.col_upper_ = np.full(n_columns, highspy.kHighsInf)
        lp.row_lower_ = np.maximum(np.concatenate(builder.lower), -highspy.kHighsInf)
        lp.row_upper_ = np.minimum(np.concatenate(builder.upper), highspy.kHighsInf)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
        lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
        lp.a_matrix_.value_ = matrix.data
        self._highs = highspy.Highs()  # type: ignore[no-untyped-call]
        self._highs.setOptionValue("output_flag", False)
        # Tight tolerances: the solution is re-checked exactly afterwards, and the
        # re-check must not find violations that a loose tolerance let through.
        self._highs.setOptionValue("primal_feasibility_tolerance", 1e-10)
        self._highs.setOptionValue("dual_feasibility_tolerance", 1e-10)
        self._highs.passModel(lp)
        self._matrix = matrix
        self._costs = np.asarray(lp.col_cost_, dtype=np.float64)

    def restrict(self, on: bool) -> None:
        """Switch the tail restriction (Problem.restrict_tails) on or off. Off, the tail
        sums are fixed at 0 and their rows and the monotone rows are void: the LP is
        then the window relaxation (Problem.window) exactly. The next solve is warm."""
        highspy, rows, cols = self._highspy, self._restriction_rows, self._restriction_columns
        if rows.size:
            upper = self._restriction_upper if on else np.full(rows.size, highspy.kHighsInf)
            self._highs.changeRowsBounds(  # type: ignore[attr-defined]  # not in the stub
                rows.size, rows, np.full(rows.size, -highspy.kHighsInf), upper
            )
        if cols.size:
            upper = np.full(cols.size, highspy.kHighsInf if on else 0.0)
            self._highs.changeColsBounds(cols.size, cols, np.zeros(cols.size), upper)

    def dual_bound(self, multipliers: FloatArray | None = None) -> float:
        """A lower bound on this LP's optimum from the last solve's dual, by weak duality.

        ``multipliers``: row multipliers to use instead of the solver's (any ``y`` gives
        a valid bound; the tests use random ones).

        For any row multipliers ``y`` and any feasible ``x``, ``c.x = d.x + y.(A x)`` with
        ``d = c - A^T y``; each row activity ``(A x)_r`` lies in its bounds and each ``x_i``
        in ``[0, u_i]``, so ``c.x >= sum_r min(y_r L_r, y_r U_r) + sum_i min(0, d_i u_i)``
        whatever ``y`` is (Neumaier & Shcherbina 2004, "Safe bounds in linear and
        mixed-integer linear programming"). ``y`` is HiGHS' row dual, with the signs that
        would multiply an infinite bound set to 0; ``u_i`` is implied by a row with
        non-negative coefficients and a finite upper end (every column of these LPs is in
        one: the masses in their sum, the slacks in their delta row). Floating-point
        error is bounded and subtracted, so the bound never rests on the solver's
        tolerances (unlike its objective value, which a slightly infeasible ``x`` can
        push above the optimum).
        """
        highs, inf = self._highs, self._highspy.kHighsInf
        lp = highs.getLp()
        lower = np.asarray(lp.row_lower_, dtype=np.float64)
        upper = np.asarray(lp.row_upper_, dtype=np.float64)
        duals = highs.getSolution().row_dual if multipliers is None else multipliers
        y = np.array(duals, dtype=np.float64)
        y[~np.isfinite(y)] = 0.0  # any y gives a bound: a non-finite entry is dropped
        y[((y > 0) & (lower <= -inf)) | ((y < 0) & (upper >= inf))] = 0.0
        a = self._matrix
        unit = 2.0**-53
        # d = c - A^T y, with a bound on its rounding error (gamma_n |c| + |A|^T |y|)
        d = self._costs - a.T @ y
        per_column = np.diff(a.indptr) + 2
        gamma = per_column * unit / (1.0 - per_column * unit)
        d_low = d - gamma * (np.abs(self._costs) + abs(a).T @ np.abs(y)) * (1.0 + 4 * unit)
        column_upper = self._implied_column_upper(lower, upper)
        negative = d_low < 0
        if np.any(negative & ~np.isfinite(column_upper)):
            return -math.inf
        column_terms = np.where(negative, d_low * np.where(negative, column_upper, 0.0), 0.0)
        row_terms = np.where(y > 0, y * np.where(y > 0, lower, 0.0), 0.0) + np.where(
            y < 0, y * np.where(y < 0, upper, 0.0), 0.0
        )
        terms = np.concatenate([row_terms, column_terms])
        total = math.fsum(terms.tolist())
        # each product and the final sum are rounded once: a relative 2^-53 each
        slack = 2.0 * unit * (float(np.abs(terms).sum()) * (1.0 + 4 * unit) + abs(total))
        return total - slack

    def _implied_column_upper(self, row_lower: FloatArray, row_upper: FloatArray) -> FloatArray:
        """Upper bounds on each column implied by its own bound and by rows whose
        coefficients are all >= 0 with a finite upper end (all columns are >= 0)."""
        inf = self._highspy.kHighsInf
        a = self._matrix.tocsr()
        bounds = np.asarray(self._highs.getLp().col_upper_, dtype=np.float64).copy()
        bounds[bounds >= inf] = np.inf
        rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
        row_min = np.full(a.shape[0], np.inf)
        np.minimum.at(row_min, rows, a.data)
        usable = (row_min[rows] > 0) & (row_upper[rows] < inf)
        implied = row_upper[rows[usable]] / a.data[usable]
        implied = np.nextafter(implied, np.inf)  # rounded up
        np.minimum.at(bounds, a.indices[usable], implied)
        return bounds

    def solve(self, delta: float | None = None) -> Solution:
        """Solve for ``delta`` (default: the problem's), warm after the first call."""
        problem, highspy, highs = self._problem, self._highspy, self._highs
        if delta is not None:
            rows = self._delta_rows.astype(np.int32)
            highs.changeRowsBounds(  # type: ignore[attr-defined]  # not in the stub
                rows.size, rows, np.full(rows.size, -highspy.kHighsInf), np.full(rows.size, delta)
            )
        highs.run()
        status = highs.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            raise InvalidParameter(
                f"{self._owner}: no noise distribution on this support meets the privacy "
                f"target (the linear program is infeasible). Widen 'support', or raise 'delta'."
            )
        if status != highspy.HighsModelStatus.kOptimal:
            raise InternalError(
                f"{self._owner}: HiGHS stopped with status {highs.modelStatusToString(status)}."
            )
        values = np.asarray(highs.getSolution().col_value, dtype=np.float64)
        every = np.arange(problem.lo, problem.hi, dtype=np.int64)
        masses = np.stack(
            [values[problem.mass_columns(d, every)] for d in range(problem.distributions)]
        )
        if problem.tail_costs is None:
            tails = np.zeros((problem.distributions, 2))
        else:
            tails = np.stack(
                [values[problem.tail_columns(d)] for d in range(problem.distributions)]
            )
        return Solution(
            masses=np.maximum(masses, 0.0),
            tails=np.maximum(tails, 0.0),
            objective=float(highs.getInfo().objective_function_value),
        )


def solve(problem: Problem, *, max_memory: int, owner: str) -> Solution:
    """Build the LP (CSC, sparse) and solve it once (see :class:`Solver`)."""
    return Solver(problem, max_memory=max_memory, owner=owner).solve()
