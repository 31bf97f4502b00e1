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

from dpkit import errors
from dpkit._version import __version__
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

if TYPE_CHECKING:
    from dpkit import (
        accounting,
        analytics,
        audit,
        design,
        estimators,
        groupwise,
        learn,
        mechanisms,
        noise,
        random,
        reliability,
        selection,
        synth,
        tools,
    )
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
    from dpkit.analytics import KeySet, Query, Session
    from dpkit.analytics._describe_api import describe
    from dpkit.design import design_noise
    from dpkit.estimators import (
        Grid,
        count_distinct,
        max,
        median,
        min,
        quantile,
        shifted_inverse_sensitivity,
        user_count,
        user_sum,
    )
    from dpkit.estimators.inverse_sensitivity import inverse_sensitivity as inverse_sensitivity
    from dpkit.estimators.quantiles import quantiles as quantiles
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
    )
    from dpkit.mechanisms.gaussian import gaussian as gaussian
    from dpkit.mechanisms.laplace import laplace as laplace
    from dpkit.mechanisms.randomized_response import randomized_response as randomized_response
    from dpkit.mechanisms.subsampled_laplace import subsampled_laplace as subsampled_laplace
    from dpkit.mechanisms.truncated_laplace import truncated_laplace as truncated_laplace
    from dpkit.random import Random, as_random
    from dpkit.selection import (
        ExponentialMechanism,
        PermuteAndFlip,
        ReportNoisyMax,
        SparseVector,
        noisy_binary_search,
        permute_and_flip,
        report_noisy_max,
        select_by_tree,
        tune,
    )
    from dpkit.selection.exponential import exponential as exponential
    from dpkit.selection.sparse_vector import sparse_vector as sparse_vector
    from dpkit.synth import synthesize
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

else:
    # Every subpackage and name loads on first use (PEP 562), so ``import dpkit`` takes
    # milliseconds and the ``dpkit`` command loads only what it runs (issue 34: it
    # loaded every module up front, ~0.2 s). Hidden from the type checker, which would
    # otherwise accept any misspelt ``dp.<name>``; the type checker reads the imports
    # above instead (functions named like their own module, such as ``laplace``, from
    # that module: mypy takes the package-level name for a redefinition).
    _LAZY = {
        "accounting": ("dpkit.accounting", ""),
        "audit": ("dpkit.audit", ""),
        "design": ("dpkit.design", ""),
        "estimators": ("dpkit.estimators", ""),
        "groupwise": ("dpkit.groupwise", ""),
        "learn": ("dpkit.learn", ""),
        "mechanisms": ("dpkit.mechanisms", ""),
        "noise": ("dpkit.noise", ""),
        "random": ("dpkit.random", ""),
        "reliability": ("dpkit.reliability", ""),
        "selection": ("dpkit.selection", ""),
        "tools": ("dpkit.tools", ""),
        "RDP": ("dpkit.accounting", "RDP"),
        "ZCDP": ("dpkit.accounting", "ZCDP"),
        "AdvancedCompositionFilter": ("dpkit.accounting", "AdvancedCompositionFilter"),
        "ApproxDP": ("dpkit.accounting", "ApproxDP"),
        "ApproxDPFilter": ("dpkit.accounting", "ApproxDPFilter"),
        "PureDP": ("dpkit.accounting", "PureDP"),
        "PureDPFilter": ("dpkit.accounting", "PureDPFilter"),
        "RDPFilter": ("dpkit.accounting", "RDPFilter"),
        "ZCDPFilter": ("dpkit.accounting", "ZCDPFilter"),
        "privacy_filter": ("dpkit.accounting", "privacy_filter"),
        "design_noise": ("dpkit.design", "design_noise"),
        "Grid": ("dpkit.estimators", "Grid"),
        "count_distinct": ("dpkit.estimators", "count_distinct"),
        "inverse_sensitivity": ("dpkit.estimators", "inverse_sensitivity"),
        "max": ("dpkit.estimators", "max"),
        "median": ("dpkit.estimators", "median"),
        "min": ("dpkit.estimators", "min"),
        "quantile": ("dpkit.estimators", "quantile"),
        "quantiles": ("dpkit.estimators", "quantiles"),
        "shifted_inverse_sensitivity": ("dpkit.estimators", "shifted_inverse_sensitivity"),
        "user_count": ("dpkit.estimators", "user_count"),
        "user_sum": ("dpkit.estimators", "user_sum"),
        "DiscreteGaussian": ("dpkit.mechanisms", "DiscreteGaussian"),
        "DiscreteLaplace": ("dpkit.mechanisms", "DiscreteLaplace"),
        "ErrorBound": ("dpkit.mechanisms", "ErrorBound"),
        "Gaussian": ("dpkit.mechanisms", "Gaussian"),
        "Laplace": ("dpkit.mechanisms", "Laplace"),
        "Mechanism": ("dpkit.mechanisms", "Mechanism"),
        "RandomizedResponse": ("dpkit.mechanisms", "RandomizedResponse"),
        "Release": ("dpkit.mechanisms", "Release"),
        "SubsampledLaplace": ("dpkit.mechanisms", "SubsampledLaplace"),
        "TruncatedLaplace": ("dpkit.mechanisms", "TruncatedLaplace"),
        "discrete_gaussian": ("dpkit.mechanisms", "discrete_gaussian"),
        "discrete_laplace": ("dpkit.mechanisms", "discrete_laplace"),
        "gaussian": ("dpkit.mechanisms", "gaussian"),
        "laplace": ("dpkit.mechanisms", "laplace"),
        "randomized_response": ("dpkit.mechanisms", "randomized_response"),
        "subsampled_laplace": ("dpkit.mechanisms", "subsampled_laplace"),
        "truncated_laplace": ("dpkit.mechanisms", "truncated_laplace"),
        "Random": ("dpkit.random", "Random"),
        "as_random": ("dpkit.random", "as_random"),
        "ExponentialMechanism": ("dpkit.selection", "ExponentialMechanism"),
        "PermuteAndFlip": ("dpkit.selection", "PermuteAndFlip"),
        "ReportNoisyMax": ("dpkit.selection", "ReportNoisyMax"),
        "SparseVector": ("dpkit.selection", "SparseVector"),
        "exponential": ("dpkit.selection", "exponential"),
        "noisy_binary_search": ("dpkit.selection", "noisy_binary_search"),
        "permute_and_flip": ("dpkit.selection", "permute_and_flip"),
        "report_noisy_max": ("dpkit.selection", "report_noisy_max"),
        "select_by_tree": ("dpkit.selection", "select_by_tree"),
        "sparse_vector": ("dpkit.selection", "sparse_vector"),
        "tune": ("dpkit.selection", "tune"),
        "ClippedErrorBound": ("dpkit.tools", "ClippedErrorBound"),
        "count": ("dpkit.tools", "count"),
        "histogram": ("dpkit.tools", "histogram"),
        "histogram2d": ("dpkit.tools", "histogram2d"),
        "mean": ("dpkit.tools", "mean"),
        "std": ("dpkit.tools", "std"),
        "sum": ("dpkit.tools", "sum"),
        "var": ("dpkit.tools", "var"),
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
