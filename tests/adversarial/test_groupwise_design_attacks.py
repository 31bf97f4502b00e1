"""Adversarial review of dpkit.groupwise and dpkit.design (issues 18 and 19).

Each test is an attack on a stated guarantee. It passes when dpkit resists; the
attacks that succeeded when written were marked ``xfail(strict=True)`` (the one found is
fixed: ``_OFF_GRID`` below).
Exact arithmetic (``fractions.Fraction``) is used wherever a divergence is compared
with a stated delta, so a pass is a proof for the design tested, not a tolerance.
"""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import math
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import dpkit.groupwise.analysis as analysis
from dpkit import noise
from dpkit.accounting._math.gaussian import gaussian_epsilon
from dpkit.accounting.events import GaussianEvent
from dpkit.accounting.guarantees import ZCDP
from dpkit.design import _core, _exact, design_data_dependent_noise, design_noise
from dpkit.errors import InvalidParameter, WeakGuaranteeWarning
from dpkit.groupwise import BucketedNoise, TwoStageNoise, _quadrature
from dpkit.groupwise import bucketed as bucketed_module
from dpkit.testing import seeded

# ---------------------------------------------------------------------------------
# helpers: the exact hockey-stick divergence of piecewise-uniform noise at ANY real
# shift phi (not only grid shifts). For phi = (j + t) beta, 0 <= t < 1, the shifted
# density on interval i is n(i - j - 1) on a fraction t of it and n(i - j) on the rest,
# so H(phi) = (1 - t) H(j) + t H(j + 1) exactly.
# ---------------------------------------------------------------------------------


def _counts(mechanism: object) -> list[np.ndarray]:
    parts = getattr(mechanism, "_parts", None)
    if parts is None:
        parts = [mechanism._distribution]  # type: ignore[attr-defined]
    return [part.counts for part in parts]


def _divergence_at(
    counts_d: np.ndarray, counts_e: np.ndarray, phi: Fraction, beta: Fraction, e_eps: Fraction
) -> Fraction:
    units = phi / beta
    j = math.floor(units)
    t = units - j
    low = _exact.hockey_stick(counts_d, counts_e, j, e_eps)
    if t == 0:
        return low
    high = _exact.hockey_stick(counts_d, counts_e, j + 1, e_eps)
    return (1 - t) * low + t * high


def _e_eps_upper(epsilon: float) -> Fraction:
    """A rational ABOVE e^epsilon: the attacker's (tighter than dpkit's) view of the
    divergence is then a lower bound on the true one."""
    with decimal.localcontext() as context:
        context.prec = 60
        return Fraction(Decimal(epsilon).exp().next_plus())


# =================================================================================
# dpkit.groupwise.TwoStageNoise
# =================================================================================


def test_two_stage_states_only_the_first_stage_guarantee() -> None:
    m = TwoStageNoise(rho=0.005, relative_error=0.3)
    assert m.guarantee == ZCDP(0.005)
    assert isinstance(m.event, GaussianEvent)
    # sigma rounded up: 1 / (2 sigma^2) <= rho
    assert 1.0 / (2.0 * m.event.noise_multiplier**2) <= 0.005
    for count in (0, 1, 10, 10**6, 2**53):
        assert m.group_guarantee(count) == ZCDP(0.005)


def test_two_stage_output_is_a_function_of_the_first_stage_and_fresh_noise() -> None:
    """Replay the stream: Y must be exactly X + r |X| Z with X the exact grid-released
    Gaussian of the first stage and Z drawn afterwards with no input (post-processing)."""
    m = TwoStageNoise(rho=0.02, relative_error=0.4)
    counts = np.array([0, 1, 7, 10_000, 2**40], dtype=np.float64)
    out = m._sample(counts, seeded(11))
    replay = seeded(11)
    first = np.asarray(
        noise.gaussian(
            counts, sigma=m._first_stage.sigma, granularity=m._first_stage.granularity, rng=replay
        )
    )
    standard = np.asarray(noise.gaussian(np.zeros_like(first), sigma=1.0, rng=replay))
    np.testing.assert_array_equal(out, first + 0.4 * np.abs(first) * standard)
    # the first stage is on its grid: nothing of the input's float bits survives
    step = m._first_stage.granularity
    assert np.all(first / step == np.round(first / step))


def _poison(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("numerical analysis used by accounting")

    for module in (analysis, _quadrature):
        for name in dir(module):
            value = getattr(module, name)
            if callable(value) and getattr(value, "__module__", None) == module.__name__:
                monkeypatch.setattr(module, name, boom)


def test_numerical_analysis_is_never_used_by_accounting(monkeypatch: pytest.MonkeyPatch) -> None:
    _poison(monkeypatch)
    two = TwoStageNoise(rho=0.01, relative_error=0.2)
    bucketed = BucketedNoise(rho=0.01, relative_error=0.2)
    for m in (two, bucketed):
        assert m.event is not None and m.guarantee is not None
        for count in (0, 3, 1000, 10**7):
            m.group_guarantee(count)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seeded generator: insecure warning
            release = m.release(np.array([0, 5, 10**6]), rng=seeded(1))
        assert release.event == m.event
    bucketed.group_rho(500)
    bucketed.expected_absolute_error(500)


# =================================================================================
# dpkit.groupwise.BucketedNoise: the per-group proof, step by step
# =================================================================================


def test_bucketed_level_is_monotone_in_the_size_even_at_level_edges() -> None:
    m = BucketedNoise(rho=0.005, relative_error=0.3, growth=2.0**0.1)
    sizes = [np.linspace(-500.0, 5e6, 20_001)]
    for j in range(1, 120):
        start = float(m.level_sigma(j)) / m._kappa + m.bound + 1.0
        near = [start]
        for _ in range(6):
            near.append(math.nextafter(near[-1], math.inf))
        near2 = [start]
        for _ in range(6):
            near2.append(math.nextafter(near2[-1], -math.inf))
        sizes.append(np.array(near + near2))
    s = np.sort(np.concatenate(sizes))
    levels = m.level(s)
    assert np.all(np.diff(levels) >= 0)
    # accuracy of the chosen level: E|N(0, sigma_j^2)| < r x for every x >= S - A
    above = levels > 0
    error = m.level_sigma(levels[above]) * math.sqrt(2.0 / math.pi)
    assert np.all(error < 0.3 * (s[above] - m.bound))


def test_bucketed_sizes_cannot_leave_the_window_the_proof_assumes() -> None:
    """The proof needs S in [x - 1 - A, x + 1 + A] for x and both neighbours, i.e. the
    size grid must be finer than 1 and the truncation bound respected after rounding."""
    m = BucketedNoise(rho=0.005, relative_error=0.3)
    assert m._bucketing.granularity <= 1.0
    counts = np.array([0, 1, 50, 10**6], dtype=np.float64)
    rng = seeded(5)
    for _ in range(20):
        sizes = np.asarray(
            noise.truncated_laplace(
                np.repeat(counts, 500),
                scale=m._bucketing.scale,
                bound=m._bucketing.bound,
                granularity=m._bucketing.granularity,
                rng=rng,
            )
        )
        x = np.repeat(counts, 500)
        assert np.all(np.abs(sizes - x) <= m.bound + m._bucketing.granularity / 2)


def test_bucketed_every_reachable_level_is_at_least_the_one_the_guarantee_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Worst case of step 1: force the smallest size any neighbour can produce and check
    the Gaussian that is actually drawn is never below sigma_j(x)."""
    m = BucketedNoise(rho=0.005, relative_error=0.3)
    slack = m.bound + m._bucketing.granularity / 2
    used: list[float] = []

    def lowest_size(value: object, **kwargs: object) -> np.ndarray:
        # the neighbour x - 1 with the most negative rounded truncated-Laplace draw
        return np.asarray(value, dtype=np.float64) - 1.0 - slack

    real_gaussian = noise.gaussian

    def recording_gaussian(value: object, *, sigma: float, **kwargs: object) -> object:
        used.append(sigma)
        return real_gaussian(value, sigma=sigma, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bucketed_module.noise, "truncated_laplace", lowest_size)
    monkeypatch.setattr(bucketed_module.noise, "gaussian", recording_gaussian)
    for count in (0, 2, 180, 500, 2_000, 10**5, 10**8):
        used.clear()
        m._sample(np.array([float(count)]), seeded(count % 97))
        claimed = float(m.level_sigma(m.level(count - 2.0 - m.bound)))
        assert used and min(used) >= claimed
        # and the per-group epsilon is computed from (at most) that sigma
        stated = m.group_guarantee(count)
        recomputed = m.size_epsilon + gaussian_epsilon(min(used), m.delta - m.size_delta)
        assert stated.epsilon >= recomputed * (1 - 1e-12)
        assert stated.delta == m.delta


def test_bucketed_group_guarantee_is_non_increasing_and_never_beats_the_global_one() -> None:
    m = BucketedNoise(rho=0.005, relative_error=0.3)
    counts = sorted({*range(0, 3000, 7), *(int(10**k) for k in np.arange(3, 9, 0.05))})
    eps = [m.group_guarantee(c).epsilon for c in counts]
    rho = [m.group_rho(c) for c in counts]
    assert all(a >= b for a, b in itertools.pairwise(eps))
    assert all(a >= b for a, b in itertools.pairwise(rho))
    assert m.group_guarantee(0).epsilon == m.guarantee.epsilon
    assert max(eps) <= m.guarantee.epsilon
    # the per-group delta is delta_1 + delta_2 with delta_1 the bucketing's exact delta
    assert m.size_delta < m.delta
    # the zCDP of the measurement step is >= 1/(2 sigma_j(x)^2)
    for c in (0, 500, 10**6):
        sigma = float(m.level_sigma(m.level(c - 2.0 - m.bound)))
        assert m.group_rho(c) >= 1.0 / (2.0 * sigma * sigma)


@pytest.mark.parametrize(
    ("size_epsilon", "size_delta"), [(0.1, 1e-9), (0.5, 1e-12), (2.0, 1e-7), (0.01, 1e-8)]
)
def test_bucketed_size_delta_is_the_truncated_laplace_delta_rounded_safely(
    size_epsilon: float, size_delta: float
) -> None:
    """delta_1 of step 1, recomputed from the sampled law (scale, bound) at 60 digits:
    (e^(1/b) - 1) / (2 (e^(A/b) - 1)) for sensitivity 1, and epsilon_1 >= 1/b."""
    m = BucketedNoise(
        rho=0.01, relative_error=0.2, size_epsilon=size_epsilon, size_delta=size_delta
    )
    b, a = Decimal(m._bucketing.scale), Decimal(m._bucketing.bound)
    with decimal.localcontext() as context:
        context.prec = 60
        exact = ((1 / b).exp() - 1) / (2 * ((a / b).exp() - 1))
        assert exact <= Decimal(m.size_delta)
        assert Decimal(m.size_epsilon) >= 1 / b
    assert a > 1  # the formula needs a bound above the sensitivity


# =================================================================================
# dpkit.design: the exact re-check
# =================================================================================


@pytest.mark.parametrize("epsilon", [1e-300, 1e-12, 0.1, 1.0, math.log(3.0), 10.0, 700.0])
def test_exp_lower_is_strictly_below_e_to_the_epsilon(epsilon: float) -> None:
    bound = _exact.exp_lower(epsilon)
    with decimal.localcontext() as context:
        context.prec = 100
        # correctly rounded to 100 digits, so one step down is below e^epsilon
        below_truth = Fraction(Decimal(epsilon).exp().next_minus())
    assert bound < below_truth


@pytest.fixture(scope="module")
def quarter_design() -> object:
    return design_noise(
        epsilon=1.0, delta=1e-3, sensitivity=1.0, granularity=0.25, support=8.0, lower_bound=False
    )


def test_design_delta_holds_for_every_real_shift_not_only_grid_shifts(
    quarter_design: object,
) -> None:
    d = quarter_design
    (counts,) = _counts(d)
    beta = Fraction(d.granularity)
    e_eps = _e_eps_upper(d.epsilon)
    rng = np.random.default_rng(0)  # shift positions only, not noise
    shifts = [Fraction(k, 8) for k in range(-8, 9)]
    shifts += [Fraction(float(u)) for u in rng.uniform(-1.0, 1.0, 40)]
    shifts += [Fraction(1), Fraction(-1), Fraction(math.nextafter(1.0, 0.0))]
    worst = max(_divergence_at(counts, counts, phi, beta, e_eps) for phi in shifts)
    assert worst <= Fraction(d.delta)
    assert worst <= Fraction(d.achieved_delta)


_OFF_GRID = (
    "check_grid (and _check_cells) accept sensitivity = k*beta up to 1e-9 relative, but "
    "only the grid shifts |j| <= k are re-checked: the shift |phi| = sensitivity > k*beta "
    "is never checked, and its exact divergence exceeds the stated delta"
)
# accepted by check_grid: |2 beta - 1| = 9.9e-10 <= 1e-9 * sensitivity
_BETA_OFF_GRID = (1.0 - 9.9e-10) / 2.0


def test_design_delta_at_the_sensitivity_itself_when_it_is_not_exactly_k_beta() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakGuaranteeWarning)
            d = design_noise(
                epsilon=1.0,
                delta=1e-5,
                sensitivity=1.0,
                granularity=_BETA_OFF_GRID,
                support=16.0,
                lower_bound=False,
            )
    except InvalidParameter:
        return  # resisted: refusing a granularity that does not divide the sensitivity
    (counts,) = _counts(d)
    e_eps = _e_eps_upper(1.0)
    beta = Fraction(d.granularity)
    # neighbouring answers exactly `sensitivity` apart, both directions
    for phi in (Fraction(d.sensitivity), -Fraction(d.sensitivity)):
        assert _divergence_at(counts, counts, phi, beta, e_eps) <= Fraction(d.delta)
    assert Fraction(d.achieved_delta) >= _divergence_at(
        counts, counts, Fraction(d.sensitivity), beta, e_eps
    )


def test_data_dependent_delta_at_the_sensitivity_when_it_is_not_exactly_k_beta() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakGuaranteeWarning)
            d = design_data_dependent_noise(
                epsilon=1.0,
                delta=1e-5,
                sensitivity=1.0,
                granularity=_BETA_OFF_GRID,
                support=16.0,
                cells=[0.0, 1.0, 3.0],
                lower_bound=False,
            )
    except InvalidParameter:
        return
    counts = _counts(d)
    e_eps = _e_eps_upper(1.0)
    beta = Fraction(d.granularity)
    worst = Fraction(0)
    for a, b in [(0.0, 1.0), (1.0, 0.0), (1.0, 2.0), (2.0, 3.0), (3.0, 2.0)]:
        k, m = int(d.cell_of(a)), int(d.cell_of(b))
        phi = Fraction(b) - Fraction(a)
        worst = max(worst, _divergence_at(counts[k], counts[m], phi, beta, e_eps))
    assert worst <= Fraction(d.delta)


def test_failed_repair_states_a_delta_that_covers_the_released_masses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Make the solver return a non-private (uniform) distribution: the repair fails and
    the design must state at least the exact divergence of what it releases."""
    real_solve = _core._lp.Solver.solve

    def uniform_solve(self: object, *args: object, **kwargs: object) -> object:
        solution = real_solve(self, *args, **kwargs)
        masses = np.ones_like(solution.masses) / solution.masses.shape[1]
        return dataclasses.replace(solution, masses=masses)

    monkeypatch.setattr(_core._lp.Solver, "solve", uniform_solve)
    with pytest.warns(WeakGuaranteeWarning):
        d = design_noise(
            epsilon=1.0,
            delta=1e-2,
            sensitivity=1.0,
            granularity=0.5,
            support=10.0,
            lower_bound=False,
        )
    (counts,) = _counts(d)
    e_eps = _e_eps_upper(1.0)
    worst = max(
        _divergence_at(counts, counts, Fraction(k, 4), Fraction(0.5), e_eps) for k in range(-4, 5)
    )
    assert worst > Fraction(1e-2)  # the attack really broke the target
    assert Fraction(d.delta) >= worst
    assert d.guarantee.delta >= float(worst)


# =================================================================================
# dpkit.design: the sampler
# =================================================================================


def test_design_sampler_picks_intervals_with_the_exact_masses() -> None:
    counts = np.array([1 << 58, 1 << 59, 1 << 58], dtype=np.int64)  # 1/4, 1/2, 1/4
    picks = _exact.choose_intervals(np.cumsum(counts), 40_000, seeded(2))
    frequencies = np.bincount(picks, minlength=3) / 40_000
    assert set(np.unique(picks)) <= {0, 1, 2}
    np.testing.assert_allclose(frequencies, [0.25, 0.5, 0.25], atol=0.015)
    # an interval of zero mass is never picked, even at the cumulative boundaries
    zero = np.array([0, 1 << 59, 0, 1 << 59, 0], dtype=np.int64)
    picks = _exact.choose_intervals(np.cumsum(zero), 20_000, seeded(3))
    assert set(np.unique(picks)) <= {1, 3}


@pytest.mark.parametrize("x", [0.0, 1e-300, 0.1, 1.0 / 3.0, -12345.678901, 2.0**60 + 2048.0])
def test_design_release_is_on_the_grid_and_inside_the_support(
    quarter_design: object, x: float
) -> None:
    """Mironov-style leak: the released float must carry no trace of x beyond the
    rounded real x + X (a multiple of the grid step, within the support)."""
    d = quarter_design
    part = d._distribution
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = np.asarray(d.release(np.full(300, x), rng=seeded(4)).value, dtype=np.float64)
    step = Fraction(part.step)
    lo = Fraction(x) + Fraction(float(part.edges[0])) - step / 2
    hi = Fraction(x) + Fraction(float(part.edges[-1])) + step / 2
    for value in out:
        exact = Fraction(float(value))
        assert (exact / step).denominator == 1
        assert lo <= exact <= hi


def test_design_release_of_neighbours_is_the_same_function_of_the_noise() -> None:
    """Same randomness, inputs x and x + grid: outputs differ by exactly the grid
    multiple (the sampler reads x only through the exact real x + X)."""
    d = design_noise(
        epsilon=1.0, delta=1e-3, sensitivity=1.0, granularity=0.25, support=8.0, lower_bound=False
    )
    part = d._distribution
    a = part.release(np.full(200, 0.3), seeded(9))
    b = part.release(np.full(200, 0.3 + 1.0), seeded(9))
    np.testing.assert_array_equal(b - a, np.ones(200))


# =================================================================================
# dpkit.design: data-dependent designs across cells
# =================================================================================


@pytest.fixture(scope="module")
def cell_design() -> object:
    return design_data_dependent_noise(
        epsilon=1.0,
        delta=1e-3,
        sensitivity=1.0,
        granularity=0.5,
        support=8.0,
        cells=[0.0, 1.0, 2.5, 6.0],
        lower_bound=False,
    )


def test_data_dependent_neighbours_in_any_cells_are_indistinguishable(cell_design: object) -> None:
    """Every pair of answers at distance <= sensitivity, in the same or different cells,
    and outside the range (clamped), against the stated delta, exactly."""
    d = cell_design
    counts = _counts(d)
    beta = Fraction(d.granularity)
    e_eps = _e_eps_upper(d.epsilon)
    ends = [float(c) for c in d.cells]
    answers = [-3.0, -1e-12, 0.0, 0.25, 0.999999, 1.0, 1.3, 2.4999999, 2.5, 3.0, 5.5, 6.0, 6.5]
    answers += [math.nextafter(e, -math.inf) for e in ends] + [
        math.nextafter(e, math.inf) for e in ends
    ]
    rng = np.random.default_rng(1)  # positions only
    answers += [float(u) for u in rng.uniform(-1.0, 7.0, 30)]
    worst = Fraction(0)
    for a in answers:
        for move in [1.0, -1.0, 0.5, -0.5, 1e-9, *rng.uniform(-1.0, 1.0, 4)]:
            b = a + float(move)
            if abs(Fraction(b) - Fraction(a)) > 1:
                continue
            ca, cb = (float(np.clip(v, ends[0], ends[-1])) for v in (a, b))
            k, m = int(d.cell_of(ca)), int(d.cell_of(cb))
            phi = Fraction(cb) - Fraction(ca)
            worst = max(worst, _divergence_at(counts[k], counts[m], phi, beta, e_eps))
    assert worst <= Fraction(d.delta)


def test_data_dependent_clamps_and_assigns_cells_consistently(cell_design: object) -> None:
    d = cell_design
    assert int(d.cell_of(-1e9)) == 0
    assert int(d.cell_of(6.0)) == d.cells.size - 2  # the last cell is closed
    assert int(d.cell_of(1e9)) == d.cells.size - 2
    assert int(d.cell_of(1.0)) == 1 and int(d.cell_of(math.nextafter(1.0, 0.0))) == 0
    # release of an out-of-range answer equals the release of the clamped answer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        far = d.release(np.array([1e12, -1e12]), rng=seeded(6)).value
        near = d.release(np.array([6.0, 0.0]), rng=seeded(6)).value
    np.testing.assert_array_equal(far, near)
