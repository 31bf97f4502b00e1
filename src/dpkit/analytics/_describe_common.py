"""Shared pieces of ``dpkit describe``'s query runner: the budget split, derived
column names, and the runner's base (how one query is built and evaluated).

:mod:`dpkit.analytics.describe` runs the plan; :mod:`dpkit.analytics._describe_numeric`
summarises numeric and date columns; both build on :class:`RunnerBase` here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from dpkit.accounting.guarantees import ZCDP, Guarantee, PureDP
from dpkit.analytics._describe_stages import missing_share
from dpkit.analytics.query import Query
from dpkit.analytics.session import Session
from dpkit.errors import BudgetExceeded, DataError, DPError, EngineError, InvalidParameter
from dpkit.report.model import BudgetShare, ColumnKind, Statistic

#: With a privacy unit: groups (categories, histogram bins) of one query a person counts
#: in; the engine keeps that many by a keyed hash of the person's own rows.
MAX_GROUPS_PER_PERSON = 5

T = TypeVar("T")
#: One column's summary as a generator of its queries: it yields ``(query, budget)``,
#: is sent the query's result, and returns what it computed. :meth:`RunnerBase.run`
#: advances every column's generator one query at a time, so that the queries of one
#: stage (every column's count and mean, every column's percentiles) are evaluated
#: together, their rows read in shared scans (issue 34). Each column's decisions are
#: those of a sequential run: they read that column's releases only.
Steps = Generator[tuple[Query, Guarantee], Any, T]

#: What the Session raises for a query it refuses before charging it (nothing of that
#: query spent). SessionLocked -- a failure after a charge -- is not one of them.
REFUSALS = (InvalidParameter, DataError, BudgetExceeded, EngineError)


def fresh_name(stem: str, taken: Iterable[str]) -> str:
    """``stem``, or else ``stem_2``, ``stem_3``, ...: the first name equal to none of
    ``taken``, even ignoring case (DuckDB and Spark resolve names case-insensitively).

    describe's derived columns (``<date>__epoch``, ``<bool>__flag``, ...) are named with
    it: a table column of the same name must neither make a query fail after others
    spent nor be read in the derived column's place. The choice depends on the public
    schema only, so ``--dry-run`` (:func:`dpkit.cli._dryrun.describe_plan`) makes it
    the same way.
    """
    folded = {t.casefold() for t in taken} | {t.lower() for t in taken}
    name, suffix = stem, 1
    while name.casefold() in folded or name.lower() in folded:
        suffix += 1
        name = f"{stem}_{suffix}"
    return name


def derive(query: Query, schema: Iterable[str], stem: str, expression: str) -> tuple[Query, str]:
    """``query`` with a derived column computed by ``expression``, under a fresh name
    (:func:`fresh_name` against the table's columns and the query's derived ones)."""
    name = fresh_name(stem, [*schema, *(n for n, _ in query.derived)])
    return query.with_column(name, expression), name


@dataclass(frozen=True)
class DescribePlan:
    """What :func:`describe` will run, decided from public information only.

    Attributes
    ----------
    columns:
        ``(name, kind)`` of every column summarised, in table order.
    skipped:
        ``(name, reason)`` of the columns left out.
    share:
        The fraction of the Session's total budget given to the row count (weight 1).
    shares:
        The fraction given to each column, in the order of ``columns`` (weight ``w``:
        ``w / (1 + sum of the weights)``, rounded down); with ``share`` they add up to
        at most 1 (exactly 1 up to rounding).
    weights:
        Each column's weight, in the order of ``columns`` (1 unless ``weights`` said
        otherwise).
    max_rows:
        Rows per person kept per query (contribution bound), or None with one row per
        person.
    date_range:
        The public range of dates (seconds since the epoch) over which the range of
        a date or time column is searched.
    """

    columns: tuple[tuple[str, ColumnKind], ...]
    skipped: tuple[tuple[str, str], ...]
    share: float
    max_rows: int | None
    date_range: tuple[float, float] = (-2208988800.0, 4102444800.0)
    shares: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        # Equal shares when none are given (the plan before per-column weights).
        if not self.shares:
            object.__setattr__(self, "shares", (self.share,) * len(self.columns))
        if not self.weights:
            object.__setattr__(self, "weights", (1.0,) * len(self.columns))

    def share_of(self, column: str) -> float:
        """The fraction of the Session's total budget given to ``column``."""
        names = [name for name, _ in self.columns]
        return self.shares[names.index(column)]

    @property
    def steps(self) -> int:
        """Number of queries the plan runs (for progress bars)."""
        return 1 + sum(4 if kind != "categorical" else 1 for _, kind in self.columns)


class _Shares:
    """Turns fractions of the budget into the Session's currency, and records them."""

    def __init__(self, session: Session, total: Guarantee, plan: DescribePlan) -> None:
        self._total = total
        self.share = plan.share  # the row count's
        self._columns = {name: s for (name, _), s in zip(plan.columns, plan.shares, strict=True)}
        self.lines: list[BudgetShare] = []
        # The Session's query currency: PureDP for PureDP budgets, ZCDP otherwise.
        self.currency = session.remaining

    def of(self, column: str) -> float:
        """The fraction of the total budget given to ``column``."""
        return self._columns[column]

    def take(self, fraction: float, label: str, mechanism: str) -> Guarantee:
        """The guarantee worth ``fraction`` of the total, rounded down, recorded."""
        part = _scaled(self.currency, fraction)
        self.lines.append(BudgetShare(label, part, mechanism, fraction))
        return part

    def skip(self, fraction: float, label: str) -> None:
        """Record a share left unspent (it stays in the Session)."""
        self.lines.append(BudgetShare(label, _scaled(self.currency, fraction), "unspent", 0.0))

    def shrink(self, factor: float) -> None:
        """Scale every share not yet spent by ``factor`` < 1 (rounded down): to make room
        for a stage the plan did not count (the private choice of ``max_rows``)."""
        self.share = math.nextafter(self.share * factor, 0.0)
        self._columns = {n: math.nextafter(f * factor, 0.0) for n, f in self._columns.items()}

    def reallocate(self, freed: Mapping[str, float], extra: float = 0.0) -> None:
        """Drop the columns of ``freed`` (name -> the fraction of the budget they leave
        unspent) and give those fractions, and ``extra``, to the other columns in
        proportion to their shares (rounded down, so the total never grows): a decision
        made from released numbers only (post-processing), so the new split is private
        too."""
        extra += sum(freed.values())
        rest = {n: f for n, f in self._columns.items() if n not in freed}
        total = sum(rest.values())
        if total <= 0.0 or extra <= 0.0:
            return
        # Exact arithmetic, each share rounded down: the shares never add up to more.
        grow = (Fraction(total) + Fraction(extra)) / Fraction(total)
        self._columns = {
            n: (_float_down(Fraction(f) * grow) if n in rest else 0.0)
            for n, f in self._columns.items()
        }


def _amount(guarantee: Guarantee) -> float:
    if isinstance(guarantee, PureDP):
        return guarantee.epsilon
    if isinstance(guarantee, ZCDP):
        return guarantee.rho
    raise InvalidParameter(
        f"describe: the Session's query currency must be PureDP or ZCDP; got {guarantee!r}."
    )


def _scaled(guarantee: Guarantee, fraction: float) -> Guarantee:
    # Round down so that the shares never add up to more than the total.
    if isinstance(guarantee, PureDP):
        return PureDP(math.nextafter(guarantee.epsilon * fraction, 0.0))
    if isinstance(guarantee, ZCDP):
        return ZCDP(math.nextafter(guarantee.rho * fraction, 0.0))
    raise InvalidParameter(
        f"describe: the Session's query currency must be PureDP or ZCDP; got {guarantee!r}."
    )


def _float_down(value: Fraction) -> float:
    """The largest float at most ``value``."""
    number = float(value)
    return math.nextafter(number, 0.0) if Fraction(number) > value else number


class RunnerBase:
    """How describe builds and runs one query against a Session, and the releases later
    stages plan from (post-processing)."""

    def __init__(
        self, session: Session, plan: DescribePlan, shares: _Shares, confidence: float
    ) -> None:
        self._session = session
        self.plan = plan
        self._shares = shares
        self._confidence = confidence
        self.secure = True
        # Releases later stages plan from (post-processing).
        self.rows_count: Statistic | None = None
        self.persons_count: Statistic | None = None
        self.prechecked: dict[str, float] = {}  # column -> fraction its pre-check spent
        self.value_counts: dict[str, Statistic] = {}  # text column -> count of values

    def _query(self) -> Query:
        query = Query()
        if self.plan.max_rows is not None:
            query = query.bound(max_rows=self.plan.max_rows)
        return query

    def _grouped(self, query: Query) -> Query:
        if self.plan.max_rows is not None:
            query = query.bound(max_groups=MAX_GROUPS_PER_PERSON)
        return query

    def _derive(self, query: Query, stem: str, expression: str) -> tuple[Query, str]:
        return derive(query, self._session.columns, stem, expression)

    def _evaluate(self, query: Query, budget: Guarantee) -> Any:
        result = self._session.evaluate(query, budget=budget, confidence=self._confidence)
        self.secure = self.secure and all(r.secure for r in result.releases)
        return result

    def _ask(self, query: Query, budget: Guarantee) -> Steps[Any]:
        """One query of a column's :data:`Steps`: yielded, and answered by :meth:`run`."""
        result = yield (query, budget)
        return result

    def run(
        self,
        columns: Mapping[str, Steps[T]],
        refused: Callable[[str, DPError], T],
    ) -> dict[str, T]:
        """Run every column's :data:`Steps` to the end, one round at a time: each round
        evaluates the next query of every column not yet done, as one batch
        (:func:`dpkit.analytics._shared_scan.evaluate_many`: the queries are charged
        and released in this order, as if evaluated one by one). The rounds, and so the
        order of the queries, depend on the plan and the releases only.

        A query the Session refuses (before its charge: nothing of it is spent) stops
        its column only: ``refused(name, error)`` stands for that column's summary, and
        the other columns go on. Before, one column's refusal in a later stage stopped
        the whole summary with the earlier stages' budget spent and their releases
        lost. Which query is refused depends on public information and earlier
        releases only (the Session's rule for refusals), so the choice of what goes on
        is post-processing.

        A Session whose ``evaluate`` was replaced on the instance (a recorder, a proxy)
        is asked one query at a time through it."""
        done: dict[str, T] = {}
        pending: dict[str, tuple[Query, Guarantee]] = {}

        def advance(name: str, send: Callable[[], tuple[Query, Guarantee]]) -> None:
            try:
                pending[name] = send()
            except StopIteration as stop:
                pending.pop(name, None)
                done[name] = stop.value

        for name, steps in columns.items():
            advance(name, steps.__next__)
        while pending:
            names = list(pending)
            answers = self._answers([pending[name] for name in names])
            for name, answer in zip(names, answers, strict=True):
                if isinstance(answer, DPError):
                    columns[name].close()
                    pending.pop(name)
                    done[name] = refused(name, answer)
                else:
                    advance(name, lambda: columns[name].send(answer))  # noqa: B023
        return done

    def _evaluate_batch(self, requests: list[tuple[Query, Guarantee]]) -> list[Any]:
        """The requests' results as one batch (the rows' stage: a refusal is raised,
        nothing can be summarised without it)."""
        from dpkit.analytics._shared_scan import evaluate_many

        if len(requests) == 1 or "evaluate" in vars(self._session):
            return [self._evaluate(query, budget) for query, budget in requests]
        results = evaluate_many(
            self._session, [(q, b) for q, b in requests], confidence=self._confidence
        )
        for result in results:
            self.secure = self.secure and all(r.secure for r in result.releases)
        return results

    def _answers(self, requests: list[tuple[Query, Guarantee]]) -> list[Any]:
        """Each request's result, or the refusal that stopped it (nothing of that
        request spent), in order."""
        from dpkit.analytics._shared_scan import _can_share, evaluate_many

        session = self._session
        if "evaluate" not in vars(session) and _can_share(session, requests):
            try:
                results = evaluate_many(session, requests, confidence=self._confidence)
            except REFUSALS:
                pass  # refused whole, nothing spent: each alone below, to find which
            else:
                for result in results:
                    self.secure = self.secure and all(r.secure for r in result.releases)
                return results
        answers: list[Any] = []
        for query, budget in requests:
            try:
                answers.append(self._evaluate(query, budget))
            except REFUSALS as err:
                answers.append(err)
        return answers

    @property
    def _kept(self) -> str:
        """How counts of rows are labelled: rows kept, with a privacy unit."""
        m = self.plan.max_rows
        return "" if m is None else f" kept (\u2264 {m} per person)"

    def _count_steps(self, name: str, budget: Guarantee) -> Steps[Statistic]:
        """A noisy count of a column's (non-missing) values."""
        query = self._query().filter(f"{_quote(name)} IS NOT NULL").count(name="count")
        result = yield from self._ask(query, budget)
        unit = "values" + self._kept
        return _statistic(result, "count", "count", self._confidence, budget, unit=unit)

    def _missing(self, values: Statistic) -> Statistic | None:
        """The column's missing share (post-processing of the rows' and its count)."""
        if self.rows_count is None:
            return None
        laplace = isinstance(self._shares.currency, PureDP)
        return missing_share(self.rows_count, values, self._confidence, laplace=laplace)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _released(statistic: Statistic) -> float:
    """The estimate of a statistic describe released itself (never withheld)."""
    assert statistic.estimate is not None, statistic.name
    return statistic.estimate


def _finite_or_none(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _statistic(
    result: Any, column: str, name: str, confidence: float, budget: Guarantee, unit: str = ""
) -> Statistic:
    cols: Mapping[str, Any] = result.columns
    low, high = (
        _finite_or_none(cols[f"{column}_low"][0]),
        _finite_or_none(cols[f"{column}_high"][0]),
    )
    if low is None or high is None:
        low = high = None
    return Statistic(
        name=name,
        estimate=float(cols[column][0]),
        std_error=_finite_or_none(cols[f"{column}_se"][0]),
        ci_low=low,
        ci_high=high,
        confidence=confidence if low is not None else None,
        mechanism=", ".join(sorted({r.mechanism for r in result.releases})),
        budget=budget,
        unit=unit,
    )
