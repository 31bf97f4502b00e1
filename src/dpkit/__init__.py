"""dpkit: differential privacy with exact noise, tight accounting and calibrated mechanisms.

``import dpkit as dp`` gives the public API; nothing outside these names is public.

Module map
----------
::

    dp.random       secure (default) and seeded random bits; as_random, Random
    dp.noise        exact samplers: discrete Laplace/Gaussian, Bernoulli(exp(-x)), and
                        continuous Laplace/Gaussian/truncated Laplace rounded exactly to a grid
    dp.accounting   guarantees (PureDP, ApproxDP, ZCDP, RDP), conversions,
                        composition theorems, events
    dp.mechanisms   Laplace, Gaussian, their discrete versions, truncated Laplace,
                        randomized response (also re-exported here)
    dp.selection    exponential mechanism, report-noisy-max, permute-and-flip, sparse
                        vector (also re-exported here)
    dp.tools        array tools: count, sum, mean, var, std, histogram(2d) with public bounds
                        and an interval (also re-exported here)
    dp.learn        scikit-learn compatible DP models (logistic/linear regression, naive Bayes)
    dp.reliability  never-fail constructions: absorb failure into delta, repeat until success
    dp.design       optimal noise by linear programming
    dp.synth        private synthetic data (MST, AIM) on the Session's ledger
    dp.groupwise    group-wise privacy: two-stage noise and its numerical analysis
    dp.audit        lower bounds on epsilon at a confidence: black-box, one-run (SNJ23),
                        and the floating-point reachability attack (Mironov 2012)
    dp.testing      distribution assertions and contract checks for mechanism authors
    dp.errors       the exception hierarchy (also re-exported here)
"""

from typing import TYPE_CHECKING

from dpkit import (
    accounting,
    audit,
    design,
    errors,
    estimators,
    groupwise,
    learn,
    mechanisms,
    noise,
    random,
    reliability,
    selection,
    tools,
)
from dpkit._version import __version__
from dpkit.accounting import (
    RDP,
    ZCDP,
    AdvancedCompositionFilter,
    ApproxDP,
    ApproxDPFilter,
    PureDP,
    PureDPFilter,
    RDPFilter,
    ZCDPFilter,
    privacy_filter,
)
from dpkit.design import design_noise
from dpkit.errors import (
    BudgetExceeded,
    CandidateFailed,
    DataError,
    DPError,
    DPWarning,
    EngineError,
    InsecureRandomWarning,
    InternalError,
    InvalidParameter,
    SessionLocked,
    SqlError,
    UnsupportedEvent,
    WeakGuaranteeWarning,
)
from dpkit.estimators import (
    Grid,
    count_distinct,
    inverse_sensitivity,
    max,
    median,
    min,
    quantile,
    quantiles,
    shifted_inverse_sensitivity,
    user_count,
    user_sum,
)
from dpkit.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ErrorBound,
    Gaussian,
    Laplace,
    Mechanism,
    RandomizedResponse,
    Release,
    SubsampledLaplace,
    TruncatedLaplace,
    discrete_gaussian,
    discrete_laplace,
    gaussian,
    laplace,
    randomized_response,
    subsampled_laplace,
    truncated_laplace,
)
from dpkit.random import Random, as_random
from dpkit.selection import (
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    SparseVector,
    exponential,
    noisy_binary_search,
    permute_and_flip,
    report_noisy_max,
    select_by_tree,
    sparse_vector,
    tune,
)
from dpkit.tools import (
    ClippedErrorBound,
    count,
    histogram,
    histogram2d,
    mean,
    std,
    sum,
    var,
)

if TYPE_CHECKING:
    from dpkit import analytics, synth
    from dpkit.analytics import KeySet, Query, Session
    from dpkit.analytics._describe_api import describe
    from dpkit.synth import synthesize
else:
    # The analytics Session (and its engine, ledger and query compiler) loads on first
    # use, so ``import dpkit`` and the ``dpkit`` command stay fast (PEP 562). Hidden from
    # the type checker, which would otherwise accept any misspelt ``dp.<name>``.
    _LAZY = {
        "analytics": ("dpkit.analytics", ""),
        "KeySet": ("dpkit.analytics", "KeySet"),
        "Query": ("dpkit.analytics", "Query"),
        "Session": ("dpkit.analytics", "Session"),
        "describe": ("dpkit.analytics._describe_api", "describe"),
        "synth": ("dpkit.synth", ""),
        "synthesize": ("dpkit.synth", "synthesize"),
    }

    def __getattr__(name: str) -> object:
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        module_name, attribute = _LAZY[name]
        module = importlib.import_module(module_name)
        value = getattr(module, attribute) if attribute else module
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "RDP",
    "ZCDP",
    "AdvancedCompositionFilter",
    "ApproxDP",
    "ApproxDPFilter",
    "BudgetExceeded",
    "CandidateFailed",
    "ClippedErrorBound",
    "DPError",
    "DPWarning",
    "DataError",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "EngineError",
    "ErrorBound",
    "ExponentialMechanism",
    "Gaussian",
    "Grid",
    "InsecureRandomWarning",
    "InternalError",
    "InvalidParameter",
    "KeySet",
    "Laplace",
    "Mechanism",
    "PermuteAndFlip",
    "PureDP",
    "PureDPFilter",
    "Query",
    "RDPFilter",
    "Random",
    "RandomizedResponse",
    "Release",
    "ReportNoisyMax",
    "Session",
    "SessionLocked",
    "SparseVector",
    "SqlError",
    "SubsampledLaplace",
    "TruncatedLaplace",
    "UnsupportedEvent",
    "WeakGuaranteeWarning",
    "ZCDPFilter",
    "__version__",
    "accounting",
    "analytics",
    "as_random",
    "audit",
    "count",
    "count_distinct",
    "describe",
    "design",
    "design_noise",
    "discrete_gaussian",
    "discrete_laplace",
    "errors",
    "estimators",
    "exponential",
    "gaussian",
    "groupwise",
    "histogram",
    "histogram2d",
    "inverse_sensitivity",
    "laplace",
    "learn",
    "max",
    "mean",
    "mechanisms",
    "median",
    "min",
    "noise",
    "noisy_binary_search",
    "permute_and_flip",
    "privacy_filter",
    "quantile",
    "quantiles",
    "random",
    "randomized_response",
    "reliability",
    "report_noisy_max",
    "select_by_tree",
    "selection",
    "shifted_inverse_sensitivity",
    "sparse_vector",
    "std",
    "subsampled_laplace",
    "sum",
    "synth",
    "synthesize",
    "tools",
    "truncated_laplace",
    "tune",
    "user_count",
    "user_sum",
    "var",
]
