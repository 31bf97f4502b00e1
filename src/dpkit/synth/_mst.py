"""MST: McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable and general
approach to differentially private synthetic data", Journal of Privacy and
Confidentiality 11(3), 2021, Section 4 (the 2018 NIST challenge's winner).

With a zCDP budget ``rho`` split in thirds:

1. every 1-way marginal is measured with Gaussian noise (``rho / 3`` over ``d`` columns);
   codes whose noisy count is below ``3 sigma`` are merged into one code (the paper's
   domain compression -- post-processing of the noisy counts);
2. ``d - 1`` pairs are chosen, Kruskal-style, to form a spanning tree: each round the
   exponential mechanism (``rho / 3`` over ``d - 1`` rounds) picks, among the pairs that
   join two components, one with a large L1 error of the independent model fitted to
   step 1 (score sensitivity ``k``: one person moves a marginal by ``k`` in L1, and an L1
   distance to a fixed estimate by at most that);
3. the chosen pairs' 2-way marginals are measured (``rho / 3`` over ``d - 1`` pairs),
   and a graphical model is fitted to every measurement (Private-PGM).

Every step's cost is charged exactly by :class:`~dpkit.synth._marginals.PrivateMarginals`;
the three parts add to at most ``rho`` (rationals), so the run is ``rho``-zCDP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import numpy as np
import numpy.typing as npt

from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._graphical import GraphicalModel, estimate
from dpkit.synth._marginals import PrivateMarginals, epsilon_for

__all__ = ["Compression", "run_mst"]

#: Step 1's threshold, in noise standard deviations (the paper's 3 sigma).
COMPRESS_SIGMAS = 3.0


@dataclass(frozen=True)
class Compression:
    """Codes merged in step 1: ``kept[column]`` lists the original codes kept (new codes
    ``0 .. len - 1``); every other original code is new code ``len(kept)`` (if any)."""

    kept: dict[str, npt.NDArray[np.int64]]
    original: Domain

    def labels(self, original: dict[str, list[str]]) -> dict[str, list[str]]:
        """Labels of the compressed codes (a merged code lists how many it holds)."""
        out = {}
        for name, kept in self.kept.items():
            merged = self.original.size_of(name) - len(kept)
            out[name] = [original[name][i] for i in kept] + (
                [f"({merged} rare codes merged)"] if merged else []
            )
        return out

    def decompress(
        self, codes: npt.NDArray[np.int64], domain: Domain, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        """Original codes for synthetic codes: a merged code becomes one of the merged
        original codes, uniformly (post-processing, as the paper does)."""
        out = np.empty_like(codes)
        for j, name in enumerate(domain.names):
            kept = self.kept[name]
            size = self.original.size_of(name)
            merged = np.setdiff1d(np.arange(size), kept)
            column = codes[:, j]
            mapped = np.empty(len(column), dtype=np.int64)
            inside = column < len(kept)
            mapped[inside] = kept[column[inside]]
            if len(merged):
                mapped[~inside] = merged[rng.integers(0, len(merged), (~inside).sum())]
            out[:, j] = mapped
        return out


def _compress(
    oneway: list[Measurement], domain: Domain
) -> tuple[Compression, Domain, list[Measurement]]:
    kept: dict[str, npt.NDArray[np.int64]] = {}
    sizes = []
    measurements = []
    for m in oneway:
        (name,) = m.columns
        support = np.flatnonzero(m.values >= COMPRESS_SIGMAS * m.sigma)
        if len(support) == len(m.values):
            kept[name] = np.arange(len(m.values), dtype=np.int64)
            sizes.append(len(m.values))
            measurements.append(m)
            continue
        kept[name] = support.astype(np.int64)
        rest = np.setdiff1d(np.arange(len(m.values)), support)
        values = np.concatenate([m.values[support], [m.values[rest].sum()]])
        sizes.append(len(values))
        # The merged cell's noise has variance len(rest) sigma^2; its weight in the fit
        # is set by the measurement's one sigma (a slight over-weighting of that cell).
        measurements.append(Measurement((name,), values, m.sigma))
    return Compression(kept, domain), Domain(domain.names, tuple(sizes)), measurements


def run_mst(
    data: PrivateMarginals,
    *,
    iterations: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> tuple[GraphicalModel, list[Measurement], Compression]:
    """Run MST on ``data`` with its whole budget (see the module docstring)."""
    tell = progress or (lambda _message: None)
    domain = data.domain
    d = len(domain.names)
    rho = data.budget
    if d == 1:
        measured = [data.measure(domain.names, rho)]
        identity = {domain.names[0]: np.arange(domain.sizes[0], dtype=np.int64)}
        return (
            estimate(domain, measured, iterations=iterations),
            measured,
            Compression(identity, domain),
        )
    third = rho / 3
    tell(f"MST: measuring {d} one-way marginals")
    oneway = [data.measure((name,), third / d) for name in domain.names]
    compression, small, oneway = _compress(oneway, domain)
    data.recode(compression.kept, small)
    tell("MST: selecting a spanning tree of pairs")
    independent = estimate(small, oneway, iterations=iterations)
    epsilon = epsilon_for(third / (d - 1))
    component = list(range(d))

    def find(i: int) -> int:
        while component[i] != i:
            component[i] = component[component[i]]
            i = component[i]
        return i

    pairs = list(combinations(small.names, 2))
    chosen: list[tuple[str, ...]] = []
    index = {name: i for i, name in enumerate(small.names)}
    for _ in range(d - 1):
        candidates = [p for p in pairs if find(index[p[0]]) != find(index[p[1]])]
        pick = data.select(
            candidates,
            lambda pair, exact: float(np.abs(exact - independent.marginal(pair)).sum()),
            epsilon=epsilon,
            score_sensitivity=float(data.sensitivity),
        )
        a, b = candidates[pick]
        component[find(index[a])] = find(index[b])
        chosen.append(candidates[pick])
    tell(f"MST: measuring {len(chosen)} two-way marginals")
    twoway = [data.measure(pair, third / (d - 1)) for pair in chosen]
    measured = [*oneway, *twoway]
    tell("MST: fitting the model")
    model = estimate(small, measured, iterations=iterations, warm_start=None)
    return model, measured, compression


def rho_parts(rho: Fraction, d: int) -> tuple[Fraction, Fraction, Fraction]:
    """The three parts of MST's budget (for explain)."""
    return rho / 3, rho / 3, rho - 2 * (rho / 3)
