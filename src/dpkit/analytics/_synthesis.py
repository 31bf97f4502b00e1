"""``Session.synthesize``: private synthetic data through the Session's front door.

The run is one mechanism, charged once. Its steps follow the Session's rules:

1. **Plan** from the schema and public parameters only: the columns' codings
   (:mod:`dpkit.synth._columns`), the budget (zCDP: MST and AIM measure with Gaussian
   noise), the contribution bound, the workload, and a check that every noise scale the
   run can use is one the exact samplers take. Every refusal happens here.
2. **Prepare**: the one statement that reads the rows -- the bounded, coded table
   (:mod:`dpkit.analytics.engines._cells`) -- is bound without reading a row.
3. **Charge** the whole run's budget once (the ledger's filter may refuse it; nothing
   is then spent).
4. **Run**: read the coded table (integers only), run MST or AIM on it, whose every step
   is charged exactly against the run's budget (:mod:`dpkit.synth._marginals`), and
   sample the synthetic table from the fitted model (post-processing). Any failure from
   here on fails closed (:mod:`dpkit.analytics._fail_closed`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.guarantees import ZCDP
from dpkit.analytics._accounting import calibrate_noise, selection_threshold
from dpkit.analytics._compile import salt_from
from dpkit.analytics._fail_closed import run_after_charge
from dpkit.analytics._synthesis_domains import (
    MAX_DISCOVERED,
    categorical_names,
    discover,
    discovery_queries,
    discovery_share,
    placeholder_domain,
    private_binning,
    range_budget,
)
from dpkit.analytics.engines._cells import CellSpec, bind_cell_counts, cell_counts
from dpkit.analytics.query import Query
from dpkit.errors import InvalidParameter
from dpkit.noise import MAX_SCALE
from dpkit.random import Random, post_processing_generator
from dpkit.synth._columns import ColumnCode, code_of, plan_columns
from dpkit.synth._domain import Domain
from dpkit.synth._marginals import PrivateMarginals, epsilon_for, sigma_for
from dpkit.synth._mst import DEFAULT_SPLIT, check_split, rho_parts
from dpkit.synth._result import SyntheticData
from dpkit.synth._specs import PrivateBins

# A dpkit.analytics.session.Session; not imported, as session.py imports this module.
Session = Any

__all__ = ["SynthesisPlan", "plan_synthesis", "synthesize"]

METHODS = ("aim", "mst")
#: The largest marginal (cells) a run may measure: 2^24 float64 cells is 128 MiB.
MAX_MARGINAL_CELLS = 2**24
#: The most rows a synthetic table may have (a public parameter; memory).
MAX_ROWS = 10**8
#: ... and the most cells (rows x columns) of its codes: 2^27 int64 codes is 1 GiB. The
#: default row count (the model's noisy total) is capped here too, so no noise can make
#: sampling run out of memory after the charge.
MAX_SAMPLED_CELLS = 2**27
#: The most codes of a domain found privately (categories beyond are dropped, the
#: largest noisy counts kept), so that a pair's marginal stays under MAX_MARGINAL_CELLS.
DISCOVERED_CODES = MAX_DISCOVERED + 1


def _check_int(value: object, name: str, owner: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidParameter.for_parameter(name, owner, f"an integer in [{low}, {high}]", value)
    return value


def _workload(workload: object, domain: Domain, owner: str) -> list[tuple[str, ...]] | None:
    if workload is None:
        return None
    if isinstance(workload, str) or not isinstance(workload, Sequence) or not workload:
        raise InvalidParameter.for_parameter(
            "workload", owner, "a non-empty list of column tuples, e.g. [('age', 'sex')]", workload
        )
    out = []
    for marginal in workload:
        if isinstance(marginal, str) or not isinstance(marginal, Sequence) or not marginal:
            raise InvalidParameter.for_parameter(
                "workload", owner, "tuples of column names", marginal
            )
        names = tuple(marginal)
        for name in names:
            if name not in domain.names:
                raise InvalidParameter(
                    f"{owner}: workload column {name!r} is not synthesized; columns: "
                    f"{list(domain.names)}."
                )
        if len(set(names)) != len(names):
            raise InvalidParameter(f"{owner}: workload marginal {names!r} repeats a column.")
        if domain.cells(names) > MAX_MARGINAL_CELLS:
            raise InvalidParameter(
                f"{owner}: workload marginal {names!r} has {domain.cells(names)} cells "
                f"(at most {MAX_MARGINAL_CELLS}); use fewer bins or categories."
            )
        out.append(names)
    return out


def _check_scales(method: str, rho: Fraction, d: int, k: int, owner: str) -> None:
    """Every noise scale the run can use is at least as large as at its smallest
    step (AIM's first rounds; MST's parts), so checking those here means no sampler
    refuses a scale after the charge."""
    if method == "aim":
        per_round = rho / (16 * d)
        smallest_measure, smallest_select = per_round * Fraction(9, 10), per_round / 10
    else:
        parts = max(d - 1, 1)
        smallest_measure, smallest_select = rho / 3 / max(d, parts), rho / 3 / parts
    sigma = sigma_for(smallest_measure, k)
    epsilon = epsilon_for(smallest_select)
    if not math.isfinite(sigma) or sigma > MAX_SCALE or epsilon <= 0:
        raise InvalidParameter(
            f"{owner}: the budget is too small for {method.upper()} over {d} columns: its "
            f"smallest measurement would need noise of scale {sigma:.3g} (the exact "
            f"samplers' limit is {MAX_SCALE:.3g}). Give a larger budget or fewer columns."
        )


@dataclass(frozen=True)
class SynthesisPlan:
    """A synthesis run before it is charged (public information only)."""

    method: str
    codings: tuple[ColumnCode | None, ...]  # None: found privately (``discovery``)
    names: tuple[str, ...]
    rho: Fraction
    charge: tuple[Fraction, ...]
    unit: str | None
    max_rows: int
    salt: int
    view: Session
    workload: list[tuple[str, ...]] | None
    rows: int | None
    budget: object
    discovery: dict[str, Query]  # the query finding each private domain
    source: Query | None
    binning: dict[str, PrivateBins] = dataclasses.field(default_factory=dict)
    mst_split: tuple[Fraction, Fraction, Fraction] = DEFAULT_SPLIT

    @property
    def discovery_share(self) -> Fraction:
        return discovery_share(len(self.discovery))

    def spec(self, codings: Sequence[ColumnCode]) -> CellSpec:
        return CellSpec(tuple(codings), self.unit, self.max_rows, self.salt, self.view._partitions)

    def describe(self) -> str:
        """What the run will measure and at which noise (spends nothing)."""
        k, d = self.max_rows, len(self.names)
        lines = [
            f"{self.method.upper()} over {d} columns, budget ZCDP(rho={float(self.rho):.6g}), "
            f"each person contributing at most {k} row(s); charged once.",
        ]
        rho = self.rho
        if self.discovery:
            share = self.discovery_share
            quantiles = any(b.edges == "quantile" for b in self.binning.values())
            lines.append(
                f"  {float(share):.0%} of it finds the domains of {sorted(self.discovery)} "
                "privately (key selection for categories, occupied power-of-two bins for "
                "numbers' ranges"
                + (", then private quantiles for their bins' edges" if quantiles else "")
                + "); the rest measures."
            )
            rho = rho * (1 - share)
        for name in self.discovery:
            spec = self.binning.get(name)
            how = ""
            if spec is not None and spec.edges == "quantile" and spec.bins > 1:
                part = range_budget(spec, Fraction(1))
                how = (
                    f": {float(part):.0%} of its share finds the range, the rest "
                    f"{spec.bins - 1} quantiles, the bins' edges, and 2 outer ones that "
                    "narrow the range (a value holding several gets a bin of its own; a "
                    f"range of at most {spec.bins} integers gets one bin per integer "
                    "instead)"
                )
            elif spec is not None:
                how = f": its range, then {spec.bins} equal-width bins"
            lines.append(f"  {name}: domain found privately{how}")
        for c in self.codings:
            if c is None:
                continue
            kind = (
                f"{len(c.values)} public categories"
                if c.categorical
                else f"{c.bins} bins over {c.range_text()}"
            )
            lines.append(
                f"  {c.name}: {kind}" + (", NULL kept" if c.nulls else ", NULL rows dropped")
            )
        if self.method == "mst":
            one, select, two = rho_parts(rho, self.mst_split)
            if d > 1:
                split = ", ".join(str(part) for part in self.mst_split)
                lines.append(f"  split of rho (1-way, selection, 2-way): {split}")
            sigma1 = sigma_for((one if d > 1 else rho) / d, k)
            lines.append(f"  step 1: {d} one-way marginals, noise sigma {sigma1:.4g} each")
            if d > 1:
                eps = epsilon_for(select / (d - 1))
                sigma2 = sigma_for(two / (d - 1), k)
                lines.append(f"  step 2: {d - 1} exponential-mechanism picks at epsilon {eps:.4g}")
                lines.append(f"  step 3: {d - 1} two-way marginals, noise sigma {sigma2:.4g} each")
        else:
            per_round = rho / (16 * d)
            lines.append(
                f"  {d} one-way marginals, then up to {16 * d} rounds (fewer as noise is "
                f"annealed): first rounds sigma {sigma_for(per_round * Fraction(9, 10), k):.4g}"
                f", selection epsilon {epsilon_for(per_round / 10):.4g}"
            )
            workload = self.workload or "every pair of columns"
            lines.append(f"  workload: {workload}")
        return "\n".join(lines)


def plan_synthesis(
    session: Session,
    *,
    budget: object,
    method: str,
    columns: Sequence[str] | None,
    domains: Mapping[str, object] | None,
    rows: int | None,
    max_rows: int,
    workload: Sequence[Sequence[str]] | None,
    source: Query | None,
    max_model_mb: float,
    iterations: int,
    salt: int,
    mst_split: object = None,
) -> SynthesisPlan:
    """Step 1 of the module docstring: every refusal, from public information only."""
    owner = "Session.synthesize"
    session._check_unlocked()
    if method not in METHODS:
        raise InvalidParameter.for_parameter("method", owner, "'aim' or 'mst'", method)
    view, stripped = session._view_for(source if source is not None else Query(), salt)
    if stripped != Query():
        raise InvalidParameter(
            f"{owner}: source= takes a table and its joins only (Query.from_table(...)"
            ".join(...)); filters, derived columns and aggregations are not applied to "
            "synthesis."
        )
    unit = view._unit
    k = _check_int(max_rows, "max_rows", owner, 1, 2**20)
    if unit is None and k != 1:
        raise InvalidParameter(
            f"{owner}: max_rows applies with a privacy unit; without one each row is a "
            "person (max_rows=1)."
        )
    if rows is not None:
        _check_int(rows, "rows", owner, 1, MAX_ROWS)
    if (
        isinstance(max_model_mb, bool)
        or not isinstance(max_model_mb, int | float)
        or not (0 < max_model_mb <= 2**14)
    ):
        raise InvalidParameter.for_parameter(
            "max_model_mb", owner, "a number in (0, 16384]", max_model_mb
        )
    _check_int(iterations, "iterations", owner, 1, 10**6)
    codings = plan_columns(view._schema, columns, domains, unit, owner, private=True)
    names = tuple(
        c.name if c is not None else n
        for c, n in zip(codings, _names(view._schema, columns, unit), strict=True)
    )
    private = [n for c, n in zip(codings, names, strict=True) if c is None]
    if rows is not None and rows * len(names) > MAX_SAMPLED_CELLS:
        raise InvalidParameter(
            f"{owner}: rows x columns must be at most {MAX_SAMPLED_CELLS:,} (memory); got "
            f"{rows:,} x {len(names)}."
        )
    discovery_queries(view._schema, private, unit, k, owner)  # refuses what has no way
    # Sizes for the checks below; a domain found privately has at most
    # DISCOVERED_CODES codes (categories) or the default bins.
    sizes = tuple(c.size if c is not None else DISCOVERED_CODES for c in codings)
    domain = Domain(names, sizes)
    chosen_workload = _workload(workload, domain, owner)
    split = DEFAULT_SPLIT
    if mst_split is not None:
        if method != "mst":
            raise InvalidParameter(f"{owner}: mst_split= applies to method='mst' only.")
        split = check_split(mst_split, owner)
    if method == "mst":
        if chosen_workload is not None:
            raise InvalidParameter(f"{owner}: workload= applies to method='aim' only.")
        biggest = max((domain.cells(p) for p in combinations(domain.names, 2)), default=0)
        if biggest > MAX_MARGINAL_CELLS:
            raise InvalidParameter(
                f"{owner}: a pair of columns has {biggest} cells (at most "
                f"{MAX_MARGINAL_CELLS}); use fewer bins or categories."
            )
    amount = session._kind.query_amount(budget, session._ledger.spent(session._scope), owner)
    if amount.noise != "gaussian":
        raise InvalidParameter(
            f"{owner}: MST and AIM measure with Gaussian noise and are accounted in zCDP; "
            "they need a ZCDP or ApproxDP Session and a ZCDP or ApproxDP budget (or a "
            f"share of the Session's); got {budget!r} in a {session._kind.total!r} Session."
        )
    rho = amount.share
    share = discovery_share(len(private))
    _check_scales(method, rho * (1 - share), len(domain.names), k, owner)
    delta, per_query = Fraction(0), None
    categorical = categorical_names(view._schema, private)
    if categorical:
        delta = _selection_delta(session, amount.charge, categorical, owner)
        # Each key selection's delta is fixed now (the reserve's, split evenly; floats
        # rounded down), and checked to be one a threshold can reach.
        per_query = fraction_down(Fraction(fraction_down(delta)) / len(categorical))
    if private:
        _check_discovery(rho * share / len(private), k, per_query, owner)
    binning = private_binning(view._schema, private, domains)
    if any(b.edges == "quantile" for b in binning.values()):
        # A range query then gets RANGE_PART of its column's share: its noise too.
        _check_discovery(range_budget(PrivateBins(), rho * share / len(private)), k, None, owner)
    discovery = discovery_queries(view._schema, private, unit, k, owner, per_query)
    if source is not None:
        discovery = {
            n: dataclasses.replace(q, table=source.table, joins=source.joins)
            for n, q in discovery.items()
        }
    charge = session._kind.vector(amount.charge, delta, Fraction(0))
    return SynthesisPlan(
        method,
        codings,
        names,
        rho,
        charge,
        unit,
        k,
        salt,
        view,
        chosen_workload,
        rows,
        budget,
        discovery,
        source,
        binning,
        split,
    )


def _names(schema: Mapping[str, str], columns: Sequence[str] | None, unit: str | None) -> list[str]:
    return [c for c in schema if c != unit] if columns is None else list(columns)


def _selection_delta(
    session: Session, rho_charge: Fraction, columns: Sequence[str], owner: str
) -> Fraction:
    """The key-selection delta a run that finds categories gets: the same share of the
    Session's selection delta as of its zCDP budget (as a partition's part), at most
    what remains of it."""
    kind = session._kind
    if kind.name != "approx" or kind.amount[1] <= 0:
        raise InvalidParameter(
            f"{owner}: the categories of {list(columns)} would be found by private key "
            "selection, which needs an ApproxDP Session with a key-selection delta; give "
            f"them as public domains, e.g. domains={{{columns[0]!r}: ['a', 'b']}}."
        )
    left = kind.amount[1] - session._ledger.spent(session._scope)[1]
    delta = Fraction(min(rho_charge / kind.amount[0] * kind.amount[1], left))
    if delta <= 0:
        raise InvalidParameter(
            f"{owner}: no key-selection delta is left to find the categories of "
            f"{list(columns)}; give them as public domains."
        )
    return delta


def _check_discovery(rho: Fraction, k: int, delta: float | None, owner: str) -> None:
    """The domain queries' noise and thresholds exist (checked at a quarter of each
    query's budget, below what any of its statistics gets, so the real ones exist)."""
    message = (
        f"{owner}: the budget (or key-selection delta) is too small to find domains "
        "privately; give a larger budget or public domains."
    )
    sigma = sigma_for(rho, k)
    if not math.isfinite(sigma) or sigma > MAX_SCALE:
        raise InvalidParameter(message)
    if delta is None:
        return
    if not 0.0 < delta < 1.0:
        raise InvalidParameter(message)
    noise = calibrate_noise("gaussian", rho / 4, 1, k)
    try:
        selection_threshold(noise, delta)
    except InvalidParameter:
        raise InvalidParameter(message) from None


def synthesize(
    session: Session,
    *,
    budget: object,
    method: str = "aim",
    columns: Sequence[str] | None = None,
    domains: Mapping[str, object] | None = None,
    rows: int | None = None,
    max_rows: int = 1,
    workload: Sequence[Sequence[str]] | None = None,
    source: Query | None = None,
    max_model_mb: float = 80.0,
    iterations: int = 1000,
    progress: Callable[[str], None] | None = None,
    mst_split: Sequence[float] | None = None,
) -> SyntheticData:
    """See :meth:`dpkit.analytics.Session.synthesize`."""
    started = time.monotonic()
    random = session._random.spawn(1)[0]
    plan = plan_synthesis(
        session,
        budget=budget,
        method=method,
        columns=columns,
        domains=domains,
        rows=rows,
        max_rows=max_rows,
        workload=workload,
        source=source,
        max_model_mb=max_model_mb,
        iterations=iterations,
        salt=salt_from(random.bytes(32)),
        mst_split=mst_split,
    )
    session._check_fits(plan.charge)
    description = json.dumps(
        {
            "synthesize": method,
            "columns": list(plan.names),
            "max_rows": plan.max_rows,
            "rows": rows,
            "budget": repr(budget),
        }
    )
    tell = progress or (lambda _line: None)
    run_options = (max_model_mb, iterations, tell)
    if not plan.discovery:
        codings = [c for c in plan.codings if c is not None]
        spec = plan.spec(codings)
        # Step 2: bind the one statement that reads rows (no row is read).
        bind_cell_counts(plan.view._engine, spec)
        session._charge(plan.charge, description)  # step 3

        def run() -> SyntheticData:
            return _measure_and_sample(plan, codings, plan.rho, random, run_options, [])

    else:
        # Step 2 with placeholder domains: the statement that reads rows, of the shape
        # the found domains will give it (the same columns, joins and casts), is bound
        # before anything is charged, so that a schema it cannot bind on is refused
        # here (tests/adversarial/test_internal_name_attacks.py).
        schema = plan.view._schema
        shaped = [
            code_of(n, schema[n], placeholder_domain(schema[n]), "synthesize") if c is None else c
            for c, n in zip(plan.codings, plan.names, strict=True)
        ]
        bind_cell_counts(plan.view._engine, plan.spec(shaped))
        # Step 3: the whole run is charged once, to a reserve whose filter the domain
        # queries and the measurements then draw on.
        reserve = session._reserve(plan.charge, description)

        def run() -> SyntheticData:
            share = plan.discovery_share / len(plan.discovery)
            tell(f"finding the domains of {sorted(plan.discovery)} privately")
            found, notes = discover(reserve, plan.discovery, plan.view._schema, share, plan.binning)
            codings = [
                c if c is not None else code_of(n, plan.view._schema[n], found[n], "synthesize")
                for c, n in zip(plan.codings, plan.names, strict=True)
            ]
            bind_cell_counts(plan.view._engine, plan.spec(codings))
            left = reserve._kind.amount[0] - reserve._ledger.spent(reserve._scope)[0]
            measure = reserve._kind.vector(left, Fraction(0), Fraction(0))
            reserve._charge(measure, json.dumps({"synthesize": method, "measure": True}))
            return _measure_and_sample(plan, codings, left, random, run_options, notes)

    return run_after_charge(
        run,
        deadline=None,
        started=started,
        interrupt=getattr(plan.view._engine, "interrupt", None),
        fail_closed=session._fail_closed,
    )


def _rows(plan: SynthesisPlan, total: float, columns: int) -> int:
    """Rows to sample: as asked, or the model's noisy total capped at the cell limit."""
    if plan.rows is not None:
        return plan.rows
    cap = max(1, MAX_SAMPLED_CELLS // columns)
    return int(min(max(1.0, round(total)), cap)) if math.isfinite(total) else cap


def _measure_and_sample(
    plan: SynthesisPlan,
    codings: Sequence[ColumnCode],
    rho: Fraction,
    random: Random,
    options: tuple[float, int, Callable[[str], None]],
    notes: list[str],
) -> SyntheticData:
    """Step 4: read the coded table, run MST or AIM with ``rho``, sample the table."""
    from dpkit.synth._aim import run_aim
    from dpkit.synth._mst import run_mst

    max_model_mb, iterations, tell = options
    domain = Domain(tuple(c.name for c in codings), tuple(c.size for c in codings))
    k = plan.max_rows
    codes, counts = cell_counts(plan.view._engine, plan.spec(codings))
    data = PrivateMarginals(codes, counts, domain, sensitivity=k, rho=rho, rng=random)
    sampler = post_processing_generator(random)
    labels = {c.name: c.labels() for c in codings}
    if plan.method == "mst":
        model, measured, compression = run_mst(
            data, iterations=iterations, progress=tell, split=plan.mst_split
        )
        total = _rows(plan, model.total, len(codings))
        coded = model.sample(total, sampler)
        drawn = compression.decompress(coded, model.domain, sampler)
        labels = compression.labels(labels)
    else:
        model, measured = run_aim(
            data, plan.workload, max_model_mb=max_model_mb, iterations=iterations, progress=tell
        )
        total = _rows(plan, model.total, len(codings))
        coded = drawn = model.sample(total, sampler)
    frame = {c.name: c.decode(drawn[:, j], sampler) for j, c in enumerate(codings)}
    kind = plan.view._kind
    if kind.name == "approx":
        also = f", plus key-selection delta {float(plan.charge[1]):.3g}" if plan.charge[1] else ""
        notes.append(f"Worth {kind.as_approx(plan.rho)!r} on its own{also}.")
    notes.append(
        f"Each person contributes at most {k} row(s); "
        + (
            f"{total} rows sampled."
            if plan.rows is not None
            else f"{total} rows (the model's noisy total)."
        )
    )
    return SyntheticData(
        data=pd.DataFrame(frame),
        method=plan.method,
        guarantee=ZCDP(fraction_up(plan.rho)),
        measurements=tuple(measured),
        domain=model.domain,
        labels=labels,
        notes=tuple(notes),
        codes=coded,
        codings=tuple(codings),
    )
