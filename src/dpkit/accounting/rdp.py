"""The Renyi-DP accountant: RDP curves add up order by order (Mironov 2017, Prop. 1).

:class:`RDPAccountant` keeps, for each order of a fixed grid, the exact rational sum of
the RDP epsilons of everything composed, and converts to (epsilon, delta) with the
best order of the grid (Canonne, Kamath & Steinke 2020, Prop. 12). Each supported
event contributes its tightest known curve:

==============================================  ===============================================
event                                           RDP epsilon at order ``a``
==============================================  ===============================================
``GaussianEvent(s)``                            ``a / (2 s^2)`` (Mironov 2017, Prop. 7)
``LaplaceEvent(b)``                             Mironov 2017, Prop. 6 at ``eps = 1/b``
``DiscreteGaussianEvent(s, D, d)``              ``a D^2 / (2 s^2)`` (CKS20, Thm 4 and Thm 14)
``RandomizedResponseEvent(eps, k)``             exact k-ary randomized response curve
``ZCDPEvent(rho)`` / any event with a zCDP rho  ``rho a``
any event with a pure epsilon                   the tight curve of Steinke 2024, Thm 4
``PoissonSampledEvent(GaussianEvent(s), q)``    Mironov, Talwar & Zhang 2019 (exact series)
``PoissonSampledEvent(pure event, q)``          Steinke's curve at the amplified epsilon
``PoissonSampledEvent(DiscreteGaussianEvent)``  dimension 1, integer sensitivity ``<= 8``: the
                                                exact divergences in both directions, as
                                                certified sums over the integers (see
                                                :mod:`~dpkit.accounting._math.discrete_gaussian_rdp`)
``PoissonSampledEvent(zCDP event, q)``          removal: the MTZ19 binomial sum at ``rho``;
                                                addition: a second-order bound (see
                                                :mod:`~dpkit.accounting._math.subsampled_zcdp`)
``SampledWithoutReplacementEvent(e, m, n)``     Wang, Balle & Kasiviswanathan 2019, Thm 9 on
                                                the curve of ``e`` (replace-one); a Gaussian
                                                ``e`` also gets Thm 27 (the smaller is used)
``ExponentialMechanismEvent(eps)``              bounded range: the exact worst case (two-
                                                valued pairs) and ``kappa(eps) + (a-1) eps^2/8``
                                                (Cesar & Rogers 2021, Sec. 3)
``SingleEpochTreeAggregationEvent(s, T)``       ``a d / (2 s^2)``, ``d = ceil(log2(max T + 1))``
                                                (Kairouz et al. 2021, App. D)
``RepeatAndSelectEvent(e, mean, shape)``        Papernot & Steinke 2022, Thm 2 (finite shape)
                                                or Thm 6 (Poisson) on the curve of ``e``
==============================================  ===============================================

When several apply (an exponential mechanism is eps-DP, eps^2/8-zCDP and eps-bounded
range) the pointwise minimum is used. Events with no RDP guarantee
(``TruncatedLaplaceEvent``, Poisson-subsampled events whose inner event has neither a
pure nor a zCDP bound) are not supported: ``supports`` says so and ``compose`` raises
:class:`~dpkit.errors.UnsupportedEvent`.

Order infinity. The grid may end with ``math.inf``: the value there bounds the
max-divergence ``D_inf`` (the limit of ``D_a`` as ``a -> inf``; Mironov 2017, Sec. III).
An event with a pure-DP epsilon gets that epsilon (eps-DP is ``D_inf <= eps`` in both
directions): Laplace ``D/b``, the discrete Laplace, randomized response (replace-one),
Poisson-subsampled pure events ``log(1 + q (e^eps - 1))`` (Balle, Barthe & Gaboardi
2018, Thm 8), sparse vector, the selection events, ...; every other event ``inf`` (no
bound: the Gaussian family, zCDP events). Composition adds there too (basic composition
of pure DP), and the conversion reads ``D_inf <= eps`` as (eps, delta)-DP for every
``delta >= 0``, so ``get_epsilon(0)`` is finite on such a grid.

(epsilon, delta) events. ``ApproxEvent(eps, delta)`` with ``delta > 0`` is composed as
dp_accounting's ``EpsilonDeltaDpEvent``: the RDP sum gets the eps-DP curve of Steinke
2024, Thm 4 and the accountant keeps ``extra_delta = 1 - prod (1 - delta_i)^count``
apart (the proof is in :class:`RDPAccountant`'s notes). No RDP curve states that delta,
so :attr:`RDPAccountant.guarantee` and :func:`event_rdp` refuse it, and so do the
events analysed through an inner RDP curve (``SampledWithoutReplacementEvent``,
``RepeatAndSelectEvent``) and Poisson sampling.

``PermuteAndFlipEvent`` keeps the tight pure-DP curve. dp_accounting (since June 2026)
gives it the Laplace curve, stating that its privacy loss distribution is the Laplace
mechanism's; no proof is cited and we know of none, so dpkit does not use it (a
numerical search is in ``tests/accounting/test_rdp_selection_events.py``).

Neighbouring relations: ``relation=None`` (the default) analyses each event under the
relation it states. ``relation="add_remove"``, ``"replace"`` or ``"replace_special"``
makes the accountant refuse events stated only for another relation: Poisson sampling
is analysed for add/remove (and replace-with-special, as dp_accounting does), sampling
without replacement and randomized response for replace-one, tree aggregation for
replace-with-special (a record replaced by one whose contribution is zero).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpkit.accounting._math import conversions
from dpkit.accounting._math.bounded_range import bounded_range_rdp
from dpkit.accounting._math.discrete_gaussian_rdp import (
    MAX_EXACT_SENSITIVITY,
    subsampled_discrete_gaussian_rdp_curve,
)
from dpkit.accounting._math.laplace import laplace_rdp
from dpkit.accounting._math.rdp import (
    gaussian_rdp_curve,
    randomized_response_rdp,
    subsampled_gaussian_rdp_curve,
)
from dpkit.accounting._math.rounding import (
    fraction_down,
    fraction_up,
    mul_up,
    mul_up_many,
    sum_up,
    up,
)
from dpkit.accounting._math.selection import repeat_and_select_rdp
from dpkit.accounting._math.subsampled_zcdp import poisson_subsampled_zcdp_rdp_curve
from dpkit.accounting._math.without_replacement import (
    WOR_MAX_ORDER,
    without_replacement_rdp_curve,
)
from dpkit.accounting.accountant import Accountant
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    RepeatAndSelectEvent,
    RepeatedEvent,
    SampledWithoutReplacementEvent,
    SingleEpochTreeAggregationEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.guarantees import DEFAULT_ORDERS, RDP
from dpkit.errors import InvalidParameter, UnsupportedEvent

__all__ = ["RDPAccountant", "Relation", "event_rdp"]

Curve = tuple[float, ...]
Relation = Literal["add_remove", "replace", "replace_special"]
_RELATIONS: tuple[Relation, ...] = ("add_remove", "replace", "replace_special")


def _pointwise_min(*curves: Curve | None) -> Curve | None:
    present = [c for c in curves if c is not None]
    if not present:
        return None
    return tuple(min(values) for values in zip(*present, strict=True))


def _pure_curve(epsilon: float | None, orders: Curve) -> Curve | None:
    if epsilon is None:
        return None
    return tuple(conversions.pure_to_rdp_epsilon(epsilon, a) for a in orders)


def _zcdp_curve(rho: float | None, orders: Curve) -> Curve | None:
    if rho is None:
        return None
    return tuple(mul_up_many(orders, Fraction(rho)).tolist())  # rho * a, rounded up


def _has_delta(event: Event) -> bool:
    """Whether ``event`` contains an ``ApproxEvent`` with ``delta > 0`` (at any depth)."""
    if isinstance(event, ApproxEvent):
        return event.delta > 0.0
    if isinstance(event, ComposedEvent):
        return any(_has_delta(part) for part in event.events)
    inner = getattr(event, "event", None)
    return isinstance(inner, Event) and _has_delta(inner)


def _max_divergence(event: Event) -> float:
    """The bound on ``D_inf`` (order inf) of a leaf event this module gives an RDP curve.

    Its pure-DP epsilon (eps-DP is ``D_inf <= eps`` both ways), ``inf`` (no bound) when it
    has none: the Gaussian family, zCDP events. An ``ApproxEvent`` stands here for its
    eps-indistinguishable part (see :class:`RDPAccountant`), whose ``D_inf`` is ``eps``.
    """
    if isinstance(event, ApproxEvent):
        return event.epsilon
    epsilon = pure_epsilon(event)
    return math.inf if epsilon is None else epsilon


@functools.lru_cache(maxsize=512)
def _leaf_curve(event: Event, orders: Curve) -> Curve | None:
    """The RDP curve of a leaf event on ``orders``, or None when it has no RDP analysis.

    An order ``inf`` (last on the grid) gets :func:`_max_divergence`; the finite orders
    their curve below. Cached: training loops compose the same event thousands of times.
    """
    if orders and math.isinf(orders[-1]):
        finite = orders[:-1]
        # Whether the event has an RDP analysis at all is decided on finite orders.
        head = _finite_leaf_curve(event, finite if finite else (2.0,))
        if head is None:
            return None
        return (head if finite else ()) + (_max_divergence(event),)
    return _finite_leaf_curve(event, orders)


def _finite_leaf_curve(event: Event, orders: Curve) -> Curve | None:
    """:func:`_leaf_curve` on a grid of finite orders."""
    if isinstance(event, ApproxEvent) and event.delta > 0.0:
        # The eps-indistinguishable part of the pair (KOV15 Thm 2.1), whose RDP is that of
        # eps-DP (Steinke 2024, Thm 4); the accountant keeps the delta apart.
        return _pure_curve(event.epsilon, orders)
    if isinstance(event, RepeatAndSelectEvent):
        return _repeat_and_select_curve(event, orders)
    if isinstance(event, PoissonSampledEvent):
        return _poisson_curve(event, orders)
    if isinstance(event, SampledWithoutReplacementEvent):
        return _without_replacement_curve(event, orders)
    if isinstance(event, SingleEpochTreeAggregationEvent):
        # Kairouz et al. 2021, App. D: the Gaussian mechanism with squared sensitivity d
        # (a d / (2 sigma^2) exactly, rounded up).
        return gaussian_rdp_curve(event.noise_multiplier, orders, event.depth)
    if isinstance(event, ExponentialMechanismEvent):
        # eps-BR (exact worst case; Cesar & Rogers 2021, Sec. 3), eps-DP (Steinke's
        # curve) and zCDP.
        bounded_range = tuple(bounded_range_rdp(event.epsilon, a) for a in orders)
        return _pointwise_min(
            bounded_range,
            _pure_curve(event.epsilon, orders),
            _zcdp_curve(zcdp_rho(event), orders),
        )
    if isinstance(event, GaussianEvent):
        return gaussian_rdp_curve(event.noise_multiplier, orders)
    if isinstance(event, DiscreteGaussianEvent):
        # CKS20 Thm 4 (exact at integer orders, an upper bound at all orders), added over
        # independent coordinates (Thm 14): the same curve as the continuous Gaussian.
        return gaussian_rdp_curve(event.sigma, orders, Fraction(event.sensitivity) ** 2)
    epsilon = pure_epsilon(event)
    if isinstance(event, LaplaceEvent) and epsilon is not None:
        return tuple(laplace_rdp(epsilon, a) for a in orders)
    if isinstance(event, RandomizedResponseEvent):
        return tuple(randomized_response_rdp(event.epsilon, event.categories, a) for a in orders)
    return _pointwise_min(_pure_curve(epsilon, orders), _zcdp_curve(zcdp_rho(event), orders))


def _poisson_curve(event: PoissonSampledEvent, orders: Curve) -> Curve | None:
    """Add/remove-one neighbours; the best of the analyses that apply to the inner event."""
    inner, q = event.event, event.sampling_probability
    if isinstance(inner, GaussianEvent):
        return subsampled_gaussian_rdp_curve(q, inner.noise_multiplier, orders)
    # Amplification of pure DP (Balle, Barthe & Gaboardi 2018, Thm 8), then the tight
    # pure-to-RDP curve; pure_epsilon already returns the amplified epsilon.
    pure = _pure_curve(pure_epsilon(event), orders)
    if pure is not None:
        return pure
    rho = zcdp_rho(inner)  # the discrete Gaussian, ZCDPEvent, composed Gaussians, ...
    if rho is None:
        return None
    generic = poisson_subsampled_zcdp_rdp_curve(q, rho, orders)
    if (
        isinstance(inner, DiscreteGaussianEvent)
        and inner.dimension == 1
        and 0.0 < q < 1.0
        and inner.sensitivity <= MAX_EXACT_SENSITIVITY
    ):
        # The exact divergences of the one-dimensional pair (integer sensitivity), where
        # the summation window is not too long; the generic bound elsewhere.
        exact = subsampled_discrete_gaussian_rdp_curve(
            q, inner.sigma, int(inner.sensitivity), orders
        )
        return tuple(g if x is None else min(g, x) for g, x in zip(generic, exact, strict=True))
    return generic


def _without_replacement_curve(
    event: SampledWithoutReplacementEvent, orders: Curve
) -> Curve | None:
    """WBK19 Thm 9 on the inner event's replace-one curve (every integer order needed).

    A ``GaussianEvent`` also gets Thm 27 (the smaller of the two bounds).
    """
    inner = event.event
    if _has_delta(inner):
        return None  # an RDP curve cannot carry the delta of an ApproxEvent
    largest = min(WOR_MAX_ORDER, max(math.floor(a) + 1 for a in orders))
    integers = tuple(float(j) for j in range(2, largest + 1))
    inner_accountant = RDPAccountant(integers, relation="replace")
    if not inner_accountant.supports(inner) or not RDPAccountant(orders).supports(inner):
        return None
    integer_curve = inner_accountant.compose(inner).guarantee.epsilons
    own_curve = RDPAccountant(orders).compose(inner).guarantee.epsilons
    # gamma = m / n rounded up (a larger sampling fraction only raises the bound).
    gamma = fraction_up(Fraction(event.sample_size, event.population_size))
    # A Gaussian inner event also gets WBK19 Thm 27 (see _math/without_replacement).
    sigma = inner.noise_multiplier if isinstance(inner, GaussianEvent) else None
    amplified = without_replacement_rdp_curve(
        gamma, integer_curve, own_curve, orders, pure_epsilon(inner), gaussian_sigma=sigma
    )
    return _pointwise_min(amplified, _pure_curve(pure_epsilon(event), orders))


def _repeat_and_select_curve(event: RepeatAndSelectEvent, orders: Curve) -> Curve | None:
    """PS22 Thm 2 / Thm 6 on the candidate's curve from this accountant (same grid).

    The candidate may be any event this accountant supports (a composed training run,
    for instance). A pure-DP candidate also gets Cor 3's ``(2 + shape) eps`` curve (finite
    shape); the pointwise minimum of valid bounds is used.
    """
    inner = RDPAccountant(orders)
    if _has_delta(event.event) or not inner.supports(event.event):
        return None  # (an RDP curve cannot carry the delta of an ApproxEvent)
    candidate = inner.compose(event.event).guarantee.epsilons
    curve = repeat_and_select_rdp(
        orders, candidate, event.mean, event.shape, pure_epsilon=pure_epsilon(event.event)
    )
    return _pointwise_min(
        curve, _pure_curve(pure_epsilon(event), orders), _zcdp_curve(zcdp_rho(event), orders)
    )


def _relation_allows(event: Event, relation: Relation | None) -> bool:
    """Whether every part of ``event`` is analysed here for ``relation`` (None: any)."""
    if relation is None:
        return True
    if isinstance(event, ComposedEvent):
        return all(_relation_allows(part, relation) for part in event.events)
    if isinstance(event, RepeatedEvent | RepeatAndSelectEvent):
        return _relation_allows(event.event, relation)
    if isinstance(event, PoissonSampledEvent):
        # The inner mechanism is analysed for adding or removing one record of the sample.
        inner_ok = _relation_allows(event.event, "add_remove")
        return relation in ("add_remove", "replace_special") and inner_ok
    if isinstance(event, SampledWithoutReplacementEvent | RandomizedResponseEvent):
        return relation == "replace"
    if isinstance(event, SingleEpochTreeAggregationEvent):
        return relation == "replace_special"
    return True


def event_rdp(event: Event, orders: Sequence[float] = DEFAULT_ORDERS) -> RDP | None:
    """The RDP guarantee :class:`RDPAccountant` assigns to one run of ``event``.

    Returns None when ``event`` (or a part of it) has no RDP analysis here. Composite
    events (``ComposedEvent``, ``RepeatedEvent``) are composed as the accountant does.
    An ``ApproxEvent`` with ``delta > 0`` has no RDP curve, so an event containing one
    gives None, although :class:`RDPAccountant` composes it (keeping its delta apart).

    >>> from dpkit.accounting import GaussianEvent
    >>> event_rdp(GaussianEvent(2.0), orders=(2.0, 4.0))
    RDP(orders=(2.0, 4.0), epsilons=(0.25, 0.5))
    """
    accountant = RDPAccountant(orders)
    if _has_delta(event) or not accountant.supports(event):
        return None
    return accountant.compose(event).guarantee


# Every finite float is an integer multiple of 2^-1074 (the smallest subnormal), so the
# running sums are kept exactly as integers in that unit: adding is an integer add.
_UNIT_BITS = 1074


def _in_units(value: float) -> int:
    """``value`` (finite, >= 0) as an exact integer multiple of 2^-1074."""
    numerator, denominator = value.as_integer_ratio()  # denominator is a power of two
    return numerator << (_UNIT_BITS - denominator.bit_length() + 1)


def _in_units_many(values: npt.NDArray[np.float64]) -> npt.NDArray[np.object_]:
    """:func:`_in_units` of each of ``values`` (finite, >= 0): Python ints, vectorised."""
    fraction, exponent = np.frexp(values)  # value = fraction * 2^exponent, 1/2 <= fraction < 1
    mantissa = (fraction * 2.0**53).astype(np.int64)  # exact: the 53-bit significand
    shift = exponent.astype(np.int64) + (_UNIT_BITS - 53)
    # A subnormal gives shift < 0, and its significand ends in at least -shift zero bits.
    mantissa >>= np.maximum(-shift, 0)
    result: npt.NDArray[np.object_] = mantissa.astype(object) << np.maximum(shift, 0).astype(object)
    return result


def _units_up(total: int) -> float:
    """The smallest float >= ``total * 2^-1074``, in integer arithmetic.

    With at most 53 bits the value is a float already (subnormals included). Otherwise
    ``total`` is rounded up to its leading 53 bits (a ceiling shift; the carry can give
    2^53, still exact) and scaled by a power of two, which is exact: that is the
    smallest float at or above the value (checked against correctly rounded division
    plus a nextafter on 2*10^5 random totals of up to 2,110 bits).
    """
    bits = total.bit_length()
    if bits <= 53:
        return math.ldexp(float(total), -_UNIT_BITS)
    shift = bits - 53
    top = -((-total) >> shift)  # ceil(total / 2^shift) <= 2^53
    try:
        return math.ldexp(float(top), shift - _UNIT_BITS)
    except OverflowError:
        return math.inf


class RDPAccountant(Accountant):
    """Renyi-DP accounting on a fixed grid of orders (Mironov 2017).

    Composition (adaptive, Mironov 2017, Prop. 1): RDP epsilons add at each order. The
    running sums are exact rationals; the reported curve rounds each up. Conversion to
    (epsilon, delta): at each order the bound of Canonne, Kamath & Steinke 2020,
    Prop. 12 (= Balle et al. 2020, eq. 20), ``eps(a) + log(1 - 1/a) - (log delta +
    log a)/(a - 1)``, and the best over the grid (see :meth:`RDP.to_approx`); the
    inverse for ``get_delta``. Every value reported is an upper bound on the true one.

    Parameters
    ----------
    orders:
        Strictly increasing Renyi orders > 1; default ``DEFAULT_ORDERS`` (a superset
        of dp_accounting's default grid, finer near 1).
    relation:
        None (default): each event is analysed for the relation it states, and the
        caller composes only events stated for the same one. ``"add_remove"``,
        ``"replace"`` (replace one record) or ``"replace_special"`` (replace one record
        by a special one that contributes nothing): events stated only for another
        relation are refused (``supports`` is False).

    Notes
    -----
    The neighbouring relation is that of the events: Poisson-subsampled events are
    analysed for add/remove-one neighbours, sampling without replacement and randomized
    response for replace-one, tree aggregation for replace-with-special. Compose only
    events stated for the same relation (``relation=`` checks it). ``get_epsilon(0)`` is
    ``inf`` once anything non-trivial was composed (an RDP curve on finitely many orders
    implies no pure DP), unless the grid ends with ``inf`` and every event composed has a
    pure-DP epsilon: then it is their sum (``D_inf <= eps`` both ways is eps-DP).

    (epsilon, delta) events: why ``get_epsilon`` and ``get_delta`` are valid. Fix
    neighbours ``x, x'`` and the sequence of events, each ``ApproxEvent`` with its
    ``(eps_i, delta_i)`` fixed in advance (the mechanisms may be chosen adaptively; their
    parameters may not). For every history ``h`` of earlier outputs, step ``i``'s pair of
    output laws is a post-processing ``T`` of the canonical pair of Kairouz, Oh &
    Viswanath 2015, Thm 2.1, so ``M_i(x; h) = (1 - delta_i) P_i^h + delta_i P'_i^h`` and
    ``M_i(x'; h) = (1 - delta_i) Q_i^h + delta_i Q'_i^h`` with ``P_i^h, Q_i^h`` the
    images under ``T`` of binary randomized response with ``eps_i``: eps_i-
    indistinguishable, hence RDP with Steinke's curve ``eps_hat_i(a)`` (Thm 4) and with
    ``D_inf <= eps_i``. Draw ``G_i ~ Bernoulli(1 - delta_i)`` independently of all else (the
    same law under ``x`` and ``x'``, as ``delta_i`` is fixed) and output from ``P_i^h`` /
    ``Q_i^h`` when ``G_i = 1``. Given ``G = 1`` at every step, an event of probability
    ``1 - E``, ``E = 1 - prod_i (1 - delta_i)``, the outputs are an adaptive composition
    of the good parts and of the other events, so their laws ``P, Q`` satisfy ``D_a(P ||
    Q) <= R(a)``, the RDP sum (Mironov 2017, Prop. 1), at every order. Hence ``M(x) = (1 -
    E) P + E P'`` and ``M(x') = (1 - E) Q + E Q'``, and for every set ``S``, with ``d`` the
    delta that ``R`` gives at ``eps`` (Canonne, Kamath & Steinke 2020, Prop. 12)::

        M(x)(S) <= (1 - E) P(S) + E <= (1 - E)(e^eps Q(S) + d) + E
                <= e^eps M(x')(S) + d + E - d E,

    which is ``get_delta(eps) = 1 - (1 - d)(1 - E)``, increasing in ``d`` and ``E``, so
    upper bounds on both give an upper bound. Inverting, ``d <= delta' = 1 - (1 -
    delta) / (1 - E)`` suffices for ``(eps, delta)``, so ``get_epsilon(delta)`` is the
    RDP epsilon at ``delta'`` (``inf`` when ``delta' < 0``; a larger ``E`` or a smaller
    ``delta'`` only raises epsilon). dpkit keeps ``E`` rounded up
    (:attr:`extra_delta`), and ``delta'`` rounded down. This is dp_accounting's
    ``EpsilonDeltaDpEvent`` rule (2026).

    Examples
    --------
    DP-SGD: 1000 steps of the Gaussian mechanism with noise multiplier 1 on Poisson
    batches of rate 0.01.

    >>> from dpkit.accounting import GaussianEvent, PoissonSampledEvent
    >>> step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    >>> accountant = RDPAccountant().compose(step, count=1000)
    >>> round(accountant.get_epsilon(1e-5), 3)
    2.101

    An (epsilon, delta) black box in the same run keeps its delta apart:

    >>> from dpkit.accounting import ApproxEvent
    >>> _ = accountant.compose(ApproxEvent(0.5, 1e-6))
    >>> accountant.extra_delta  # 1e-6, rounded up
    1.0000000000000016e-06
    >>> round(accountant.get_epsilon(1e-5), 3)
    2.547
    """

    def __init__(
        self, orders: Sequence[float] = DEFAULT_ORDERS, *, relation: Relation | None = None
    ) -> None:
        super().__init__()
        if relation is not None and relation not in _RELATIONS:
            raise InvalidParameter.for_parameter(
                "relation",
                "RDPAccountant",
                "None, 'add_remove', 'replace' or 'replace_special'",
                relation,
            )
        self._relation: Relation | None = relation
        self._orders: Curve = RDP._check_orders(orders, "RDPAccountant", allow_inf=True)
        # The exact running sums, in units of 2^-1074, of every curve composed except the
        # latest one; orders where some curve was infinite are flagged instead.
        self._totals: npt.NDArray[np.object_] = np.zeros(len(self._orders), dtype=object)
        self._infinite = np.zeros(len(self._orders), dtype=bool)
        self._summed = False  # whether any curve was added to the totals yet
        # The latest curve and how many times it was composed in a row, not yet added to
        # the totals: a run of the same event (a training loop) costs one addition per
        # order in all, and an accountant holding a single curve reads out its exact sum
        # ``count * curve`` directly (see _epsilons), with no integer sums at all.
        self._pending: tuple[Curve, int] | None = None
        # An upper bound on -log prod_i (1 - delta_i)^count_i over the ApproxEvents
        # composed (0: none with delta > 0), and the first of them (for messages).
        self._log_keep_bound = 0.0
        self._first_approx: ApproxEvent | None = None

    @property
    def orders(self) -> tuple[float, ...]:
        """The grid of Renyi orders."""
        return self._orders

    @property
    def relation(self) -> Relation | None:
        """The neighbouring relation checked on compose (None: the events' own)."""
        return self._relation

    @property
    def extra_delta(self) -> float:
        """``1 - prod (1 - delta_i)^count_i`` over the composed ``ApproxEvent`` events, rounded up.

        0 when none with ``delta > 0`` was composed. Outside an event of at most this
        probability the composition is the RDP composition of the rest (see the class
        notes); :meth:`get_epsilon` and :meth:`get_delta` account for it.
        """
        with self._lock:
            return self._extra_delta()

    def _extra_delta(self) -> float:
        if self._log_keep_bound == 0.0:
            return 0.0
        # 1 - exp(-L) increases with L, and L is an upper bound: so is the result.
        return min(1.0, up(-math.expm1(-self._log_keep_bound), 4))

    @property
    def guarantee(self) -> RDP:
        """The composed RDP curve, each order's exact sum rounded up.

        Raises :class:`~dpkit.errors.UnsupportedEvent` once an ``ApproxEvent`` with
        ``delta > 0`` was composed: no RDP curve states its delta (use
        :meth:`get_epsilon` / :meth:`get_delta`, which carry it).
        """
        with self._lock:
            if self._first_approx is not None:
                raise UnsupportedEvent(
                    f"RDPAccountant.guarantee: {self._first_approx!r} (delta > 0) was "
                    "composed, and no RDP curve states its delta (the extra delta is "
                    f"{self._extra_delta():.6g}); use get_epsilon/get_delta, which carry "
                    "it, or keep (epsilon, delta) events out of this accountant."
                )
            return RDP(self._orders, self._epsilons())

    def _epsilons(self) -> Curve:
        """Each order's exact sum, rounded up (called under the lock)."""
        if not self._summed:
            # Nothing in the totals: at most one curve, composed `count` times, whose exact
            # sums are count * curve (no integers needed).
            if self._pending is None:
                return (0.0,) * len(self._orders)
            curve, count = self._pending
            if min(curve) >= 0.0:  # always (the totals would count a negative value as 0)
                return curve if count == 1 else tuple(mul_up_many(curve, Fraction(count)).tolist())
        self._add_pending()
        return tuple(
            math.inf if inf else _units_up(total)
            for total, inf in zip(self._totals.tolist(), self._infinite.tolist(), strict=True)
        )

    def _add_pending(self) -> None:
        """Add the pending curve, ``count`` times, to the exact totals."""
        if self._pending is None:
            return
        curve, count = self._pending
        self._pending = None
        self._summed = True
        values = np.asarray(curve, dtype=np.float64)
        self._infinite |= np.isinf(values)
        units = _in_units_many(np.where(np.isfinite(values) & (values > 0.0), values, 0.0))
        self._totals = self._totals + (units if count == 1 else count * units)  # exact

    # ------------------------------------------------------------------ hooks

    def _supports_leaf(self, event: Event) -> bool:
        # Computing the curve here (it is cached) means any failure happens during
        # validation, before the state changes.
        if not _relation_allows(event, self._relation):
            return False
        return _leaf_curve(event, self._orders) is not None

    def _compose_leaf(self, event: Event, count: int) -> None:
        curve = _leaf_curve(event, self._orders)
        assert curve is not None  # checked by _supports_leaf before any change
        if isinstance(event, ApproxEvent) and event.delta > 0.0:
            # count * -log(1 - delta), each step rounded up (log1p is within an ulp).
            step = mul_up(count, up(-math.log1p(-event.delta), 4))
            self._log_keep_bound = sum_up((self._log_keep_bound, step))
            if self._first_approx is None:
                self._first_approx = event
        if self._pending is not None and self._pending[0] == curve:
            self._pending = (curve, self._pending[1] + count)
        else:
            self._add_pending()
            self._pending = (curve, count)

    def _is_zero(self) -> bool:
        if self._pending is not None and any(self._pending[0]):  # inf counts as non-zero
            return False
        return not self._infinite.any() and not any(self._totals.tolist())

    def _epsilon(self, delta: float) -> float:
        extra = self._extra_delta()
        if extra > 0.0:
            # delta' = 1 - (1 - delta) / (1 - extra), exactly, then rounded down (a smaller
            # delta' only raises epsilon); negative: no epsilon is proven.
            if extra >= 1.0 or delta < extra:
                return math.inf
            shifted = (Fraction(delta) - Fraction(extra)) / (1 - Fraction(extra))
            delta = fraction_down(shifted)
        if self._is_zero():
            return 0.0
        # delta = 0: the order-inf value if the grid has one (D_inf <= eps is eps-DP).
        return conversions.rdp_epsilon(self._orders, self._epsilons(), delta)

    def _delta(self, epsilon: float) -> float:
        extra = self._extra_delta()
        if self._is_zero():
            rdp_delta = 0.0
        else:
            rdp_delta = conversions.rdp_delta(self._orders, self._epsilons(), epsilon)
        if extra == 0.0:
            return rdp_delta
        # 1 - (1 - rdp_delta)(1 - extra), increasing in both; exact, rounded up.
        d, e = Fraction(rdp_delta), Fraction(extra)
        return min(1.0, fraction_up(d + e - d * e))
