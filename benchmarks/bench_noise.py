"""Noise samplers: dpkit's exact secure Laplace and Gaussian against the peers.

Workload: ``n`` independent draws of zero-centred noise, Laplace with scale ``b = 1``
(epsilon = 1 at sensitivity 1) and Gaussian with the sigma of
``dp.Gaussian.calibrate(epsilon=1, delta=1e-5)`` (analytic calibration, ~3.73); the
discrete samplers use the same scales on the integers. Every case is timed in this
process with ``_harness.compare`` and reported as throughput (samples per second).

Cases and sizes:

* NumPy ``Generator.laplace`` / ``standard_normal`` on 10^7 draws: the floor (float
  arithmetic on a non-cryptographic PCG64 stream), not a competitor. The
  "× NumPy" column is NumPy's throughput for the same distribution divided by the
  case's (the discrete samplers are compared with the continuous floor).
* dpkit on 10^7 draws: ``dp.noise.laplace`` / ``gaussian`` (the exact real
  ``loc + X`` rounded to a 2^-20-scale grid), ``discrete_laplace`` /
  ``discrete_gaussian``, and the ``Laplace`` / ``Gaussian`` mechanisms' ``release``;
  all with the default OS-keyed ChaCha20 generator.
* The slow peers on fewer draws (the ``n`` column; their cost is per element, a
  Python loop or OpenDP's per-element exact sampler, so throughput is flat in ``n``
  once the per-call overhead is amortised): OpenDP's vectorised ``make_laplace`` /
  ``make_gaussian`` (exact; with its default grid, and with dpkit's grid of ~2^-20
  noise scales), diffprivlib's per-element ``randomise``, Google's
  python-dp per-element ``add_noise``. The "dpkit ×" column is dpkit's throughput
  for the same distribution (function level) divided by the peer's.

``--memory`` also measures, in a fresh subprocess, the peak memory of dpkit's
Laplace on 10^8 draws relative to the output array (requirement: at most 2×).

Run: ``python benchmarks/bench_noise.py [--memory]`` (~2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import platform
import statistics
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import numpy as np

import dpkit as dp
from _harness import compare

N = 10**7  # dpkit and NumPy
N_SLOW = 10**4  # OpenDP and diffprivlib (~10^4-10^5 draws per second)
N_PYDP = 10**5  # python-dp (~3 x 10^5 draws per second)
N_MEMORY = 10**8
ROUNDS = 5  # interleaved timings per case (see time_cases)

SCALE = 1.0  # Laplace scale b: epsilon = 1 at L1 sensitivity 1
SIGMA = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5).sigma  # ~3.7306
GOALS = {"laplace": 4.0, "gaussian": 8.0}  # at most this many times slower than NumPy
PEER_GOAL = 100.0  # dpkit at least this many times faster than every secure peer


@dataclass(frozen=True)
class Case:
    library: str
    sampler: str
    family: str  # "laplace", "gaussian", "discrete laplace", "discrete gaussian"
    exact: str
    secure: str
    n: int
    fn: Callable[[], object]


@dataclass(frozen=True)
class Row:
    case: Case
    throughput: float  # samples per second


def numpy_cases(n: int) -> list[Case]:
    rng = np.random.default_rng()
    samplers = [
        ("Generator.laplace", "laplace", lambda: rng.laplace(0.0, SCALE, n)),
        ("Generator.standard_normal", "gaussian", lambda: rng.standard_normal(n)),
    ]
    return [
        Case("NumPy", name, family, "no (float)", "no (PCG64)", n, fn)
        for name, family, fn in samplers
    ]


def dpkit_cases(n: int) -> list[Case]:
    x = np.zeros(n)
    laplace = dp.Laplace.calibrate(epsilon=1.0)
    gaussian = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5)
    secure = "yes (ChaCha20)"
    cases = [
        ("noise.laplace", "laplace", lambda: dp.noise.laplace(x, scale=SCALE)),
        ("noise.gaussian", "gaussian", lambda: dp.noise.gaussian(x, sigma=SIGMA)),
        (
            "noise.discrete_laplace",
            "discrete laplace",
            lambda: dp.noise.discrete_laplace(SCALE, size=n),
        ),
        (
            "noise.discrete_gaussian",
            "discrete gaussian",
            lambda: dp.noise.discrete_gaussian(SIGMA, size=n),
        ),
        ("Laplace.release", "laplace", lambda: laplace.release(x).value),
        ("Gaussian.release", "gaussian", lambda: gaussian.release(x).value),
    ]
    return [Case("dpkit", name, family, "yes", secure, n, fn) for name, family, fn in cases]


def opendp_cases(n: int) -> list[Case]:
    import opendp.prelude as odp

    odp.enable_features("contrib")
    xs, ints = [0.0] * n, [0] * n
    floats = odp.atom_domain(T=float, nan=False)
    # An explicit grid (k) needs the vector length in the domain.
    sized = odp.vector_domain(floats, size=n)
    free = odp.vector_domain(floats)
    integers = odp.vector_domain(odp.atom_domain(T=int))
    l1, l2 = odp.l1_distance(T=float), odp.l2_distance(T=float)
    # dpkit's output grid, 2^k, for the same guarantee and resolution.
    k_laplace = math.frexp(dp.noise.default_granularity(SCALE))[1] - 1
    k_gaussian = math.frexp(dp.noise.default_granularity(SIGMA))[1] - 1
    measurements = [
        ("make_laplace (default grid)", "laplace", odp.m.make_laplace(free, l1, scale=SCALE), xs),
        (
            f"make_laplace (k={k_laplace})",
            "laplace",
            odp.m.make_laplace(sized, l1, scale=SCALE, k=k_laplace),
            xs,
        ),
        (
            "make_gaussian (default grid)",
            "gaussian",
            odp.m.make_gaussian(free, l2, scale=SIGMA),
            xs,
        ),
        (
            f"make_gaussian (k={k_gaussian})",
            "gaussian",
            odp.m.make_gaussian(sized, l2, scale=SIGMA, k=k_gaussian),
            xs,
        ),
        (
            "make_laplace (int)",
            "discrete laplace",
            odp.m.make_laplace(integers, odp.l1_distance(T=int), scale=SCALE),
            ints,
        ),
        (
            "make_gaussian (int)",
            "discrete gaussian",
            odp.m.make_gaussian(integers, odp.l2_distance(T=int), scale=SIGMA),
            ints,
        ),
    ]
    return [
        Case("OpenDP", name, family, "yes", "yes (OS CSPRNG)", n, lambda m=m, v=v: m(v))
        for name, family, m, v in measurements
    ]


def diffprivlib_cases(n: int) -> list[Case]:
    from diffprivlib.mechanisms import GaussianAnalytic, GaussianDiscrete, Laplace

    xs, ints = [0.0] * n, [0] * n
    mechanisms = [
        ("Laplace.randomise", "laplace", "no (float)", Laplace(epsilon=1.0, sensitivity=1.0), xs),
        (
            "GaussianAnalytic.randomise",
            "gaussian",
            "no (float)",
            GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0),
            xs,
        ),
        (
            "GaussianDiscrete.randomise",
            "discrete gaussian",
            "yes",
            GaussianDiscrete(epsilon=1.0, delta=1e-5, sensitivity=1),
            ints,
        ),
    ]
    return [
        Case(
            "diffprivlib",
            name,
            family,
            exact,
            "yes (SystemRandom)",
            n,
            lambda m=m, v=v: [m.randomise(e) for e in v],
        )
        for name, family, exact, m, v in mechanisms
    ]


def pydp_cases(n: int) -> list[Case]:
    from pydp.algorithms.numerical_mechanisms import GaussianMechanism, LaplaceMechanism

    xs = [0.0] * n
    mechanisms = [
        (
            "LaplaceMechanism.add_noise",
            "laplace",
            "no (granular, float-safe)",
            LaplaceMechanism(epsilon=1.0, sensitivity=1.0),
        ),
        (
            "GaussianMechanism.add_noise",
            "gaussian",
            "no (binomial approx.)",
            GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0),
        ),
    ]
    return [
        Case(
            "python-dp",
            name,
            family,
            exact,
            "yes (BoringSSL)",
            n,
            lambda m=m: [m.add_noise(e) for e in xs],
        )
        for name, family, exact, m in mechanisms
    ]


def time_cases(cases: list[Case]) -> list[Row]:
    """Time the cases with the harness, one ``compare`` per draw count and round.

    The rounds interleave the cases (each round times every case once, after a warm-up
    call), so a burst of load from another process on this shared machine slows one
    round of every case rather than every round of one case; the median over the
    rounds is reported.
    """
    seconds: dict[int, list[float]] = {id(c): [] for c in cases}
    for n in dict.fromkeys(c.n for c in cases):
        group = {f"{c.library} {c.sampler}": c for c in cases if c.n == n}
        fns = {name: c.fn for name, c in group.items()}
        for _ in range(ROUNDS):
            for r in compare(fns, baseline=next(iter(group)), items=n, repeat=1, number=1):
                seconds[id(group[r.name])].append(r.seconds)
    return [Row(c, c.n / statistics.median(seconds[id(c)])) for c in cases]


def _count(n: int) -> str:
    k = len(str(n)) - 1
    return f"10^{k}" if n == 10**k else f"{n:,}"


def _floor(family: str) -> str:
    return "gaussian" if "gaussian" in family else "laplace"


def format_rows(rows: list[Row]) -> str:
    floor = {r.case.family: r.throughput for r in rows if r.case.library == "NumPy"}
    ours = {
        r.case.family: r.throughput
        for r in rows
        if r.case.library == "dpkit" and r.case.sampler.startswith("noise.")
    }
    lines = [
        "| library | sampler | exact? | secure? | n | M samples/s | × NumPy | dpkit × |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        c = r.case
        slower = floor[_floor(c.family)] / r.throughput
        speedup = "—" if c.library == "dpkit" else f"{ours[c.family] / r.throughput:,.3g}"
        lines.append(
            f"| {c.library} | {c.family}: `{c.sampler}` | {c.exact} | {c.secure} | "
            f"{_count(c.n)} | {r.throughput / 1e6:.3g} | {slower:,.3g} | {speedup} |"
        )
    return "\n".join(lines)


def verdict(rows: list[Row]) -> str:
    floor = {r.case.family: r.throughput for r in rows if r.case.library == "NumPy"}
    lines = []
    for r in rows:
        c = r.case
        if c.library == "dpkit" and c.family in GOALS:
            slower, goal = floor[c.family] / r.throughput, GOALS[c.family]
            status = "met" if slower <= goal else f"missed by {slower / goal:.2f}×"
            lines.append(
                f"- dpkit `{c.sampler}`: {slower:.2f}× slower than NumPy (goal ≤ {goal:g}×): "
                f"{status}; {r.throughput / 1e6:.3g} M/s"
            )
    ours = {
        r.case.family: r.throughput
        for r in rows
        if r.case.library == "dpkit" and r.case.sampler.startswith("noise.")
    }
    every = [r for r in rows if r.case.library not in ("dpkit", "NumPy")]
    exact = [r for r in every if r.case.exact == "yes"]
    for label, peers in (("a secure peer", every), ("an exact secure peer", exact)):
        if not peers:
            continue
        worst = min(peers, key=lambda r: ours[r.case.family] / r.throughput)
        ratio = ours[worst.case.family] / worst.throughput
        status = "met" if ratio >= PEER_GOAL else "missed"
        lines.append(
            f"- smallest speed-up over {label}: {ratio:,.0f}× "
            f"({worst.case.library} `{worst.case.sampler}`; goal ≥ {PEER_GOAL:g}×): {status}"
        )
    return "\n".join(lines)


_MEMORY_PROBE = """
import json, resource, sys, tracemalloc
import numpy as np
import dpkit as dp
n, how = int(sys.argv[1]), sys.argv[2]
x = np.full(n, 0.0)  # written, so its pages are resident before the baseline
mechanism = dp.Laplace.calibrate(epsilon=1.0)
sample = {
    "noise.laplace": lambda v: dp.noise.laplace(v, scale=1.0),
    "Laplace.release": lambda v: mechanism.release(v).value,
}[how]
sample(x[:100_000])  # warm-up: imports, caches, the generator
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tracemalloc.start()
out = sample(x)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"output": out.nbytes, "traced_peak": peak, "rss_growth": after - before}))
"""


def memory(n: int) -> str:
    """Peak extra memory of dpkit's Laplace on ``n`` draws, in a fresh process each."""
    lines = [
        f"Peak memory of dpkit's Laplace on {_count(n)} draws "
        "(input array allocated before; requirement ≤ 2× the output):",
        "",
        "| call | output | tracemalloc peak | ÷ output | max-RSS growth | ÷ output |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for how in ("noise.laplace", "Laplace.release"):
        done = subprocess.run(
            [sys.executable, "-c", _MEMORY_PROBE, str(n), how],
            capture_output=True,
            text=True,
            check=True,
        )
        m = json.loads(done.stdout)
        out, peak, rss = m["output"], m["traced_peak"], m["rss_growth"]
        lines.append(
            f"| `{how}` | {out / 2**20:,.0f} MiB | {peak / 2**20:,.0f} MiB | {peak / out:.2f} | "
            f"{rss / 2**20:,.0f} MiB | {rss / out:.2f} |"
        )
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = f"{models[0]} ×{len(models)}"
    except (OSError, IndexError):
        pass
    packages = ["dpkit", "numpy", "opendp", "diffprivlib", "python-dp", "scikit-learn"]
    versions = ", ".join(f"{p} {_version(p)}" for p in packages)
    return f"{date.today()}; {cpu}; Python {platform.python_version()}; {versions}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memory", action="store_true", help="also measure peak memory (10^8)")
    parser.add_argument("--n", type=int, default=N, help="draws for dpkit and NumPy")
    args = parser.parse_args()

    cases = numpy_cases(args.n) + dpkit_cases(args.n)
    skipped = []
    for name, make, n in [
        ("opendp", opendp_cases, N_SLOW),
        ("diffprivlib", diffprivlib_cases, N_SLOW),
        ("python-dp", pydp_cases, N_PYDP),
    ]:
        try:
            cases += make(n)
        except ImportError as error:
            skipped.append(f"{name} ({error})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # diffprivlib's PrivacyLeakWarning etc.
        rows = time_cases(cases)

    print(f"### Noise samplers, throughput\n\n_{machine()}_\n")
    print(format_rows(rows))
    print(f"\nLaplace scale {SCALE:g}, Gaussian sigma {SIGMA:.4f}; median of {ROUNDS} rounds.")
    if skipped:
        print(f"Skipped (not installed): {', '.join(skipped)}.")
    print("\nGoals:\n")
    print(verdict(rows))
    if args.memory:
        print()
        print(memory(N_MEMORY))


if __name__ == "__main__":
    main()
