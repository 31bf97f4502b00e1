"""What a synthesis run returns: the table, its guarantee, and an honest fidelity report.

The fidelity report compares the synthetic table with the *noisy measurements* the run
made -- released values, so the comparison is free and private. A comparison with the
real data is not private; :meth:`SyntheticData.compare_with_real` exists for
evaluation only and says so in every row it returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from dpkit.accounting.guarantees import Guarantee
from dpkit.errors import InvalidParameter
from dpkit.synth._columns import ColumnCode
from dpkit.synth._domain import Domain, Measurement, marginal_counts

__all__ = ["SyntheticData"]


def _recode(frame: pd.DataFrame, codings: Sequence[ColumnCode]) -> npt.NDArray[np.int64]:
    """Codes of a DataFrame's rows in Python (evaluation only; the private path codes
    in SQL). Rows a ``nulls=False`` column would drop get the last code here."""
    out = np.empty((len(frame), len(codings)), dtype=np.int64)
    for j, c in enumerate(codings):
        column = frame[c.name]
        missing = column.isna().to_numpy()
        last = c.size - 1
        if c.categorical:
            index = {v: i for i, v in enumerate(c.values)}
            codes = np.array([index.get(v, last) for v in column.astype(object)], dtype=np.int64)
        else:
            if c.category in ("date", "timestamp", "timestamptz"):
                unit = "D" if c.category == "date" else "us"
                values = pd.to_datetime(column).to_numpy().astype(f"datetime64[{unit}]")
                numbers = values.astype(np.int64).astype(np.float64)
            else:
                numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
            missing = missing | np.isnan(numbers)
            codes = c.code_numbers(numbers)
        codes[missing] = last
        out[:, j] = codes
    return out


@dataclass(frozen=True)
class SyntheticData:
    """A private synthetic table (``data``) and how it was made.

    Attributes
    ----------
    data:
        The synthetic rows, one column per synthesized column, with the original
        column types (NULL where a row's code stands for missing or unlisted values).
    method:
        ``"mst"`` or ``"aim"``.
    guarantee:
        What the run cost: a :class:`~dpkit.ZCDP` (and, in an ApproxDP Session, what it
        is worth at the Session's conversion delta, in ``notes``).
    measurements:
        The noisy marginals, over the coded domain ``domain``: everything the data
        released; the table is post-processing of them.
    """

    data: pd.DataFrame
    method: str
    guarantee: Guarantee
    measurements: tuple[Measurement, ...]
    domain: Domain
    labels: dict[str, list[str]]
    notes: tuple[str, ...] = ()
    codes: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    codings: tuple[ColumnCode, ...] = ()

    def fidelity(self) -> pd.DataFrame:
        """Per measurement: the L1 distance between the synthetic table's marginal and
        the noisy measurement, both as fractions of their totals, next to the noise's
        own expected L1 size (``sqrt(2/pi) sigma cells / total``) -- a synthetic marginal
        closer than that is as close as the measurement can tell. Private (it reads
        released values only)."""
        rows = []
        n = max(len(self.data), 1)
        for m in self.measurements:
            synthetic = marginal_counts(self.codes, self.domain, m.columns) / n
            measured = np.clip(m.values, 0, None)
            total = measured.sum()
            measured = measured / total if total > 0 else measured
            rows.append(
                {
                    "marginal": " x ".join(m.columns),
                    "cells": int(m.values.size),
                    "sigma": m.sigma,
                    "l1_vs_measured": float(np.abs(synthetic - measured).sum()),
                    "expected_noise_l1": float(
                        math.sqrt(2 / math.pi) * m.sigma * m.values.size / max(m.values.sum(), 1.0)
                    ),
                }
            )
        return pd.DataFrame(rows)

    def compare_with_real(
        self, real: pd.DataFrame, marginals: Sequence[Sequence[str]]
    ) -> pd.DataFrame:
        """NOT PRIVATE -- for evaluation on data you may look at: the L1 distance
        between the normalised marginals of ``real`` and of the synthetic table over
        the run's codes (the same categories and bins), per marginal in ``marginals``.
        Every row says ``private = False``."""
        if not self.codings:
            raise InvalidParameter("compare_with_real: this result has no column codings.")
        real_codes = _recode(real, self.codings)
        synthetic_codes = _recode(self.data, self.codings)
        domain = Domain(tuple(c.name for c in self.codings), tuple(c.size for c in self.codings))
        rows = []
        for marginal in marginals:
            names = tuple(marginal)
            for name in names:
                if name not in domain.names:
                    raise InvalidParameter(f"compare_with_real: unknown column {name!r}.")
            a = marginal_counts(real_codes, domain, names)
            b = marginal_counts(synthetic_codes, domain, names)
            a, b = a / max(a.sum(), 1.0), b / max(b.sum(), 1.0)
            rows.append(
                {
                    "marginal": " x ".join(names),
                    "l1_vs_real": float(np.abs(a - b).sum()),
                    "private": False,
                }
            )
        return pd.DataFrame(rows)

    def to_csv(self, path: str | Path) -> None:
        """Write the synthetic table as CSV."""
        self.data.to_csv(path, index=False)

    def to_parquet(self, path: str | Path) -> None:
        """Write the synthetic table as Parquet."""
        self.data.to_parquet(path, index=False)

    def to_html(
        self, title: str = "dpkit synthetic data", real_comparison: pd.DataFrame | None = None
    ) -> str:
        """The fidelity report as one HTML page (inline plots; private: it reads the
        synthetic table and the noisy measurements only). ``real_comparison`` -- the
        output of :meth:`compare_with_real`, NOT private -- adds a section marked so."""
        from dpkit.synth._report import html_report

        return html_report(self, title, real_comparison)  # type: ignore[arg-type]

    def summary(self) -> str:
        """A few lines: method, size, guarantee, measurements."""
        lines = [
            f"{self.method.upper()} synthetic data: {len(self.data)} rows x "
            f"{self.data.shape[1]} columns, {self.guarantee!r}.",
            f"{len(self.measurements)} noisy marginals measured: "
            + ", ".join(" x ".join(m.columns) for m in self.measurements[:12])
            + (" ..." if len(self.measurements) > 12 else ""),
            *self.notes,
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"SyntheticData({self.method!r}, rows={len(self.data)}, {self.guarantee!r})"
