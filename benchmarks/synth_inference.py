"""dpkit's Private-PGM estimation (``dpkit.synth._graphical``) against ``mbi`` 2.0.

Both fit a graphical model to the same noisy marginals of the bundled UCI Adult data
(numeric columns cut into at most 32 equal-width bins over the public bounds, the
data range for ``fnlwgt``), by
mirror descent for 1000 iterations, and we compare the L2 loss they reach
(``sum_r 1/2 ||(M_r(mu) - y_r) / sigma_r||^2``, computed here, by the same code, from
each fit's marginals), the L1 distance of the fitted marginals to the measurements,
the L1 distance between the two fits, and the wall time.

Workloads (columns picked by non-private mutual information: this benchmarks the
inference, not the selection):

* ``MST-like``: all 1-way marginals (sigma 5) and the 14 pairs of a maximum spanning
  tree (sigma 10);
* ``AIM-like``: those, 6 more pairs and 3-way marginals (sigma 15) added greedily by
  mutual information while the junction tree stays under 2**20 cells (8 MiB).

``mbi`` needs JAX (about 600 MB), so it runs in its own virtual environment, in a
subprocess, with JAX in float64::

    python -m venv /tmp/peer-venvs/mbi
    /tmp/peer-venvs/mbi/bin/pip install mbi jax jaxlib numpy pandas
    python benchmarks/synth_inference.py [--mbi-python /tmp/peer-venvs/mbi/bin/python]

The noise is NumPy's Gaussian with a fixed seed: these are benchmark inputs, not
releases.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dpkit.data import ADULT_PUBLIC_BOUNDS, load_adult
from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._graphical import estimate, junction_tree_cells

NUMERIC_BINS = 32
MAX_CELLS = 2**20

MBI_RUNNER = r"""
import json, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)
from mbi import Domain, LinearMeasurement, estimation

spec = json.load(open(sys.argv[1]))
data = np.load(sys.argv[2])
domain = Domain(spec["names"], spec["sizes"])
ms = [
    LinearMeasurement(data[f"m{i}"].ravel(), tuple(cols), stddev=sigma)
    for i, (cols, sigma) in enumerate(zip(spec["columns"], spec["sigmas"]))
]
out = {}
for run in ("cold", "warm"):  # the first run includes JAX's compilation
    t0 = time.perf_counter()
    model = estimation.MirrorDescent().estimate(domain, ms, iters=spec["iterations"])
    fitted = [
        np.asarray(model.project(tuple(c)).datavector(flatten=False)) for c in spec["columns"]
    ]
    out[f"seconds_{run}"] = time.perf_counter() - t0
for i, f in enumerate(fitted):
    out[f"f{i}"] = f
import importlib.metadata as md
out["version"] = f"{md.version('mbi')} (jax {md.version('jax')})"
np.savez(sys.argv[3], **{k: np.asarray(v) for k, v in out.items()})
"""


def adult_codes() -> tuple[Domain, np.ndarray]:
    """Adult as integer codes; numeric columns in equal-width bins over public bounds."""
    table = load_adult()
    names, sizes, cols = [], [], []
    for name, values in table.items():
        if values.dtype.kind in "iuf":
            # fnlwgt has no public bound; its data range is fine for a benchmark.
            lo, hi = ADULT_PUBLIC_BOUNDS.get(name, (values.min(), values.max()))
            bins = min(NUMERIC_BINS, int(hi - lo) + 1)
            code = np.floor((np.clip(values, lo, hi) - lo) / (hi - lo) * bins).astype(int)
            code = np.minimum(code, bins - 1)
        else:
            cats, code = np.unique(values.astype(str), return_inverse=True)
            bins = len(cats)
        names.append(name)
        sizes.append(bins)
        cols.append(code)
    return Domain(tuple(names), tuple(sizes)), np.stack(cols, axis=1)


def counts(domain: Domain, data: np.ndarray, cols: tuple[str, ...]) -> np.ndarray:
    idx = [domain.index(c) for c in cols]
    flat = np.ravel_multi_index(tuple(data[:, i] for i in idx), domain.shape(cols))
    return np.bincount(flat, minlength=domain.cells(cols)).reshape(domain.shape(cols)).astype(float)


def mutual_information(domain: Domain, data: np.ndarray, cols: tuple[str, ...]) -> float:
    """Total correlation of ``cols`` (sum of entropies minus joint entropy), in nats."""

    def entropy(c: tuple[str, ...]) -> float:
        p = counts(domain, data, c).ravel() / len(data)
        p = p[p > 0]
        return float(-np.sum(p * np.log(p)))

    return sum(entropy((c,)) for c in cols) - entropy(cols)


def workloads(domain: Domain, data: np.ndarray) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    pairs = sorted(
        itertools.combinations(domain.names, 2),
        key=lambda p: -mutual_information(domain, data, p),
    )
    tree: list[tuple[str, ...]] = []
    component = {c: c for c in domain.names}

    def find(c: str) -> str:
        while component[c] != c:
            c = component[c]
        return c

    for a, b in pairs:  # Kruskal on mutual information
        if find(a) != find(b):
            component[find(a)] = find(b)
            tree.append((a, b))
    ones = [((c,), 5.0) for c in domain.names]
    mst = ones + [(p, 10.0) for p in tree]
    extra_pairs = [p for p in pairs if p not in tree][:6]
    aim = mst + [(p, 15.0) for p in extra_pairs]
    triples = sorted(
        itertools.combinations(domain.names, 3),
        key=lambda t: -mutual_information(domain, data, t),
    )
    added = 0
    for t in triples:
        cliques = [c for c, _ in aim] + [t]
        if domain.cells(t) <= 20_000 and junction_tree_cells(domain, cliques) <= MAX_CELLS:
            aim.append((t, 15.0))
            added += 1
        if added == 6:
            break
    return {"MST-like": mst, "AIM-like": aim}


def loss_and_l1(measurements: list[Measurement], fitted: list[np.ndarray]) -> tuple[float, float]:
    loss = l1 = 0.0
    for m, f in zip(measurements, fitted, strict=True):
        d = f - m.values
        loss += 0.5 * float(np.vdot(d, d)) / m.sigma**2
        l1 += float(np.abs(d).sum())
    return loss, l1


def run_mbi(python: str, domain: Domain, ms: list[Measurement], iterations: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        spec = {
            "names": list(domain.names),
            "sizes": list(domain.sizes),
            "columns": [list(m.columns) for m in ms],
            "sigmas": [m.sigma for m in ms],
            "iterations": iterations,
        }
        Path(tmp, "spec.json").write_text(json.dumps(spec))
        np.savez(Path(tmp, "in.npz"), **{f"m{i}": m.values for i, m in enumerate(ms)})
        script = Path(tmp, "runner.py")
        script.write_text(MBI_RUNNER)
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        subprocess.run(
            [
                python,
                str(script),
                str(Path(tmp, "spec.json")),
                str(Path(tmp, "in.npz")),
                str(Path(tmp, "out.npz")),
            ],
            check=True,
            env=env,
        )
        out = np.load(Path(tmp, "out.npz"))
        return {k: out[k] for k in out.files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mbi-python", default="/tmp/peer-venvs/mbi/bin/python")
    parser.add_argument("--iterations", type=int, default=1000)
    args = parser.parse_args()
    domain, data = adult_codes()
    rng = np.random.default_rng(20240531)
    print(f"# Private-PGM estimation: dpkit vs mbi ({time.strftime('%Y-%m-%d')})\n")
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, NumPy {np.__version__}; "
        f"load average {os.getloadavg()[0]:.2f}."
    )
    print(f"Domain: {len(domain.names)} columns, sizes {domain.sizes}; {len(data)} rows.\n")
    for name, work in workloads(domain, data).items():
        ms = [
            Measurement(cols, counts(domain, data, cols) + rng.normal(0, s, domain.shape(cols)), s)
            for cols, s in work
        ]
        cliques = [m.columns for m in ms]
        cells = junction_tree_cells(domain, cliques)
        kinds = {k: sum(len(c) == k for c in cliques) for k in (1, 2, 3)}
        print(
            f"## {name}: {kinds[1]} 1-way, {kinds[2]} 2-way, {kinds[3]} 3-way; "
            f"junction tree {cells} cells ({cells * 8 / 2**20:.2f} MiB)\n"
        )
        rows = []
        noise_loss, noise_l1 = loss_and_l1(ms, [counts(domain, data, m.columns) for m in ms])
        fits = {}
        for label, tol in (("dpkit, 1000 iterations", 0.0), ("dpkit, default stop", 1e-7)):
            t0 = time.perf_counter()
            model = estimate(domain, ms, iterations=args.iterations, tolerance=tol)
            fitted = [model.marginal(m.columns) for m in ms]
            seconds = time.perf_counter() - t0
            fits[label] = fitted
            rows.append((label, seconds, model.iterations, *loss_and_l1(ms, fitted)))
        out = run_mbi(args.mbi_python, domain, ms, args.iterations)
        fitted = [out[f"f{i}"] for i in range(len(ms))]
        fits["mbi"] = fitted
        rows.append(
            (
                f"mbi {out['version']}, 1000 iterations (cold: with JIT)",
                float(out["seconds_cold"]),
                args.iterations,
                *loss_and_l1(ms, fitted),
            )
        )
        rows.append(
            (
                f"mbi {out['version']}, 1000 iterations (warm)",
                float(out["seconds_warm"]),
                args.iterations,
                *loss_and_l1(ms, fitted),
            )
        )
        base = rows[-1][3]
        print(
            "| fit | seconds | iterations | L2 loss | loss / mbi's | L1 to measurements |"
            " L1 to mbi's fit |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, sec, its, loss, l1 in rows:
            key = label if label in fits else "mbi"
            dist = sum(
                float(np.abs(a - b).sum()) for a, b in zip(fits[key], fits["mbi"], strict=True)
            )
            print(
                f"| {label} | {sec:.2f} | {its} | {loss:.1f} | {loss / base:.4f} "
                f"| {l1:.0f} | {dist:.0f} |"
            )
        print(
            f"| (true counts: the noise itself) | | | {noise_loss:.1f} | {noise_loss / base:.4f} "
            f"| {noise_l1:.0f} | |\n"
        )
    print(f"Total run time: {time.perf_counter() - START:.0f} s.")


START = time.perf_counter()

if __name__ == "__main__":
    sys.exit(main())
