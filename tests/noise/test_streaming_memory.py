"""Samplers stream in chunks: peak memory stays within 2x the output array.

``tracemalloc`` sees NumPy's allocations, so the traced peak is the memory the
sampler itself needed (the input array is allocated before tracing starts).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from dpkit import noise
from dpkit.testing import seeded

SAMPLERS: dict[str, Callable[[np.ndarray, object], np.ndarray]] = {
    "laplace": lambda loc, rng: noise.laplace(loc, scale=1.0, rng=rng),
    "gaussian": lambda loc, rng: noise.gaussian(loc, sigma=1.0, rng=rng),
    "truncated_laplace": lambda loc, rng: noise.truncated_laplace(
        loc, scale=1.0, bound=5.0, rng=rng
    ),
    "discrete_laplace": lambda loc, rng: noise.discrete_laplace(2.0, size=loc.size, rng=rng),
    "discrete_gaussian": lambda loc, rng: noise.discrete_gaussian(2.0, size=loc.size, rng=rng),
}


def peak_ratio(name: str, size: int) -> float:
    loc = np.zeros(size)
    rng = seeded(1)
    tracemalloc.start()
    try:
        out = SAMPLERS[name](loc, rng)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.size == size
    return peak / out.nbytes


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_peak_memory_within_twice_the_output(name: str) -> None:
    assert peak_ratio(name, 10_000_000) <= 2.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_peak_memory_at_one_hundred_million_draws(name: str) -> None:
    assert peak_ratio(name, 100_000_000) <= 2.0
