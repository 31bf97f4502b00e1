"""Selection: dpkit's exact exponential mechanism, permute-and-flip and noisy max.

Workload: scores ``s ~ N(0, 1)`` (fixed seed), epsilon = 1, sensitivity 1, not
monotonic, so every mechanism adds noise of scale ``2 / epsilon = 2`` to each score
(``c = 1/2``) and releases one index.

Tables (each timed in this process with ``_harness.compare``, median of 5):

1. 10^7 scores, baseline NumPy's Gumbel-max one-liner
   ``np.argmax(c * s + rng.gumbel(size=n))``: the same distribution as the exponential
   mechanism up to floating-point rounding (ties broken by rounding, PCG64 bits, not
   cryptographic). Goal: dpkit's exact ``exponential`` within 2x of it. The NumPy
   one-liners with exponential and Laplace noise are listed for the other two noises.
2. 10^6 scores, baseline OpenDP's ``make_noisy_max`` (exact, OS CSPRNG) with Gumbel
   noise (zCDP output measure) and with exponential noise (max-divergence), scale 2,
   fed a NumPy array. dpkit's ``exponential`` and ``permute_and_flip`` run the same
   distributions. Goal: faster than OpenDP.

dpkit runs with its default generator (ChaCha20 keyed from the OS). Run:
``python benchmarks/bench_selection.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import importlib.util

import numpy as np

from _harness import compare, print_table
from dpkit.selection import exponential, permute_and_flip, report_noisy_max

EPSILON = 1.0
C = EPSILON / 2.0  # score coefficient: noise scale 2 at sensitivity 1
N_LARGE = 10**7
N_OPENDP = 10**6


def table_numpy(n: int) -> None:
    scores = np.random.default_rng(0).normal(size=n)
    rng = np.random.default_rng(1)
    results = compare(
        {
            "NumPy gumbel one-liner (inexact)": lambda: np.argmax(C * scores + rng.gumbel(size=n)),
            "dpkit exponential (exact)": lambda: exponential(scores, epsilon=EPSILON).value,
            "NumPy exponential-noise one-liner (inexact)": lambda: np.argmax(
                C * scores + rng.exponential(size=n)
            ),
            "dpkit permute_and_flip (exact)": lambda: (
                permute_and_flip(scores, epsilon=EPSILON).value
            ),
            "NumPy laplace one-liner (inexact)": lambda: np.argmax(
                C * scores + rng.laplace(size=n)
            ),
            "dpkit report_noisy_max laplace (exact)": lambda: (
                report_noisy_max(scores, epsilon=EPSILON, noise="laplace").value
            ),
        },
        baseline="NumPy gumbel one-liner (inexact)",
        items=n,
        repeat=5,
        min_time=0.0,
    )
    print_table(results, title=f"Selection from {n:,} scores vs NumPy", unit="scores")


def table_opendp(n: int) -> None:
    if importlib.util.find_spec("opendp") is None:
        print("OpenDP is not installed (pip install opendp): skipping its table.\n")
        return
    import opendp.prelude as odp

    odp.enable_features("contrib")
    space = odp.vector_domain(odp.atom_domain(T=float, nan=False)), odp.linf_distance(T=float)
    gumbel = odp.m.make_noisy_max(*space, odp.zero_concentrated_divergence(), scale=1 / C)
    flip = odp.m.make_noisy_max(*space, odp.max_divergence(), scale=1 / C)
    assert abs(flip.map(1.0) - EPSILON) < 1e-12  # the same guarantee as dpkit's
    scores = np.random.default_rng(0).normal(size=n)
    results = compare(
        {
            "OpenDP make_noisy_max gumbel": lambda: gumbel(scores),
            "dpkit exponential": lambda: exponential(scores, epsilon=EPSILON).value,
            "OpenDP make_noisy_max exponential": lambda: flip(scores),
            "dpkit permute_and_flip": lambda: permute_and_flip(scores, epsilon=EPSILON).value,
        },
        baseline="OpenDP make_noisy_max gumbel",
        items=n,
        repeat=5,
        min_time=0.0,
    )
    print_table(results, title=f"Selection from {n:,} scores vs OpenDP (exact)", unit="scores")


if __name__ == "__main__":
    table_numpy(N_LARGE)
    table_opendp(N_OPENDP)
