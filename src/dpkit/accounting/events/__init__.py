"""Events: what a mechanism ran, described for accountants.

A mechanism returns its output together with an event: the parameters that its privacy
analysis needs, and nothing else. Accountants consume events and turn them into the
tightest guarantee they can prove; a ledger is a composed event and its serialised form.
:func:`pure_epsilon` and :func:`zcdp_rho` state the basic cost of any event, so that a
release can say what it spent.

Stability rule
--------------
Events are a persistent vocabulary (ledgers store them), so:

1. An event class is never removed, renamed, or changed in meaning.
2. New parameters of an existing class are optional, with a default that keeps the old
   meaning.
3. A new or different analysis gets a new class, never a new reading of an old one.
4. An accountant that cannot analyse an event says so (``supports(event) is False``)
   instead of guessing; here :func:`pure_epsilon` and :func:`zcdp_rho` return ``None``
   for an event with no guarantee of that kind.

Neighbouring relation
---------------------
Sensitivities in events are computed by the caller for the neighbouring relation of its
privacy unit (add/remove one person, or replace one person's data); the guarantee of
an additive-noise event holds for that same relation. The analyses stated here do not
depend on which relation it is. Events whose analysis does depend on it (subsampling,
for instance) will carry the relation explicitly.

Serialisation
-------------
``event.to_dict()`` gives a JSON-safe dict ``{"type": <class name>, <field>: <value>, ...}``
with nested events as dicts; :func:`event_from_dict` rebuilds the event (validated).
"""

from dpkit.accounting.events._base import Event, event_from_dict, pure_epsilon, zcdp_rho
from dpkit.accounting.events.allocation import (
    MixtureOfGaussiansEvent,
    RandomAllocationGaussianEvent,
    TruncatedPoissonSampledGaussianEvent,
)
from dpkit.accounting.events.composite import (
    ComposedEvent,
    NoOpEvent,
    RepeatAndSelectEvent,
    RepeatedEvent,
)
from dpkit.accounting.events.mechanisms import (
    ApproxEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PermuteAndFlipEvent,
    PureEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SparseVectorEvent,
    TruncatedDiscreteGaussianEvent,
    TruncatedLaplaceEvent,
    ZCDPEvent,
)
from dpkit.accounting.events.sampling import PoissonSampledEvent, SampledWithoutReplacementEvent
from dpkit.accounting.events.tree import SingleEpochTreeAggregationEvent

__all__ = [
    "ApproxEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "Event",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "MixtureOfGaussiansEvent",
    "NoOpEvent",
    "PermuteAndFlipEvent",
    "PoissonSampledEvent",
    "PureEvent",
    "RandomAllocationGaussianEvent",
    "RandomizedResponseEvent",
    "RepeatAndSelectEvent",
    "RepeatedEvent",
    "ReportNoisyMaxEvent",
    "SampledWithoutReplacementEvent",
    "SingleEpochTreeAggregationEvent",
    "SparseVectorEvent",
    "TruncatedDiscreteGaussianEvent",
    "TruncatedLaplaceEvent",
    "TruncatedPoissonSampledGaussianEvent",
    "ZCDPEvent",
    "event_from_dict",
    "pure_epsilon",
    "zcdp_rho",
]
