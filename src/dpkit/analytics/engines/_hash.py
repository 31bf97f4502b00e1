"""dpkit's keyed hash, written in SQL that every engine computes identically.

Contribution bounding chooses, for each person, which groups and which rows to keep by
the smallest keyed hash of ``(salt, person, group[, value])`` (:mod:`.sql`). Engines'
built-in hashes differ (DuckDB's ``hash`` and Spark's ``hash``/``xxhash64`` are
different functions of different byte layouts), so the same query would keep different
rows on DuckDB and on Spark. This module defines one hash, from operations both
compute exactly: 64-bit integer ``+ - * %`` (all values here stay below 2^63),
comparisons, ``floor``/``log2``/``power`` of doubles (corrected to be
exact, below), two's-complement ``&`` and arithmetic ``>>`` of BIGINTs, and ``md5`` of
a string.

The hash, in two steps (each is a column of a SELECT, so neither is written twice):

1. ``linear``: each part is mapped to integer *limbs* in ``[0, p)`` (an injective
   map for integers, doubles, dates and timestamps; 56 bits of ``md5`` for strings and
   everything else) and combined as ``(k_0 + sum_j k_j * limb_j) mod p`` with
   ``p = 2^31 - 1`` (a prime) and round keys ``k_j`` drawn from the salt by SHA-256. For
   distinct limb vectors, the values collide with probability ``1/p`` over the keys (a
   universal hash; Carter & Wegman 1979). Each limb has a public bound, so products
   are summed as long as the sum provably stays below 2^63 and reduced once
   (:meth:`KeyedHash._reduced_sum`): the same residue with fewer ``%``.
2. ``finish``: one round of ``x -> (x + k)^5 mod p``, a permutation of ``Z_p`` because
   ``gcd(5, p - 1) = 1`` (a round of the MiMC cipher's shape, Albrecht et al. 2016). A
   linear hash alone would order one person's groups by ``(a(person) + b(group)) mod
   p``: every person would keep an arc of one circular order of the groups, and two
   groups next to each other on it were kept together ~10x as often as chance (50
   groups, 5 kept, 2*10^4 consecutive person ids). The non-linear round breaks that
   structure: pairs are then kept together as often as under a uniform choice
   (tests/engines/test_keyed_hash.py). A second round, used until 2026-12, measured
   no better on that test and cost ~7% of the bounding statement at 10^6 rows (issue
   34), so it was dropped; privacy never depended on it (below).

The output is in ``[0, p)``; callers break ties by the value itself, so a collision
never makes the choice depend on row order. Privacy does not depend on the hash's
quality: whatever the hash, each person's kept rows depend on that person's rows and
the salt alone (the bounding proofs in :mod:`.sql`). Quality matters for accuracy (a
biased choice of kept rows), and is tested in tests/analytics/test_keyed_hash.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["HASH_PRIME", "HASH_VERSION", "SMALL_INDEX", "KeyedHash", "Limb", "TypedPart"]

#: The Mersenne prime 2^31 - 1: products of two residues stay below 2^62.
HASH_PRIME = 2**31 - 1

#: The hash's version, raised whenever its values change for the same salt and input
#: (2: integer limbs made of bits, one finishing round, TIMESTAMP_S and TIMESTAMP_MS by
#: their text; 2026-12). A partition assigns each person to a part by this hash of a
#: salt kept in the ledger (``Session.partition``), so the version is part of a
#: partition's identity: one created by a dpkit with another hash is never resumed with
#: different parts (it is a new partition, charged again). Pinned by a test of the
#: values (tests/engines/test_keyed_hash.py).
HASH_VERSION = 2

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
#: Timestamps hashed by their microseconds since the epoch: every value of these fits a
#: BIGINT (TIMESTAMP_NS, within 1677-2262, loses its nanoseconds: equal hashes are
#: ordered by the value itself). TIMESTAMPTZ is DuckDB's alias of the zoned type.
_MICROSECOND_TIMESTAMPS = (
    "TIMESTAMP",
    "TIMESTAMP WITH TIME ZONE",
    "TIMESTAMPTZ",
    "TIMESTAMP_NS",
    "DATETIME",
)

#: A DECIMAL type as dpkit names it (``DECIMAL(38,10)``), its scale captured.
_DECIMAL = re.compile(r"DECIMAL\(\s*\d+\s*,\s*(\d+)\s*\)")

#: A pseudo-type for integers known to lie in [0, p) (grid indices): one limb, itself.
SMALL_INDEX = "SMALL INDEX"

#: Bits of an integer limb (:meth:`KeyedHash._integer_limbs`): below p, so a limb times
#: a round key is below 2^61 and two such products add up below 2^62.
_LIMB_BITS = 30
#: A running sum of products is reduced mod p before it could pass this (see
#: :meth:`KeyedHash._reduced_sum`): with at most 2^30 residues below 2^31 added to it,
#: the total stays below 2^63.
_SUM_LIMIT = 3 << 61


@dataclass(frozen=True, slots=True)
class TypedPart:
    """A SQL expression to hash and its type (dpkit's DuckDB type vocabulary)."""

    sql: str
    type: str


@dataclass(frozen=True, slots=True)
class Limb:
    """The SQL of one limb and a public bound on its values: ``0 <= limb < bound``."""

    sql: str
    bound: int


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
    #: ``shift_right(sql, n)``: a BIGINT shifted right by ``n`` bits, arithmetically
    #: (the sign bit copied in: floor division by 2^n).
    shift_right: Callable[[str, int], str]
    #: The string type name for CAST (``VARCHAR``, ``STRING``).
    text: str
    #: ``decimal_text(sql, scale)``: a DECIMAL of that scale as plain text with all
    #: its places (``-0.5000``, ``0.0000000001``; never an exponent), DuckDB's text.
    decimal_text: Callable[[str, int], str]


#: Round keys: k_0, one per limb position (cycled beyond), and one for ``finish`` (the
#: key drawn for a second round, no longer used, keeps its place in the stream).
_LIMB_KEYS = 32
_FINISH_KEYS = (_LIMB_KEYS + 1,)


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
    def _integer_limbs(self, x: str) -> list[Limb]:
        """Three limbs of a BIGINT, its two's-complement bits: the low 30 bits, the next
        30, and the top 4 (arithmetic shift, in [-8, 8)) plus 8. ``x`` is their sum
        ``l_0 + 2^30 l_1 + 2^60 (l_2 - 8)``, so the map is injective. Bit operations
        only: on DuckDB, the bounding statement at 10^6 pairs spent ~0.016 s on a
        person's four limbs of truncating divisions and remainders, and about as much
        as one ``%`` on these (issue 34)."""
        low = (1 << _LIMB_BITS) - 1
        shift = self._dialect.shift_right
        return [
            Limb(f"(({x}) & {low})", 1 << _LIMB_BITS),
            Limb(f"({shift(f'({x})', _LIMB_BITS)} & {low})", 1 << _LIMB_BITS),
            Limb(f"({shift(f'({x})', 2 * _LIMB_BITS)} + 8)", 16),
        ]

    def _double_limbs(self, x: str) -> list[Limb]:
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
            Limb(kind, 6),
            Limb(sign, 2),
            Limb(f"CASE WHEN {finite} THEN {e} + 2000 ELSE 0 END", 3024),
            *[
                Limb(f"CASE WHEN {finite} THEN {limb.sql} ELSE 0 END", limb.bound)
                for limb in self._integer_limbs(significand)
            ],
        ]

    def _text_limbs(self, x: str) -> list[Limb]:
        """56 bits of md5 of a string, as two 28-bit limbs (NULL hashes as '')."""
        digest = f"md5(coalesce(({x}), ''))"
        to_int = self._dialect.hex_to_bigint
        return [
            Limb(to_int(f"substr({digest}, 1, 7)"), 1 << 28),
            Limb(to_int(f"substr({digest}, 8, 7)"), 1 << 28),
        ]

    def limbs(self, part: TypedPart) -> list[Limb]:
        """The limbs of one part, by its type, each with its bound.

        Types are matched whole: a nested type whose name begins with a scalar's
        (``INTEGER[]``, ``DOUBLE[3]``, ``TIMESTAMP[]``) is hashed by its text, never cast
        to the scalar -- a cast DuckDB accepts when binding and refuses on the first row,
        after the charge (found by a review of hash v2; older than it)."""
        kind = part.type.upper().strip()
        if kind == SMALL_INDEX:
            return [Limb(f"({part.sql})", HASH_PRIME)]
        if kind in _INTEGER_TYPES:
            return self._integer_limbs(f"CAST(({part.sql}) AS BIGINT)")
        if kind in _FLOAT_TYPES:
            return self._double_limbs(part.sql)
        if kind == "BOOLEAN":
            flag = f"CASE WHEN ({part.sql}) IS NULL THEN 2 WHEN ({part.sql}) THEN 1 ELSE 0 END"
            return [Limb(flag, 3)]
        if kind == "DATE":
            return self._integer_limbs(self._dialect.date_days(part.sql))
        if kind in _MICROSECOND_TIMESTAMPS:
            return self._integer_limbs(self._dialect.epoch_micros(part.sql, kind))
        if kind in ("BLOB", "BYTEA", "VARBINARY", "BINARY"):
            # Bytes as their hexadecimal text (both engines print upper case).
            return self._text_limbs(f"hex({part.sql})")
        decimal = _DECIMAL.fullmatch(kind)
        if decimal:
            # Spark's own text of a DECIMAL below 1e-6 is '1E-10' (DuckDB's
            # '0.0000000001'): both engines write it plain, with every place.
            scale = int(decimal.group(1))
            return self._text_limbs(self._dialect.decimal_text(f"({part.sql})", scale))
        # Strings, nested types and anything else: md5 of its text. Parity across
        # engines holds where their text is the same. DuckDB's TIMESTAMP_S and
        # TIMESTAMP_MS go here too: they
        # reach years whose microseconds overflow a BIGINT (epoch_us raised on a value
        # after 294247, after the charge), and their text is exact; Spark has neither.
        return self._text_limbs(f"CAST(({part.sql}) AS {self._dialect.text})")

    # ------------------------------------------------------------------ the hash
    def _terms(self, parts: Sequence[TypedPart], first_limb: int) -> list[Limb]:
        """The products ``k_j * limb_j`` of the parts' limbs, numbered from
        ``first_limb``, each with its bound (``bound(limb) * k_j``)."""
        limbs = [limb for part in parts for limb in self.limbs(part)]
        terms = []
        for j, limb in enumerate(limbs, start=first_limb):
            key = self._keys[1 + j % _LIMB_KEYS]
            terms.append(Limb(f"(CAST({limb.sql} AS BIGINT) * {key})", (limb.bound - 1) * key + 1))
        return terms

    @staticmethod
    def _reduced_sum(terms: Sequence[Limb]) -> str:
        """SQL of ``(sum of terms) mod p``, in [0, p), each term non-negative and below
        its bound. Terms are added in order while their bounds' sum stays within
        :data:`_SUM_LIMIT`; such a running sum is then reduced mod p and its residue
        (below 2^31) carried into the last one. The last sum is at most the limit plus
        one residue per reduced sum (far fewer than 2^30), so no partial sum reaches
        2^63 on any row: the same residue as reducing every product, with fewer ``%``
        (a product of two residues, below 2^62, still gets one of its own)."""
        p = HASH_PRIME
        reduced: list[str] = []
        running: list[str] = []
        total = 0
        for term in terms:
            if running and total + term.bound > _SUM_LIMIT:
                reduced.append(f"(({' + '.join(running)}) % {p})")
                running, total = [], 0
            running.append(term.sql)
            total += term.bound
        return f"(({' + '.join([*reduced, *running] or ['0'])}) % {p})"

    def limb_count(self, parts: Sequence[TypedPart]) -> int:
        """How many limbs the parts have (where the next parts' limbs are numbered)."""
        return sum(len(self.limbs(part)) for part in parts)

    def linear(self, parts: Sequence[TypedPart], slices: Sequence[str] = ()) -> str:
        """Step 1: SQL of ``(k_0 + sum k_j limb_j) mod p``, a BIGINT in [0, p).

        ``slices`` are :meth:`partial` sums of the limbs that follow ``parts``' (each a
        column in [0, p), computed elsewhere): they are added in, for the same integer
        by associativity mod p."""
        k0 = Limb(str(self._keys[0]), HASH_PRIME)
        given = [Limb(s, HASH_PRIME) for s in slices]
        return self._reduced_sum([k0, *self._terms(parts, 0), *given])

    def partial(self, parts: Sequence[TypedPart], first_limb: int) -> str:
        """SQL of one slice of :meth:`linear`'s sum, ``(sum k_j limb_j) mod p`` over
        the parts' limbs numbered from ``first_limb``, in [0, p). A slice that depends
        on few distinct values (a group key) can be computed once per value and joined;
        :meth:`linear` adds it back."""
        return self._reduced_sum(self._terms(parts, first_limb))

    def finish(self, column: str) -> str:
        """Step 2: the rounds ``x -> (x + k)^5 mod p`` (:data:`_FINISH_KEYS`) of a column
        holding :meth:`linear`, as one expression. Its text holds each round's input 5
        times (a column written 5^rounds times): where a statement is built,
        :meth:`finished` computes the same integer in projections instead."""
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
        BIGINT on every engine). Written as one expression, each round repeats its
        input 5 times: with two rounds, ~1.9 KB of SQL per hash that the engine parsed,
        bound and optimised (issue 30: on TPC-H Q10, three such hashes were ~40% of
        DuckDB's binding and a third of its planning). The rows keep ``relation``'s
        columns and gain ``name`` and a helper column ``{name}_y<r>`` per round (and
        ``{name}_x<r>`` between rounds).

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
    (Python's ``&`` and ``>>`` on a negative int act on its two's complement, as the
    engines' on a BIGINT; for tests)."""
    low = (1 << _LIMB_BITS) - 1
    return [x & low, (x >> _LIMB_BITS) & low, (x >> (2 * _LIMB_BITS)) + 8]


def python_text_limbs(text: str) -> list[int]:
    """The limbs :meth:`KeyedHash.limbs` computes in SQL for a string: 56 bits of the
    md5 of its UTF-8 bytes, as two 28-bit integers (for tests)."""
    digest = hashlib.md5(text.encode()).hexdigest()
    return [int(digest[0:7], 16), int(digest[7:14], 16)]
