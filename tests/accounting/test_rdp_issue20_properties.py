"""Property tests for the issue-20 RDP analyses (hypothesis, fixed example budget).

Each property is a safe-side law: no proven bound may fall below a divergence that an
actual pair of distributions attains.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    RDPAccountant,
    SampledWithoutReplacementEvent,
)
from dpkit.accounting._math.bounded_range import bounded_range_rdp
from dpkit.accounting._math.subsampled_zcdp import poisson_subsampled_zcdp_rdp_curve

epsilons = st.floats(min_value=0.01, max_value=10.0)
orders = st.floats(min_value=1.01, max_value=200.0)
probabilities = st.floats(min_value=1e-3, max_value=1 - 1e-3)


@settings(max_examples=300, deadline=None)
@given(epsilon=epsilons, order=orders, p=probabilities)
def test_bounded_range_curve_is_above_every_two_valued_pair(
    epsilon: float, order: float, p: float
) -> None:
    t = math.log1p(-p * -math.expm1(-epsilon))
    # log E_P[e^{(a-1) L}] / (a - 1) for the loss t + eps (probability p) or t.
    x = (order - 1) * epsilon
    log_mgf = x + math.log(p + (1 - p) * math.exp(-x))  # log(1 + p (e^x - 1))
    forward = t + log_mgf / (order - 1)
    # The other direction: E_Q[e^{(a-1)(-L)}] = E_P[e^{-a L}].
    backward = (-order * t + math.log1p(p * math.expm1(-order * epsilon))) / (order - 1)
    bound = bounded_range_rdp(epsilon, order)
    assert bound >= forward * (1 - 1e-12) - 1e-15
    assert bound >= backward * (1 - 1e-12) - 1e-15


@settings(max_examples=60, deadline=None)
@given(
    sigma=st.floats(min_value=0.4, max_value=10.0),
    q=st.floats(min_value=1e-4, max_value=0.9),
    n=st.integers(2, 64),
)
def test_subsampled_zcdp_is_above_the_subsampled_gaussian_at_integer_orders(
    sigma: float, q: float, n: int
) -> None:
    # The Gaussian is 1/(2 sigma^2)-zCDP, and its subsampled removal divergence at an
    # integer order is the binomial sum (MTZ19), computed here in exact-ish float form.
    (value,) = poisson_subsampled_zcdp_rdp_curve(q, 1 / (2 * sigma**2), (float(n),))
    k = np.arange(n + 1)
    log_terms = (
        np.array([math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) for j in k])
        + (n - k) * math.log1p(-q)
        + k * math.log(q)
        + (k * k - k) / (2 * sigma**2)
    )
    top = log_terms.max()
    exact = (top + math.log(np.exp(log_terms - top).sum())) / (n - 1)
    assert value >= exact * (1 - 1e-9)


@settings(max_examples=40, deadline=None)
@given(
    inner=st.one_of(
        st.builds(GaussianEvent, st.floats(min_value=0.3, max_value=20.0)),
        st.builds(LaplaceEvent, st.floats(min_value=0.1, max_value=20.0)),
    ),
    m=st.integers(1, 1000),
    extra=st.integers(0, 1000),
)
def test_sampling_without_replacement_never_exceeds_the_inner_curve(inner, m, extra) -> None:  # type: ignore[no-untyped-def]
    grid = (1.5, 2.0, 5.0, 12.5, 64.0)
    event = SampledWithoutReplacementEvent(inner, m, m + extra)
    sampled = RDPAccountant(grid).compose(event).guarantee.epsilons
    plain = RDPAccountant(grid).compose(inner).guarantee.epsilons
    assert all(s <= p for s, p in zip(sampled, plain, strict=True))
