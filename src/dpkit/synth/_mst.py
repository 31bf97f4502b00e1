"""MST: McKenna, Miklau & Sheldon, "Winning the NIST Contest: A scalable and general
approach to differentially private synthetic data", Journal of Privacy and
Confidentiality 11(3), 2021, Section 4 (the 2018 NIST challenge's winner).

A zCDP budget ``rho`` is split over three steps as ``split = (a, b, c)`` says
(:data:`DEFAULT_SPLIT`, ``(2/5, 1/5, 2/5)``, unless the caller gives another; the paper
splits it in thirds, :data:`PAPER_SPLIT`):

1. every 1-way marginal is measured with Gaussian noise (``a rho`` over ``d`` columns);
   codes whose noisy count is below ``3 sigma`` are merged into one code (the paper's
   domain compression -- post-processing of the noisy counts);
2. ``d - 1`` pairs are chosen, Kruskal-style, to form a spanning tree: each round the
   exponential mechanism (``b rho`` over ``d - 1`` rounds) picks, among the pairs that
   join two components, one with a large L1 error of the independent model fitted to
   step 1 (score sensitivity ``k``: one person moves a marginal by ``k`` in L1, and an L1
   distance to a fixed estimate by at most that);
3. the chosen pairs' 2-way marginals are measured (``c rho``, the rest of ``rho``, over
   ``d - 1`` pairs), and a graphical model is fitted to every measurement (Private-PGM).

Every step's cost is charged exactly by :class:`~dpkit.synth._marginals.PrivateMarginals`;
the three parts add to exactly ``rho`` (rationals, :func:`rho_parts`) and each step spends
at most its part, so the run is ``rho``-zCDP whatever the split.

Why (2/5, 1/5, 2/5): ``benchmarks/synth_split_study.py`` compared it, the thirds, OpenDP's
(1/2, 1/4, 1/4) and (1/4, 1/4, 1/2) on Adult, statsmodels' ``fair`` and causaldata's
``cps_mixtape`` at epsilon 0.3, 1 and 3 (10 seeds), then on two held-out tables: its
3-way workload error was below the thirds' in all 15 means, by 0.3% to 4.6%
(``benchmarks/results/synth.md``; docs/synth.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import numpy as np
import numpy.typing as npt

from dpkit.errors import InternalError, InvalidParameter
from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._graphical import GraphicalModel, estimate
from dpkit.synth._marginals import PrivateMarginals, epsilon_for

__all__ = ["DEFAULT_SPLIT", "PAPER_SPLIT", "Compression", "check_split", "rho_parts", "run_mst"]

#: Step 1's threshold, in noise standard deviations (the paper's 3 sigma).
COMPRESS_SIGMAS = 3.0

Split = tuple[Fraction, Fraction, Fraction]

#: The paper's split of ``rho`` over (1-way marginals, selection, 2-way marginals).
PAPER_SPLIT: Split = (Fraction(1, 3), Fraction(1, 3), Fraction(1, 3))
#: dpkit's default split (module docstring; ``benchmarks/synth_split_study.py``).
DEFAULT_SPLIT: Split = (Fraction(2, 5), Fraction(1, 5), Fraction(2, 5))
#: How far from 1 the parts of a split given as floats may add up (then normalised).
SPLIT_TOLERANCE = Fraction(1, 10**9)


def check_split(value: object, owner: str) -> Split:
    """``mst_split`` as three positive exact rationals adding up to exactly 1.

    ``value``: three positive finite numbers (ints, floats or Fractions) adding up to 1;
    floats may miss 1 by rounding (``(1/3, 1/3, 1/3)``), up to ``1e-9``, and are then
    divided by their exact sum. Anything else raises :class:`InvalidParameter` (public
    parameters only: called before any charge).
    """
    expected = "three positive numbers adding up to 1, as (1-way, selection, 2-way)"
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 3:
        raise InvalidParameter.for_parameter("mst_split", owner, expected, value)
    parts = []
    for part in value:
        if isinstance(part, bool) or not isinstance(part, int | float | Fraction):
            raise InvalidParameter.for_parameter("mst_split", owner, expected, value)
        if isinstance(part, float) and not math.isfinite(part):
            raise InvalidParameter.for_parameter("mst_split", owner, expected, value)
        # A float as written (0.4 is 2/5), not its binary value.
        parts.append(Fraction(str(part)) if isinstance(part, float) else Fraction(part))
    total = sum(parts, Fraction(0))
    if any(p <= 0 for p in parts) or abs(total - 1) > SPLIT_TOLERANCE:
        raise InvalidParameter.for_parameter("mst_split", owner, expected, value)
    a, b, c = (p / total for p in parts)
    return a, b, c


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
    split: Split = DEFAULT_SPLIT,
) -> tuple[GraphicalModel, list[Measurement], Compression]:
    """Run MST on ``data`` with its whole budget (see the module docstring), split over
    its three steps as ``split`` says (:func:`rho_parts`)."""
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
    one, select, two = rho_parts(rho, split)
    tell(f"MST: measuring {d} one-way marginals")
    oneway = [data.measure((name,), one / d) for name in domain.names]
    compression, small, oneway = _compress(oneway, domain)
    data.recode(compression.kept, small)
    tell("MST: selecting a spanning tree of pairs")
    independent = estimate(small, oneway, iterations=iterations)
    epsilon = epsilon_for(select / (d - 1))
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
    twoway = [data.measure(pair, two / (d - 1)) for pair in chosen]
    measured = [*oneway, *twoway]
    tell("MST: fitting the model")
    model = estimate(small, measured, iterations=iterations, warm_start=None)
    return model, measured, compression


def rho_parts(rho: Fraction, split: Split = DEFAULT_SPLIT) -> Split:
    """The three parts of MST's budget (1-way, selection, 2-way), exact rationals that add
    up to ``rho``: the last part is what the first two leave. ``split``: three positive
    rationals adding up to 1."""
    if len(split) != 3 or any(Fraction(s) <= 0 for s in split) or sum(split) != 1:
        raise InternalError(f"MST's split must be three positive parts adding up to 1: {split}")
    one, select = rho * Fraction(split[0]), rho * Fraction(split[1])
    return one, select, rho - one - select
