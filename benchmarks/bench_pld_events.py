"""The PLD accountant's newer events against dp_accounting: epsilon and time, one run.

Each row builds a fresh accountant, composes ``T`` runs of the event (one FFT in both
libraries) and asks for epsilon at ``delta``; one timed run per case (dp_accounting's
mixture of Gaussians takes tens of seconds). Same grid width (1e-4) on both sides.

- replace-one Poisson-subsampled Gaussian (``relation="replace"`` vs ``REPLACE_ONE``);
- truncated Poisson sampling (``TruncatedPoissonSampledGaussianEvent`` vs
  ``TruncatedSubsampledGaussianDpEvent``; dpkit's second branch is tighter);
- mixture of Gaussians (``MixtureOfGaussiansEvent`` vs ``MixtureOfGaussiansDpEvent``);
- the exponential mechanism: dp_accounting has no PLD for it, so the baseline is what
  its user would do, ``PLD.from_privacy_parameters(eps, 0)`` (the eps-DP worst case).

Goal (issue 20): no slower than dp_accounting at equal accuracy; epsilon within 0.1%
(or below it where dpkit's analysis is tighter and proven).
Run: ``python benchmarks/bench_pld_events.py`` (about 2-3 minutes on 2 cores); writes
``benchmarks/results/pld_events.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from dp_accounting import dp_event
from dp_accounting.pld import common, pld_privacy_accountant, privacy_loss_distribution

from dpkit.accounting import (
    ExponentialMechanismEvent,
    GaussianEvent,
    MixtureOfGaussiansEvent,
    PoissonSampledEvent,
    TruncatedPoissonSampledGaussianEvent,
)
from dpkit.accounting.pld import PLDAccountant

Rel = pld_privacy_accountant.NeighborRel


def _timed(fn: Callable[[], float]) -> tuple[float, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _theirs(event: dp_event.DpEvent, count: int, delta: float, rel: Rel) -> float:
    accountant = pld_privacy_accountant.PLDAccountant(rel)
    accountant.compose(dp_event.SelfComposedDpEvent(event, count))
    return float(accountant.get_epsilon(delta))


def _em_theirs(epsilon: float, count: int, delta: float) -> float:
    pld = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(epsilon, 0.0), value_discretization_interval=1e-4
    )
    return float(pld.self_compose(count).get_epsilon_for_delta(delta))


def cases() -> list[tuple[str, Callable[[], float], Callable[[], float]]]:
    sgd = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    trunc = TruncatedPoissonSampledGaussianEvent(1.0, 0.01, 120, 10_000)
    mog = MixtureOfGaussiansEvent(1.0, (0.0, 1.0, 2.0), (0.2, 0.6, 0.2))
    return [
        (
            "replace-one Poisson Gaussian, q=0.01, sigma=1, T=1000, delta=1e-5",
            lambda: PLDAccountant(relation="replace").compose(sgd, count=1000).get_epsilon(1e-5),
            lambda: _theirs(
                dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0)),
                1000,
                1e-5,
                Rel.REPLACE_ONE,
            ),
        ),
        (
            "truncated Poisson, N=1e4, q=0.01, B=120, sigma=1, T=100, delta=1e-6",
            lambda: PLDAccountant().compose(trunc, count=100).get_epsilon(1e-6),
            lambda: _theirs(
                dp_event.TruncatedSubsampledGaussianDpEvent(10_000, 0.01, 120, 1.0),
                100,
                1e-6,
                Rel.ADD_OR_REMOVE_ONE,
            ),
        ),
        (
            "mixture of Gaussians (0,1,2)/(0.2,0.6,0.2), sigma=1, T=10, delta=1e-6",
            lambda: PLDAccountant().compose(mog, count=10).get_epsilon(1e-6),
            lambda: _theirs(
                dp_event.MixtureOfGaussiansDpEvent(1.0, (0.0, 1.0, 2.0), (0.2, 0.6, 0.2)),
                10,
                1e-6,
                Rel.ADD_OR_REMOVE_ONE,
            ),
        ),
        (
            "exponential mechanism eps=1, T=10, delta=1e-6 (theirs: as 1-DP)",
            lambda: (
                PLDAccountant().compose(ExponentialMechanismEvent(1.0), count=10).get_epsilon(1e-6)
            ),
            lambda: _em_theirs(1.0, 10, 1e-6),
        ),
    ]


def main() -> None:
    lines = [
        "| workload | dpkit eps | dp_accounting eps | eps ratio | dpkit s | dp_accounting s |"
        " time ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, ours, theirs in cases():
        eps_ours, t_ours = _timed(ours)
        eps_theirs, t_theirs = _timed(theirs)
        lines.append(
            f"| {name} | {eps_ours:.6f} | {eps_theirs:.6f} | {eps_ours / eps_theirs:.5f} | "
            f"{t_ours:.2f} | {t_theirs:.2f} | {t_ours / t_theirs:.3f} |"
        )
        print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / "pld_events.md"
    header = "# PLD events: dpkit vs dp_accounting (one run each)\n\n"
    out.write_text(header + "\n".join(lines) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
