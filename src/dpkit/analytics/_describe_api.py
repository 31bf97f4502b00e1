"""``dp.describe(data, budget=...)``: the private summary of ``dpkit describe`` in one call.

As ydata-profiling's ``ProfileReport(df)``: give a pandas DataFrame, a pyarrow Table or
the path of a CSV or Parquet file, and a budget; get a
:class:`~dpkit.report.DatasetSummary` (a ``DescribedDataset``) whose ``to_html()`` is the
report ``dpkit describe --report`` writes, ``to_json()`` the document of ``dpkit describe --json``,
and which a notebook shows as the report. The Session is opened as
:meth:`~dpkit.Session.from_path` (or ``from_pandas``, ``from_arrow``) opens it, so a
ledger written here is resumed by ``dpkit describe --ledger`` on the same file, and the
plan is ``dpkit.analytics.describe.describe``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpkit.errors import DataError, InvalidParameter

if TYPE_CHECKING:
    from dpkit.accounting.guarantees import Guarantee
    from dpkit.analytics.session import Session
    from dpkit.random import RandomLike
    from dpkit.report.profile import DescribedDataset

__all__ = ["describe"]

_EXPECTED = (
    "a pandas DataFrame, a pyarrow Table, a Polars DataFrame or LazyFrame, or the path of "
    "a CSV or Parquet file"
)


def describe(
    data: Any,
    *,
    budget: Guarantee,
    privacy_unit: str | None = None,
    columns: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    max_rows: int | None = None,
    top: int = 10,
    confidence: float = 0.95,
    weights: Mapping[str, float] | None = None,
    date_range: tuple[date, date] | None = None,
    ledger: str | Path | None = None,
    selection_delta: float | None = None,
    rng: RandomLike | None = None,
    source: str | None = None,
    schema: Mapping[str, str] | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    na_values: Sequence[str] | None = None,
) -> DescribedDataset:
    """Release a private summary of every column of ``data``, as ``dpkit describe``.

    Parameters
    ----------
    data:
        A pandas DataFrame, a pyarrow Table (both copied into DuckDB), or the path
        (``str`` or :class:`~pathlib.Path`) of a CSV (``.csv``, ``.csv.gz``, ``.tsv``)
        or Parquet file.
    budget:
        The total budget, e.g. ``dp.ApproxDP(1.0, 1e-6)`` (the command line's default);
        ``dp.PureDP(eps)`` releases no categories (key selection needs a delta);
        ``dp.ZCDP(rho)``. The summary spends all of it (of what remains, with a
        ``ledger`` that was used before).
    privacy_unit:
        The column identifying a person (default: one row per person).
    columns, exclude:
        Columns to summarise (default all), and columns not to.
    max_rows, top, confidence, weights, date_range:
        As for ``dpkit.analytics.describe.describe`` (and the options of the same
        names of ``dpkit describe``).
    ledger:
        A SQLite ledger file that persists the spend (reopening resumes it).
    selection_delta, rng:
        As for :class:`~dpkit.Session` (a seed makes the output reproducible and NOT
        private).
    source:
        The dataset's name in the report (default: the file's name, or ``"pandas"``
        / ``"arrow"``).
    schema, encoding, delimiter, na_values:
        Reading a file: as for :meth:`~dpkit.Session.from_path` (``--types``,
        ``--encoding``, ``--delimiter``, ``--na-values`` on the command line).

    Returns
    -------
    DescribedDataset
        A :class:`~dpkit.report.DatasetSummary` with ``.to_html()`` and ``.to_json()``;
        a notebook shows it as the HTML report.

    Raises
    ------
    InvalidParameter, DataError
        A bad budget or option, a missing file, an unknown column: raised before
        anything is spent.
    BudgetExceeded
        Too little budget is left for a summary (nothing spent).

    Privacy
    -------
    The whole summary satisfies ``budget`` for the privacy unit: every number is a
    release of the Session (or post-processing of releases), and the Session's filter
    refuses anything that would overspend.
    """
    from dpkit.analytics._accounting import budget_kind
    from dpkit.analytics.describe import describe as describe_session
    from dpkit.report.profile import DescribedDataset

    owner = "dp.describe"
    budget_kind(budget, selection_delta, owner)  # checked before the data is touched
    if isinstance(exclude, str) or not isinstance(exclude, Sequence):
        raise InvalidParameter.for_parameter("exclude", owner, "a list of column names", exclude)
    if isinstance(columns, str):
        raise InvalidParameter.for_parameter("columns", owner, "a list of column names", columns)
    session, name = _open(
        data,
        budget=budget,
        privacy_unit=privacy_unit,
        ledger=ledger,
        selection_delta=selection_delta,
        rng=rng,
        file_options={
            "schema": schema,
            "encoding": encoding,
            "delimiter": delimiter,
            "na_values": na_values,
        },
    )
    summary = describe_session(
        session,
        columns=_chosen(session, columns, exclude, owner),
        max_rows=max_rows,
        top=top,
        confidence=confidence,
        source=source if source is not None else name,
        date_range=date_range,
        weights=weights,
    )
    # The same fields, already validated once: building it cannot fail.
    return DescribedDataset.of(summary)


def _open(
    data: Any,
    *,
    budget: Guarantee,
    privacy_unit: str | None,
    ledger: str | Path | None,
    selection_delta: float | None,
    rng: RandomLike | None,
    file_options: dict[str, Any],
) -> tuple[Session, str | None]:
    """The Session over ``data``, and the name of its file (None for objects)."""
    from dpkit.analytics.session import Session

    common: dict[str, Any] = {
        "privacy_unit": privacy_unit,
        "budget": budget,
        "ledger": ledger,
        "selection_delta": selection_delta,
        "rng": rng,
    }
    if isinstance(data, str | Path):
        return Session.from_path(data, **common, **file_options), Path(data).name
    given = [key for key, value in file_options.items() if value is not None]
    if given:
        raise InvalidParameter(
            f"dp.describe: {', '.join(given)} apply to reading a file; data is a "
            f"{type(data).__name__}, not a path."
        )
    module = type(data).__module__.split(".")[0]
    if module == "pandas" and type(data).__name__ == "DataFrame":
        return Session.from_pandas(data, **common), None
    if module == "pyarrow" and type(data).__name__ == "Table":
        return Session.from_arrow(data, **common), None
    if module == "polars" and type(data).__name__ in ("DataFrame", "LazyFrame"):
        return Session.from_polars(data, **common), None
    raise DataError(f"dp.describe: data must be {_EXPECTED}; got {type(data).__name__}.")


def _chosen(
    session: Session, columns: Sequence[str] | None, exclude: Sequence[str], owner: str
) -> list[str] | None:
    """The columns to summarise: ``columns`` (default all) without ``exclude``."""
    if not exclude:
        return None if columns is None else list(columns)
    schema = session.columns
    unknown = [c for c in exclude if c not in schema]
    if unknown:
        raise DataError(
            f"{owner}: exclude names column(s) {unknown} that the table does not have. "
            f"Available columns: {sorted(schema)}."
        )
    wanted = list(schema) if columns is None else list(columns)
    return [c for c in wanted if c not in set(exclude)]
