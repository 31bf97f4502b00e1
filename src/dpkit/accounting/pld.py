"""The privacy loss distribution (PLD) accountant: tight (eps, delta) by numerical composition.

A mechanism's privacy loss distribution determines its whole privacy profile
``delta(eps)`` (the hockey-stick divergence), and composing mechanisms convolves their
PLDs (Sommer, Meiser & Mohammadi 2019; Koskela, Jalko & Honkela 2020). On a grid this
is exact up to discretisation, which we make *pessimistic* so that every reported
number is an upper bound:

- losses are split onto the grid by connect-the-dots (Doroshenko, Ghazi, Kamath,
  Kumar & Manurangsi 2022, Alg. 1), which never lowers ``delta(eps)``; atoms on the
  grid stay put ("privacy buckets" rounding, Meiser & Mohammadi 2018, is the special
  case of putting all mass on the upper point);
- the left tail (at most ``tail_mass``) moves up to the first grid point and the right
  tail to ``+inf``;
- floating-point error is bounded rigorously and added to delta: the k-fold
  composition of one event runs on exponentially tilted masses, so that its FFT
  round-off (and the discretisation's own float error) is bounded *relative* to the
  Chernoff tail at each eps rather than by one constant that grows with the count
  (``_math/pld/power.py``); round-off negatives are clipped to 0; the final answer is
  rounded up.

The smallest delta the accountant can certify is :attr:`PLDAccountant.smallest_delta`,
mostly the mass moved to ``+inf``: about ``count x (tail_mass + 1.5e-15)`` (2.4e-11
after 10^4 Poisson-subsampled Gaussian steps with the defaults, 2.4e-10 after 10^5);
``get_epsilon`` returns ``inf`` below it.

For add/remove neighbours both orderings of each pair ("remove": ``M(D)`` vs
``M(D')``, "add": the reverse) are composed separately and the worse is reported.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Literal, Self

import numpy as np

from dpkit import _validation as check
from dpkit.accounting._math.pld.convolve import convolve
from dpkit.accounting._math.pld.discretize import (
    TooManyBuckets,
    from_atoms,
    from_interval_cdfs,
)
from dpkit.accounting._math.pld.hockey import hockey_stick, smallest_epsilon
from dpkit.accounting._math.pld.mechanisms import (
    GaussianNoise,
    LaplaceNoise,
    Noise,
    approx_pmf,
    discrete_laplace_pmf,
    randomized_response_pmf,
    sampled_cdfs,
)
from dpkit.accounting._math.pld.pmf import LossPmf, identity
from dpkit.accounting._math.pld.power import self_compose
from dpkit.accounting._math.rounding import up
from dpkit.accounting._pld_extra import extra_leaf_pmfs, supports_extra
from dpkit.accounting._pld_lower import (
    LOWER_DISCRETIZATION,
    EpsilonInterval,
    epsilon_lower_bound,
)
from dpkit.accounting.accountant import Accountant
from dpkit.accounting.events import (
    ApproxEvent,
    DiscreteLaplaceEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureEvent,
    RandomizedResponseEvent,
)
from dpkit.errors import InternalError, InvalidParameter, UnsupportedEvent

__all__ = ["PLDAccountant"]


def _replace_special_pmfs(event: RandomizedResponseEvent, h: float) -> tuple[LossPmf, LossPmf]:
    """Randomized response against the uniform output of the special value: "remove"
    samples ``R(x)`` (losses ``log(k a)``, ``log(k b)``), "add" samples ``U`` (masses
    ``1/k`` and ``(k-1)/k``, the same losses negated). Losses rounded up (4 ulps cover
    the ``log`` and the products); a mass shortfall goes to +inf in ``from_atoms``."""
    p_true, high, p_others, low = event.special_losses()
    k = event.categories
    remove = from_atoms(np.array([up(high, 4), up(low, 4)]), np.array([p_true, p_others]), h)
    add = from_atoms(np.array([up(-high, 4), up(-low, 4)]), np.array([1.0 / k, (k - 1) / k]), h)
    return remove, add


Relation = Literal["add_remove", "replace"]
_RELATIONS = ("add_remove", "replace")


class _LeafCache:
    """The leaf PLDs of recent ``(event, grid width, tail, relation)`` keys, least
    recently used dropped first, holding at most ``limit`` bytes of masses.

    A leaf's PLD is a pure function of its key (public parameters only), and a
    :class:`LossPmf` is immutable (read-only masses), so accountants can share them: a
    ledger rebuilt per query, an epoch loop or a comparison composes the same leaves
    again (a Gaussian of sigma 0.1 took ~1 s each time). Thread-safe.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: OrderedDict[Hashable, tuple[tuple[LossPmf, LossPmf | None], int]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[LossPmf, LossPmf | None] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, pmfs: tuple[LossPmf, LossPmf | None]) -> None:
        size = sum(p.masses.nbytes for p in pmfs if p is not None)
        if size > self._limit:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (pmfs, size)
            self._bytes += size
            while self._bytes > self._limit:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped


#: Leaf PLDs shared by every PLDAccountant of the process: at most 64 MiB of masses.
_LEAVES = _LeafCache(64 * 2**20)


def _noise(event: Event) -> Noise | None:
    if isinstance(event, GaussianEvent):
        return GaussianNoise(event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        return LaplaceNoise(event.noise_multiplier)
    return None


class PLDAccountant(Accountant):
    """Numerical composition of privacy loss distributions, pessimistic by construction.

    Parameters
    ----------
    discretization:
        Grid width ``h`` of the losses (> 0, at most 1). The slack of connect-the-dots
        shrinks like ``h^2``; the cost grows like ``1/h``.
    relation:
        ``"add_remove"`` (default) or ``"replace"``: the neighbouring relation for
        which the events' sensitivities were computed. Poisson subsampling is analysed
        for add/remove and, for a Gaussian with the noise multiplier over the
        per-record norm bound (DP-SGD's clipping norm), for ``"replace"``.
    tail_mass:
        Mass (in (0, 1e-6]) that may be cut from each tail of a PLD before and after a
        composition; it is moved, never dropped (left tail up, right tail to ``+inf``).

    Notes
    -----
    Supported events: :class:`GaussianEvent`, :class:`LaplaceEvent`,
    :class:`DiscreteLaplaceEvent`, :class:`RandomizedResponseEvent`,
    :class:`PureEvent` (as binary randomized response, the worst ``eps``-DP pair),
    :class:`ApproxEvent` (``delta`` at ``+inf``, the rest as ``eps``-RR; Kairouz, Oh &
    Viswanath 2015) and, for add/remove, :class:`PoissonSampledEvent` of a Gaussian or
    Laplace event; :class:`DiscreteGaussianEvent` with one coordinate and, for
    add/remove, :class:`PoissonSampledEvent` of it or of a :class:`DiscreteLaplaceEvent`
    (atoms with certified masses; ``sigma`` up to ~4e6);
    :class:`TruncatedDiscreteGaussianEvent` (and, for add/remove, Poisson-subsampled);
    :class:`RandomizedResponseEvent` with ``relation="replace_special"`` (against the
    uniform output); :class:`ExponentialMechanismEvent` (bounded range) and
    :class:`PermuteAndFlipEvent`; under ``"replace"``, :class:`PoissonSampledEvent` of a
    Gaussian (see ``dpkit.accounting._pld_extra``). ``compose(event, count=k)`` costs
    one FFT whatever ``k`` is.

    Guarantee
    ---------
    ``get_delta(eps)`` is at least the hockey-stick divergence of the composed
    mechanisms' worst-case pairs (both orderings for add/remove) at ``eps``, and
    ``get_epsilon(delta)`` at least the smallest eps that divergence allows: the
    discretisation is pessimistic (Doroshenko et al. 2022, Thm 4.2; Meiser & Mohammadi
    2018), tails are moved outward, FFT round-off is bounded (Higham 2002, Thm 24.2,
    applied to exponentially tilted masses so that the bound is relative to the tail
    at each eps) and the answer is rounded up. ``get_epsilon(delta)`` is finite for
    every ``delta`` above :attr:`smallest_delta`. Composition is adaptive with mechanisms
    fixed in advance; it is not a filter (see DESIGN.md on fully adaptive budgets).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, gaussian_epsilon
    >>> from dpkit.accounting.pld import PLDAccountant
    >>> accountant = PLDAccountant().compose(GaussianEvent(1.0))
    >>> eps = accountant.get_epsilon(1e-5)
    >>> exact = gaussian_epsilon(1.0, 1e-5)
    >>> exact <= eps <= exact * 1.001
    True
    """

    def __init__(
        self,
        *,
        discretization: float = 1e-4,
        relation: Relation = "add_remove",
        tail_mass: float = 1e-15,
    ) -> None:
        super().__init__()
        owner = "PLDAccountant"
        h = check.check_positive(discretization, "discretization", owner)
        if h > 1.0:
            raise InvalidParameter.for_parameter("discretization", owner, "a float in (0, 1]", h)
        if relation not in _RELATIONS:
            raise InvalidParameter.for_parameter(
                "relation", owner, "'add_remove' or 'replace'", relation
            )
        tau = check.check_positive(tail_mass, "tail_mass", owner)
        if tau > 1e-6:
            raise InvalidParameter.for_parameter("tail_mass", owner, "a float in (0, 1e-6]", tau)
        self._h = h
        self._relation: Relation = relation
        self._tail = tau
        self._remove: LossPmf = identity(h)
        self._add: LossPmf = identity(h)

    def __repr__(self) -> str:
        return (
            f"PLDAccountant(discretization={self._h!r}, relation={self._relation!r}, "
            f"tail_mass={self._tail!r})"
        )

    @property
    def discretization(self) -> float:
        """The grid width of the losses."""
        return self._h

    @property
    def relation(self) -> Relation:
        """The neighbouring relation the events are analysed under."""
        return self._relation

    @property
    def smallest_delta(self) -> float:
        """The smallest delta for which :meth:`get_epsilon` returns a finite epsilon.

        It is ``delta`` at the largest finite loss on the grid: the mass at ``+inf``
        (the right tails moved there, at most ``tail_mass`` per composed event, and a
        few ``1e-16`` of float guards per event) plus the float-error allowance there.
        """
        with self._lock:
            pmfs = (self._remove, self._add)
            return max(hockey_stick(pmf, float(pmf.losses[-1])) for pmf in pmfs)

    def compose(self, event: Event, *, count: int = 1) -> Self:
        """Add ``count`` runs of ``event``; on any failure the state is left unchanged."""
        with self._lock:
            saved = (self._remove, self._add)
            try:
                return super().compose(event, count=count)
            except BaseException:
                # A ComposedEvent may fail on a later leaf (e.g. a grid too wide):
                # restore the PLDs so that a failed compose changes nothing.
                self._remove, self._add = saved
                raise

    def get_epsilon_interval(
        self, delta: float, *, lower_discretization: float = LOWER_DISCRETIZATION
    ) -> EpsilonInterval:
        """Certified ``[lower, upper]`` around the best epsilon of what was composed.

        ``upper`` is :meth:`get_epsilon`; ``lower`` a certified lower bound on the
        epsilon any accountant can prove for the ledger (``dpkit.accounting.pld_bounds``,
        grid ``lower_discretization``: Gaussian and Poisson-subsampled Gaussian events,
        add/remove; other events and ``relation="replace"`` raise
        :class:`~dpkit.errors.UnsupportedEvent`).
        """
        owner = "PLDAccountant.get_epsilon_interval"
        delta = check.check_delta(delta, owner, allow_zero=False)
        if self._relation != "add_remove":
            raise UnsupportedEvent(
                f"{owner}: the certified lower bound covers add/remove neighbours only; "
                f"this accountant uses relation={self._relation!r}."
            )
        lower = epsilon_lower_bound(self.ledger, delta, discretization=lower_discretization)
        upper = self.get_epsilon(delta)
        if lower > upper:  # both are certified: this cannot happen unless dpkit has a bug
            raise InternalError(f"{owner}: certified lower bound {lower!r} above {upper!r}.")
        return EpsilonInterval(lower, upper, delta)

    # ------------------------------------------------------------------ hooks

    def _supports_leaf(self, event: Event) -> bool:
        if supports_extra(event, self._relation, self._tail):
            return True
        if isinstance(event, PoissonSampledEvent):
            return self._relation == "add_remove" and _noise(event.event) is not None
        return _noise(event) is not None or isinstance(
            event, DiscreteLaplaceEvent | RandomizedResponseEvent | PureEvent | ApproxEvent
        )

    def _leaf_pmfs(self, event: Event) -> tuple[LossPmf, LossPmf | None]:
        """The event's "remove" PLD, and its "add" PLD when that one differs (shared
        with the other accountants of the process: :class:`_LeafCache`)."""
        try:
            key: Hashable | None = (type(event), event, self._h, self._tail, self._relation)
            hash(key)
        except TypeError:  # an event with an unhashable field: not remembered
            key = None
        remembered = _LEAVES.get(key) if key is not None else None
        if remembered is not None:
            return remembered
        pmfs = self._new_leaf_pmfs(event)
        if key is not None:
            _LEAVES.put(key, pmfs)
        return pmfs

    def _new_leaf_pmfs(self, event: Event) -> tuple[LossPmf, LossPmf | None]:
        h, tau = self._h, self._tail
        extra = extra_leaf_pmfs(event, h, tau, self._relation)
        if extra is not None:
            return extra
        if isinstance(event, PoissonSampledEvent):
            noise, q = _noise(event.event), event.sampling_probability
            assert noise is not None  # checked by _supports_leaf
            if q == 1.0:
                return from_interval_cdfs(sampled_cdfs(noise, 1.0, "remove"), h, tau), None
            remove = from_interval_cdfs(sampled_cdfs(noise, q, "remove"), h, tau)
            return remove, from_interval_cdfs(sampled_cdfs(noise, q, "add"), h, tau)
        noise = _noise(event)
        if noise is not None:  # symmetric noise: one PLD for both orderings
            return from_interval_cdfs(sampled_cdfs(noise, 1.0, "remove"), h, tau), None
        if isinstance(event, DiscreteLaplaceEvent):
            return discrete_laplace_pmf(event.scale, event.sensitivity, h), None
        if isinstance(event, RandomizedResponseEvent):
            if event.relation == "replace_special":
                return _replace_special_pmfs(event, h)
            return randomized_response_pmf(event.epsilon, event.categories, h), None
        if isinstance(event, PureEvent):
            return randomized_response_pmf(event.epsilon, 2, h), None
        assert isinstance(event, ApproxEvent)  # checked by _supports_leaf
        return approx_pmf(event.epsilon, event.delta, h), None

    def _compose_leaf(self, event: Event, count: int) -> None:
        try:
            remove, add = self._leaf_pmfs(event)
            remove_k = self_compose(remove, count, self._tail)
            add_k = remove_k if add is None else self_compose(add, count, self._tail)
            new_remove = convolve(self._remove, remove_k, self._tail)
            new_add = convolve(self._add, add_k, self._tail)
        except TooManyBuckets:
            raise InvalidParameter(
                f"PLDAccountant cannot represent {event!r} (x{count}) on a grid of width "
                f"{self._h!r}: the privacy loss range needs too many grid points. Use a "
                "larger discretization."
            ) from None
        self._remove, self._add = new_remove, new_add

    def _epsilon(self, delta: float) -> float:
        # delta = 0 gives inf: the float guards put a little mass at +inf, so no PLD
        # built here certifies pure DP (use PureAccountant for that).
        return max(smallest_epsilon(self._remove, delta), smallest_epsilon(self._add, delta))

    def _delta(self, epsilon: float) -> float:
        return max(hockey_stick(self._remove, epsilon), hockey_stick(self._add, epsilon))
