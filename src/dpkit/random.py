"""Randomness: one source of uniform bits for every sampler in dpkit.

A :class:`Random` is a ChaCha20 key stream (RFC 8439, via the ``cryptography``
package). The process-wide default is keyed from operating-system entropy and is
cryptographically secure; it cannot be seeded. A generator built from a seed is
deterministic -- for tests and reproducible research -- and is flagged insecure:
building one warns with :class:`~dpkit.errors.InsecureRandomWarning`, and every
release drawn from it records ``secure=False``.

Samplers take ``rng: RandomLike | None = None`` as their last keyword-only argument
and normalise it with :func:`as_random`. Nothing in dpkit touches NumPy's or Python's
global random state.

Forks
-----
``os.fork()`` copies a generator's key and position into the child. Two workers forked
from one parent would then draw the *same* noise, and the difference of their releases
would be the exact difference of their true values. So a secure generator never
continues its parent's stream in a forked child: every secure :class:`Random` (the
process-wide default, every stream spawned from it, spawned before or after the fork)
is re-keyed from ``os.urandom`` before its first use in the child -- by every method
that reads the key (:meth:`Random.bytes`, :meth:`Random.uint64`,
:meth:`Random.getrandbits`, :meth:`Random.integers`, :meth:`Random.spawn`). Two
mechanisms enforce it: an ``os.register_at_fork`` hook that marks every live
generator stale in the child (it also replaces each generator's lock, which a thread
of the parent may have held at the moment of the fork), and a process-id check before
every use, for forks that bypass Python's hooks.

Seeded generators are deliberately *not* re-keyed: a seed promises a reproducible
stream, and re-keying would break that promise silently. Forked children of a seeded
generator draw identical streams -- acceptable only because a seeded generator is
already insecure (it warns and its releases record ``secure=False``). To give seeded
workers distinct reproducible streams, :meth:`Random.spawn` one stream per worker
before forking.

Examples
--------
>>> import warnings, dpkit as dp
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", dp.InsecureRandomWarning)
...     rng = dp.random.as_random(7)
>>> rng.secure
False
>>> a, b = rng.spawn(2)
>>> bool(a.uint64(4)[0] != b.uint64(4)[0])
True
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
import weakref
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from dpkit.errors import InsecureRandomWarning, InvalidParameter

__all__ = ["Random", "RandomLike", "as_random", "default_random", "post_processing_generator"]

_KEY_BYTES = 32
# Bytes of key stream produced per cipher call: large enough to amortise the call,
# small enough to stay in cache.
_CHUNK_BYTES = 1 << 20
_ZEROS = memoryview(bytes(_CHUNK_BYTES))  # sliced without copying


class Random:
    """A stream of uniform random bits (ChaCha20 key stream).

    Do not build one directly: use :func:`as_random` (``None`` for the secure default,
    an int or :class:`numpy.random.SeedSequence` for a seeded, insecure generator)
    or :meth:`spawn` for independent child streams.

    Parameters
    ----------
    key:
        32 bytes that determine the stream.
    secure:
        Whether the key came from operating-system entropy (and is unknown to anyone).

    Notes
    -----
    After ``os.fork()`` a secure generator is re-keyed from ``os.urandom`` in the
    child before it produces anything or spawns (see the module docstring, "Forks"):
    the child's stream, and the streams it spawns, are independent of the parent's
    and of every other child's. A seeded (``secure=False``) generator is not re-keyed:
    forked children continue the same reproducible stream and draw identical values.
    """

    __slots__ = ("__weakref__", "_cipher", "_key", "_lock", "_pid", "_spawned", "secure")

    def __init__(self, key: bytes, *, secure: bool) -> None:
        if len(key) != _KEY_BYTES:
            raise InvalidParameter.for_parameter("key", "Random", "32 bytes", f"{len(key)} bytes")
        self.secure = secure
        self._lock = threading.Lock()
        self._spawned = 0
        self._rekey(key)
        _live.add(self)

    def _rekey(self, key: bytes) -> None:
        self._key = key
        self._pid: int | None = os.getpid()
        # The 16-byte ChaCha20 nonce of `cryptography` is counter || nonce; a fresh key
        # per stream lets both start at zero.
        self._cipher = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()

    def _check_fork(self) -> None:
        # Call with self._lock held, before anything reads self._key or self._cipher.
        # A forked child must never replay its parent's secure stream, nor derive
        # spawned keys from the parent's key. _pid is None after the at-fork hook ran;
        # the pid comparison also catches forks that bypass Python's hooks (a C
        # library calling fork() directly).
        if self.secure and self._pid != os.getpid():
            self._rekey(os.urandom(_KEY_BYTES))

    def _after_fork_in_child(self) -> None:
        # Runs in the single-threaded child right after os.fork(). A thread of the
        # parent may have held the lock at the moment of the fork; it does not exist
        # in the child, so the copied lock would never be released.
        self._lock = threading.Lock()
        if self.secure:
            self._pid = None  # re-keyed (lazily, from os.urandom) before the next use

    def bytes(self, n: int) -> bytes:
        """``n`` uniformly random bytes."""
        with self._lock:
            self._check_fork()
            parts = []
            remaining = n
            while remaining > 0:
                take = min(remaining, _CHUNK_BYTES)
                parts.append(self._cipher.update(_ZEROS[:take]))
                remaining -= take
            return b"".join(parts)

    def uint64(self, n: int) -> npt.NDArray[np.uint64]:
        """``n`` independent uniform 64-bit unsigned integers."""
        if n < 0:
            raise InvalidParameter.for_parameter("n", "Random.uint64", "an int >= 0", n)
        out = np.empty(n, dtype=np.uint64)
        view = out.data.cast("B")  # a writable byte view of the output array
        with self._lock:
            self._check_fork()
            # Encrypting zeros writes the key stream straight into the output array.
            for start in range(0, len(view), _CHUNK_BYTES):
                stop = min(start + _CHUNK_BYTES, len(view))
                self._cipher.update_into(_ZEROS[: stop - start], view[start:stop])
        return out

    def getrandbits(self, k: int) -> int:
        """A uniform integer in ``[0, 2**k)`` (Python int, any size)."""
        if k <= 0:
            return 0
        # self.bytes checks for a fork (so does every method that draws).
        raw = int.from_bytes(self.bytes((k + 7) // 8), "little")
        return raw >> (-k % 8)

    def integers(self, high: int) -> int:
        """A uniform integer in ``[0, high)`` by rejection (exact for any ``high >= 1``)."""
        if high < 1:
            raise InvalidParameter.for_parameter("high", "Random.integers", "an int >= 1", high)
        bits = (high - 1).bit_length()
        while True:
            candidate = self.getrandbits(bits)
            if candidate < high:
                return candidate

    def spawn(self, n: int) -> list[Random]:
        """``n`` new generators whose streams are independent of this one and each other.

        Children of a seeded generator are seeded (reproducible) too. Spawning again
        gives new children, not the same ones. Children of a secure generator are
        secure; in a forked child the parent is re-keyed first, so the children differ
        from those the parent or any other forked child spawns.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidParameter.for_parameter("n", "Random.spawn", "an int >= 0", n)
        with self._lock:
            # The children's keys are derived from this key: without the check, every
            # forked child would spawn the same streams (and a Session spawns one
            # stream per query, so two forked workers would release identical noise).
            self._check_fork()
            first = self._spawned
            self._spawned += n
            key = self._key
        return [Random(_derive_key(key, b"spawn", first + i), secure=self.secure) for i in range(n)]

    def __copy__(self) -> Random:
        # A copy that replayed this stream would release the same noise twice (the
        # failure a fork causes): copying a generator gives the generator itself, so
        # scikit-learn's clone() of a model holding one shares its stream instead.
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Random:
        return self

    def __repr__(self) -> str:
        return f"Random(secure={self.secure})"


def _derive_key(key: bytes, label: bytes, index: int) -> bytes:
    # SHA-256 of (key, label, index) as a key-derivation function: children are
    # computationally independent of each other and of the parent stream.
    return hashlib.sha256(key + label + index.to_bytes(8, "little")).digest()


#: What every ``rng=`` argument accepts (:func:`as_random` normalises it).
RandomLike: TypeAlias = "Random | int | np.random.SeedSequence | np.random.Generator"

# Every live generator, so that the at-fork hook can reach them all (weak: the hook
# must not keep streams alive). WeakSet.add ends in one set insertion, atomic under
# the GIL, so a fork from another thread sees a generator registered or not; one not
# yet registered is still caught by the pid check in _check_fork.
_live: weakref.WeakSet[Random] = weakref.WeakSet()
_default: Random | None = None
_default_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()  # may have been held by a parent thread
    for generator in list(_live):
        generator._after_fork_in_child()


# POSIX only; elsewhere there is no fork (and the pid check still stands).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def default_random() -> Random:
    """The process-wide secure generator (keyed from ``os.urandom``; cannot be seeded)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Random(os.urandom(_KEY_BYTES), secure=True)
        return _default


def as_random(rng: RandomLike | None = None) -> Random:
    """Normalise anything accepted as ``rng=`` into a :class:`Random`.

    Parameters
    ----------
    rng:
        ``None``: the process-wide secure generator. A :class:`Random`: returned as is.
        An ``int`` (>= 0), a :class:`numpy.random.SeedSequence` or a
        :class:`numpy.random.Generator`: a deterministic generator derived from it,
        flagged insecure (warns :class:`~dpkit.errors.InsecureRandomWarning`). A
        seeded generator is not re-keyed after ``os.fork()`` (see the module
        docstring, "Forks").

    Returns
    -------
    Random
    """
    if rng is None:
        return default_random()
    if isinstance(rng, Random):
        return rng
    if isinstance(rng, bool):
        raise InvalidParameter.for_parameter(
            "rng", "as_random", "None, a dpkit Random, an int >= 0 or a SeedSequence", rng
        )
    if isinstance(rng, int | np.integer):
        if int(rng) < 0:
            raise InvalidParameter.for_parameter("rng", "as_random", "an int >= 0 (a seed)", rng)
        material = b"int:" + int(rng).to_bytes((int(rng).bit_length() + 8) // 8, "little")
    elif isinstance(rng, np.random.SeedSequence):
        material = b"seedseq:" + rng.generate_state(8, dtype=np.uint32).tobytes()
    elif isinstance(rng, np.random.Generator):
        material = b"generator:" + rng.bytes(_KEY_BYTES)
    else:
        raise InvalidParameter.for_parameter(
            "rng", "as_random", "None, a dpkit Random, an int >= 0 or a SeedSequence", rng
        )
    warnings.warn(
        "A seeded random generator is predictable: use it for tests and reproducible "
        "research only, never for a real release (pass rng=None for the secure default).",
        InsecureRandomWarning,
        stacklevel=2,
    )
    return Random(hashlib.sha256(b"dpkit-seed/" + material).digest(), secure=False)


def post_processing_generator(random: Random) -> np.random.Generator:
    """A NumPy generator keyed from ``random``, for **post-processing only**.

    Drawing synthetic rows from a model fitted to released measurements
    (:mod:`dpkit.synth`) needs NumPy's categorical and uniform sampling; whatever it
    draws is a function of released values and this randomness, so it needs no exact
    sampler. Never use it for noise: noise goes through :mod:`dpkit.noise`.
    """
    seed = np.frombuffer(random.bytes(32), dtype=np.uint32)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
