"""RDP accounting of DP-SGD: dpkit's RDPAccountant against dp_accounting's RdpAccountant.

Workload: Poisson-subsampled Gaussian, sampling rate q = 0.01, noise multiplier 1.0,
delta = 1e-5, T = 10^3 and 10^4 steps; one call builds a fresh accountant, composes
the step T times (``count=T``) and asks for epsilon. Both libraries compute the RDP
curve once per call (dpkit: 251 orders, dp_accounting: its 163 default orders). The
table gives each library's epsilon, the median time per call, and the ratios
(dpkit / dp_accounting). The issue's goal: epsilon no larger than dp_accounting's.

Opacus's ``opacus.accountants.RDPAccountant`` (history ``[(sigma, q, T)]``) is timed
alongside when importable (it needs PyTorch).

Run: ``python benchmarks/bench_rdp.py`` (~25 s on 2 cores).
"""

from __future__ import annotations

import logging
import statistics

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from _harness import time_callable
from dpkit.accounting import GaussianEvent, PoissonSampledEvent
from dpkit.accounting.rdp import RDPAccountant

Q, SIGMA, DELTA = 0.01, 1.0, 1e-5


def dpkit_epsilon(steps: int) -> float:
    step = PoissonSampledEvent(GaussianEvent(SIGMA), Q)
    # A fresh event object each call, so dpkit's per-event cache does not help.
    return RDPAccountant().compose(step, count=steps).get_epsilon(DELTA)


def dp_accounting_epsilon(steps: int) -> float:
    event = dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(SIGMA))
    return float(rdp_lib.RdpAccountant().compose(event, steps).get_epsilon(DELTA))


def opacus_epsilon(steps: int) -> float:
    from opacus.accountants import RDPAccountant as OpacusRDP

    accountant = OpacusRDP()
    accountant.history = [(SIGMA, Q, steps)]
    return float(accountant.get_epsilon(DELTA))


def main() -> None:
    import importlib.util

    have_opacus = importlib.util.find_spec("opacus") is not None
    logging.getLogger("absl").setLevel(logging.ERROR)
    from dpkit.accounting import rdp as rdp_module

    print(f"### DP-SGD, q = {Q}, sigma = {SIGMA}, delta = {DELTA:g}\n")
    print(
        "| T | dpkit epsilon | dp_accounting epsilon | epsilon ratio "
        "| dpkit time | dp_accounting time | time ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    opacus_rows: list[str] = []
    for steps in (10**3, 10**4):
        ours = dpkit_epsilon(steps)
        theirs = dp_accounting_epsilon(steps)

        def run_dpkit(steps: int = steps) -> float:
            rdp_module._leaf_curve.cache_clear()
            return dpkit_epsilon(steps)

        mine = statistics.median(time_callable(run_dpkit, repeat=5, min_time=0.5))
        ref = statistics.median(
            time_callable(lambda steps=steps: dp_accounting_epsilon(steps), repeat=5, min_time=0.5)
        )
        print(
            f"| {steps} | {ours:.6f} | {theirs:.6f} | {ours / theirs:.6f} "
            f"| {mine * 1e3:.1f} ms | {ref * 1e3:.1f} ms | {mine / ref:.2f} |"
        )
        if have_opacus:
            theirs_o = opacus_epsilon(steps)
            t_o = statistics.median(
                time_callable(lambda steps=steps: opacus_epsilon(steps), repeat=5, min_time=0.5)
            )
            opacus_rows.append(
                f"| {steps} | {theirs_o:.6f} | {ours / theirs_o:.6f} | {t_o * 1e3:.1f} ms |"
            )
    if opacus_rows:
        print("\n| T | Opacus RDP epsilon | dpkit / Opacus | Opacus time |")
        print("|---:|---:|---:|---:|")
        print("\n".join(opacus_rows))
    else:
        print("\n(opacus not installed: skipped)")
    print("\n_One process, same workload; ratios below 1 favour dpkit._")


if __name__ == "__main__":
    main()
