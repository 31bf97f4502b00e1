"""Several queries of one Session evaluated together, their rows read in shared scans.

:func:`evaluate_many` is :meth:`Session.evaluate <dpkit.analytics.Session.evaluate>`
for a batch of ``(query, budget)`` requests whose statements the engine can compute
together (:mod:`dpkit.analytics.engines._batch`): ``dpkit describe`` runs each stage
of its per-column plan -- every column's count and mean, every column's percentiles
and maximum -- as one batch (issue 34).

It is the sequential run, step for step, with the engine's work merged:

1. per request, in order: its own random stream and salt (``Session.evaluate``'s
   ``spawn``), its compilation at its budget against what the requests before it will
   have spent (the amount ``Session.evaluate`` would have computed after charging
   them), the filter's rule applied to the running total (a batch that would overspend
   is refused whole, before anything is charged), and its mechanisms rehearsed on
   data-free inputs;
2. every statement the batch will run bound (``SqlEngine._bind``; no row read): the shared
   statements, and the own statements of the plans that share none -- every statement
   that will read rows is bound before the first charge, so a failure that the
   queries' shape can cause is reported with nothing spent;
3. every request charged to the ledger, in order, with the description
   ``Session.evaluate`` writes (a refusal of any but the first -- possible only when
   another process spends on the same ledger in between -- fails closed, as does any
   other failure once a charge is made);
4. the engine computes every plan's exact integers (shared statements where plans
   share, one statement per plan otherwise), and each request is released with its own
   stream -- all inside the Session's fail-closed path.

Privacy: each request is released by the mechanism, noise and charge of its own
compilation, on the same exact integers as its own statement would give (the shared
statements compute the same function of the rows; :mod:`.engines._batch`), so the
batch is the sequential composition of the requests, charged as such. The threat
model's three rules hold as in ``Session.evaluate``: every refusal comes before the
first charge and depends on the schema and public parameters only; keys and integers
come back in the engines' canonical form; and the per-row cost of a shared statement
is the sum of its plans' (bounded by their public constants).

Requests that cannot share (a joined or per-person view, private clamping bounds, an
engine that is not a SQL engine, a single request) are evaluated one by one through
``session.evaluate``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dpkit.analytics._accounting import selection_threshold
from dpkit.analytics._compile import CompiledQuery, salt_from, stages_private_bounds
from dpkit.analytics._fail_closed import run_after_charge
from dpkit.analytics._release import QueryResult, rehearse, release
from dpkit.analytics.engines import _batch
from dpkit.analytics.engines._sql import SqlEngine
from dpkit.analytics.query import Query
from dpkit.errors import InvalidParameter
from dpkit.random import Random

if TYPE_CHECKING:
    from dpkit.analytics.session import Session

__all__ = ["evaluate_many"]

_OWNER = "Session.evaluate"


def evaluate_many(
    session: Session, requests: Sequence[tuple[Query, object]], *, confidence: float = 0.95
) -> list[QueryResult]:
    """Evaluate ``requests`` (``(query, budget)`` pairs) on ``session``, in order, as
    :meth:`Session.evaluate` would one after the other: the same compilations,
    charges, ledger records and releases, with the engine's work shared (module
    docstring). Refused whole, with nothing spent, when the batch does not fit."""
    if not (isinstance(confidence, float) and 0.0 < confidence < 1.0):
        raise InvalidParameter.for_parameter("confidence", _OWNER, "a float in (0, 1)", confidence)
    if not _can_share(session, requests):
        return [session.evaluate(q, budget=b, confidence=confidence) for q, b in requests]
    started = time.monotonic()
    session._check_unlocked()
    spent = session._ledger.spent(session._scope)
    prepared: list[tuple[Query, CompiledQuery, int | None, Random, str]] = []
    for query, budget in requests:
        random = session._random.spawn(1)[0]
        salt = salt_from(random.bytes(32))
        compiled = _compile(session, query, budget, salt, spent)
        threshold = None
        if compiled.selection_noise is not None:
            assert compiled.selection_delta is not None
            threshold, _ = selection_threshold(compiled.selection_noise, compiled.selection_delta)
        # The filter's rule on the running total: refuses (BudgetExceeded, nothing
        # spent) a batch whose requests would not all fit, as the ledger would.
        spent = session._kind.rule.after(spent, compiled.charge)
        rehearse(compiled, confidence, random.spawn(1)[0])
        description = json.dumps({"query": repr(query)[:2000], "budget": repr(budget)})
        prepared.append((query, compiled, threshold, random, description))
    plans = [c.plan for _, c, _, _, _ in prepared if c.plan.statistics]
    jobs = [(c.plan, o) for _, c, _, _, _ in prepared for o in c.orders]
    engine = session._engine
    assert isinstance(engine, SqlEngine)  # _can_share
    _batch.prepare_many(engine, plans, jobs)

    for k, (_, compiled, _, _, description) in enumerate(prepared):
        try:
            session._charge(compiled.charge, description)
        except Exception:
            # A refusal, or a ledger failure: before the first charge nothing is spent;
            # after it, the batch fails closed (some requests are charged).
            if k == 0:
                raise
            raise session._fail_closed() from None

    def run_and_release() -> list[QueryResult]:
        for _ in prepared:
            if session._after_commit is not None:
                session._after_commit()
        all_histograms, all_exacts = _batch.compute_many(engine, plans, jobs)
        histograms, exacts = iter(all_histograms), iter(all_exacts)
        results = []
        for query, compiled, threshold, random, _ in prepared:
            hists = [next(histograms) for _ in compiled.orders]
            exact = next(exacts) if compiled.plan.statistics else {}
            results.append(release(compiled, query, exact, threshold, confidence, random, hists))
        return results

    return run_after_charge(
        run_and_release,
        deadline=None,
        started=started,
        interrupt=getattr(engine, "interrupt", None),
        fail_closed=session._fail_closed,
    )


def _can_share(session: Session, requests: Sequence[tuple[Query, object]]) -> bool:
    """Whether the batch goes through :func:`evaluate_many`'s shared path (public
    information only: the queries' shapes, the engine's class)."""
    if len(requests) < 2 or not isinstance(session._engine, SqlEngine):
        return False
    for query, _budget in requests:
        view, _ = session._view_for(query, 0)
        if view is not session:
            return False  # a joined or per-person view: its own engine per query
        if stages_private_bounds(query):
            return False  # private clamping bounds: released in stages
    return True


def _compile(
    session: Session, query: Query, budget: object, salt: int, spent: tuple[Any, ...]
) -> CompiledQuery:
    """``query`` compiled as ``Session.evaluate`` would compile it once the ledger holds
    ``spent`` (the requests before it charged): its amount and selection delta."""
    kind = session._kind
    amount = kind.query_amount(budget, spent, _OWNER)
    delta = None
    if query.selection is not None and kind.name == "approx":
        left = kind.amount[1] - spent[1]
        delta = query.selection.delta
        if delta is None:
            delta = float(left / 2)
            if delta <= 0:
                delta = None
    compiled, _ = session._compile_budgeted(query, budget, salt, fixed=(amount, delta))
    return compiled
