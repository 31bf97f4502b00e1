"""An attacker's view of randomness across ``os.fork()``.

The attack: a service forks worker processes from one parent (a pre-fork server, a
``multiprocessing`` pool with the 'fork' start method). If the workers inherit the
parent's generator state, two of them release *the same* noise, and the difference of
their releases is the exact difference of their true values -- no privacy at all. Each
test below forks real children with ``os.fork()``, collects what each child drew
through a pipe, and checks that no two processes (children or parent) drew the same
values.

False failures. Every compared value is a secure draw with at least 124 bits of
entropy against a coincidence: 32 bytes or four 64-bit words (P(equal) = 2^-256),
``getrandbits(256)`` (2^-256), four ``integers(2^62)`` (2^-248), four discrete Laplace
draws of scale t = 2^30 (each coincides with probability sum_k p_k^2 <= max_k p_k =
(1 - e^{-1/t}) / (1 + e^{-1/t}) <= 1 / (2t) = 2^-31, so 2^-124 for four), and the
end-to-end releases bounded below. With fewer than 10^3 comparisons in this file, the
chance of any false failure is below 10^3 * 2^-124 < 10^-34.

On the code before the fix (``spawn`` read the parent's key without checking for a
fork), every test whose first draw in the child is ``spawn`` fails, and so does the
Session-like end-to-end test; the lock test hangs the child (and fails on the
timeout).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import traceback
import warnings
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np
import pytest

import dpkit as dp
from dpkit import noise
from dpkit.random import Random, as_random
from dpkit.testing import seeded

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

CHILDREN = 2
# Seconds a child may take before it is declared hung (it needs milliseconds).
TIMEOUT = 20.0
LARGE_SCALE = 2.0**30


def fork_children(work: Callable[[], Any], count: int = CHILDREN) -> list[Any]:
    """Run ``work()`` in ``count`` forked children; return what each sent back.

    Each child pickles its result into a pipe and leaves with ``os._exit`` (never
    through pytest's teardown). A child that raises, or that does not answer within
    ``TIMEOUT`` seconds (a deadlock), fails the test.
    """
    children: list[tuple[int, int]] = []
    for _ in range(count):
        read, write = os.pipe()
        with warnings.catch_warnings():
            # Python >= 3.12 warns when forking a process with threads (NumPy's BLAS
            # pool); these children only compute and write to a pipe.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            status = 1
            try:
                os.close(read)
                payload = pickle.dumps(work())
                with os.fdopen(write, "wb") as pipe:
                    pipe.write(payload)
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(status)
        os.close(write)
        children.append((pid, read))
    results = []
    try:
        for pid, read in children:
            ready, _, _ = select.select([read], [], [], TIMEOUT)
            if not ready:
                pytest.fail(f"a forked child did not answer within {TIMEOUT} s (deadlock?)")
            with os.fdopen(read, "rb", closefd=False) as pipe:
                payload = pipe.read()
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, "a forked child failed (see stderr)"
            results.append(pickle.loads(payload))
    finally:
        # Never leave a child behind (a hung one would outlive the test run).
        for pid, read in children:
            os.close(read)
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
    return results


def assert_all_different(values: list[Any]) -> None:
    for first, second in combinations(range(len(values)), 2):
        assert values[first] != values[second], (
            f"processes {first} and {second} drew identical values: {values[first]!r}"
        )


# The first thing a child does with the generator: each must re-key on its own.
FIRST_DRAWS: dict[str, Callable[[Random], Any]] = {
    "bytes": lambda rng: rng.bytes(32),
    "uint64": lambda rng: rng.uint64(4).tobytes(),
    "getrandbits": lambda rng: rng.getrandbits(256),
    "integers": lambda rng: [rng.integers(2**62) for _ in range(4)],
    "spawn": lambda rng: rng.spawn(1)[0].bytes(32),
    "spawn_twice": lambda rng: rng.spawn(1)[0].spawn(1)[0].bytes(32),
    "discrete_laplace": lambda rng: noise.discrete_laplace(LARGE_SCALE, size=4, rng=rng).tolist(),
}


def default_after_drawing() -> Random:
    rng = as_random(None)
    rng.bytes(32)  # the parent has used its stream before forking
    return rng


def spawned_before_fork() -> Random:
    # A stream the parent spawned (as a Session does per query) and never used.
    return as_random(None).spawn(1)[0]


def spawned_and_used_before_fork() -> Random:
    stream = as_random(None).spawn(1)[0]
    stream.uint64(3)
    return stream


SOURCES: dict[str, Callable[[], Random]] = {
    "default_after_drawing": default_after_drawing,
    "spawned_before_fork": spawned_before_fork,
    "spawned_and_used_before_fork": spawned_and_used_before_fork,
}


@pytest.mark.parametrize("draw", FIRST_DRAWS.values(), ids=FIRST_DRAWS.keys())
@pytest.mark.parametrize("source", SOURCES.values(), ids=SOURCES.keys())
def test_forked_children_and_parent_draw_different_values(
    source: Callable[[], Random], draw: Callable[[Random], Any]
) -> None:
    rng = source()
    children = fork_children(lambda: draw(rng))
    parent = draw(rng)  # the parent keeps using its stream after the fork
    assert_all_different([*children, parent])


def test_children_of_a_child_differ_too() -> None:
    """A worker that itself forks (nested pools): grandchildren must differ as well."""
    rng = default_after_drawing()

    def child() -> list[Any]:
        return [*fork_children(lambda: rng.spawn(1)[0].bytes(32)), rng.spawn(1)[0].bytes(32)]

    draws = [value for family in fork_children(child) for value in family]
    assert_all_different([*draws, rng.spawn(1)[0].bytes(32)])


def test_lock_held_by_another_thread_at_fork_does_not_deadlock_the_child() -> None:
    """A parent thread in the middle of a draw when another thread forks.

    The child inherits the lock in its locked state, but not the thread that would
    release it. Holding the lock in this thread across the fork is the deterministic
    version of that race.
    """
    rng = default_after_drawing()
    with rng._lock:
        children = fork_children(lambda: rng.bytes(32))
    assert_all_different([*children, rng.bytes(32)])


def test_seeded_generator_is_reproducible_across_forks() -> None:
    """Documented choice: a seeded (insecure) generator is not re-keyed after a fork.

    Its children continue the same reproducible stream, and spawning one stream per
    worker *before* forking gives distinct reproducible streams.
    """
    rng = seeded(2024)
    rng.bytes(8)
    same = fork_children(lambda: (rng.bytes(32), rng.spawn(1)[0].bytes(32)))
    assert same[0] == same[1] == (rng.bytes(32), rng.spawn(1)[0].bytes(32))
    workers = seeded(2024).spawn(CHILDREN)
    distinct = [
        fork_children(lambda worker=worker: worker.bytes(32), count=1)[0] for worker in workers
    ]
    assert_all_different(distinct)
    assert distinct == [worker.bytes(32) for worker in seeded(2024).spawn(CHILDREN)]


# ---------------------------------------------------------------------- end to end
#
# Two workers forked from one parent release the Laplace mechanism on true values
# x_1 = 1000 and x_2 = 1001 at epsilon = 2^-20 (scale b = 2^20, default grid step
# g = 1). Each release is x_i + g K_i with K_i the grid-rounded noise; the attacker
# learns x_1 - x_2 exactly when r_1 - r_2 = x_1 - x_2, i.e. when K_1 = K_2. For
# independent noise P(K_1 = K_2) = sum_k P(K = k)^2 <= max_k P(K = k) <= g / (2b) =
# 2^-21 (the Laplace density is at most 1 / (2b)); over 8 entries all must coincide,
# probability <= 2^-168. Discrete Laplace at epsilon = 2^-30 (t = 2^30): <= 2^-31 per
# entry, 2^-248 over 8. So a false failure has probability < 10^-50.

ENTRIES = 8
TRUE_VALUES = (1000.0, 1001.0)


def default_stream(rng: Random) -> Random:
    return rng


def stream_per_query(rng: Random) -> Random:
    # What dpkit.analytics.Session.evaluate does: one fresh stream per query.
    return rng.spawn(1)[0]


RELEASES: dict[str, Callable[[float, Random], Any]] = {
    "laplace": lambda x, rng: (
        dp.laplace(np.full(ENTRIES, x), epsilon=2.0**-20, sensitivity=1.0, rng=rng).value
    ),
    "discrete_laplace": lambda x, rng: (
        dp.discrete_laplace(
            np.full(ENTRIES, int(x)), epsilon=2.0**-30, sensitivity=1, rng=rng
        ).value
    ),
}


@pytest.mark.parametrize("release", RELEASES.values(), ids=RELEASES.keys())
@pytest.mark.parametrize("per_query", [default_stream, stream_per_query], ids=lambda f: f.__name__)
def test_forked_workers_do_not_reveal_the_true_difference(
    release: Callable[[float, Random], Any], per_query: Callable[[Random], Random]
) -> None:
    parent = as_random(None)
    releases = []
    for value in TRUE_VALUES:
        (released,) = fork_children(
            lambda value=value: np.asarray(release(value, per_query(parent)), dtype=np.float64),
            count=1,
        )
        releases.append(released)
    difference = releases[0] - releases[1]
    # The attack succeeds when every entry gives away the true difference exactly.
    assert not np.all(difference == TRUE_VALUES[0] - TRUE_VALUES[1]), (
        "two forked workers added identical noise: the true difference is revealed"
    )
