"""A Session's spends as data: readable rows, a DataFrame, and a ledger file read-only.

:attr:`dpkit.Session.history` is a :class:`SpendHistory`: still the sequence of
:class:`~dpkit.analytics._ledger.SpendRecord` it always was, plus :meth:`SpendHistory.rows`
and :meth:`SpendHistory.to_pandas`, one row per spend with its time, the query in
readable form and the charge in the units of the Session's budget
(:func:`charge_in_user_units`). :func:`read_ledger` reads a ledger file without
changing it (``dpkit ledger show`` and ``dpkit ledger export``).

Everything here reads what the ledger holds: public parameters (queries, keys, bounds,
budgets) and exact amounts, never a row value. It spends nothing.
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, overload

from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.filters import PureApproxZCDPFilter
from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.analytics._accounting import BudgetKind, budget_kind
from dpkit.analytics._ledger import _GENESIS, SpendRecord, _decode, _link
from dpkit.errors import DataError, DPError

__all__ = [
    "LedgerSnapshot",
    "ScopeState",
    "SpendHistory",
    "charge_in_user_units",
    "kind_from_ledger",
    "read_ledger",
    "readable_description",
    "spend_row",
]

Amount = Sequence[Fraction]


# ----------------------------------------------------------------------------- units


def charge_in_user_units(
    kind: BudgetKind, amount: Amount, *, round_up: bool = True, worth: bool = True
) -> dict[str, float]:
    """An amount of a ledger's currency in the units of the budget the user gave.

    - ``PureDP`` Session: ``{"epsilon": eps}``.
    - ``ZCDP`` Session: ``{"rho": rho}``.
    - ``ApproxDP`` Session: the ledger holds ``(rho, delta_sel)`` -- zCDP rho and the
      delta of private key selection -- and, when it has a third component, pure
      epsilon spent at face value. Gives ``rho``, ``delta`` (key selection),
      ``pure_epsilon`` (only with a third component) and ``epsilon``: what the amount
      is worth on its own, ``pure_epsilon`` plus the epsilon of ``rho`` at the
      Session's conversion delta (:meth:`BudgetKind.as_approx`, CKS20). Epsilons of
      several spends do not add up to the Session's: zCDP composes more tightly.

    ``worth=False`` leaves ``epsilon`` out (for a scope's budget vector and what
    remains of it, whose epsilon is not the sum of its components': the ledger CLI
    shows the Session's budget as the user gave it instead). Values are floats rounded
    up (``round_up=False``: rounded down, for what remains). An unknown currency gives
    its components as ``amount_0``, ``amount_1``, ...
    """
    values = [max(Fraction(a), Fraction(0)) for a in amount]
    rounded = [fraction_up(v) if round_up else fraction_down(v) for v in values]
    if kind.name == "pure" and len(values) == 1:
        return {"epsilon": rounded[0]}
    if kind.name == "zcdp" and len(values) == 1:
        return {"rho": rounded[0]}
    if kind.name == "approx" and len(values) in (2, 3):
        units = {"rho": rounded[0], "delta": rounded[1]}
        pure = values[2] if len(values) == 3 else Fraction(0)
        if len(values) == 3:
            units["pure_epsilon"] = rounded[2]
        if not worth:
            return units
        from_rho = kind.as_approx(values[0]).epsilon if values[0] > 0 else 0.0
        total = Fraction(from_rho) + pure
        units["epsilon"] = fraction_up(total) if round_up else fraction_down(total)
        return units
    return {f"amount_{i}": value for i, value in enumerate(rounded)}


def kind_from_ledger(kind_text: str, budget: Amount) -> BudgetKind | None:
    """The :class:`BudgetKind` of a ledger scope, from its stored ``kind`` (the repr of
    the Session's total budget, e.g. ``"ApproxDP(epsilon=1.0, delta=1e-06)"``) and
    budget; None for bookkeeping scopes (partitions) and unknown kinds."""
    total = _guarantee_from_repr(kind_text)
    if total is None:
        return None
    try:
        share = float(budget[1]) if isinstance(total, ApproxDP) and len(budget) > 1 else None
        root = budget_kind(total, share, "dpkit ledger")
        if _widen(root.amount, len(budget)) == tuple(budget) or (
            tuple(root.amount[: len(budget)]) == tuple(budget)
        ):
            return root  # the Session's own scope: its filter's rule, not a box
        return root.part(tuple(budget))
    except (DPError, IndexError, ValueError):
        return None


_GUARANTEES: dict[str, type[Guarantee]] = {"PureDP": PureDP, "ZCDP": ZCDP, "ApproxDP": ApproxDP}


def _guarantee_from_repr(text: str) -> Guarantee | None:
    """Parse ``PureDP(epsilon=1.0)`` and the like without evaluating anything."""
    try:
        node = ast.parse(text, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return None
        cls = _GUARANTEES.get(node.func.id)
        if cls is None or node.args:
            return None
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        return cls(**kwargs)
    except (SyntaxError, ValueError, TypeError, DPError):
        return None


# ----------------------------------------------------------------------------- queries


def readable_description(description: str) -> str:
    """A spend's description (the ledger's JSON) in words: ``"count, sum(age) by
    region where age > 3"`` for a query, ``"partition by region (3 parts)"``, ...
    Text that is not a known form is returned as it is."""
    try:
        data = json.loads(description)
    except ValueError:
        return description
    if not isinstance(data, dict):
        return description
    if "query" in data:
        return _query_text(str(data["query"]))
    if "partition" in data:
        keys = data.get("keys")
        parts = f" ({len(keys)} parts)" if isinstance(keys, list) else ""
        return f"partition by {data['partition']}{parts}"
    if "synthesize" in data:
        if data.get("measure"):
            return f"synthesize ({data['synthesize']}): measurements"
        columns = data.get("columns")
        named = f" of {', '.join(map(str, columns))}" if isinstance(columns, list) else ""
        return f"synthesize ({data['synthesize']}){named}"
    if data.get("failed_after_charge"):
        return "failed after its charge: the rest of the budget was charged"
    return description


def _query_text(text: str) -> str:
    """A ``repr(Query)`` in words, read with :mod:`ast` (never evaluated). The ledger
    keeps the first 2,000 characters: a cut repr is read as far as it goes (the fields
    before ``keys=``, and the aggregations a pattern still finds)."""
    truncated = False
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        truncated = True
        try:
            node = ast.parse(text.split(", keys=", 1)[0] + ")", mode="eval").body
        except SyntaxError:
            node = ast.Call(ast.Name("Query"), [], [])
    if not isinstance(node, ast.Call):
        return text
    fields = _call_fields(node)
    aggregations = [_aggregation_text(_call_fields(a)) for a in _items(fields.get("aggregations"))]
    if truncated:
        aggregations = [
            kind if column == "None" else f"{kind}({column[1:-1]})"
            for kind, column in _AGGREGATION.findall(text)
        ]
    bins = {b[1]: b[0] for b in _literal(fields.get("bins"), ()) if len(b) >= 2}
    groups = [
        f"{bins[g]} (bins)" if g in bins else str(g)
        for g in _literal(fields.get("group_columns"), ())
    ]
    words = ", ".join(aggregations) or "query"
    if groups:
        words += " by " + ", ".join(groups)
        if isinstance(fields.get("selection"), ast.Call):
            words += " (keys selected privately)"
    table = _literal(fields.get("table"), None)
    joins = [_literal(_call_fields(j).get("table"), "?") for j in _items(fields.get("joins"))]
    if table is not None or joins:
        words += " from " + " join ".join([str(table or "table"), *map(str, joins)])
    filters = _literal(fields.get("filters"), ())
    if filters:
        words += " where " + " and ".join(map(str, filters))
    max_rows = _literal(fields.get("max_rows"), None)
    total = _literal(fields.get("max_total_rows"), None)
    if total is not None:
        per_group = "" if max_rows is None else f", {max_rows} per group"
        words += f" (at most {total} row{'' if total == 1 else 's'} per person in all{per_group})"
    elif max_rows is not None:
        words += f" (at most {max_rows} row{'' if max_rows == 1 else 's'} per person)"
    return words + (" [description truncated]" if truncated else "")


def _aggregation_text(fields: dict[str, ast.expr]) -> str:
    kind = str(_literal(fields.get("kind"), "?"))
    column = _literal(fields.get("column"), None)
    levels = _literal(fields.get("qs"), ())
    args = ([] if column is None else [str(column)]) + [f"{q:g}" for q in levels]
    return f"{kind}({', '.join(args)})" if args else kind


_AGGREGATION = re.compile(
    r"Aggregation\(kind='(\w+)', name=(?:'[^']*'|\"[^\"]*\"), column=(None|'[^']*')"
)


def _items(node: ast.expr | None) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple | ast.List) else []


def _call_fields(node: ast.expr) -> dict[str, ast.expr]:
    if not isinstance(node, ast.Call):
        return {}
    return {k.arg: k.value for k in node.keywords if k.arg}


def _literal(node: ast.expr | None, default: Any) -> Any:
    if node is None:
        return default
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return default


# ----------------------------------------------------------------------------- rows


def spend_row(record: SpendRecord, kind: BudgetKind | None) -> dict[str, Any]:
    """One spend as a flat row: ``id``, ``time`` (UTC datetime), ``scope``, ``query``
    (readable), ``budget`` (as the query asked for it) and the charge in the user's
    units (:func:`charge_in_user_units`; the raw amounts without a known kind)."""
    try:
        asked = json.loads(record.description).get("budget")
    except (ValueError, AttributeError):
        asked = None
    row: dict[str, Any] = {
        "id": record.id,
        "time": datetime.fromtimestamp(record.created, UTC),
        "scope": record.scope,
        "query": readable_description(record.description),
        "budget": None if asked is None else str(asked),
    }
    if kind is None:
        row.update({f"amount_{i}": fraction_up(a) for i, a in enumerate(record.amount)})
    else:
        row.update(charge_in_user_units(kind, record.amount))
    return row


class SpendHistory(Sequence[SpendRecord]):
    """Every committed spend of a Session, oldest first: a sequence of
    :class:`~dpkit.analytics._ledger.SpendRecord` (equal to a list of the same
    records), with :meth:`rows` and :meth:`to_pandas`."""

    __slots__ = ("_kind", "_records")

    def __init__(self, records: Iterable[SpendRecord], kind: BudgetKind | None = None) -> None:
        self._records = tuple(records)
        self._kind = kind

    @overload
    def __getitem__(self, index: int) -> SpendRecord: ...
    @overload
    def __getitem__(self, index: slice) -> SpendHistory: ...
    def __getitem__(self, index: int | slice) -> SpendRecord | SpendHistory:
        if isinstance(index, slice):
            return SpendHistory(self._records[index], self._kind)
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[SpendRecord]:
        return iter(self._records)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpendHistory):
            return self._records == other._records
        if isinstance(other, list | tuple):
            return list(self._records) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self._records))

    def rows(self) -> list[dict[str, Any]]:
        """One dict per spend (:func:`spend_row`)."""
        return [spend_row(record, self._kind) for record in self._records]

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per spend: ``id``, ``time`` (UTC), ``scope``,
        ``query`` (readable), ``budget`` (as asked) and the charge in the units of the
        Session's budget: ``epsilon`` (PureDP), ``rho`` (ZCDP), or ``rho``, ``delta``
        and the ``epsilon`` the spend is worth on its own (ApproxDP; see
        :func:`charge_in_user_units`)."""
        import pandas as pd  # type: ignore[import-untyped]

        rows = self.rows()
        # Every row's columns, in order of appearance: an ApproxDP ledger's rows written
        # before the pure component have no pure_epsilon, later ones do.
        columns = list(dict.fromkeys(["id", "time", "scope", "query", "budget"]))
        for row in rows:
            columns += [name for name in row if name not in columns]
        if not rows and self._kind is not None:
            columns += list(charge_in_user_units(self._kind, self._kind.amount))
        frame = pd.DataFrame(rows, columns=columns)
        frame["time"] = pd.to_datetime(frame["time"], utc=True)
        return frame


# ----------------------------------------------------------------------------- files


@dataclass(frozen=True)
class ScopeState:
    """One scope of a ledger file (None for bookkeeping scopes such as a partition's):
    ``budget`` and ``remaining``, its filter's budget vector and what is left of it,
    component by component (rounded down); ``spent``, the sum of its charges in the
    user's units (:func:`charge_in_user_units`, rounded up). ``kind`` is the Session's
    budget as the user gave it (its ``repr``)."""

    scope: str
    kind: str
    spends: int
    budget: dict[str, float] | None
    spent: dict[str, float] | None
    remaining: dict[str, float] | None


@dataclass(frozen=True)
class LedgerSnapshot:
    """What a ledger file holds, read once without changing it."""

    path: str
    scopes: tuple[ScopeState, ...]
    spends: tuple[dict[str, Any], ...]
    intact: bool | None  # the spend history chains (None: written before the chain)
    failure: datetime | None  # first failure after a charge (the ledger is locked)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 text)."""
        return {
            "ledger": self.path,
            "intact": self.intact,
            "locked_since": None if self.failure is None else self.failure.isoformat(),
            "scopes": [vars(scope) for scope in self.scopes],
            "spends": [{**row, "time": row["time"].isoformat()} for row in self.spends],
        }


def read_ledger(path: str | Path) -> LedgerSnapshot:
    """Read a ledger file read-only: its scopes (budget, spent, remaining), every spend
    (:func:`spend_row`), whether its history chains, and whether it is locked.

    A missing file is a :class:`~dpkit.errors.DataError` (nothing is created); so is a
    file that is not a dpkit ledger. The file is opened with SQLite's ``mode=ro`` and
    never written. With no Session on it (no ``-wal`` file beside it) it is read as
    ``immutable``, which creates nothing; while a Session writes it, and if that read
    does not chain (a Session may have opened it meanwhile), SQLite reads it under its
    shared lock, creating its ``-wal``/``-shm`` companions if absent.
    """
    file = Path(path)
    if not file.is_file():
        raise DataError(f"No ledger file at {str(file)!r}.")
    quiet = not Path(f"{file}-wal").exists()
    snapshot = _read_once(file, immutable=quiet)
    if quiet and snapshot.intact is False:
        snapshot = _read_once(file, immutable=False)
    return snapshot


def _read_once(file: Path, *, immutable: bool) -> LedgerSnapshot:
    uri = f"{file.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as err:
        raise DataError(f"Cannot open the ledger {str(file)!r} read-only: {err}.") from None
    try:
        return _snapshot(conn, str(file))
    except sqlite3.OperationalError as err:
        raise DataError(f"Cannot read the ledger {str(file)!r}: {err}.") from None
    except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as err:
        raise DataError(
            f"{str(file)!r} is not a dpkit ledger ({type(err).__name__}). A ledger is the "
            "file given as ledger= to a Session or --ledger to a command."
        ) from None
    finally:
        conn.close()


def _snapshot(conn: sqlite3.Connection, path: str) -> LedgerSnapshot:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"scopes", "spends"} <= tables:
        raise sqlite3.DatabaseError("no scopes and spends tables")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(spends)")]
    chain = "chain" if "chain" in columns else "NULL"
    spend_rows = conn.execute(
        f"SELECT id, scope, created, amount, description, {chain} FROM spends ORDER BY id"
    ).fetchall()
    kinds: dict[str, BudgetKind | None] = {}
    scopes: list[ScopeState] = []
    counts: dict[str, int] = {}
    totals: dict[str, tuple[Fraction, ...]] = {}
    for row in spend_rows:
        counts[row[1]] = counts.get(row[1], 0) + 1
    for scope, kind_text, budget_text, spent_text in conn.execute(
        "SELECT scope, kind, budget, spent FROM scopes ORDER BY rowid"
    ):
        budget, spent = _decode(budget_text), _decode(spent_text)
        totals[scope] = spent
        kind = kind_from_ledger(kind_text, budget)
        kinds[scope] = kind
        width = max(len(budget), len(spent))
        left = tuple(
            b - s for b, s in zip(_widen(budget, width), _widen(spent, width), strict=True)
        )
        scopes.append(
            ScopeState(
                scope=scope,
                kind=kind_text,
                spends=counts.get(scope, 0),
                budget=None if kind is None else _components(kind, budget),
                spent=None if kind is None else _spent(kind, spent),
                remaining=None if kind is None else _remaining(kind, spent, left),
            )
        )
    records = [SpendRecord(r[0], r[1], r[2], _decode(r[3]), r[4]) for r in spend_rows]
    intact = _chains(spend_rows)
    if intact is not False and not (
        _ids_match(conn, spend_rows, tables) and _totals_match(records, totals)
    ):
        intact = False
    failure = None
    if "failures" in tables:
        first = conn.execute("SELECT created FROM failures ORDER BY id LIMIT 1").fetchone()
        if first is not None:
            failure = datetime.fromtimestamp(float(first[0]), UTC)
    return LedgerSnapshot(
        path=path,
        scopes=tuple(scopes),
        spends=tuple(spend_row(r, kinds.get(r.scope)) for r in records),
        intact=intact,
        failure=failure,
    )


def _components(kind: BudgetKind, amount: Amount) -> dict[str, float]:
    """A scope's budget vector (or what is left of it) component by component, rounded
    down."""
    return charge_in_user_units(kind, amount, round_up=False, worth=False)


def _spent(kind: BudgetKind, spent: Amount) -> dict[str, float]:
    """What a scope spent. An ApproxDP Session's own scope: ``epsilon`` is the share of
    its budget's epsilon the filter's rule counts as used (pure epsilons plus the zCDP
    part at the filter's fixed order), not what the total would be worth on its own."""
    units = charge_in_user_units(kind, spent)
    if isinstance(kind.rule, PureApproxZCDPFilter):
        units["epsilon"] = kind.rule.epsilon_used(_widen(spent, 3))
    return units


def _remaining(kind: BudgetKind, spent: Amount, left: Amount) -> dict[str, float]:
    """What a scope has left, rounded down. An ApproxDP Session's own scope: the largest
    pure query (``pure_epsilon``, at face value or in rho) and the largest zCDP query
    (``rho``) that its filter's rule still admits, each on its own, and the selection
    delta; other scopes component by component."""
    rule = kind.rule
    if isinstance(rule, PureApproxZCDPFilter):
        state = _widen(spent, 3)
        return {
            "rho": fraction_down(rule.rho_left(state)),
            "delta": fraction_down(max(Fraction(left[1]), Fraction(0))),
            "pure_epsilon": rule.pure_left(state),
        }
    return _components(kind, left)


def _ids_match(conn: sqlite3.Connection, rows: Sequence[Sequence[Any]], tables: set[str]) -> bool:
    """Whether the spend ids are 1, 2, ... with no gap, up to the largest id SQLite ever
    handed out (``Ledger._check_history``): a deleted row, even the last one with the
    totals lowered to match, shows, chained or not."""
    if [int(row[0]) for row in rows] != list(range(1, len(rows) + 1)):
        return False
    if "sqlite_sequence" not in tables:
        return True
    issued = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'spends'").fetchone()
    return issued is None or int(issued[0]) == len(rows)


def _totals_match(records: Sequence[SpendRecord], totals: dict[str, tuple[Fraction, ...]]) -> bool:
    """Whether every scope's stored total is the sum of its spends (amounts written
    before a ledger's currency gained a component count it as zero, as the ledger
    does)."""
    sums: dict[str, tuple[Fraction, ...]] = {}
    for record in records:
        old = sums.get(record.scope, ())
        width = max(len(old), len(record.amount))
        sums[record.scope] = tuple(
            a + b for a, b in zip(_widen(old, width), _widen(record.amount, width), strict=True)
        )
    return all(_widen(sums.get(scope, ()), len(t)) == t for scope, t in totals.items())


def _widen(amount: Sequence[Fraction], width: int) -> tuple[Fraction, ...]:
    return tuple(amount) + (Fraction(0),) * (width - len(amount))


def _chains(rows: Sequence[Sequence[Any]]) -> bool | None:
    """Whether the spend rows chain as the ledger writes them (``Ledger._check_history``,
    read-only); None for a ledger written before the chain existed."""
    if rows and all(row[5] is None for row in rows):
        return None
    previous = _GENESIS
    for expected_id, row in enumerate(rows, start=1):
        link = _link(previous, row)
        if row[0] != expected_id or row[5] != link:
            return False
        previous = link
    return True
