"""dpkit's keyed hash, written in SQL that every engine computes identically.

Contribution bounding chooses, for each person, which groups and which rows to keep by
the smallest keyed hash of ``(salt, person, group[, value])`` (:mod:`.sql`). Engines'
built-in hashes differ (DuckDB's ``hash`` and Spark's ``hash``/``xxhash64`` are
different functions of different byte layouts), so the same query would keep different
rows on DuckDB and on Spark. This module defines one hash, from operations both
compute exactly: 64-bit integer ``+ - * %`` and integer division (all values here stay
below 2^63), comparisons, ``floor``/``log2``/``power`` of doubles (corrected to be
exact, below) and ``md5`` of a string.

The hash, in two steps (each is a column of a SELECT, so neither is written twice):

1. ``linear``: each part is mapped to integer *limbs* in ``[0, p)`` (an injective
   map for integers, doubles, dates and timestamps; 56 bits of ``md5`` for strings and
   everything else) and combined as ``(k_0 + sum_j k_j * limb_j) mod p`` with
   ``p = 2^31 - 1`` (a prime) and round keys ``k_j`` drawn from the salt by SHA-256. For
   distinct limb vectors, the values collide with probability ``1/p`` over the keys (a
   universal hash; Carter & Wegman 1979).
2. ``finish``: two rounds of ``x -> (x + k)^5 mod p``, a permutation of ``Z_p`` because
   ``gcd(5, p - 1) = 1``, the shape of the MiMC cipher (Albrecht et al. 2016). A
   linear hash alone would order one person's groups by ``(a(person) + b(group)) mod
   p``: every person would keep an arc of one circular order of the groups. The
   non-linear rounds break that structure.

The output is in ``[0, p)``; callers break ties by the value itself, so a collision
never makes the choice depend on row order. Privacy does not depend on the hash's
quality: whatever the hash, each person's kept rows depend on that person's rows and
the salt alone (the bounding proofs in :mod:`.sql`). Quality matters for accuracy (a
biased choice of kept rows), and is tested in tests/analytics/test_keyed_hash.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["HASH_PRIME", "SMALL_INDEX", "KeyedHash", "TypedPart"]

#: The Mersenne prime 2^31 - 1: products of two residues stay below 2^62.
HASH_PRIME = 2**31 - 1

_INTEGER_TYPES = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
)
_FLOAT_TYPES = ("FLOAT", "DOUBLE", "REAL")

#: A pseudo-type for integers known to lie in [0, p) (grid indices): one limb, itself.
SMALL_INDEX = "SMALL INDEX"


@dataclass(frozen=True, slots=True)
class TypedPart:
    """A SQL expression to hash and its type (dpkit's DuckDB type vocabulary)."""

    sql: str
    type: str


@dataclass(frozen=True, slots=True)
class HashDialect:
    """The few spellings the hash needs that differ between engines."""

    #: ``hex_to_bigint(sql)``: a string of at most 15 hex digits -> BIGINT.
    hex_to_bigint: Callable[[str], str]
    #: ``date_days(sql)``: a DATE -> days since 1970-01-01 (BIGINT).
    date_days: Callable[[str], str]
    #: ``epoch_micros(sql, type)``: a TIMESTAMP (``type`` says with or without time
    #: zone) -> microseconds since the epoch (of the wall clock without a time zone).
    epoch_micros: Callable[[str, str], str]
    #: ``int_div(a, b)``: integer division truncating towards zero.
    int_div: Callable[[str, str], str]
    #: The string type name for CAST (``VARCHAR``, ``STRING``).
    text: str


#: Round keys: k_0, one per limb position (cycled beyond), and two for ``finish``.
_LIMB_KEYS = 32
_FINISH_KEYS = (_LIMB_KEYS + 1, _LIMB_KEYS + 2)


def round_keys(salt: int) -> list[int]:
    """The hash's round keys for ``salt``: SHA-256 in counter mode, each 4-byte word
    reduced mod p (the bias of 2^32 mod p is about 2^-30). Nearby salts get unrelated
    keys."""
    stream = b"".join(
        hashlib.sha256(f"dpkit keyed hash|{int(salt)}|{block}".encode()).digest()
        for block in range(5)
    )
    count = _LIMB_KEYS + 3
    return [int.from_bytes(stream[4 * i : 4 * i + 4], "big") % HASH_PRIME for i in range(count)]


class KeyedHash:
    """The keyed hash of one salt (see the module docstring)."""

    def __init__(self, salt: int, dialect: HashDialect) -> None:
        self._keys = round_keys(salt)
        self._dialect = dialect

    # ------------------------------------------------------------------ limbs
    def _integer_limbs(self, x: str) -> list[str]:
        """Four limbs in [0, p) of a BIGINT: with truncating division x = q p + r and
        q = q2 p + r2 (r, r2 in (-p, p), |q2| <= 4, all of x's sign), the residues of r
        and r2, q2 + 8 and the sign -- an injective map (the sign tells which
        representative a residue stands for)."""
        p, div = HASH_PRIME, self._dialect.int_div
        q = div(f"({x})", str(p))
        return [
            f"((({x}) % {p} + {p}) % {p})",
            f"((({q}) % {p} + {p}) % {p})",
            f"({div(q, str(p))} + 8)",
            f"CASE WHEN ({x}) < 0 THEN 1 ELSE 0 END",
        ]

    def _double_limbs(self, x: str) -> list[str]:
        """Limbs of a DOUBLE's exact value: class, sign, exponent, 53-bit significand.

        ``e = floor(log2(|x|))`` is corrected by comparing ``|x|`` with exact powers of
        two (``log2`` may be one ulp off in one engine and not the other); then
        ``|x| / 2^(e - 52)`` is an exact integer below 2^53 (subnormals: e = -1022).
        NULL, NaN and infinities get fixed limbs; +0 and -0 are one value.
        """
        raw = f"abs(CAST(({x}) AS DOUBLE))"
        finite = f"({raw} > 0 AND {raw} < CAST('Infinity' AS DOUBLE))"
        # 1.0 in place of 0, NaN, infinities and NULL: log2 and the casts below never
        # see a value they could fail on (DuckDB raises on log2(0)).
        a = f"(CASE WHEN {finite} THEN {raw} ELSE 1.0 END)"
        e0 = f"CAST(floor(log2({a})) AS BIGINT)"
        e1 = (
            f"({e0} - CASE WHEN {a} < power(2.0, {e0}) THEN 1 ELSE 0 END"
            f" + CASE WHEN {a} >= power(2.0, least({e0} + 1, 1023)) AND {e0} < 1023"
            " THEN 1 ELSE 0 END)"
        )
        e = f"greatest(least({e1}, 1023), -1022)"
        significand = f"CAST({a} / power(2.0, {e} - 52) AS BIGINT)"
        kind = (
            f"CASE WHEN ({x}) IS NULL THEN 1 WHEN isnan(CAST(({x}) AS DOUBLE)) THEN 2 "
            f"WHEN {raw} = 0 THEN 3 WHEN {finite} THEN 4 ELSE 5 END"
        )
        sign = f"CASE WHEN CAST(({x}) AS DOUBLE) < 0 THEN 1 ELSE 0 END"
        return [
            kind,
            sign,
            f"CASE WHEN {finite} THEN {e} + 2000 ELSE 0 END",
            *[
                f"CASE WHEN {finite} THEN {limb} ELSE 0 END"
                for limb in self._integer_limbs(significand)
            ],
        ]

    def _text_limbs(self, x: str) -> list[str]:
        """56 bits of md5 of a string, as two 28-bit limbs (NULL hashes as '')."""
        digest = f"md5(coalesce(({x}), ''))"
        to_int = self._dialect.hex_to_bigint
        return [to_int(f"substr({digest}, 1, 7)"), to_int(f"substr({digest}, 8, 7)")]

    def limbs(self, part: TypedPart) -> list[str]:
        """SQL of the limbs of one part, by its type."""
        kind = part.type.upper()
        if kind == SMALL_INDEX:
            return [f"({part.sql})"]
        if kind.startswith(_INTEGER_TYPES):
            return self._integer_limbs(f"CAST(({part.sql}) AS BIGINT)")
        if kind.startswith(_FLOAT_TYPES):
            return self._double_limbs(part.sql)
        if kind == "BOOLEAN":
            return [f"CASE WHEN ({part.sql}) IS NULL THEN 2 WHEN ({part.sql}) THEN 1 ELSE 0 END"]
        if kind == "DATE":
            return self._integer_limbs(self._dialect.date_days(part.sql))
        if kind.startswith("TIMESTAMP"):
            return self._integer_limbs(self._dialect.epoch_micros(part.sql, kind))
        if kind in ("BLOB", "BYTEA", "VARBINARY", "BINARY"):
            # Bytes as their hexadecimal text (both engines print upper case).
            return self._text_limbs(f"hex({part.sql})")
        # Strings, DECIMAL and anything else: md5 of its text. Parity across engines
        # holds where their text is the same: DECIMALs print alike ('1.50') except below
        # 1e-6 with 7+ decimal places, which Spark writes as '1E-10' (a known gap:
        # exact arithmetic on them loses scale in Spark's DECIMAL(38) rules).
        return self._text_limbs(f"CAST(({part.sql}) AS {self._dialect.text})")

    # ------------------------------------------------------------------ the hash
    def _terms(self, parts: Sequence[TypedPart], first_limb: int) -> list[str]:
        """``(k_j * limb_j) mod p`` for the parts' limbs, numbered from ``first_limb``."""
        p = HASH_PRIME
        limbs = [limb for part in parts for limb in self.limbs(part)]
        terms = []
        for j, limb in enumerate(limbs, start=first_limb):
            key = self._keys[1 + j % _LIMB_KEYS]
            # limb < 2^31 and key < 2^31: the product is below 2^62, reduced at once.
            terms.append(f"((CAST({limb} AS BIGINT) * {key}) % {p})")
        return terms

    def limb_count(self, parts: Sequence[TypedPart]) -> int:
        """How many limbs the parts have (where the next parts' limbs are numbered)."""
        return sum(len(self.limbs(part)) for part in parts)

    def linear(self, parts: Sequence[TypedPart]) -> str:
        """Step 1: SQL of ``(k_0 + sum k_j limb_j) mod p``, a BIGINT in [0, p)."""
        terms = [str(self._keys[0]), *self._terms(parts, 0)]
        return f"(({' + '.join(terms)}) % {HASH_PRIME})"

    def partial(self, parts: Sequence[TypedPart], first_limb: int) -> str:
        """SQL of one slice of :meth:`linear`'s sum, ``(sum k_j limb_j) mod p`` over
        the parts' limbs numbered from ``first_limb``, in [0, p). A slice that depends
        on few distinct values (a group key) can be computed once per value and joined;
        :meth:`combine` adds the slices back."""
        return f"(({' + '.join(self._terms(parts, first_limb) or ['0'])}) % {HASH_PRIME})"

    def combine(self, slices: Sequence[str]) -> str:
        """SQL of ``(k_0 + sum of slices) mod p``: :meth:`linear` of the parts whose
        slices (:meth:`partial`, each in [0, p), so the sum stays far below 2^63) these
        are -- the same integer, by associativity mod p."""
        return f"(({' + '.join([str(self._keys[0]), *slices])}) % {HASH_PRIME})"

    def finish(self, column: str) -> str:
        """Step 2: two rounds ``x -> (x + k)^5 mod p`` of a column holding :meth:`linear`,
        as one expression. Its text holds the first round 5 times and ``column`` 25
        times (~1.9 KB): where a statement is built, :meth:`finished` computes the same
        integer in projections instead."""
        p = HASH_PRIME
        x = column
        for key in (self._keys[i] for i in _FINISH_KEYS):
            y = f"(({x} + {key}) % {p})"
            y2 = f"(({y} * {y}) % {p})"
            y4 = f"(({y2} * {y2}) % {p})"
            x = f"(({y4} * {y}) % {p})"
        return x

    def finished(self, relation: str, column: str, name: str) -> str:
        """SQL of ``SELECT *, <finish(column)> AS name FROM relation``: the integer of
        :meth:`finish`, each round's ``(x + k) mod p`` and its fifth power computed in
        a projection of their own (the same operations on the same values, so the same
        BIGINT on every engine). Written as one expression, two rounds repeat the first
        25 times: ~1.9 KB of SQL per hash that the engine parsed, bound and optimised
        (issue 30: on TPC-H Q10, three such hashes were ~40% of DuckDB's binding and a
        third of its planning). The rows keep ``relation``'s columns and gain ``name``
        and the helper columns ``{name}_y0``, ``{name}_x0``, ``{name}_y1``.

        ``relation`` is what follows FROM: a table or CTE name, or an aliased
        subquery."""
        p = HASH_PRIME
        steps: list[tuple[str, str]] = []
        x = column
        keys = [self._keys[i] for i in _FINISH_KEYS]
        for r, key in enumerate(keys):
            y = f"{name}_y{r}"
            steps.append((y, f"(({x} + {key}) % {p})"))
            y2 = f"(({y} * {y}) % {p})"
            x = name if r == len(keys) - 1 else f"{name}_x{r}"
            steps.append((x, f"(((({y2} * {y2}) % {p}) * {y}) % {p})"))
        sql = f"SELECT *, {steps[0][1]} AS {steps[0][0]} FROM {relation}"
        for i, (target, expression) in enumerate(steps[1:], start=1):
            sql = f"SELECT *, {expression} AS {target} FROM ({sql}) AS {name}_f{i}"
        return sql


def python_hash(salt: int, limbs: Sequence[int]) -> int:
    """The hash of integer limbs, in Python (for tests of the SQL)."""
    keys = round_keys(salt)
    p = HASH_PRIME
    x = keys[0]
    for j, limb in enumerate(limbs):
        x += (limb * keys[1 + j % _LIMB_KEYS]) % p
    x %= p
    for i in _FINISH_KEYS:
        x = pow((x + keys[i]) % p, 5, p)
    return x


def python_integer_limbs(x: int) -> list[int]:
    """The limbs :meth:`KeyedHash.limbs` computes in SQL for a BIGINT, in Python
    (truncating division and C's remainder, as the engines compute them; for tests)."""

    def trunc_div(a: int, b: int) -> int:
        quotient = abs(a) // abs(b)
        return quotient if (a >= 0) == (b > 0) else -quotient

    p = HASH_PRIME
    q = trunc_div(x, p)
    return [x % p, q % p, trunc_div(q, p) + 8, int(x < 0)]


def python_text_limbs(text: str) -> list[int]:
    """The limbs :meth:`KeyedHash.limbs` computes in SQL for a string: 56 bits of the
    md5 of its UTF-8 bytes, as two 28-bit integers (for tests)."""
    digest = hashlib.md5(text.encode()).hexdigest()
    return [int(digest[0:7], 16), int(digest[7:14], 16)]
