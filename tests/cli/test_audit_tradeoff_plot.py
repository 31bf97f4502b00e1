"""The hypothesis-testing panel of ``dpkit audit --plot``: the claimed trade-off curve."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.tradeoff import approx_dp_tradeoff
from dpkit.audit import audit


def _laplace(scale: float) -> Any:
    def mechanism(x: Any, n: int, rng: dp.Random) -> Any:
        return dp.noise.laplace(np.full(n, float(x)), scale=scale, rng=rng)

    return mechanism


@pytest.mark.parametrize(("scale", "refuted"), [(1.0, False), (0.4, True)])
def test_corner_below_the_claimed_curve_iff_refuted(scale: float, refuted: bool) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from dpkit.cli.audit import _draw_tradeoff

    # Laplace with scale 1 is 1-DP; scale 0.4 is 2.5-DP, and a claim of 1 is refuted.
    result = audit(_laplace(scale), 0.0, 1.0, samples=40_000, rng=11)
    assert result.refutes(1.0) is refuted
    ax = Figure().subplots()
    _draw_tradeoff(ax, result, 1.0)
    curve = next(line for line in ax.get_lines() if line.get_label().startswith("claimed"))
    alphas, values = (np.asarray(v, dtype=float) for v in curve.get_data())
    np.testing.assert_array_equal(values, approx_dp_tradeoff(alphas, epsilon=1.0, delta=0.0))
    # The refuting evidence is the conservative corner lying below the claimed curve.
    f_at_corner = approx_dp_tradeoff(result.fpr_upper, epsilon=1.0, delta=0.0)[0]
    assert bool(result.fnr_upper < f_at_corner) is refuted


def test_plot_has_both_panels(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    from dpkit.cli.audit import plot_audit

    result = audit(_laplace(1.0), 0.0, 1.0, samples=4_000, keep_outputs=True, rng=3)
    path = tmp_path / "audit.png"
    plot_audit(result, path, claimed_epsilon=1.0)
    assert path.stat().st_size > 10_000
