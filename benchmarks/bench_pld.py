"""PLD accounting for DP-SGD: dpkit vs dp_accounting vs prv_accountant.

Workload (issue 3): Poisson-subsampled Gaussian, sampling rate q = 0.01, noise
multiplier 1.0, delta = 1e-5, T = 10^3 and 10^4 steps. Each case builds a fresh
accountant, composes the T steps and asks for epsilon; the time is the median of 5
warm runs (``_harness.compare``), in this one process.

- dpkit: ``PLDAccountant()`` (grid 1e-4, connect-the-dots, certified upper bound).
- dp_accounting: ``pld.PLDAccountant()`` with its defaults (grid 1e-4, pessimistic
  connect-the-dots): the baseline of the ratios.
- prv_accountant (Gopi, Lee & Wutschitz 2021; Opacus's PRV accountant is built on
  its method): ``eps_error=0.01`` (Opacus's default) and ``delta_error=delta/1000``
  (prv_accountant's recommendation). It reports an interval; its *upper* end is the
  comparable bound.
- Opacus (when importable): ``opacus.accountants.PRVAccountant`` with its defaults
  (``eps_error=0.01``) and ``RDPAccountant``, with ``history = [(noise_multiplier,
  sample_rate, steps)]``.

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

Third workload (the certified lower bound, ``dpkit.accounting.pld_bounds``): dpkit's
interval ``[lower, upper]`` next to prv_accountant's ``[lower, estimate, upper]``
(``eps_error=0.01``, ``delta_error=delta/1000``) on six DP-SGD settings, with the time
of each (three runs). ``--lower-bound`` runs only this workload and writes
``benchmarks/results/pld_lower_bound.md``. The first workload's tables also list the
lower bound and its time.
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


def dpkit_lower(steps: int) -> float:
    from dpkit.accounting import RepeatedEvent
    from dpkit.accounting.pld_bounds import epsilon_lower_bound

    event = PoissonSampledEvent(GaussianEvent(SIGMA), Q)
    return epsilon_lower_bound(RepeatedEvent(event, steps), DELTA)


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
        eps_error=0.01,
        delta_error=DELTA / 1000,
    )
    lower, estimate, upper = accountant.compute_epsilon(delta=DELTA, num_self_compositions=steps)
    return float(lower), float(estimate), float(upper)


def opacus_prv_eps(steps: int) -> float:
    from opacus.accountants import PRVAccountant as OpacusPRV

    accountant = OpacusPRV()
    accountant.history = [(SIGMA, Q, steps)]
    return float(accountant.get_epsilon(DELTA))  # Opacus's default eps_error (0.01)


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
        lower_bound = dpkit_lower(steps)
        print(f"| dpkit lower bound (certified) | {lower_bound:.6f} | {lower_bound / theirs:.6f} |")
        cases = {
            "dp_accounting PLD": lambda s=steps: dp_accounting_eps(s),
            "dpkit PLD": lambda s=steps: dpkit_eps(s),
            "dpkit lower bound": lambda s=steps: dpkit_lower(s),
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


LOWER_SETTINGS = [  # (sigma, q, steps, delta): tests/accounting/test_pld_lower_bound.py
    (0.8, 0.01, 1_000, 1e-5),
    (1.0, 0.01, 1_000, 1e-5),
    (2.0, 0.1, 100, 1e-8),
    (1.0, 1e-3, 10_000, 1e-6),
    (0.8, 0.004, 10_000, 1e-7),
    (1.0, 0.05, 100, 1e-5),
]
LOWER_RESULTS = Path(__file__).parent / "results" / "pld_lower_bound.md"


def _interval(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    from dpkit.accounting.calibrate import dpsgd_epsilon_bounds

    bounds = dpsgd_epsilon_bounds(
        sampling_probability=q, noise_multiplier=sigma, steps=steps, delta=delta
    )
    return bounds.lower, bounds.upper


def _prv_interval(sigma: float, q: float, steps: int, delta: float) -> tuple[float, ...]:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    accountant = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
        max_self_compositions=steps,
        eps_error=0.01,
        delta_error=delta / 1000,
    )
    return tuple(
        float(v) for v in accountant.compute_epsilon(delta=delta, num_self_compositions=steps)
    )


def lower_bound_main() -> None:
    """dpkit's certified interval next to prv_accountant's, with times (third workload)."""
    from dpkit.accounting import RepeatedEvent
    from dpkit.accounting.pld_bounds import epsilon_lower_bound

    lines = [
        "# Certified lower bound on epsilon: dpkit vs prv_accountant",
        "",
        "`python benchmarks/bench_pld.py --lower-bound`; prv_accountant with "
        "`eps_error=0.01`, `delta_error=delta/1000`. Times: median of 3 runs.",
        "",
        "| sigma | q | T | delta | dpkit [lower, upper] | lower / upper | "
        "prv [lower, estimate, upper] | dpkit lower - prv lower | "
        "time: dpkit lower / dpkit upper / prv (s) |",
        "|---:|---:|---:|---:|---|---:|---|---:|---|",
    ]
    for sigma, q, steps, delta in LOWER_SETTINGS:
        lower, upper = _interval(sigma, q, steps, delta)
        prv = _prv_interval(sigma, q, steps, delta)
        event = RepeatedEvent(PoissonSampledEvent(GaussianEvent(sigma), q), steps)
        results = compare(
            {
                "prv_accountant": lambda s=sigma, q=q, t=steps, d=delta: _prv_interval(s, q, t, d),
                "dpkit lower bound": lambda e=event, d=delta: epsilon_lower_bound(e, d),
                "dpkit PLD": lambda e=event, d=delta: PLDAccountant().compose(e).get_epsilon(d),
            },
            baseline="prv_accountant",
            repeat=3,
            number=1,
        )
        t = {r.name: r.seconds for r in results}
        lines.append(
            f"| {sigma:g} | {q:g} | {steps} | {delta:g} | [{lower:.5f}, {upper:.5f}] | "
            f"{lower / upper:.5f} | [{prv[0]:.5f}, {prv[1]:.5f}, {prv[2]:.5f}] | "
            f"{lower - prv[0]:+.5f} | {t['dpkit lower bound']:.2f} / {t['dpkit PLD']:.2f} / "
            f"{t['prv_accountant']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    LOWER_RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if "--lower-bound" in sys.argv:
        lower_bound_main()
        sys.exit(0)
    if "--small-delta" not in sys.argv:
        main()
    small_delta_main()
