"""Privacy accounting: guarantees, conversions, composition and mechanism analyses.

Guarantees (:class:`PureDP`, :class:`ApproxDP`, :class:`ZCDP`, :class:`RDP`) are frozen
values that compose with ``+`` and convert explicitly, never looser than the tight
conversion. Events describe what a mechanism ran; :func:`pure_epsilon` and
:func:`zcdp_rho` state their cost. The mechanism analyses (Laplace RDP, Gaussian and
discrete Gaussian profiles and calibration) and the composition theorems are plain
functions. Every bound returned is rounded in the conservative direction.
"""

from dpkit.accounting._math.discrete_gaussian import (
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    discrete_gaussian_rho,
)
from dpkit.accounting._math.gaussian import (
    gaussian_delta,
    gaussian_epsilon,
    gaussian_rho,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
)
from dpkit.accounting._math.laplace import laplace_rdp
from dpkit.accounting.accountant import Accountant
from dpkit.accounting.calibrate import calibrate, dpsgd_epsilon, dpsgd_noise_multiplier
from dpkit.accounting.composition import (
    advanced_composition,
    compose_pure_via_zcdp,
    optimal_composition,
)
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PermuteAndFlipEvent,
    PoissonSampledEvent,
    PureEvent,
    RandomizedResponseEvent,
    RepeatAndSelectEvent,
    RepeatedEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SingleEpochTreeAggregationEvent,
    SparseVectorEvent,
    TruncatedLaplaceEvent,
    ZCDPEvent,
    event_from_dict,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.filters import (
    AdvancedCompositionFilter,
    ApproxDPFilter,
    ApproxDPOdometer,
    ApproxZCDP,
    ApproxZCDPFilter,
    PrivacyFilter,
    PrivacyOdometer,
    PureDPFilter,
    PureDPOdometer,
    RDPFilter,
    RDPOdometer,
    ZCDPFilter,
    ZCDPOdometer,
    privacy_filter,
)
from dpkit.accounting.guarantees import DEFAULT_ORDERS, RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.accounting.pld import PLDAccountant
from dpkit.accounting.rdp import RDPAccountant, event_rdp
from dpkit.accounting.simple import PureAccountant, ZCDPAccountant
from dpkit.accounting.subsampling import (
    OptionalDependencyError,
    amplified_delta,
    amplified_epsilon,
    amplify,
    epsilon_before_sampling,
    noise_ratio,
    noise_ratio_lower_bound,
    plot_noise_ratio,
)
from dpkit.accounting.tradeoff import (
    approx_dp_tradeoff,
    gaussian_tradeoff,
    gdp_mu,
    max_true_positive_rate,
    tradeoff_curve,
)

__all__ = [
    "DEFAULT_ORDERS",
    "RDP",
    "ZCDP",
    "Accountant",
    "AdvancedCompositionFilter",
    "ApproxDP",
    "ApproxDPFilter",
    "ApproxDPOdometer",
    "ApproxEvent",
    "ApproxZCDP",
    "ApproxZCDPFilter",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "Event",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "Guarantee",
    "LaplaceEvent",
    "NoOpEvent",
    "OptionalDependencyError",
    "PLDAccountant",
    "PermuteAndFlipEvent",
    "PoissonSampledEvent",
    "PrivacyFilter",
    "PrivacyOdometer",
    "PureAccountant",
    "PureDP",
    "PureDPFilter",
    "PureDPOdometer",
    "PureEvent",
    "RDPAccountant",
    "RDPFilter",
    "RDPOdometer",
    "RandomizedResponseEvent",
    "RepeatAndSelectEvent",
    "RepeatedEvent",
    "ReportNoisyMaxEvent",
    "SampledWithoutReplacementEvent",
    "SingleEpochTreeAggregationEvent",
    "SparseVectorEvent",
    "TruncatedLaplaceEvent",
    "ZCDPAccountant",
    "ZCDPEvent",
    "ZCDPFilter",
    "ZCDPOdometer",
    "advanced_composition",
    "amplified_delta",
    "amplified_epsilon",
    "amplify",
    "approx_dp_tradeoff",
    "calibrate",
    "compose_pure_via_zcdp",
    "discrete_gaussian_delta",
    "discrete_gaussian_epsilon",
    "discrete_gaussian_rho",
    "dpsgd_epsilon",
    "dpsgd_noise_multiplier",
    "epsilon_before_sampling",
    "event_from_dict",
    "event_rdp",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_rho",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classic",
    "gaussian_tradeoff",
    "gdp_mu",
    "laplace_rdp",
    "max_true_positive_rate",
    "noise_ratio",
    "noise_ratio_lower_bound",
    "optimal_composition",
    "plot_noise_ratio",
    "privacy_filter",
    "pure_epsilon",
    "tradeoff_curve",
    "zcdp_rho",
]
