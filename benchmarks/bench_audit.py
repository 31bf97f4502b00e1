"""Black-box audit throughput: 10^6 samples per input of dpkit's Laplace mechanism.

Workload: ``dpkit.audit.audit`` on ``Laplace.calibrate(epsilon=1)`` with x = 0 and
x' = 1, 10^6 draws from each input (half to choose the threshold, half to estimate),
threshold attack, 95% confidence. The requirement (issue 5) is under 10 s; the
table splits the time into drawing the samples and the audit's own work.

Run: ``python benchmarks/bench_audit.py``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import dpkit as dp
from dpkit.audit import audit

SAMPLES = 10**6
LAPLACE = dp.Laplace.calibrate(epsilon=1.0)


def mechanism(x: float, n: int, rng: dp.Random) -> np.ndarray:  # type: ignore[type-arg]
    return np.asarray(LAPLACE.release(np.full(n, float(x)), rng=rng).value)


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        rng = dp.random.as_random(0)
    start = time.perf_counter()
    for x in (0.0, 1.0):
        mechanism(x, SAMPLES, rng)
    sampling = time.perf_counter() - start
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        result = audit(mechanism, 0.0, 1.0, samples=SAMPLES, rng=rng)
        timings.append(time.perf_counter() - start)
    total = float(np.median(timings))
    print("| case | seconds |")
    print("|---|---|")
    print(f"| drawing 2 x 10^6 Laplace samples | {sampling:.2f} |")
    print(f"| audit, 10^6 samples per input (median of 3) | {total:.2f} |")
    print(f"| audit minus sampling | {total - sampling:.2f} |")
    print(f"\nbound: epsilon >= {result.epsilon_lower_bound:.4f} (claimed 1, 95% confidence)")


if __name__ == "__main__":
    main()
