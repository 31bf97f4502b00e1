"""Time callables side by side in one process and print a Markdown table.

Absolute times depend on the machine and on what else it is doing; ratios measured
in the same process, on the same workload, moments apart, are what a benchmark can
honestly report. So every table here has a baseline row and a ratio column.

Usage from a benchmark script in this folder (run as ``python benchmarks/<script>.py``)::

    from _harness import compare, print_table

    results = compare(
        {
            "dpkit": lambda: dp.laplace(x, epsilon=1.0, sensitivity=1.0),
            "opendp": lambda: opendp_laplace(x),
        },
        baseline="opendp",
        items=1,  # work items per call, for the throughput column
    )
    print_table(results, title="Laplace, one value", unit="releases")

Each case is warmed up, then timed ``repeat`` times; each timing runs the callable
``number`` times (chosen automatically so one timing lasts about ``min_time``
seconds). The median per-call time is reported: it ignores the occasional slow
timing caused by something else on the machine, which the mean would not.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Result", "compare", "format_table", "print_table", "time_callable"]


@dataclass(frozen=True)
class Result:
    """The timing of one case.

    Attributes
    ----------
    name:
        The case's label.
    seconds:
        Median seconds per call.
    items:
        Work items done by one call (values released, rows processed, ...).
    ratio:
        ``seconds`` divided by the baseline's ``seconds``: below 1 is faster than
        the baseline, above 1 slower.
    timings:
        Every measured seconds-per-call, for a closer look.
    """

    name: str
    seconds: float
    items: int
    ratio: float
    timings: tuple[float, ...]

    @property
    def throughput(self) -> float:
        """Work items per second."""
        return self.items / self.seconds


def time_callable(
    fn: Callable[[], object], *, repeat: int = 7, number: int | None = None, min_time: float = 0.2
) -> tuple[float, ...]:
    """Seconds per call of ``fn``, measured ``repeat`` times after one warm-up call.

    With ``number=None``, the number of calls per timing doubles from 1 until one
    timing lasts at least ``min_time`` seconds (as :mod:`timeit`'s autorange does).
    """
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1. Got {repeat!r} instead.")
    fn()  # warm up: imports, caches, lazy initialisation
    if number is None:
        number = 1
        while True:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            if time.perf_counter() - start >= min_time or number >= 1 << 20:
                break
            number *= 2
    if number < 1:
        raise ValueError(f"number must be at least 1. Got {number!r} instead.")
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        timings.append((time.perf_counter() - start) / number)
    return tuple(timings)


def compare(
    cases: Mapping[str, Callable[[], object]],
    *,
    baseline: str,
    items: int = 1,
    repeat: int = 7,
    number: int | None = None,
    min_time: float = 0.2,
) -> list[Result]:
    """Time every case in ``cases`` (in order) and compare each with ``baseline``.

    Parameters
    ----------
    cases:
        Label -> zero-argument callable doing one unit of the workload. Every case
        must do the same work (same input, same output size), or the ratio is
        meaningless.
    baseline:
        The label of the case the ratios are relative to.
    items:
        Work items per call, used for the throughput column.
    repeat, number, min_time:
        Passed to :func:`time_callable`.
    """
    if baseline not in cases:
        raise ValueError(f"baseline {baseline!r} is not one of the cases {list(cases)}.")
    if items < 1:
        raise ValueError(f"items must be at least 1. Got {items!r} instead.")
    medians: dict[str, tuple[float, tuple[float, ...]]] = {}
    for name, fn in cases.items():
        timings = time_callable(fn, repeat=repeat, number=number, min_time=min_time)
        medians[name] = (statistics.median(timings), timings)
    base = medians[baseline][0]
    return [
        Result(name=name, seconds=median, items=items, ratio=median / base, timings=timings)
        for name, (median, timings) in medians.items()
    ]


def _seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def format_table(results: list[Result], *, title: str | None = None, unit: str = "items") -> str:
    """The results as a Markdown table (one row per case, the baseline's ratio is 1.00)."""
    lines = [f"### {title}", ""] if title else []
    lines += [
        f"| case | median time per call | {unit} per second | time ÷ baseline |",
        "|---|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r.name} | {_seconds(r.seconds)} | {r.throughput:.3g} | {r.ratio:.2f} |")
    return "\n".join(lines)


def print_table(results: list[Result], *, title: str | None = None, unit: str = "items") -> None:
    """Print :func:`format_table` and the Python and platform it was measured on."""
    print(format_table(results, title=title, unit=unit))
    print(f"\n_Python {sys.version.split()[0]} on {sys.platform}; one process, ratios only._\n")


if __name__ == "__main__":
    # A self-check of the harness on two workloads of known relative cost.
    data = list(range(10_000))
    results = compare(
        {"sum": lambda: sum(data), "sorted": lambda: sorted(data)},
        baseline="sum",
        items=len(data),
    )
    print_table(results, title="harness self-check", unit="elements")


def run_process(code: str, *, quiet: bool = False) -> tuple[float, float]:
    """Run ``python -c code`` as a fresh process: (wall seconds, peak RSS in MiB).

    Whole-process timing (start-up and imports included) for the benchmarks that compare
    end-to-end jobs; the peak is the child's maximum resident set (``os.wait4``).
    """
    import os
    import subprocess
    import time

    start = time.perf_counter()
    stdout = subprocess.DEVNULL if quiet else None
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=stdout)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"contender failed with status {status}")
    return elapsed, usage.ru_maxrss / 1024.0  # MiB (Linux reports KiB)
