"""A persistent, exact, thread- and process-safe budget ledger on SQLite.

Every spend is a row of exact rationals written in one ``BEGIN IMMEDIATE`` transaction
that first re-reads the running total, checks it against the budget and only then
inserts; the transaction is committed with ``PRAGMA synchronous=FULL`` (fsync) before
the caller may release anything. ``BEGIN IMMEDIATE`` takes SQLite's write lock at the
start of the transaction, so two processes sharing a ledger file serialise their
check-and-spend and cannot overspend together; a :class:`threading.Lock` does the same
for threads sharing one connection.

Amounts are stored as ``"numerator/denominator"`` text of :class:`fractions.Fraction`,
so the arithmetic is exact: a charge is the exact rational value of the float asked for
(never rounded down), and what remains is reported rounded down.

A ledger has *scopes*: the root scope is the Session's budget, and each partition of a
Session gets its own scope (``"root/part:<column>=<key>"``) with its own budget.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpkit.accounting.filters import PrivacyFilter
from dpkit.errors import DataError, InternalError

__all__ = ["Ledger", "SpendRecord"]

Amount = tuple[Fraction, ...]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scopes (
    scope TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    budget TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    spent TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    created REAL NOT NULL,
    amount TEXT NOT NULL,
    description TEXT NOT NULL,
    chain TEXT
);
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    created REAL NOT NULL
);
"""


_GENESIS = "dpkit ledger v1"


def _link(previous: str, row: Sequence[Any]) -> str:
    """The chain hash of a spend row ``(id, scope, created, amount, description)``
    after the row whose chain hash is ``previous``."""
    text = json.dumps([previous, int(row[0]), str(row[1]), repr(float(row[2])), row[3], row[4]])
    return hashlib.sha256(text.encode()).hexdigest()


def _widened(amount: Amount, width: int) -> Amount:
    """``amount`` padded with zeros to ``width`` components (ApproxDP amounts written
    before the pure-epsilon component have two)."""
    return tuple(amount) + (Fraction(0),) * (width - len(amount))


def _encode(amount: Amount) -> str:
    return json.dumps([f"{a.numerator}/{a.denominator}" for a in amount])


def _decode(text: str) -> Amount:
    return tuple(Fraction(part) for part in json.loads(text))


@dataclass(frozen=True, slots=True)
class SpendRecord:
    """One committed spend: its scope, time, exact amount and a description (JSON)."""

    id: int
    scope: str
    created: float
    amount: Amount
    description: str


class Ledger:
    """Exact budget bookkeeping for a Session, in memory (``path=None``) or in a file.

    Parameters
    ----------
    path:
        SQLite file (created if absent), or None for a private in-memory ledger.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else str(Path(path))
        self._lock = threading.Lock()
        # A failure after a charge, known in this process even if writing it failed.
        self._failure: tuple[float, str] | None = None
        try:
            self._conn = sqlite3.connect(
                ":memory:" if self.path is None else self.path,
                timeout=60.0,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,
            )
            self._conn.execute("PRAGMA synchronous=FULL")
            if self.path is not None:
                self._use_wal()
            self._conn.executescript(_SCHEMA)
            self._check_history()
        except sqlite3.Error as err:
            raise DataError(f"Cannot open the ledger file {self.path!r}: {err}.") from err

    def _check_history(self) -> None:
        """Refuse a ledger whose spend history was edited or truncated in place.

        Every spend row carries a SHA-256 hash chained to the row before it, and every
        scope's stored total (its filter state: a sum) must equal the sum of its rows.
        An edited, deleted or reordered row breaks one or the other. (A whole older copy
        of the file is consistent, and so is a history truncated by someone who also
        rewrites SQLite's sequence table and the totals: file-system write access is
        outside the threat model, docs/analytics.md.) Ledgers written before the chain
        existed get it now.
        """
        with self._transaction() as cur:
            columns = [row[1] for row in cur.execute("PRAGMA table_info(spends)")]
            if "chain" not in columns:
                cur.execute("ALTER TABLE spends ADD COLUMN chain TEXT")
            rows = cur.execute(
                "SELECT id, scope, created, amount, description, chain FROM spends ORDER BY id"
            ).fetchall()
            previous, sums = _GENESIS, dict[str, Amount]()
            legacy = all(row[5] is None for row in rows)
            for row in rows:
                link = _link(previous, row)
                if legacy:
                    cur.execute("UPDATE spends SET chain = ? WHERE id = ?", (link, row[0]))
                elif row[5] != link:
                    raise self._tampered()
                amount = _decode(row[3])
                old = sums.get(row[1], ())
                width = max(len(old), len(amount))  # see _widened
                sums[row[1]] = tuple(
                    a + b
                    for a, b in zip(_widened(old, width), _widened(amount, width), strict=True)
                )
                previous = link
            # Ids are 1, 2, ... with no gap, up to the largest id SQLite ever handed out
            # (AUTOINCREMENT keeps it in sqlite_sequence): a deleted row, even the last,
            # shows.
            issued = cur.execute("SELECT seq FROM sqlite_sequence WHERE name = 'spends'").fetchone()
            ids = [int(row[0]) for row in rows]
            if ids != list(range(1, len(ids) + 1)) or (
                issued is not None and int(issued[0]) != len(ids)
            ):
                raise self._tampered()
            for scope, spent in cur.execute("SELECT scope, spent FROM scopes"):
                total = _decode(spent)
                if _widened(sums.get(scope, ()), len(total)) != total:
                    raise self._tampered()

    def _tampered(self) -> DataError:
        return DataError(
            f"The ledger {self.path!r} has been edited: its spend history does not chain, "
            "or a scope's total differs from the sum of its spends. A ledger is append-only "
            "and written by dpkit alone; restore it from a trusted copy."
        )

    def _use_wal(self) -> None:
        # Switching to WAL takes an exclusive lock, and SQLite does not call the busy
        # handler for it: processes opening one new ledger at the same moment got
        # "database is locked". Once a file is in WAL mode it stays so (reading the
        # mode takes no lock), so only the first opener switches; the others retry.
        for attempt in range(200):
            try:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or attempt == 199:
                    raise
                time.sleep(0.01 * (1 + attempt % 10))

    # ------------------------------------------------------------------ scopes
    def open_scope(self, scope: str, kind: str, budget: Amount, fingerprint: str) -> None:
        """Create ``scope`` with its budget, or check that an existing one matches."""
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT kind, budget, fingerprint FROM scopes WHERE scope = ?", (scope,)
            ).fetchone()
            if row is None:
                cur.execute(
                    "INSERT INTO scopes VALUES (?, ?, ?, ?, ?)",
                    (
                        scope,
                        kind,
                        _encode(budget),
                        fingerprint,
                        _encode((Fraction(0),) * len(budget)),
                    ),
                )
                return
            old_kind, old_budget, old_fingerprint = row
            stored = _decode(old_budget)
            if old_kind == kind and len(stored) == 2 and len(budget) == 3:
                stored = self._widen_scope(cur, scope, stored, budget)
            if old_kind != kind or stored != budget:
                raise DataError(
                    f"The ledger {self.path!r} holds a {old_kind} budget "
                    f"{_show(_decode(old_budget))} "
                    f"for {scope!r}, not the {kind} budget {_show(budget)} given. A ledger "
                    "keeps one total budget for its whole life: reopen it with the same "
                    "budget, or use a new ledger file for a new budget."
                )
            if old_fingerprint != fingerprint:
                raise DataError(
                    f"The ledger {self.path!r} was opened for a different table (its schema "
                    "or source differ). A ledger accounts for one table: use a new ledger "
                    "file for another table."
                )

    @staticmethod
    def _widen_scope(cur: sqlite3.Cursor, scope: str, stored: Amount, budget: Amount) -> Amount:
        """An ApproxDP scope written before the pure-epsilon component existed (budget
        ``(rho, delta)``): stored as ``(rho, delta, eps)`` from now on, its spent total
        with no pure epsilon. Its spend rows keep their two components (the history's
        hash chain covers them); sums widen them with a zero (:func:`_widened`)."""
        if stored != budget[:2]:
            return stored  # a different budget: refused by the caller
        spent = _widened(
            _decode(
                cur.execute("SELECT spent FROM scopes WHERE scope = ?", (scope,)).fetchone()[0]
            ),
            3,
        )
        cur.execute(
            "UPDATE scopes SET budget = ?, spent = ? WHERE scope = ?",
            (_encode(budget), _encode(spent), scope),
        )
        return budget

    def fingerprint(self, scope: str) -> str:
        """The fingerprint stored with ``scope`` (also used to persist partition salts)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT fingerprint FROM scopes WHERE scope = ?", (scope,)
            ).fetchone()
        if row is None:
            raise InternalError(f"Ledger scope {scope!r} does not exist; this is a bug.")
        return str(row[0])

    def has_scope(self, scope: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM scopes WHERE scope = ?", (scope,)).fetchone()
        return row is not None

    def spent(self, scope: str) -> Amount:
        """Exact total spent in ``scope``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT spent FROM scopes WHERE scope = ?", (scope,)
            ).fetchone()
        if row is None:
            raise InternalError(
                f"Ledger scope {scope!r} does not exist; this is a bug, please report it."
            )
        return _decode(row[0])

    def budget(self, scope: str) -> Amount:
        with self._lock:
            row = self._conn.execute(
                "SELECT budget FROM scopes WHERE scope = ?", (scope,)
            ).fetchone()
        if row is None:
            raise InternalError(
                f"Ledger scope {scope!r} does not exist; this is a bug, please report it."
            )
        return _decode(row[0])

    # ------------------------------------------------------------------ spending
    def spend(
        self,
        scope: str,
        amount: Amount,
        description: str,
        *,
        rule: PrivacyFilter[Any],
    ) -> SpendRecord:
        """Charge ``amount`` to ``scope`` under its filter ``rule``, and record it durably.

        The scope's stored total is the state of ``rule``; in one ``BEGIN IMMEDIATE``
        transaction the ledger reads it, asks the filter for the next state
        (``rule.after``, which raises :class:`BudgetExceeded` -- nothing recorded -- when
        the filter refuses), and writes it. Returns only after the commit (fsync'd).
        """
        with self._transaction() as cur:
            record = self._charge(cur, scope, amount, description, rule)
        return record

    def _charge(
        self,
        cur: sqlite3.Cursor,
        scope: str,
        amount: Amount,
        description: str,
        rule: PrivacyFilter[Any],
    ) -> SpendRecord:
        """Inside a transaction: the filter's next state for ``scope``, written."""
        _, spent = self._state(cur, scope, rule)
        total = rule.after(spent, amount)
        created = time.time()
        cur.execute("UPDATE scopes SET spent = ? WHERE scope = ?", (_encode(total), scope))
        record_id = self._append(cur, scope, created, _encode(amount), description)
        return SpendRecord(record_id, scope, created, amount, description)

    @staticmethod
    def _append(cur: sqlite3.Cursor, scope: str, created: float, amount: str, text: str) -> int:
        """Inside a transaction: insert one spend row with its chain hash."""
        last = cur.execute("SELECT chain FROM spends ORDER BY id DESC LIMIT 1").fetchone()
        cur.execute(
            "INSERT INTO spends (scope, created, amount, description) VALUES (?, ?, ?, ?)",
            (scope, created, amount, text),
        )
        record_id = cur.lastrowid
        assert record_id is not None
        link = _link(
            _GENESIS if last is None else str(last[0]), (record_id, scope, created, amount, text)
        )
        cur.execute("UPDATE spends SET chain = ? WHERE id = ?", (link, record_id))
        return record_id

    @staticmethod
    def _state(cur: sqlite3.Cursor, scope: str, rule: PrivacyFilter[Any]) -> tuple[Amount, Amount]:
        row = cur.execute("SELECT budget, spent FROM scopes WHERE scope = ?", (scope,)).fetchone()
        if row is None:
            raise InternalError(f"Ledger scope {scope!r} does not exist; this is a bug.")
        budget, spent = _decode(row[0]), _decode(row[1])
        if budget != rule.budget_cost:
            raise InternalError(f"Ledger scope {scope!r} is kept under another budget; a bug.")
        return budget, spent

    # ------------------------------------------------------------------ failing closed
    def fail_closed(self, scope: str) -> float:
        """Record that a query of ``scope`` failed after its charge: charge what remains
        of ``scope``'s budget (its filter is then exhausted) and lock the whole ledger.
        Returns the failure's time.

        The lock holds in this process even if the write fails (a full disk); written,
        it holds for every Session that opens this ledger later.
        """
        created = time.time()
        if self._failure is None:
            self._failure = (created, scope)
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT budget, spent FROM scopes WHERE scope = ?", (scope,)
            ).fetchone()
            if row is not None:
                budget, spent = _decode(row[0]), _decode(row[1])
                left = tuple(max(b - x, Fraction(0)) for b, x in zip(budget, spent, strict=True))
                cur.execute("UPDATE scopes SET spent = budget WHERE scope = ?", (scope,))
                text = json.dumps({"failed_after_charge": True})
                self._append(cur, scope, created, _encode(left), text)
            cur.execute("INSERT INTO failures (scope, created) VALUES (?, ?)", (scope, created))
        return created

    def failure(self) -> tuple[float, str] | None:
        """``(time, scope)`` of the first failure after a charge on this ledger, if any."""
        if self._failure is not None:
            return self._failure
        with self._lock:
            row = self._conn.execute(
                "SELECT created, scope FROM failures ORDER BY id LIMIT 1"
            ).fetchone()
        if row is not None:
            self._failure = (float(row[0]), str(row[1]))
        return self._failure

    def open_partition(
        self,
        parent: str,
        partition: str,
        charge: Amount,
        parts: Sequence[tuple[str, str, Amount]],
        salt: int,
        description: str,
        *,
        rule: PrivacyFilter[Any],
        fingerprint: str,
    ) -> int:
        """Create a partition once, charging its parent, in one transaction; its salt.

        ``partition`` names the partition (column, canonical keys and part budgets); its
        scope stores the salt of the rule that assigns persons to parts. The first call
        checks ``charge`` against the parent's budget, records it, and creates the part
        scopes ``(scope, kind, budget)``; a later call with the same name (a reopened
        ledger, another thread or process) finds it and charges nothing. The charge and
        the creation of the parts commit together, so no crash or race can open parts
        that were not paid for, or pay twice for the same parts.
        """
        with self._transaction() as cur:
            row = cur.execute(
                "SELECT fingerprint FROM scopes WHERE scope = ?", (partition,)
            ).fetchone()
            if row is not None:
                return int(row[0])
            self._charge(cur, parent, charge, description, rule)
            cur.execute(
                "INSERT INTO scopes VALUES (?, ?, ?, ?, ?)",
                (
                    partition,
                    "partition",
                    _encode((Fraction(0),)),
                    str(salt),
                    _encode((Fraction(0),)),
                ),
            )
            for scope, kind, amount in parts:
                cur.execute(
                    "INSERT OR IGNORE INTO scopes VALUES (?, ?, ?, ?, ?)",
                    (
                        scope,
                        kind,
                        _encode(amount),
                        fingerprint,
                        _encode((Fraction(0),) * len(amount)),
                    ),
                )
            return salt

    def history(self, scope: str | None = None) -> Sequence[SpendRecord]:
        """Every committed spend (of ``scope``, or of all scopes), oldest first."""
        query = "SELECT id, scope, created, amount, description FROM spends"
        args: tuple[str, ...] = ()
        if scope is not None:
            query += " WHERE scope = ?"
            args = (scope,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY id", args).fetchall()
        return [SpendRecord(r[0], r[1], r[2], _decode(r[3]), r[4]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # ------------------------------------------------------------------ internals
    def _transaction(self) -> _Transaction:
        return _Transaction(self)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` under the ledger's thread lock (rollback on error)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def __enter__(self) -> sqlite3.Cursor:
        self._ledger._lock.acquire()
        try:
            cur = self._ledger._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")  # the write lock, before reading the total
        except BaseException:
            self._ledger._lock.release()
            raise
        self._cur = cur
        return cur

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self._cur.execute("COMMIT")  # synchronous=FULL: fsync'd when this returns
            else:
                self._cur.execute("ROLLBACK")
        finally:
            self._ledger._lock.release()


def _show(amount: Amount) -> str:
    return "(" + ", ".join(f"{float(a):.6g}" for a in amount) + ")"
