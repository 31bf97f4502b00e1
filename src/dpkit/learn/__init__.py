"""scikit-learn compatible DP models: logistic and linear regression, naive Bayes, scaling.

Every model takes its privacy parameters (``epsilon=``, ``delta=``) and public bounds
in the constructor, follows scikit-learn's estimator API (``fit``/``predict``/``score``,
``get_params``/``set_params``, usable in pipelines, ``clone``-able), and after ``fit``
carries the ``event`` and ``guarantee`` of that fit. Bounds are never read from the
data; sums are exact (fixed point) and noise comes from :mod:`dpkit.noise`.

``LogisticRegression``  noisy gradient descent / DP-SGD, (epsilon, delta)-DP
``LinearRegression``    sufficient-statistics perturbation, epsilon-DP (or (epsilon, delta))
``GaussianNB``          Gaussian naive Bayes from noisy class counts, sums and squares
``SparseLogisticRegression``  L1-regularised logistic regression, DP coordinate descent
``StandardScaler``      DP means and standard deviations within public bounds
``MinMaxScaler``        public bounds mapped to a range: no data read, no budget spent
``UnscaledFeaturesWarning``  a gradient-trained model got no public scale (bounds=)

Needs scikit-learn (``pip install 'dpkit[learn]'``); it is imported on first use, so
``import dpkit`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpkit.learn._base import UnscaledFeaturesWarning
    from dpkit.learn.linear import LinearRegression
    from dpkit.learn.logistic import LogisticRegression
    from dpkit.learn.naive_bayes import GaussianNB
    from dpkit.learn.preprocessing import MinMaxScaler, StandardScaler
    from dpkit.learn.sparse_logistic import SparseLogisticRegression

__all__ = [
    "GaussianNB",
    "LinearRegression",
    "LogisticRegression",
    "MinMaxScaler",
    "SparseLogisticRegression",
    "StandardScaler",
    "UnscaledFeaturesWarning",
]

_HOMES = {
    "GaussianNB": "dpkit.learn.naive_bayes",
    "LinearRegression": "dpkit.learn.linear",
    "LogisticRegression": "dpkit.learn.logistic",
    "MinMaxScaler": "dpkit.learn.preprocessing",
    "SparseLogisticRegression": "dpkit.learn.sparse_logistic",
    "StandardScaler": "dpkit.learn.preprocessing",
    "UnscaledFeaturesWarning": "dpkit.learn._base",
}


def __getattr__(name: str) -> Any:
    # PEP 562: scikit-learn (about 0.5 s to import) loads with the first model used.
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(_HOMES[name])
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] == "sklearn":
            raise ImportError("dpkit.learn needs scikit-learn: pip install 'dpkit[learn]'") from err
        raise
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(__all__)
