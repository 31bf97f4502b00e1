"""The one-call wrappers need ``sensitivity=``; omitting it is deprecated (issue 32)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

import dpkit as dp
from dpkit.testing import seeded

CALLS: list[tuple[str, Callable[..., Any], dict[str, Any], Any]] = [
    ("laplace", dp.laplace, {"epsilon": 1.0}, 1.0),
    ("discrete_laplace", dp.discrete_laplace, {"epsilon": 1.0}, 3),
    ("gaussian", dp.gaussian, {"rho": 0.5}, 1.0),
    ("discrete_gaussian", dp.discrete_gaussian, {"rho": 0.5}, 3),
    ("truncated_laplace", dp.truncated_laplace, {"epsilon": 1.0, "delta": 1e-5}, 1.0),
]


@pytest.mark.parametrize(("name", "wrapper", "kwargs", "value"), CALLS, ids=[c[0] for c in CALLS])
def test_omitted_sensitivity_warns_and_keeps_the_old_default(
    name: str, wrapper: Callable[..., Any], kwargs: dict[str, Any], value: Any
) -> None:
    with pytest.warns(DeprecationWarning, match="pass sensitivity= explicitly") as caught:
        old = wrapper(value, **kwargs, rng=seeded(1))
    # The warning points at the caller's line, not at dpkit's internals.
    assert caught[0].filename == __file__
    assert f"dp.{name}" in str(caught[0].message)
    explicit = wrapper(value, **kwargs, sensitivity=1, rng=seeded(1))
    assert old == explicit


@pytest.mark.parametrize(("name", "wrapper", "kwargs", "value"), CALLS, ids=[c[0] for c in CALLS])
def test_explicit_sensitivity_is_silent_and_used(
    name: str, wrapper: Callable[..., Any], kwargs: dict[str, Any], value: Any
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        one = wrapper(value, **kwargs, sensitivity=1, rng=seeded(2))
        two = wrapper(value, **kwargs, sensitivity=2, rng=seeded(2))
    assert one.guarantee == two.guarantee  # same budget ...
    assert two.error.half_width > one.error.half_width  # ... so twice the noise
