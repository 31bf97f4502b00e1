"""Tests of dpkit.random: secure default, seeded generators, spawning, forks, threads."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import dpkit as dp
from dpkit.random import Random, as_random, default_random
from dpkit.testing import assert_binomial, assert_pmf, seeded


def test_default_is_secure_and_shared() -> None:
    assert as_random() is default_random() and as_random(None).secure


def test_seeded_generators_reproduce_and_differ() -> None:
    assert np.array_equal(seeded(5).uint64(100), seeded(5).uint64(100))
    assert not np.array_equal(seeded(5).uint64(100), seeded(6).uint64(100))


@pytest.mark.parametrize(
    "seed",
    [7, np.int64(7), np.random.SeedSequence(7), np.random.default_rng(7)],
    ids=["int", "np.int64", "SeedSequence", "Generator"],
)
def test_seed_kinds_give_insecure_generators(seed: object) -> None:
    with pytest.warns(dp.InsecureRandomWarning):
        rng = as_random(seed)  # type: ignore[arg-type]
    assert rng.secure is False


@pytest.mark.parametrize(
    "bad", [-1, 1.5, "seed", True, object()], ids=["-1", "1.5", "str", "True", "object"]
)
def test_bad_rng_is_rejected(bad: object) -> None:
    with pytest.raises(dp.InvalidParameter):
        as_random(bad)  # type: ignore[arg-type]


def test_random_passes_through() -> None:
    rng = seeded(1)
    assert as_random(rng) is rng


def test_spawn_is_reproducible_independent_and_fresh() -> None:
    a1, b1 = seeded(9).spawn(2)
    a2, _ = seeded(9).spawn(2)
    assert np.array_equal(a1.uint64(10), a2.uint64(10))
    assert not np.array_equal(a1.uint64(10), b1.uint64(10))
    parent = seeded(9)
    first, second = parent.spawn(1)[0], parent.spawn(1)[0]
    assert not np.array_equal(first.uint64(10), second.uint64(10))
    assert all(child.secure for child in default_random().spawn(2))
    assert not any(child.secure for child in seeded(1).spawn(2))


def test_words_are_uniform_bytes_and_bits() -> None:
    words = seeded(3).uint64(200_000)
    as_bytes = words.view(np.uint8)
    assert_pmf(as_bytes, {k: 1 / 256 for k in range(256)})
    assert_binomial(int(np.sum((words >> np.uint64(63)) == 1)), words.size, 0.5)


def test_integers_and_getrandbits_are_in_range_and_uniform() -> None:
    rng = seeded(4)
    draws = [rng.integers(6) for _ in range(30_000)]
    assert_pmf(draws, {k: 1 / 6 for k in range(6)})
    assert all(0 <= rng.getrandbits(70) < 2**70 for _ in range(100))
    assert rng.getrandbits(0) == 0
    with pytest.raises(dp.InvalidParameter):
        rng.integers(0)
    with pytest.raises(dp.InvalidParameter):
        rng.uint64(-1)
    with pytest.raises(dp.InvalidParameter):
        rng.spawn(-1)


def test_key_must_be_32_bytes() -> None:
    with pytest.raises(dp.InvalidParameter):
        Random(b"short", secure=True)


def test_concurrent_draws_never_repeat_words() -> None:
    rng = seeded(8)
    results: list[np.ndarray] = []
    lock = threading.Lock()

    def draw() -> None:
        for _ in range(50):
            words = rng.uint64(1000)
            with lock:
                results.append(words)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = np.concatenate(results)
    # 400,000 64-bit words: a repeat would mean two threads read the same stream bytes.
    assert np.unique(everything).size == everything.size
    # And together they are exactly the sequential stream, in some chunk order.
    reference = seeded(8).uint64(everything.size)
    assert np.array_equal(np.sort(reference), np.sort(everything))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_replay_secure_stream() -> None:
    rng = default_random()
    rng.uint64(1)  # make sure the generator exists before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its next words and exit immediately
        os.close(read)
        os.write(write, rng.uint64(4).tobytes())
        os._exit(0)
    os.close(write)
    child_words = np.frombuffer(os.read(read, 32), dtype=np.uint64)
    os.close(read)
    os.waitpid(pid, 0)
    assert not np.array_equal(child_words, rng.uint64(4))
