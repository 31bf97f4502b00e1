"""Algorithm 1 of Pujol & Desfontaines (2023): Gaussian counts, then data-dependent noise.

For every group ``i`` with count ``x_i``::

    X_i ~ N(x_i, sigma^2),   sigma^2 = 1 / (2 rho)       (Gaussian mechanism)
    Y_i ~ N(X_i, (r X_i)^2)                               (post-processing of X_i)

Proven guarantee: rho-zCDP. Adding or removing one record changes one count by 1,
so the counts have L2 sensitivity 1 and the first stage is the Gaussian mechanism
(Bun & Steinke 2016, Prop. 1.6); the second stage reads only ``X`` and fresh
randomness, so it is post-processing (Bun & Steinke 2016, Lemma 1.8). Whether larger
groups get a *stronger* guarantee is the open problem of the post; see
:mod:`dpkit.groupwise.analysis` for numerical evidence (never used by accounting).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting.events import Event
from dpkit.accounting.guarantees import ZCDP, ApproxDP
from dpkit.groupwise._counts import check_counts
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.mechanisms.gaussian import Gaussian
from dpkit.random import Random, RandomLike

__all__ = ["TwoStageNoise", "two_stage_noise"]


class TwoStageNoise(Mechanism):
    """Per-group counts with Gaussian noise, then Gaussian noise of s.d. ``r |X_i|``.

    Algorithm 1 of Pujol & Desfontaines, "Open problem: better privacy guarantees for
    larger groups" (differentialprivacy.org, 2023).

    Parameters
    ----------
    rho:
        zCDP parameter of the first stage, > 0; ``sigma = 1/sqrt(2 rho)`` (rounded up).
    relative_error:
        ``r >= 0``: the second stage adds ``N(0, (r X_i)^2)`` to the noisy count
        ``X_i``. ``r = 0`` is the plain Gaussian mechanism.

    Privacy
    -------
    ``rho``-zCDP for the whole vector of counts (one record changes one count by 1:
    L2 sensitivity 1; Bun & Steinke 2016, Prop. 1.6; the second stage is
    post-processing, Lemma 1.8). Event: ``GaussianEvent(noise_multiplier=sigma)``.
    No stronger per-group guarantee is proven; :meth:`group_guarantee` returns the
    proven one for every count.

    Accuracy
    --------
    The second stage's scale depends on the data, so no public error bound is
    attached (``Release.error`` is None). For a count ``x``,
    ``E[(Y - x)^2] = sigma^2 + r^2 (x^2 + sigma^2)``; the expected absolute error is
    computed by ``dpkit.groupwise.analysis.expected_absolute_error``.

    Notes
    -----
    ``X_i`` is drawn by :func:`dpkit.noise.gaussian` (exact, released on a grid). The
    second stage is ``Y_i = X_i + r |X_i| Z_i`` with ``Z_i`` a standard normal drawn by
    :func:`dpkit.noise.gaussian` as well; its float arithmetic reads only ``X_i`` and
    fresh noise, so it cannot leak anything beyond ``X_i``.

    Examples
    --------
    >>> import dpkit as dp
    >>> from dpkit.testing import seeded
    >>> mechanism = dp.groupwise.TwoStageNoise(rho=0.005, relative_error=0.3)
    >>> mechanism.sigma
    10.000000000000004
    >>> release = mechanism.release([10_000, 50, 0], rng=seeded(0))
    >>> release.guarantee, release.value.shape
    (ZCDP(rho=0.005), (3,))
    """

    def __init__(self, *, rho: float, relative_error: float) -> None:
        owner = "TwoStageNoise"
        rho = check.check_positive(rho, "rho", owner)
        self.relative_error = check.check_nonnegative(relative_error, "relative_error", owner)
        self.rho = rho
        # sigma = 1/sqrt(2 rho) rounded up: more noise only strengthens the guarantee.
        self._first_stage = Gaussian.calibrate(rho=rho, sensitivity=1.0)
        self.sigma = self._first_stage.sigma

    @property
    def event(self) -> Event:
        return self._first_stage.event

    @property
    def guarantee(self) -> ZCDP | ApproxDP:
        return self._first_stage.guarantee

    def group_guarantee(self, count: int) -> ZCDP:
        """The proven guarantee of a member of a group of size ``count``: ``rho``-zCDP.

        The same for every count (this is all that is proven for Algorithm 1). The
        numerical per-group curve is ``dpkit.groupwise.analysis.effective_rho``,
        which is evidence, not a guarantee.
        """
        check.check_count(count, "count", "TwoStageNoise.group_guarantee", minimum=0)
        return ZCDP(self.rho)

    def release(
        self, value: Any, *, confidence: float = 0.95, rng: RandomLike | None = None
    ) -> Release[Any]:
        """Release noisy per-group counts (non-negative integers, scalar or array).

        ``confidence`` is accepted for the common interface and unused: there is no
        public error bound (see the class docstring).
        """
        return super().release(value, confidence=confidence, rng=rng)

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check_counts(value, "TwoStageNoise.release")

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        stage = self._first_stage  # the Gaussian mechanism, exact and grid-released
        first = np.asarray(
            noise.gaussian(value, sigma=stage.sigma, granularity=stage.granularity, rng=rng),
            dtype=np.float64,
        )
        if self.relative_error == 0.0:
            return first
        # Post-processing of the private X only (Bun & Steinke 2016, Lemma 1.8); the
        # standard normals still come from dpkit.noise, never NumPy's float samplers.
        standard = np.asarray(noise.gaussian(np.zeros_like(first), sigma=1.0, rng=rng))
        return first + self.relative_error * np.abs(first) * standard

    def _repr_fields(self) -> tuple[str, ...]:
        return ("rho", "relative_error")


def two_stage_noise(
    counts: npt.ArrayLike,
    *,
    rho: float,
    relative_error: float,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release per-group counts with Algorithm 1 (``rho``-zCDP); see :class:`TwoStageNoise`."""
    return TwoStageNoise(rho=rho, relative_error=relative_error).release(counts, rng=rng)
