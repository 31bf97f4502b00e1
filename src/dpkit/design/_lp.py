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
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

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
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def width(self) -> int:
        """Columns per distribution: its interval masses, then two tail masses if any."""
        return self.hi - self.lo + (2 if self.tail_costs is not None else 0)

    def slack_count(self) -> int:
        """Number of slack columns (= slack rows) the pair constraints need."""
        c_lo, c_hi = self.central
        total = 0
        for _, _, j in self.pairs:
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

    def add(
        self, rows: IntArray, cols: IntArray, vals: FloatArray, lower: FloatArray, upper: FloatArray
    ) -> None:
        """Add ``len(lower)`` rows; ``rows`` are indices relative to this block."""
        self.rows.append(rows + self.count)
        self.cols.append(cols)
        self.vals.append(vals)
        self.lower.append(lower)
        self.upper.append(upper)
        self.count += lower.size


def _pair_rows(problem: Problem, builder: _Rows, first_slack: int) -> int:
    width, lo, hi = problem.width, problem.lo, problem.hi
    c_lo, c_hi = problem.central
    slack = first_slack
    for d, e, j in problem.pairs:
        inside = np.arange(max(c_lo, lo + j), min(c_hi, hi + j), dtype=np.int64)
        outside = np.setdiff1d(np.arange(c_lo, c_hi, dtype=np.int64), inside)
        n = inside.size
        s_cols = np.arange(slack, slack + n, dtype=np.int64)
        slack += n
        local = np.arange(n, dtype=np.int64)
        # p_d(i) - e^eps p_e(i - j) - s <= 0
        builder.add(
            np.concatenate([local, local, local]),
            np.concatenate([d * width + inside - lo, e * width + inside - j - lo, s_cols]),
            np.concatenate([np.ones(n), np.full(n, -problem.exp_epsilon), -np.ones(n)]),
            np.full(n, -np.inf),
            np.zeros(n),
        )
        # sum of slacks, plus p_d(i) where p_e(i - j) = 0 (outside the support), <= delta
        cols = np.concatenate([s_cols, d * width + outside - lo])
        builder.add(
            np.zeros(cols.size, dtype=np.int64),
            cols,
            np.ones(cols.size),
            np.array([-np.inf]),
            np.array([problem.delta]),
        )
    return slack


def _shape_rows(problem: Problem, builder: _Rows) -> None:
    width, lo, hi = problem.width, problem.lo, problem.hi
    size = hi - lo
    for d in range(problem.distributions):
        base = d * width
        # probabilities sum to one (tails included)
        builder.add(
            np.zeros(width, dtype=np.int64),
            base + np.arange(width),
            np.ones(width),
            np.ones(1),
            np.ones(1),
        )
        pairs: list[tuple[IntArray, IntArray, float, float]] = []
        if problem.symmetric:
            # interval i = [i b, (i+1) b) mirrors interval -1 - i
            left = np.arange(lo, min(0, hi), dtype=np.int64)
            left = left[(-1 - left >= lo) & (-1 - left < hi)]
            pairs.append((left, -1 - left, 0.0, 0.0))
        if problem.monotone:
            right = np.arange(max(0, lo), hi - 1, dtype=np.int64)  # p(i + 1) <= p(i), i >= 0
            pairs.append((right + 1, right, -np.inf, 0.0))
            left = np.arange(lo, min(-1, hi), dtype=np.int64)  # p(i) <= p(i + 1), i + 1 <= -1
            left = left[left + 1 <= -1]
            pairs.append((left, left + 1, -np.inf, 0.0))
        for a, b, low, high in pairs:
            n = a.size
            if n == 0:
                continue
            local = np.arange(n, dtype=np.int64)
            builder.add(
                np.concatenate([local, local]),
                np.concatenate([base + a - lo, base + b - lo]),
                np.concatenate([np.ones(n), -np.ones(n)]),
                np.full(n, low),
                np.full(n, high),
            )
        if problem.symmetric and problem.tail_costs is not None:
            builder.add(
                np.array([0, 0]),
                np.array([base + size, base + size + 1]),
                np.array([1.0, -1.0]),
                np.zeros(1),
                np.zeros(1),
            )
        if problem.instance_costs is not None and problem.instance_limits is not None:
            costs = problem.instance_costs
            builder.add(
                np.zeros(size, dtype=np.int64),
                base + np.arange(size),
                costs,
                np.array([-np.inf]),
                np.array([problem.instance_limits[d]]),
            )


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


def solve(problem: Problem, *, max_memory: int, owner: str) -> Solution:
    """Build the LP (CSC, sparse) and solve it with HiGHS' dual simplex."""
    refuse_if_too_large(problem, max_memory, owner)
    import highspy  # heavy: imported only when a design is solved
    from scipy import sparse

    width = problem.width
    first_slack = problem.distributions * width
    builder = _Rows()
    n_columns = _pair_rows(problem, builder, first_slack)
    _shape_rows(problem, builder)
    costs = np.zeros(n_columns)
    for d in range(problem.distributions):
        block = problem.weights[d] * problem.costs
        costs[d * width : d * width + block.size] = block
        if problem.tail_costs is not None:
            costs[d * width + block.size : (d + 1) * width] = problem.weights[d] * np.asarray(
                problem.tail_costs
            )
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
    lp.col_cost_ = costs
    lp.col_lower_ = np.zeros(n_columns)
    lp.col_upper_ = np.full(n_columns, highspy.kHighsInf)
    lp.row_lower_ = np.maximum(np.concatenate(builder.lower), -highspy.kHighsInf)
    lp.row_upper_ = np.minimum(np.concatenate(builder.upper), highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr.astype(np.int32)
    lp.a_matrix_.index_ = matrix.indices.astype(np.int32)
    lp.a_matrix_.value_ = matrix.data
    highs = highspy.Highs()  # type: ignore[no-untyped-call]
    highs.setOptionValue("output_flag", False)
    # Tight tolerances: the solution is re-checked exactly afterwards, and the
    # re-check must not find violations that a loose tolerance let through.
    highs.setOptionValue("primal_feasibility_tolerance", 1e-10)
    highs.setOptionValue("dual_feasibility_tolerance", 1e-10)
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        raise InvalidParameter(
            f"{owner}: no noise distribution on this support meets the privacy target "
            f"(the linear program is infeasible). Widen 'support', or raise 'delta'."
        )
    if status != highspy.HighsModelStatus.kOptimal:
        raise InternalError(
            f"{owner}: HiGHS stopped with status {highs.modelStatusToString(status)}."
        )
    values = np.asarray(highs.getSolution().col_value, dtype=np.float64)
    size = problem.hi - problem.lo
    blocks = values[:first_slack].reshape(problem.distributions, width)
    tails = (
        blocks[:, size:] if problem.tail_costs is not None else np.zeros((problem.distributions, 2))
    )
    return Solution(
        masses=np.maximum(blocks[:, :size], 0.0),
        tails=np.maximum(tails, 0.0),
        objective=float(highs.getInfo().objective_function_value),
    )
