"""The ``noise=`` option of dpkit.learn models: one scalar statistic, one noise.

A model that releases many scalar statistics (naive Bayes: a count, sums and sums of
squares per class; coordinate descent: one gradient sum per update) splits its
(epsilon, delta) budget over them by basic composition (Dwork et al. 2006; Dwork &
Roth 2014, Thm 3.16) and gives each statistic one of these noises, calibrated to its
own share ``(epsilon_i, delta_i)`` and its sensitivity ``s_i``:

``"laplace"``            Laplace, scale ``s_i / epsilon_i`` (epsilon_i-DP).
``"gaussian"``           Gaussian, the analytic calibration of Balle & Wang (2018).
``"truncated_laplace"``  Laplace truncated to ``[-A, A]`` (Geng, Ding, Guo & Kumar 2020),
                         exactly (epsilon_i, delta_i)-DP.
``"optimal"``            the noise of :func:`dpkit.design.design_noise` for
                         ``(epsilon_i, delta_i)``: a mixture of uniforms with the smallest
                         expected squared error among (epsilon_i, delta_i)-DP additive
                         noises on its grid (Selvi, Liu & Wiesemann, arXiv 2304.12681).
a ``NoiseDesign``        the user's own design (any sensitivity: statistics are scaled
                         to it), used for every statistic.

Scaling: a design made for sensitivity ``sigma`` releases a statistic ``v`` of
sensitivity ``s_i`` as ``F * (v / F + X)`` with ``F >= s_i (1 + 2^-20) / sigma``. Every
statistic of dpkit.learn has ``|v| <= n s_i < 2^26 s_i`` (``n < MAX_ROWS`` rows, each
moving it by at most ``s_i``), so ``|v / F| < 2^26 sigma`` and each float quotient is
within half an ulp, ``2^-27 sigma``, of the exact one. Two neighbours' quotients then
differ by at most ``sigma (1 - 2^-20 + 2^-40) + 2^-26 sigma <= sigma``: the scaled
statistic has the design's sensitivity. Multiplying back by ``F`` is post-processing.

Loss of ``"optimal"``: squared error (``"l2"``). The statistics enter the models through
averages (means, variances, gradient means) whose accuracy is their mean squared error,
and the bias-variance arguments of coordinate descent (Mangold et al. 2022) are about
the noise's second moment; the l1-optimal noise trades variance for a smaller mean
absolute error, which neither model uses. The design is constrained to be symmetric:
for a symmetric loss that costs nothing (the mirror image of an optimum is one, and so
is their average) and makes the noise unbiased (without it, the LP's optimum at
epsilon_i = 0.009 had mean 0.4 units of sensitivity).

Grid rule of ``"optimal"`` (public parameters only): with ``A = ln(1 + (e^eps - 1) /
(2 delta)) / eps`` the truncated-Laplace support in units of the sensitivity, the
design's support is ``W = max(1.5 A, 2)`` units -- the optimal noise measured here
never uses more than ``A`` -- and its interval width is ``1 / k`` units with ``k =
clip(floor(200 / W), 1, 20)``: at most about 400 intervals (an LP of about a second)
unless ``W > 200`` (epsilon_i below about 0.02), where one interval per unit gives
``2 W`` intervals (about 2,800, a second, at epsilon_i = 0.002). The unit (the design's
sensitivity) is the power of two nearest ``1 / W``, so the LP's support and costs are of
order 1 (HiGHS fails on the same LP with squared costs near 10^6). Designs are cached
per ``(epsilon_i, delta_i)``, so a fit (and repeated fits) never solve the same LP twice.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import up
from dpkit.accounting.events import ApproxEvent, Event
from dpkit.errors import InternalError, InvalidParameter
from dpkit.learn._base import FloatArray, laplace_for
from dpkit.random import Random

if TYPE_CHECKING:
    from dpkit.design import NoiseDesign

#: The named noises.
NOISE_NAMES = ("laplace", "gaussian", "truncated_laplace", "optimal")
#: Loss the "optimal" designs minimise (see the module docstring for why).
OPTIMAL_LOSS = "l2"
#: Relative margin of the scale factor S over a statistic's sensitivity (see above).
SCALE_MARGIN = 2.0**-20
#: Most intervals an automatic design aims for (the LP then solves in about a second).
_DESIGN_INTERVALS = 400


def check_noise(choice: Any, delta: Any, owner: str) -> tuple[str | NoiseDesign, float]:
    """The validated ``noise`` (a name or a NoiseDesign) and ``delta`` (0 allowed only for
    Laplace noise, which ignores it)."""
    from dpkit.design import NoiseDesign  # the LP layer loads only when used

    if isinstance(choice, NoiseDesign):
        kind: str | NoiseDesign = choice
    elif isinstance(choice, str) and choice in NOISE_NAMES:
        kind = choice
    else:
        raise InvalidParameter.for_parameter(
            "noise", owner, f"one of {NOISE_NAMES} or a dpkit.design.NoiseDesign", choice
        )
    dlt = check.check_delta(delta, owner, allow_zero=True)
    if kind != "laplace" and dlt == 0.0:
        raise InvalidParameter(
            f"The 'delta' parameter of {owner} must be a float in (0, 1) for "
            f"noise={_name(kind)!r}: that noise is (epsilon, delta)-DP, never pure. Got "
            f"{delta!r} instead. Use noise='laplace' for pure epsilon-DP."
        )
    return kind, dlt


def _name(kind: str | NoiseDesign) -> str:
    return kind if isinstance(kind, str) else "NoiseDesign"


@dataclass(frozen=True)
class ScalarNoise:
    """Noise for statistics of sensitivity ``sensitivity`` at ``(epsilon, delta)`` each.

    ``event`` is the event of ONE scalar release; ``standard_deviation`` is the noise's,
    in units of the statistic (public: it depends on the parameters only).
    """

    sensitivity: float
    epsilon: float
    delta: float
    event: Event
    standard_deviation: float
    _draw: Callable[[FloatArray, Random], FloatArray]

    def release(self, values: FloatArray, rng: Random) -> FloatArray:
        """Each entry of ``values`` plus independent noise."""
        return self._draw(np.asarray(values, dtype=np.float64), rng)


def scalar_noise(
    kind: str | NoiseDesign, *, epsilon: float, delta: float, sensitivity: float, owner: str
) -> ScalarNoise:
    """The noise ``kind`` calibrated to one statistic's share ``(epsilon, delta)``.

    Raises :class:`InvalidParameter` when a user's design spends more than the share.
    Nothing is drawn here: models build every noise first, then release.
    """
    if kind == "laplace":
        scale, event = laplace_for(sensitivity, epsilon)
        return ScalarNoise(
            sensitivity,
            epsilon,
            0.0,
            event,
            math.sqrt(2.0) * scale,
            lambda v, rng: _as_array(noise.laplace(v, scale=scale, rng=rng)),
        )
    if kind == "gaussian":
        from dpkit.mechanisms import Gaussian

        gaussian = Gaussian.calibrate(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        sigma = gaussian.sigma
        return ScalarNoise(
            sensitivity,
            epsilon,
            delta,
            # Balle & Wang's calibration: N(0, sigma^2) on sensitivity s is (eps, delta)-DP
            gaussian.event,
            sigma,
            lambda v, rng: _as_array(noise.gaussian(v, sigma=sigma, rng=rng)),
        )
    if kind == "truncated_laplace":
        from dpkit.mechanisms import TruncatedLaplace

        truncated = TruncatedLaplace.calibrate(
            epsilon=epsilon, delta=delta, sensitivity=sensitivity
        )
        deviation = _deviation(truncated)
        return ScalarNoise(
            sensitivity,
            epsilon,
            delta,
            truncated.event,
            deviation,
            lambda v, rng: _as_array(truncated.release(v, rng=rng).value),
        )
    design = optimal_design(epsilon, delta) if kind == "optimal" else kind
    assert not isinstance(design, str)  # the names are handled above
    if design.epsilon > epsilon or design.delta > delta:
        raise InvalidParameter.for_parameter(
            "noise",
            owner,
            f"a NoiseDesign with epsilon <= {epsilon!r} and delta <= {delta!r} (the share "
            "of the budget of each statistic: see the model's statistic_budgets)",
            design,
        )
    # F >= s (1 + 2^-20) / sigma, rounded up: the scaled statistic has sensitivity
    # <= sigma, the design's (module docstring)
    factor = up(sensitivity * (1.0 + SCALE_MARGIN) / design.sensitivity, 4)
    deviation = factor * _deviation(design)

    def draw(values: FloatArray, rng: Random) -> FloatArray:
        released = _as_array(design.release(values / factor, parallel=True, rng=rng).value)
        return factor * released

    return ScalarNoise(
        sensitivity,
        epsilon,
        delta,
        ApproxEvent(design.epsilon, design.delta),
        deviation,
        draw,
    )


def _deviation(mechanism: Any) -> float:
    bound = mechanism.error(0.95)
    if bound is None:  # pragma: no cover - both mechanisms report their accuracy
        raise InternalError("a noise with no error bound; this is a bug, please report it")
    return float(bound.standard_deviation)


def _as_array(value: Any) -> FloatArray:
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def design_grid(epsilon: float, delta: float) -> tuple[float, float, float]:
    """``(sensitivity, granularity, support)`` of the automatic design (module docstring)."""
    bound = math.log1p(math.expm1(epsilon) / (2.0 * delta)) / epsilon
    units = max(1.5 * bound, 2.0)
    per_unit = min(20, max(1, math.floor(_DESIGN_INTERVALS / 2 / units)))
    unit = math.ldexp(1.0, -round(math.log2(units)))
    return unit, unit / per_unit, units * unit


@functools.lru_cache(maxsize=128)
def optimal_design(epsilon: float, delta: float) -> NoiseDesign:
    """The l2-optimal (epsilon, delta)-DP noise on the grid of :func:`design_grid` (cached)."""
    from dpkit.design import design_noise

    sensitivity, granularity, support = design_grid(epsilon, delta)
    return design_noise(
        epsilon=epsilon,
        delta=delta,
        sensitivity=sensitivity,
        loss=OPTIMAL_LOSS,
        granularity=granularity,
        support=support,
        # Symmetric costs nothing for a symmetric loss (mirror an optimum and average:
        # still feasible, by convexity of the DP constraints and symmetry of the shift
        # set), and a zero-mean noise adds no bias to the statistics.
        symmetric=True,
        lower_bound=False,
    )
