"""PLD accounting for DP-SGD: dpkit vs dp_accounting vs prv_accountant.

Workload (issue 3): Poisson-subsampled Gaussian, sampling rate q = 0.01, noise
multiplier 1.0, delta = 1e-5, T = 10^3 and 10^4 steps. Each case builds a fresh
accountant, composes the T steps and asks for epsilon; the time is the median of 5
warm runs (``_harness.compare``), in this one process.

- dpkit: ``PLDAccountant()`` (grid 1e-4, connect-the-dots, certified upper bound).
- dp_accounting: ``pld.PLDAccountant()`` with its defaults (grid 1e-4, pessimistic
  connect-the-dots): the baseline of the ratios.
- prv_accountant (Gopi, Lee & Wutschitz 2021; Opacus's PRV accountant is built on
  its method): ``eps_error=0.07``, ``delta_error=1e-10`` (Opacus's defaults are of
  that order). It reports an interval; its *upper* end is the comparable bound.
- Opacus (when importable): ``opacus.accountants.PRVAccountant`` (eps_error 0.07) and
  ``RDPAccountant``, with ``history = [(noise_multiplier, sample_rate, steps)]``.

Goal: within 0.1% of dp_accounting's epsilon, never below the true epsilon, at most
half of dp_accounting's time and no slower than the PRV accountant.

Second workload (issue 20, small deltas): sigma 0.8, q 1e-3, T = 10^4 and 10^5,
delta = 1e-5 and 1e-8, where dpkit's former a-priori FFT bound returned ``inf``.
prv_accountant runs with ``eps_error=0.01`` and ``delta_error=delta/1000`` (its
interval is then at most ~0.02 wide; dpkit's certified value is checked to lie in
it). Three timed runs per case. The table is also written to
``benchmarks/results/pld_small_delta.md``.
Run: ``python benchmarks/bench_pld.py`` (a few minutes on 2 cores; ``--small-delta``
runs only the second workload).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

from _harness import compare, format_table, print_table
from dpkit.accounting import GaussianEvent, PoissonSampledEvent
from dpkit.accounting.pld import PLDAccountant

Q, SIGMA, DELTA = 0.01, 1.0, 1e-5


def dpkit_eps(steps: int) -> float:
    event = PoissonSampledEvent(GaussianEvent(SIGMA), Q)
    return PLDAccountant().compose(event, count=steps).get_epsilon(DELTA)


def dp_accounting_eps(steps: int) -> float:
    accountant = pld_privacy_accountant.PLDAccountant()
    event = dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(SIGMA))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return float(accountant.get_epsilon(DELTA))


def prv_eps(steps: int) -> tuple[float, float, float]:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    accountant = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA, sampling_probability=Q),
        max_self_compositions=steps,
        eps_error=0.07,
        delta_error=1e-10,
    )
    lower, estimate, upper = accountant.compute_epsilon(delta=DELTA, num_self_compositions=steps)
    return float(lower), float(estimate), float(upper)


def opacus_prv_eps(steps: int) -> float:
    from opacus.accountants import PRVAccountant as OpacusPRV

    accountant = OpacusPRV()
    accountant.history = [(SIGMA, Q, steps)]
    return float(accountant.get_epsilon(DELTA, eps_error=0.07))


def opacus_rdp_eps(steps: int) -> float:
    from opacus.accountants import RDPAccountant as OpacusRDP

    accountant = OpacusRDP()
    accountant.history = [(SIGMA, Q, steps)]
    return float(accountant.get_epsilon(DELTA))


def main() -> None:
    have_prv = importlib.util.find_spec("prv_accountant") is not None
    have_opacus = importlib.util.find_spec("opacus") is not None
    for steps in (1_000, 10_000):
        ours, theirs = dpkit_eps(steps), dp_accounting_eps(steps)
        print(f"\n## T = {steps}: epsilon at delta = {DELTA:g}\n")
        print("| accountant | epsilon | ÷ dp_accounting |")
        print("|---|---:|---:|")
        print(f"| dpkit PLD (certified) | {ours:.6f} | {ours / theirs:.6f} |")
        print(f"| dp_accounting PLD | {theirs:.6f} | 1 |")
        cases = {
            "dp_accounting PLD": lambda s=steps: dp_accounting_eps(s),
            "dpkit PLD": lambda s=steps: dpkit_eps(s),
        }
        if have_prv:
            lower, estimate, upper = prv_eps(steps)
            print(f"| prv_accountant upper | {upper:.6f} | {upper / theirs:.6f} |")
            print(f"| prv_accountant estimate | {estimate:.6f} | {estimate / theirs:.6f} |")
            print(f"| prv_accountant lower | {lower:.6f} | {lower / theirs:.6f} |")
            cases["prv_accountant"] = lambda s=steps: prv_eps(s)
        else:
            print("(prv_accountant not installed: skipped)")
        if have_opacus:
            o_prv, o_rdp = opacus_prv_eps(steps), opacus_rdp_eps(steps)
            print(f"| Opacus PRVAccountant | {o_prv:.6f} | {o_prv / theirs:.6f} |")
            print(f"| Opacus RDPAccountant | {o_rdp:.6f} | {o_rdp / theirs:.6f} |")
            cases["Opacus PRV"] = lambda s=steps: opacus_prv_eps(s)
            cases["Opacus RDP"] = lambda s=steps: opacus_rdp_eps(s)
        else:
            print("(opacus not installed: skipped)")
        print()
        results = compare(cases, baseline="dp_accounting PLD", repeat=5, number=1)
        print_table(results, title=f"DP-SGD accounting, T = {steps}", unit="accountings")
        times = {r.name: r.seconds for r in results}
        half = times["dpkit PLD"] <= 0.5 * times["dp_accounting PLD"]
        print(f"\ndpkit within 0.1% of dp_accounting: {abs(ours / theirs - 1) <= 1e-3}")
        print(f"dpkit at most half of dp_accounting's time: {half}")
        if have_prv:
            faster = times["dpkit PLD"] <= times["prv_accountant"]
            print(f"dpkit no slower than prv_accountant: {faster}")


SMALL_SIGMA, SMALL_Q = 0.8, 1e-3
RESULTS = Path(__file__).parent / "results" / "pld_small_delta.md"


def _dpkit_small(steps: int, delta: float) -> float:
    event = PoissonSampledEvent(GaussianEvent(SMALL_SIGMA), SMALL_Q)
    return PLDAccountant().compose(event, count=steps).get_epsilon(delta)


def _dp_accounting_small(steps: int, delta: float) -> float:
    accountant = pld_privacy_accountant.PLDAccountant()
    event = dp_accounting.PoissonSampledDpEvent(SMALL_Q, dp_accounting.GaussianDpEvent(SMALL_SIGMA))
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, steps))
    return float(accountant.get_epsilon(delta))


def _prv_small(steps: int, delta: float) -> tuple[float, float, float]:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    mechanism = PoissonSubsampledGaussianMechanism(
        noise_multiplier=SMALL_SIGMA, sampling_probability=SMALL_Q
    )
    accountant = PRVAccountant(
        prvs=mechanism, max_self_compositions=steps, eps_error=0.01, delta_error=delta / 1000
    )
    lower, estimate, upper = accountant.compute_epsilon(delta=delta, num_self_compositions=steps)
    return float(lower), float(estimate), float(upper)


def small_delta_main() -> None:
    lines = [
        "# PLD accounting at small deltas (issue 20)",
        "",
        f"Poisson-subsampled Gaussian, sigma {SMALL_SIGMA}, q {SMALL_Q}; "
        "`python benchmarks/bench_pld.py --small-delta`.",
        "",
        "| T | delta | dpkit (certified) | dp_accounting | PRV lower | PRV estimate | "
        "PRV upper | dpkit in PRV's interval |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    tables = []
    for steps in (10_000, 100_000):
        for delta in (1e-5, 1e-8):
            ours = _dpkit_small(steps, delta)
            theirs = _dp_accounting_small(steps, delta)
            lower, estimate, upper = _prv_small(steps, delta)
            inside = lower <= ours <= upper
            lines.append(
                f"| {steps} | {delta:g} | {ours:.5f} | {theirs:.5f} | {lower:.5f} | "
                f"{estimate:.5f} | {upper:.5f} | {inside} |"
            )
            results = compare(
                {
                    "dp_accounting PLD": lambda s=steps, d=delta: _dp_accounting_small(s, d),
                    "dpkit PLD": lambda s=steps, d=delta: _dpkit_small(s, d),
                    "prv_accountant": lambda s=steps, d=delta: _prv_small(s, d),
                },
                baseline="dp_accounting PLD",
                repeat=3,
                number=1,
            )
            tables.append(
                format_table(results, title=f"T = {steps}, delta = {delta:g}", unit="accountings")
            )
    text = "\n".join(lines) + "\n\n" + "\n\n".join(tables) + "\n"
    print(text)
    RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if "--small-delta" not in sys.argv:
        main()
    small_delta_main()
