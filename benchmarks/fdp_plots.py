"""Figures for docs/accounting-fdp.md: trade-off curves and the audit's f-DP panel.

* ``benchmarks/results/fdp_tradeoff.png`` -- DP-SGD (q = 0.01, noise multiplier 1)
  after 100, 1000 and 10000 steps: the certified lower bound on the trade-off curve
  from the PLD accountant (``dpkit.accounting.tradeoff_curve``) next to the curve
  implied by its single (epsilon, 1e-5) statement, and the 1-GDP curve for scale.
* ``benchmarks/results/audit_tradeoff.png`` -- ``dpkit audit --plot`` on a planted
  bug: Laplace noise of scale 0.4 claimed to be 1-DP (it is 2.5-DP).

Run ``python benchmarks/fdp_plots.py`` (about 10 s).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import dpkit as dp
from dpkit.accounting import (
    GaussianEvent,
    PoissonSampledEvent,
    approx_dp_tradeoff,
    gaussian_tradeoff,
    tradeoff_curve,
)
from dpkit.accounting.pld import PLDAccountant
from dpkit.audit import audit
from dpkit.cli.audit import plot_audit

RESULTS = Path(__file__).parent / "results"


def tradeoff_figure(path: Path) -> None:
    from matplotlib.figure import Figure

    alphas = np.concatenate([np.geomspace(1e-5, 0.01, 60), np.linspace(0.01, 1.0, 200)])
    fig = Figure(figsize=(6.4, 5.0), layout="constrained")
    ax = fig.subplots()
    step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    for steps, colour in ((100, "#4e79a7"), (1000, "#f28e2b"), (10_000, "#e15759")):
        accountant = PLDAccountant().compose(step, count=steps)
        curve = tradeoff_curve(accountant, alphas)
        eps = accountant.get_epsilon(1e-5)
        single = approx_dp_tradeoff(alphas, epsilon=eps, delta=1e-5)
        ax.plot(alphas, curve, color=colour, label=f"T = {steps}: PLD profile")
        ax.plot(alphas, single, color=colour, linestyle=":",
                label=f"T = {steps}: ({eps:.2f}, 1e-5)-DP only")  # fmt: skip
    ax.plot(alphas, gaussian_tradeoff(alphas, mu=1.0), color="0.4", linestyle="--",
            label="1-GDP (reference)")  # fmt: skip
    ax.plot([0, 1], [1, 0], color="0.7", linewidth=0.8, label="perfect privacy")
    ax.set_xlabel("false-positive rate (type I error)")
    ax.set_ylabel("smallest false-negative rate (type II error)")
    ax.set_title("DP-SGD, q = 0.01, noise multiplier 1: certified trade-off curves")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7.5)
    fig.savefig(path, dpi=110)


def audit_figure(path: Path) -> None:
    def planted(x: object, n: int, rng: dp.Random) -> object:
        return dp.noise.laplace(np.full(n, float(x)), scale=0.4, rng=rng)  # type: ignore[arg-type]

    result = audit(planted, 0.0, 1.0, samples=200_000, keep_outputs=True, rng=2026)
    plot_audit(result, path, claimed_epsilon=1.0)


def main() -> None:
    RESULTS.mkdir(exist_ok=True)
    tradeoff_figure(RESULTS / "fdp_tradeoff.png")
    audit_figure(RESULTS / "audit_tradeoff.png")
    print("wrote", RESULTS / "fdp_tradeoff.png", "and", RESULTS / "audit_tradeoff.png")


if __name__ == "__main__":
    main()
