"""Random allocation ("balls and bins") of Gaussian steps in the PLD accountant.

The checks, each with a power check that a wrong computation fails it:

- independent quadrature at t = 2 (mpmath, 1-D) and t = 3 (nested adaptive, 2-D):
  dpkit's delta is never below the exact value and within 0.1% of it (or 2e-15, the
  float guards' mass at +inf);
- Monte Carlo at t = 100: dpkit's delta is never below the lower confidence limit
  (empirical Bernstein, false-failure rate 1e-6 per check) and not far above;
- golden values of the reference implementation RA_PLD (Feldman & Shenfeld 2026);
- the claims that can be checked against other analyses: allocation is no worse than
  one unsubsampled Gaussian step per epoch, and (the paper's numerical claim, in the
  regimes checked here) no worse than Poisson subsampling at rate 1/t.

The quadrature references (``_exact_t2``, ``_exact_t3``) are read from
tests/golden/references/ and recomputed, bit for bit, under ``--runslow``
(tests/_references.py).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special
from tests._references import golden_reference

from dpkit.accounting import (
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    RandomAllocationGaussianEvent,
    RDPAccountant,
    event_from_dict,
    zcdp_rho,
)
from dpkit.accounting._math.pld.hockey import hockey_stick
from dpkit.accounting._math.pld.pmf import LossPmf
from dpkit.accounting._math.pld.random_allocation import (
    AllocationLaw,
    allocation_gaussian_pmfs,
    allocation_law,
)
from dpkit.accounting.calibrate import dpsgd_epsilon
from dpkit.errors import InvalidParameter, UnsupportedEvent

H = 1e-4


# ----------------------------------------------------------------- exact references


def _call(c: np.ndarray, s: float) -> np.ndarray:
    """``E[(Z - c)_+]`` for ``log Z ~ N(-s^2/2, s^2)`` (mean 1), any real ``c``."""
    out = 1.0 - c
    pos = c > 0
    logc = np.log(np.where(pos, c, 1.0))
    d1 = (-logc + 0.5 * s * s) / s
    out = np.where(pos, special.ndtr(d1) - c * special.ndtr(d1 - s), out)
    return out


def _put(c: np.ndarray, s: float) -> np.ndarray:
    """``E[(c - Z)_+]``."""
    pos = c > 0
    logc = np.log(np.where(pos, c, 1.0))
    d1 = (-logc + 0.5 * s * s) / s
    return np.where(pos, c * special.ndtr(-(d1 - s)) - special.ndtr(-d1), 0.0)


@golden_reference
def _exact_t2(sigma: float, eps: float) -> tuple[float, float]:
    """(remove, add) deltas of 1-out-of-2 allocation by 1-D quadrature, 30 digits."""
    # Local precision (mpmath.mp.dps = 30 leaked to later tests): a stored value and a
    # live call must leave the same global state behind.
    with mpmath.workdps(30):
        s = mpmath.mpf(1) / sigma
        mu = -s * s / 2
        g = mpmath.e**eps

        def call(c: mpmath.mpf) -> mpmath.mpf:
            if c <= 0:
                return 1 - c
            d1 = (-mpmath.log(c) + s * s / 2) / s
            return mpmath.ncdf(d1) - c * mpmath.ncdf(d1 - s)

        def put(c: mpmath.mpf) -> mpmath.mpf:
            if c <= 0:
                return mpmath.mpf(0)
            d1 = (-mpmath.log(c) + s * s / 2) / s
            return c * mpmath.ncdf(-(d1 - s)) - mpmath.ncdf(-d1)

        def dens(y: mpmath.mpf) -> mpmath.mpf:
            return mpmath.npdf(y, mu, s)

        ends = [mu - 14 * s, mu + 14 * s]
        rem = mpmath.quad(
            lambda y: dens(y) * call(2 * g - mpmath.e**y), sorted([*ends, mpmath.log(2 * g)])
        )
        add = mpmath.quad(
            lambda y: dens(y) * put(2 / g - mpmath.e**y), sorted([*ends, mpmath.log(2 / g)])
        )
        return float(rem / 2), float(g / 2 * add)


@golden_reference
def _exact_t3(sigma: float, eps: float) -> tuple[float, float]:
    """(remove, add) deltas of 1-out-of-3 allocation: nested adaptive quadrature in log Z.

    Given ``Z_1``, ``E[(Z_2 + Z_3 - c)_+]`` is one more integral of the closed form
    ``E[(Z - c)_+]``; each level is split where the hinge's argument changes sign.
    (A 600-point tensor Gauss-Legendre rule was off by 7e-4 relative at eps = 3.)
    """
    s = 1.0 / sigma
    mu = -0.5 * s * s
    g = math.exp(eps)
    lo, hi = mu - 14 * s, mu + 14 * s

    def dens(y: float) -> float:
        return math.exp(-0.5 * ((y - mu) / s) ** 2) / (s * math.sqrt(2 * math.pi))

    def integral(f: Callable[[float], float], kink: float) -> float:
        points = [math.log(kink)] if kink > 0 and lo < math.log(kink) < hi else None
        return float(
            integrate.quad(f, lo, hi, points=points, epsabs=0.0, epsrel=1e-13, limit=500)[0]
        )

    def one(hinge: Callable[[np.ndarray, float], np.ndarray], total: float) -> float:
        def inner(y1: float) -> float:
            c = total - math.exp(y1)

            def f(y2: float) -> float:
                return dens(y2) * float(hinge(np.array(c - math.exp(y2)), s))

            return dens(y1) * integral(f, c)

        return integral(inner, total)

    return one(_call, 3 * g) / 3, g / 3 * one(_put, 3 / g)


def _law_deltas(law: AllocationLaw, steps: int, eps: float) -> tuple[float, float]:
    """(remove, add) deltas straight from the law of S (module docstring formulas)."""
    s = law.support * math.exp(law.shift)
    g = math.exp(eps)
    rem = float(np.sum(law.masses * np.maximum(s / steps - g, 0.0))) + law.excess / steps
    add = float(
        np.sum(law.masses * np.maximum(1.0 - g * law.support / steps * math.exp(-law.shift), 0.0))
    )
    return rem, add + law.zero


# ----------------------------------------------------------------- (b) quadrature

_EPS = (0.0, 0.5, 1.0, 2.0, 3.0)


def _check_against(
    exact: Callable[[float, float], tuple[float, float]],
    sigma: float,
    steps: int,
    eps_list: tuple[float, ...] = _EPS,
) -> None:
    remove, add = allocation_gaussian_pmfs(sigma, steps, H)
    for eps in eps_list:
        rem_true, add_true = exact(sigma, eps)
        for pmf, true in ((remove, rem_true), (add, add_true)):
            got = hockey_stick(pmf, eps)
            assert got >= true * (1.0 - 1e-9), (sigma, steps, eps)
            assert got <= true * 1.001 + 2e-15, (sigma, steps, eps, got, true)


@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0])
def test_two_steps_match_quadrature(sigma: float) -> None:
    _check_against(_exact_t2, sigma, 2)


@pytest.mark.parametrize("sigma", [0.8, 1.5])
def test_three_steps_match_quadrature(sigma: float) -> None:
    _check_against(_exact_t3, sigma, 3, (0.0, 1.0, 3.0))


def test_one_step_is_the_gaussian() -> None:
    # 1-out-of-1 allocation is the Gaussian mechanism itself.
    remove, add = allocation_gaussian_pmfs(1.0, 1, H)
    gauss = PLDAccountant().compose(GaussianEvent(1.0))
    for eps in (0.0, 1.0, 3.0):
        exact = gauss.get_delta(eps)
        for pmf in (remove, add):
            assert exact * (1 - 1e-4) <= hockey_stick(pmf, eps) <= exact * (1 + 1e-4)


def test_quadrature_check_has_power() -> None:
    # (e) Rounding S down by one grid step, or using t - 1 or t + 1 terms, fails.
    sigma, eps_list = 1.0, (0.5, 1.0, 2.0)
    law = allocation_law(sigma, 3)
    down = AllocationLaw(law.a, law.lo - 1, law.masses, law.zero, law.excess, law.shift)
    exact = [_exact_t3(sigma, eps) for eps in eps_list]
    right = [_law_deltas(law, 3, eps) for eps in eps_list]
    wrong = [_law_deltas(down, 3, eps) for eps in eps_list]
    pairs = list(zip(eps_list, exact, strict=True))
    ok = zip(right, exact, strict=True)
    assert all(r[0] >= e[0] and r[1] >= e[1] * (1 - 1e-9) for r, e in ok)
    assert any(w[0] < e[0] for w, e in zip(wrong, exact, strict=True))
    fewer = allocation_gaussian_pmfs(sigma, 2, H)[0]
    more = allocation_gaussian_pmfs(sigma, 4, H)[0]
    assert any(hockey_stick(fewer, eps) > 1.01 * e[0] for eps, e in pairs)
    assert any(hockey_stick(more, eps) < e[0] for eps, e in pairs)


# ----------------------------------------------------------------- (c) Monte Carlo


def _bernstein(x: np.ndarray, alpha: float) -> tuple[float, float]:
    """Two-sided empirical Bernstein interval for a mean of [0, 1] variables.

    Maurer & Pontil 2009, Thm 4, each side at ``alpha / 2``.
    """
    n = x.size
    log_term = math.log(4.0 / alpha)
    var = float(np.var(x, ddof=1))
    width = math.sqrt(2.0 * var * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
    mean = float(np.mean(x))
    return mean - width, mean + width


def _sample_s(sigma: float, steps: int, n: int, tilted: bool, seed: int) -> np.ndarray:
    """``S = sum_i Z_i`` under Q, or under P (one coordinate tilted)."""
    gen = np.random.Generator(np.random.PCG64(seed))
    s = 1.0 / sigma
    total = np.zeros(n)
    for _ in range(steps):
        total += np.exp(gen.normal(-0.5 * s * s, s, n))
    if tilted:  # replace one Q-coordinate by the P one: log-mean +s^2/2
        total += np.exp(gen.normal(0.5 * s * s, s, n)) - np.exp(gen.normal(-0.5 * s * s, s, n))
    return total


@functools.cache
def _mc_samples(sigma: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The draws of ``S`` under P and under Q (fixed seeds), read-only.

    They do not depend on eps: the cases at two epsilons of one sigma share them
    (2 x 200,000 x ~100 log-normals per case).
    """
    n = 200_000
    s_p = _sample_s(sigma, steps, n, tilted=True, seed=20260225)
    s_q = _sample_s(sigma, steps, n, tilted=False, seed=20260226)
    s_p.setflags(write=False)
    s_q.setflags(write=False)
    return s_p, s_q


@functools.cache
def _mc_pmfs(sigma: float, steps: int) -> tuple[LossPmf, LossPmf]:
    """dpkit's (remove, add) PLDs of 1-out-of-``steps`` allocation, shared by the
    cases at two epsilons of one sigma (a LossPmf is immutable)."""
    return allocation_gaussian_pmfs(sigma, steps, H)


def _mc_deltas(
    sigma: float, steps: int, eps: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    g = math.exp(eps)
    # remove: E_P[(1 - g t / S)_+] (bounded in [0, 1]); add: E_Q[(1 - g S / t)_+].
    s_p, s_q = _mc_samples(sigma, steps)
    rem = np.maximum(1.0 - g * steps / np.maximum(s_p, 1e-300), 0.0)
    add = np.maximum(1.0 - g * s_q / steps, 0.0)
    return _bernstein(rem, 1e-6), _bernstein(add, 1e-6)


@pytest.mark.parametrize(("sigma", "eps"), [(1.0, 0.05), (1.0, 0.1), (0.7, 0.2), (0.7, 0.3)])
def test_monte_carlo_at_one_hundred_steps(sigma: float, eps: float) -> None:
    steps = 100
    (rem_lo, rem_hi), (add_lo, add_hi) = _mc_deltas(sigma, steps, eps)
    remove, add = _mc_pmfs(sigma, steps)
    d_rem, d_add = hockey_stick(remove, eps), hockey_stick(add, eps)
    assert d_rem >= rem_lo and d_add >= add_lo  # never optimistic
    # Tight: at most the upper confidence limit plus 1% (the grids' error is ~1e-4).
    assert d_rem <= 1.01 * rem_hi and d_add <= 1.01 * add_hi
    # Power: analysing 1-out-of-200 (twice the amplification) is caught as optimistic.
    wrong_remove, _ = _mc_pmfs(sigma, 2 * steps)
    assert hockey_stick(wrong_remove, eps) < rem_lo


# ----------------------------------------------------------------- (a) golden values

# RA_PLD (github.com/moshenfeld/RA_PLD at 139082d, the code of Feldman & Shenfeld
# 2026), gaussian_allocation_epsilon_extended with loss_discretization 1e-2 and
# tail_truncation 1e-12, both bound types: (sigma, t, k, epochs, delta, lower, upper).
_RA_PLD = [
    (1.0, 1000, 1, 1, 1e-5, 0.13625821489738718, 0.14150833407108393),
    (1.0, 100, 1, 1, 1e-5, 0.6184586982026282, 0.6234333988484101),
    (3.0, 100, 10, 1, 1e-6, 1.4820861992363292, 1.5020517001663873),  # RA_PLD's example
    (0.8, 100, 1, 1, 1e-5, 1.3717347499366206, 1.3761102405885821),
    (2.0, 1000, 1, 1, 1e-8, 0.07102005147326486, 0.07953297357698029),
    (1.0, 100, 1, 10, 1e-5, 1.691549926159387, 1.7114544677290664),
]


@functools.lru_cache(maxsize=1)
def _allocation_accountant(sigma: float, t: int, k: int, epochs: int) -> PLDAccountant:
    """``epochs`` epochs of k-out-of-t allocation (only queried, never composed onto);
    the last one is kept for a test that reads it at a second delta."""
    return PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, t, k), count=epochs)


@functools.cache
def _allocation_epsilon(sigma: float, t: int, k: int, epochs: int, delta: float) -> float:
    """The PLD accountant's epsilon of ``epochs`` epochs of k-out-of-t allocation, once
    per process: the golden rows, the comparisons and the dpsgd_epsilon check below
    read several of the same ones (each composition and query takes ~1 s)."""
    return _allocation_accountant(sigma, t, k, epochs).get_epsilon(delta)


@pytest.mark.parametrize(("sigma", "t", "k", "epochs", "delta", "lower", "upper"), _RA_PLD)
def test_golden_values_of_ra_pld(
    sigma: float, t: int, k: int, epochs: int, delta: float, lower: float, upper: float
) -> None:
    eps = _allocation_epsilon(sigma, t, k, epochs, delta)
    assert lower <= eps <= upper  # never below RA_PLD's certified lower bound
    # Power: twice or half the steps per epoch (k = 1) leaves the interval.
    if k == 1:
        more = _allocation_epsilon(sigma, 2 * t, 1, epochs, delta)
        fewer = _allocation_epsilon(sigma, t // 2, 1, epochs, delta)
        assert more < lower and fewer > upper


# ----------------------------------------------------------------- (d) comparisons


@functools.cache
def _gaussian_epsilon(sigma: float, epochs: int, delta: float) -> float:
    """One unsubsampled Gaussian step per epoch: the same for both ``steps`` below."""
    return PLDAccountant().compose(GaussianEvent(sigma), count=epochs).get_epsilon(delta)


@pytest.mark.parametrize("sigma", [0.8, 1.0, 2.0])
@pytest.mark.parametrize("steps", [100, 1000])
@pytest.mark.parametrize("epochs", [1, 10])
def test_no_worse_than_poisson_or_one_gaussian(sigma: float, steps: int, epochs: int) -> None:
    poisson = PLDAccountant().compose(
        PoissonSampledEvent(GaussianEvent(sigma), 1.0 / steps), count=steps * epochs
    )
    for delta in (1e-5, 1e-8):
        eps = _allocation_epsilon(sigma, steps, 1, epochs, delta)
        assert eps <= poisson.get_epsilon(delta)
        assert eps <= _gaussian_epsilon(sigma, epochs, delta)


def test_k_out_of_t_sits_between_its_bounds() -> None:
    # k = 10 of t = 100: at most 10 epochs of 1-out-of-10 (Claim 2 with r = 0), and at
    # least one 1-out-of-100 epoch (using a record more often never helps).
    sigma, delta = 3.0, 1e-6
    k_of_t = _allocation_epsilon(sigma, 100, 10, 1, delta)
    blocks = _allocation_epsilon(sigma, 10, 1, 10, delta)
    assert k_of_t == pytest.approx(blocks, rel=1e-9)
    single = _allocation_epsilon(sigma, 100, 1, 1, delta)
    assert single < k_of_t
    # Uneven blocks: 3 of 10 is 2 blocks of 3 and 1 of 4.
    uneven = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 10, 3))
    parts = PLDAccountant().compose(RandomAllocationGaussianEvent(sigma, 3), count=2)
    parts.compose(RandomAllocationGaussianEvent(sigma, 4))
    assert uneven.get_epsilon(delta) == pytest.approx(parts.get_epsilon(delta), rel=1e-6)


def test_dpsgd_epsilon_with_allocation() -> None:
    kwargs = {"sampling_probability": 0.01, "noise_multiplier": 1.0, "delta": 1e-5}
    alloc = dpsgd_epsilon(steps=1000, accountant="pld", sampler="allocation", **kwargs)
    assert alloc == _allocation_epsilon(1.0, 100, 1, 10, 1e-5)
    # A partial last epoch is counted as a whole one.
    assert dpsgd_epsilon(steps=950, accountant="pld", sampler="allocation", **kwargs) == alloc
    assert alloc <= dpsgd_epsilon(steps=1000, accountant="pld", **kwargs)


# ----------------------------------------------------------------- (f) bad input


@pytest.mark.parametrize(
    "args",
    [
        (float("nan"), 10),
        (float("inf"), 10),
        (0.0, 10),
        (-1.0, 10),
        (True, 10),
        (1.0, 0),
        (1.0, -3),
        (1.0, 2.5),
        (1.0, True),
        (1.0, 10, 0),
        (1.0, 10, 11),
    ],
    ids=["nan", "inf", "zero", "negative", "bool", "t0", "t-neg", "t-float", "t-bool", "k0", "k>t"],
)
def test_bad_input_is_refused(args: tuple[float, ...]) -> None:
    with pytest.raises(InvalidParameter):
        RandomAllocationGaussianEvent(*args)  # type: ignore[arg-type]


def test_too_small_a_noise_multiplier_is_refused_clearly() -> None:
    with pytest.raises(InvalidParameter, match=r"noise multiplier of at least 0\.2"):
        PLDAccountant().compose(RandomAllocationGaussianEvent(0.1, 100))


def test_other_relations_and_accountants_refuse() -> None:
    event = RandomAllocationGaussianEvent(1.0, 100)
    replace = PLDAccountant(relation="replace")
    assert not replace.supports(event)
    with pytest.raises(UnsupportedEvent):
        replace.compose(event)
    assert event_from_dict(event.to_dict()) == event
    # Elsewhere the event costs one Gaussian step per allocation (its zCDP bound).
    assert zcdp_rho(RandomAllocationGaussianEvent(2.0, 100, 3)) == 3 / 8
    rdp = RDPAccountant().compose(event, count=10).get_epsilon(1e-5)
    assert rdp >= PLDAccountant().compose(event, count=10).get_epsilon(1e-5)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sampler": "shuffle", "accountant": "pld"}, "sampler"),
        ({"sampler": "allocation", "accountant": "rdp"}, "accountant"),
        (
            {"sampler": "allocation", "accountant": "pld", "sampling_probability": 0.003},
            "sampling_probability",
        ),
    ],
)
def test_dpsgd_sampler_validation(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {
        "sampling_probability": 0.01,
        "noise_multiplier": 1.0,
        "steps": 10,
        "delta": 1e-5,
    }
    args.update(kwargs)
    with pytest.raises(InvalidParameter, match=name):
        dpsgd_epsilon(**args)  # type: ignore[arg-type]


def test_cli_sampler_allocation() -> None:
    import json

    from typer.testing import CliRunner

    from dpkit.cli.main import app

    runner = CliRunner()
    common = ["account", "dpsgd", "--noise-multiplier", "1.0", "--delta", "1e-5"]
    schedule = ["--sampling-rate", "0.01", "--steps", "1000", "--accountant", "pld"]
    result = runner.invoke(app, [*common, *schedule, "--sampler", "allocation", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["sampler"] == "allocation" and payload["epochs"] == 10
    assert payload["epsilon"] == dpsgd_epsilon(
        sampling_probability=0.01,
        noise_multiplier=1.0,
        steps=1000,
        delta=1e-5,
        accountant="pld",
        sampler="allocation",
    )
    # Opacus's vocabulary: ceil(N / B) = 235 batches per epoch.
    opacus = ["--epochs", "3", "--batch-size", "256", "--dataset-size", "60000"]
    result = runner.invoke(
        app, [*common, *opacus, "--accountant", "pld", "--sampler", "allocation", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload_opacus = json.loads(result.output)
    assert payload_opacus["batches_per_epoch"] == 235 and payload_opacus["epochs"] == 3
    # The default stays Poisson; allocation refuses what it cannot analyse.
    poisson = runner.invoke(app, [*common, *schedule, "--json"])
    assert json.loads(poisson.output)["epsilon"] > payload["epsilon"]
    for extra in (["--accountant", "rdp"], ["--sampler", "shuffle"], ["--fpr", "0.01"]):
        bad = runner.invoke(app, [*common, *schedule, "--sampler", "allocation", *extra])
        if extra[0] == "--sampler":
            bad = runner.invoke(app, [*common, *schedule, *extra])
        assert bad.exit_code == 2, (extra, bad.output)


@settings(max_examples=12, deadline=None)
@given(
    sigma=st.floats(0.5, 5.0),
    steps=st.integers(1, 400),
    eps=st.floats(-1.0, 4.0),
)
def test_never_worse_than_one_gaussian_step(sigma: float, steps: int, eps: float) -> None:
    # A theorem (joint convexity: the pair is a mixture of one-coordinate Gaussian
    # pairs), so it must hold for the computed PLDs too, both orders, every eps.
    remove, add = allocation_gaussian_pmfs(sigma, steps, H)
    gaussian = PLDAccountant().compose(GaussianEvent(sigma)).get_delta(eps) if eps >= 0 else None
    for pmf in (remove, add):
        delta = hockey_stick(pmf, eps)
        assert 0.0 <= delta <= 1.0 + 1e-9
        if gaussian is not None:
            assert delta <= gaussian * (1 + 1e-3) + 1e-15
