"""What a partition is, decided from public information only (before the ledger).

:func:`plan_partition` validates ``Session.partition``'s arguments, makes the keys
canonical for the column's type (:mod:`dpkit.analytics._keys`), turns each part's
budget into a filter of its own (:meth:`BudgetKind.part`), and names the partition by
its column, canonical keys and part budgets: the same three always name the same
partition (reopened, it is not charged again), and anything else is a new one. The
parent's charge is the largest part budget (parallel composition; see
``Session.partition``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit.analytics._accounting import BudgetKind, _share_of
from dpkit.analytics._canonical import check_key_type
from dpkit.analytics._keys import canonical_keys
from dpkit.analytics.engines._hash import HASH_VERSION
from dpkit.errors import DataError, InvalidParameter

__all__ = ["PartitionPlan", "plan_partition"]


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """A partition before it is opened: its ledger name, parts and charge."""

    name: str  # ledger scope of the partition (stores its salt)
    given: tuple[Any, ...]  # the keys as the user gave them (the returned dict's keys)
    keys: tuple[Any, ...]  # canonical keys, in the same order
    scopes: tuple[str, ...]  # one ledger scope per part
    kinds: tuple[BudgetKind, ...]  # one filter per part
    charge: tuple[Fraction, ...]  # the parent's charge: the largest part budget
    description: str  # JSON, for the ledger's history


def plan_partition(
    kind: BudgetKind,
    schema: Mapping[str, str],
    unit: str | None,
    scope: str,
    column: object,
    keys: object,
    budgets: object,
    table: str | None = None,
) -> PartitionPlan:
    """Validate and plan ``Session.partition(column, keys, budgets)`` (raises
    InvalidParameter or DataError, before anything is charged)."""
    owner = "Session.partition"
    if not isinstance(column, str) or column not in schema:
        raise DataError(f"{owner}: unknown column {column!r}. Available columns: {sorted(schema)}.")
    if column == unit:
        raise InvalidParameter(f"{owner}: cannot partition by the privacy unit.")
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence) or not keys:
        raise InvalidParameter.for_parameter("keys", owner, "a non-empty list of keys", keys)
    given = tuple(keys)
    check_key_type(schema[column], column, owner, role="partition")
    canonical = tuple(canonical_keys(list(given), schema[column], column, owner))
    if isinstance(budgets, list | tuple):
        if len(budgets) != len(given):
            raise InvalidParameter(f"{owner}: give one budget per key ({len(given)}).")
        per_key = list(budgets)
    else:
        per_key = [budgets] * len(given)
    # Each part is a filter of its own budget (rounded down to floats), nested in the
    # parent's filter, which is charged the largest of them.
    kinds = tuple(kind.part(_part_amount(kind, b, owner)) for b in per_key)
    amounts = [k.amount for k in kinds]
    charge = tuple(max(a[i] for a in amounts) for i in range(len(kind.amount)))
    # The keyed hash's version joins the identity: the parts are that hash of the salt
    # the ledger keeps, so a ledger reopened by a dpkit with another hash must not find
    # (and resume, with persons in other parts) a partition the old one created.
    # (First, so no other field's value can stand in for it.)
    identity = json.dumps(
        [f"keyed hash v{HASH_VERSION}", column, [repr(k) for k in canonical]]
        + [[[str(x) for x in a] for a in amounts]]
        + ([] if table is None else [table])
    )
    name = f"{scope}/partition:{hashlib.sha256(identity.encode()).hexdigest()[:24]}"
    return PartitionPlan(
        name=name,
        given=given,
        keys=canonical,
        scopes=tuple(f"{name}/{key!r}" for key in canonical),
        kinds=kinds,
        charge=charge,
        description=json.dumps(
            {"partition": column, "keys": [repr(k) for k in canonical]}
            | ({} if table is None else {"table": table})
        ),
    )


def _part_amount(kind: BudgetKind, budget: object, owner: str) -> tuple[Fraction, ...]:
    share = _share_of(budget)
    if share is not None:
        if kind.name == "approx":  # a share of the zCDP part and of the selection delta
            return (share * kind.amount[0], share * kind.amount[1], Fraction(0))
        return tuple(share * a for a in kind.amount)
    amount = kind.query_amount(budget, (Fraction(0),) * len(kind.amount), owner)
    if amount.noise != kind.noise:
        raise InvalidParameter.for_parameter(
            "budgets", owner, "shares in (0, 1] or guarantees of the Session's currency", budget
        )
    return kind.vector(amount.charge, Fraction(0), amount.pure)
