"""Private synthetic data: MST and AIM, measured through the Session and its ledger.

``session.synthesize(budget=..., method="aim" | "mst", domains=...)`` (or
:func:`synthesize` on a DataFrame or a file) measures noisy marginals of the table --
discrete Gaussian noise, zCDP accounting, every person's contribution bounded -- and
samples a synthetic table from a graphical model fitted to them (Private-PGM's
estimator, McKenna, Sheldon & Miklau, ICML 2019, in NumPy: ``dpkit.synth._graphical``).

* MST -- McKenna, Miklau & Sheldon, JPC 2021 (``dpkit.synth._mst``);
* AIM -- McKenna, Mullins, Sheldon & Miklau, PVLDB 2022 (``dpkit.synth._aim``).

Guarantee: the run is ``rho``-zCDP w.r.t. the privacy unit for the budget it is
charged (once); the synthetic table, the fitted model and the fidelity report are
post-processing of the noisy measurements. See docs/synth.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dpkit.accounting.guarantees import Guarantee
from dpkit.random import RandomLike
from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._result import SyntheticData
from dpkit.synth._specs import Bins, Categories, PrivateBins

__all__ = [
    "Bins",
    "Categories",
    "Domain",
    "Measurement",
    "PrivateBins",
    "SyntheticData",
    "synthesize",
]


def synthesize(
    data: Any,
    *,
    budget: Guarantee,
    method: str = "aim",
    columns: Sequence[str] | None = None,
    domains: Mapping[str, object] | None = None,
    rows: int | None = None,
    privacy_unit: str | None = None,
    max_rows: int = 1,
    workload: Sequence[Sequence[str]] | None = None,
    rng: RandomLike | None = None,
    progress: Callable[[str], None] | None = None,
    mst_split: Sequence[float] | None = None,
) -> SyntheticData:
    """A private synthetic copy of ``data`` (a pandas DataFrame, a pyarrow Table, a
    Polars DataFrame or LazyFrame, or a CSV/Parquet path) spending all of ``budget``
    (``ZCDP`` or ``ApproxDP``).

    A one-off Session over ``data`` runs :meth:`dpkit.analytics.Session.synthesize`; see
    it for the parameters and the guarantee. Use a Session directly to keep a ledger or
    to spend the budget on other queries too.
    """
    from dpkit.analytics import Session
    from dpkit.analytics._sources import is_polars

    if isinstance(data, str | Path):
        session = Session.from_path(data, privacy_unit=privacy_unit, budget=budget, rng=rng)
    elif type(data).__module__.startswith("pyarrow"):
        session = Session.from_arrow(data, privacy_unit=privacy_unit, budget=budget, rng=rng)
    elif is_polars(data):
        session = Session.from_polars(data, privacy_unit=privacy_unit, budget=budget, rng=rng)
    else:
        session = Session.from_pandas(data, privacy_unit=privacy_unit, budget=budget, rng=rng)
    return session.synthesize(
        budget="remaining",
        method=method,
        columns=columns,
        domains=domains,
        rows=rows,
        max_rows=max_rows,
        workload=workload,
        progress=progress,
        mst_split=mst_split,
    )
