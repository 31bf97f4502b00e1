"""Private synthetic data: dpkit against OpenDP and SmartNoise (issue 31).

Utility and speed of MST and AIM, side by side: the same coded table, the same public
domain, the same (ε, δ), the same workload, several seeds, in one run.

Data (``adult``): the bundled UCI Adult training split (``dpkit.data.load_adult``,
32,561 rows, 15 columns), discretised once, the same for every system, with *public*
domains only (nothing is read from the rows to build them):

* numeric columns: equal-width bins over public bounds, ``min(32, number of integer
  values)`` bins (so ``education_num`` keeps its 16 levels; the others get 32). The
  bounds are ``dpkit.data.ADULT_PUBLIC_BOUNDS``; it gives none for ``fnlwgt`` (a CPS
  survey weight), so this benchmark uses ``[0, 1_500_000]``, a round analyst's choice.
  Values outside a bound are clamped into the end bins.
* categorical columns: the full category list of the UCI documentation
  (``adult.names``), plus ``"?"``, the documented code for an unknown value, in every
  categorical column (so every system sees the same, slightly larger, domain).

Wide table (``--wide``): Caravan (CoIL Challenge 2000 insurance data, 5,822 customers ×
86 columns, all integer coded), shipped in the ``islp`` wheel (BSD). Its codebook (the
CoIL 2000 data dictionary) is public: customer subtype 1–41, number of houses 1–10,
household size 1–6, age class 1–6, main type 1–10, the 59 socio-demographic and
contribution columns on the 0–9 scale, the 21 policy counts 0–12, and ``Purchase``
(No/Yes). Codes are shifted to start at 0 and clamped into these ranges.

Workload and metric (AIM's): every 3-way marginal (455 for Adult's 15 columns; all
102,340 for Caravan's 86), error = the mean over them of
``|| M(synthetic) / n_synthetic - M(real) / n_real ||_1`` (L1 distance between the
normalised marginals). This is the workload error of McKenna, Mullins, Sheldon &
Miklau, *AIM* (PVLDB 15, 2022; arXiv:2201.12677) with unit weights; the reference
implementation (``mechanisms/aim.py`` of Private-PGM) prints half of it (total
variation distance): divide by 2 to compare with its numbers.

Systems, each in its own process (and, for peers, in its own venv), reading the coded
CSV and writing the synthetic table back as codes; the time is fit + sample, measured
inside the process (imports and I/O excluded):

* ``dpkit-mst``, ``dpkit-aim``: ``dp.synthesize(frame, method=..., budget=
  dp.ApproxDP(ε, δ), domains=..., rows=n, rng=seed)`` with this interpreter (AIM also
  gets ``workload=`` all 3-way column sets); "not available" when dpkit has no
  ``synthesize``.
* ``opendp-mst``, ``opendp-aim``: OpenDP's ``opendp.extras.mbi`` (``dp.mbi.MST()``,
  ``dp.mbi.AIM()`` with their defaults: ``AIM(queries=3)`` is the all-3-way workload)
  through ``Context.contingency_table`` with every column keyed by its public codes,
  then ``ContingencyTable.synthesize(rows=n)``. With all keys public OpenDP requires
  δ = 0 inside, so it gets ρ-zCDP with ρ = the largest ρ whose zCDP → (ε, δ) conversion
  (Canonne, Kamath & Steinke 2020, the one Private-PGM and SmartNoise use) gives δ ≤
  1e-9: the same (ε, δ) guarantee. OpenDP adds a null key to every column and spends,
  by default, half the budget on the one-way marginals. Its noise is not seedable.
  OpenDP 0.16.0 fails here with "insufficient budget for query" (float rounding in its
  budget split, opendp/opendp#2789): the worker makes each split ask for x·(1 − 1e-12)
  instead of the next float below x, the same or a stricter guarantee.
* ``smartnoise-mst``, ``smartnoise-aim``: ``snsynth.Synthesizer.create("mst"|"aim",
  epsilon=ε, delta=δ)``; each column gets a ``BinTransformer`` over its public code
  range (no category inferred from the data, no budget on preprocessing); AIM with
  ``degree=3`` and no cap on marginal size (the same all-3-way workload). Seeded
  through NumPy's global generator.

Sampling rows: both peers draw the synthetic rows from their fitted model with Private-PGM
(``mbi`` 1.1.0), whose default, ``method="round"`` (randomised rounding), conditions
every column on the rank of a row within its parents' group, so sibling columns come
out jointly ordered: a dependence the model does not have. On Adult at ε = 1 the same
SmartNoise MST model gave an error of 0.53 with ``"round"`` and 0.21 with
``"sample"`` (i.i.d. draws), worse than independent columns (0.36) with the default.
So the peers draw with ``"sample"`` (OpenDP: ``synthesize(method="sample")``, public;
SmartNoise: its ``sample()`` has no such argument, so the worker sets mbi's default);
``--peer-sampler round`` runs them as shipped.

Everyone: δ = 1e-9 (AIM's paper and Private-PGM's default), neighbouring tables differ
by one row (add/remove), ``n`` (the number of real rows) is public and asked for.

Venvs::

    python3.11 -m venv /tmp/peer-venvs/snsynth
    /tmp/peer-venvs/snsynth/bin/pip install smartnoise-synth pyarrow
    python3.11 -m venv /tmp/peer-venvs/opendp-mbi
    /tmp/peer-venvs/opendp-mbi/bin/pip install 'opendp[mbi]' polars pyarrow pandas

The Caravan CSV is read from an installed ``ISLP`` package or from ``--wide-csv``
(``pip download --no-deps islp`` and unzip ``ISLP/data/Caravan.csv``).

Run: ``nice python benchmarks/synth_vs_peers.py --quick`` (ε = 1, one seed),
``nice python benchmarks/synth_vs_peers.py`` (ε = 0.3, 1, 3, three seeds),
add ``--wide`` for Caravan. Results: ``benchmarks/results/synth.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("DPKIT_BENCH_CACHE", Path.home() / ".cache" / "dpkit-bench"))
VENVS = Path(os.environ.get("PEER_VENVS", "/tmp/peer-venvs"))
RESULTS = Path(__file__).resolve().parent / "results" / "synth.md"

EPSILONS = (0.3, 1.0, 3.0)
DELTA = 1e-9
MAX_BINS = 32
FNLWGT_BOUNDS = (0, 1_500_000)  # analyst's choice: ADULT_PUBLIC_BOUNDS has no fnlwgt bound
SYSTEMS = (
    "dpkit-mst",
    "dpkit-aim",
    "opendp-mst",
    "opendp-aim",
    "smartnoise-mst",
    "smartnoise-aim",
)
PEER_VENV = {"opendp": "opendp-mbi", "smartnoise": "snsynth"}

# The category lists of UCI Adult, as adult.names documents them; "?" marks unknowns.
ADULT_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": (
        "Private",
        "Self-emp-not-inc",
        "Self-emp-inc",
        "Federal-gov",
        "Local-gov",
        "State-gov",
        "Without-pay",
        "Never-worked",
    ),
    "education": (
        "Bachelors",
        "Some-college",
        "11th",
        "HS-grad",
        "Prof-school",
        "Assoc-acdm",
        "Assoc-voc",
        "9th",
        "7th-8th",
        "12th",
        "Masters",
        "1st-4th",
        "10th",
        "Doctorate",
        "5th-6th",
        "Preschool",
    ),
    "marital_status": (
        "Married-civ-spouse",
        "Divorced",
        "Never-married",
        "Separated",
        "Widowed",
        "Married-spouse-absent",
        "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support",
        "Craft-repair",
        "Other-service",
        "Sales",
        "Exec-managerial",
        "Prof-specialty",
        "Handlers-cleaners",
        "Machine-op-inspct",
        "Adm-clerical",
        "Farming-fishing",
        "Transport-moving",
        "Priv-house-serv",
        "Protective-serv",
        "Armed-Forces",
    ),
    "relationship": (
        "Wife",
        "Own-child",
        "Husband",
        "Not-in-family",
        "Other-relative",
        "Unmarried",
    ),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native_country": (
        "United-States",
        "Cambodia",
        "England",
        "Puerto-Rico",
        "Canada",
        "Germany",
        "Outlying-US(Guam-USVI-etc)",
        "India",
        "Japan",
        "Greece",
        "South",
        "China",
        "Cuba",
        "Iran",
        "Honduras",
        "Philippines",
        "Italy",
        "Poland",
        "Jamaica",
        "Vietnam",
        "Mexico",
        "Portugal",
        "Ireland",
        "France",
        "Dominican-Republic",
        "Laos",
        "Ecuador",
        "Taiwan",
        "Haiti",
        "Columbia",
        "Hungary",
        "Guatemala",
        "Nicaragua",
        "Scotland",
        "Thailand",
        "Yugoslavia",
        "El-Salvador",
        "Trinadad&Tobago",
        "Peru",
        "Hong",
        "Holand-Netherlands",
    ),
    "income": ("<=50K", ">50K"),
}
UNKNOWN = "?"


# --- data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """An integer-coded table and its public domain (codes 0 .. size - 1)."""

    name: str
    columns: tuple[str, ...]
    sizes: tuple[int, ...]
    codes: np.ndarray  # (rows, columns), int64
    note: str

    @property
    def folder(self) -> Path:
        return CACHE / f"synth_{self.name}"

    @property
    def csv(self) -> Path:
        return self.folder / "data.csv"

    @property
    def domain_json(self) -> Path:
        return self.folder / "domain.json"

    def write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        header = ",".join(self.columns)
        np.savetxt(self.csv, self.codes, fmt="%d", delimiter=",", header=header, comments="")
        domain = {"columns": list(self.columns), "sizes": list(self.sizes)}
        self.domain_json.write_text(json.dumps(domain), encoding="utf-8")


def equal_width_codes(values: np.ndarray, low: float, high: float, bins: int) -> np.ndarray:
    """Bin index of each value in ``bins`` equal-width bins over ``[low, high]`` (clamped)."""
    clipped = np.clip(values.astype(np.float64), low, high)
    index = np.floor((clipped - low) / (high - low) * bins).astype(np.int64)
    return np.minimum(index, bins - 1)


def adult_table() -> Table:
    from dpkit.data import ADULT_COLUMNS, ADULT_NUMERIC_COLUMNS, ADULT_PUBLIC_BOUNDS, load_adult

    raw = load_adult()
    bounds = {**ADULT_PUBLIC_BOUNDS, "fnlwgt": FNLWGT_BOUNDS}
    columns, sizes, coded = [], [], []
    for name in ADULT_COLUMNS:
        if name in ADULT_NUMERIC_COLUMNS:
            low, high = bounds[name]
            bins = min(MAX_BINS, high - low + 1)
            codes = equal_width_codes(raw[name], low, high + 1, bins)
        else:
            categories = (*ADULT_CATEGORIES[name], UNKNOWN)
            lookup = {c: i for i, c in enumerate(categories)}
            # Anything outside the documented list would count as unknown (none is).
            codes = np.array([lookup.get(v, len(categories) - 1) for v in raw[name]], np.int64)
            bins = len(categories)
        columns.append(name)
        sizes.append(int(bins))
        coded.append(codes)
    note = (
        "UCI Adult (bundled), 32,561 rows × 15 columns; numeric columns in equal-width "
        f"bins over public bounds (≤ {MAX_BINS} bins; fnlwgt over {FNLWGT_BOUNDS}), "
        "categorical columns with the documented categories plus '?'"
    )
    return Table("adult", tuple(columns), tuple(sizes), np.column_stack(coded), note)


def caravan_ranges(columns: list[str]) -> dict[str, tuple[int, int]]:
    """Public code range of each Caravan column, from the CoIL 2000 data dictionary."""
    fixed = {
        "MOSTYPE": (1, 41),
        "MAANTHUI": (1, 10),
        "MGEMOMV": (1, 6),
        "MGEMLEEF": (1, 6),
        "MOSHOOFD": (1, 10),
    }
    ranges: dict[str, tuple[int, int]] = {}
    for position, name in enumerate(columns):
        if name in fixed:
            ranges[name] = fixed[name]
        elif name == "Purchase":
            ranges[name] = (0, 1)
        elif position < 64:  # M* socio-demographic shares and P* contribution classes
            ranges[name] = (0, 9)
        else:  # A*: number of policies
            ranges[name] = (0, 12)
    return ranges


def find_caravan(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("ISLP")
    if spec and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            path = Path(location) / "data" / "Caravan.csv"
            if path.exists():
                return path
    for path in sorted(VENVS.glob("*/lib/python*/site-packages/ISLP/data/Caravan.csv")):
        return path
    raise FileNotFoundError(
        "Caravan.csv not found: install islp or pass --wide-csv (see the docstring)"
    )


def caravan_table(path: Path) -> Table:
    import pandas as pd

    frame = pd.read_csv(path)
    columns = list(frame.columns)
    ranges = caravan_ranges(columns)
    coded, sizes = [], []
    for name in columns:
        low, high = ranges[name]
        if name == "Purchase":
            values = (frame[name].astype(str) == "Yes").to_numpy(np.int64)
        else:
            values = frame[name].to_numpy(np.int64)
        coded.append(np.clip(values, low, high) - low)
        sizes.append(high - low + 1)
    note = (
        f"Caravan (CoIL 2000, from the islp wheel), {len(frame):,} rows × {len(columns)} "
        "columns, integer codes over the codebook's ranges"
    )
    return Table("caravan", tuple(columns), tuple(sizes), np.column_stack(coded), note)


# --- the metric --------------------------------------------------------------------------


def workload_error(real: np.ndarray, synthetic: np.ndarray, sizes: tuple[int, ...]) -> float:
    """Mean over all 3-way marginals of the L1 distance between normalised marginals.

    A synthetic code of -1 (a value outside the domain) falls in an extra cell that the
    real marginal does not have, so its mass counts fully as error.
    """
    if len(synthetic) == 0:
        return math.nan
    total = 0.0
    count = 0
    for a, b, c in itertools.combinations(range(len(sizes)), 3):
        cells = sizes[a] * sizes[b] * sizes[c]
        index_real = (real[:, a] * sizes[b] + real[:, b]) * sizes[c] + real[:, c]
        index_syn = (synthetic[:, a] * sizes[b] + synthetic[:, b]) * sizes[c] + synthetic[:, c]
        outside = (synthetic[:, [a, b, c]] < 0).any(axis=1)
        index_syn = np.where(outside, cells, index_syn)
        p = np.bincount(index_real, minlength=cells + 1) / len(real)
        q = np.bincount(index_syn, minlength=cells + 1) / len(synthetic)
        total += float(np.abs(p - q).sum())
        count += 1
    return total / count


# --- zCDP for the one peer that needs it ---------------------------------------------------


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ of ρ-zCDP at ε (Canonne, Kamath & Steinke 2020, Prop. 12), by bisection on α."""
    if rho <= 0:
        return 0.0
    low, high = 1.01, (epsilon + 1) / (2 * rho) + 2
    alpha = low
    for _ in range(200):
        alpha = (low + high) / 2
        slope = (2 * alpha - 1) * rho - epsilon + math.log1p(-1 / alpha)
        if slope < 0:
            low = alpha
        else:
            high = alpha
    log_delta = (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha)
    return min(math.exp(log_delta) / (alpha - 1), 1.0)


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ whose ρ-zCDP implies (ε, δ)-DP by :func:`zcdp_delta` (bisection)."""
    low, high = 0.0, epsilon + 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if zcdp_delta(mid, epsilon) <= delta:
            low = mid
        else:
            high = mid
    return low


# --- the workers ---------------------------------------------------------------------------

# Each worker: argv = data.csv domain.json method epsilon delta rho seed out.csv result.json
# sampler (the peers' Private-PGM sampling method: "sample" or "round").
# It writes the synthetic codes to out.csv and {"seconds", "versions"} to result.json.
_PRELUDE = """
    import contextlib, importlib.metadata as md, json, sys, time, warnings
    warnings.filterwarnings("ignore")
    data_path, domain_path, method = sys.argv[1:4]
    epsilon, delta, rho = map(float, sys.argv[4:7])
    seed = int(sys.argv[7])
    out_path, result_path, sampler = sys.argv[8:11]
    import numpy as np
    import pandas as pd
    domain = json.load(open(domain_path))
    columns, sizes = domain["columns"], domain["sizes"]
    frame = pd.read_csv(data_path)
    def versions(names):
        found = []
        for name in names:
            try:
                found.append(f"{name} {md.version(name)}")
            except md.PackageNotFoundError:
                pass
        return ", ".join(found) + f", python {sys.version.split()[0]}"
    def finish(synthetic, seconds, names):
        synthetic = pd.DataFrame(synthetic, columns=columns)
        # A value outside the domain (OpenDP's null key, say) is written as -1.
        coded = []
        for c, k in zip(columns, sizes):
            values = np.rint(pd.to_numeric(synthetic[c], errors="coerce").to_numpy(float))
            inside = np.isfinite(values) & (values >= 0) & (values <= k - 1)
            coded.append(np.where(inside, values, -1))
        codes = np.column_stack(coded).astype(np.int64)
        np.savetxt(out_path, codes, fmt="%d", delimiter=",")
        with open(result_path, "w") as f:
            json.dump({"seconds": seconds, "rows": len(codes), "versions": versions(names)}, f)
"""

_WORKERS = {
    "dpkit": """
        import dpkit as dp
        import itertools
        # The same domain as the peers': the codes only, no extra code for NULL
        # (the coded table has none); dpkit's default keeps one (nulls=True).
        domains = {
            c: dp.synth.Categories(list(range(k)), nulls=False) for c, k in zip(columns, sizes)
        }
        options = {"workload": list(itertools.combinations(columns, 3))} if method == "aim" else {}
        rng = dp.random.as_random(seed)  # seeded, flagged insecure: fine for a benchmark
        begin = time.perf_counter()
        result = dp.synthesize(
            frame,
            method=method,
            budget=dp.ApproxDP(epsilon, delta),
            domains=domains,
            rows=len(frame),
            rng=rng,
            **options,
        )
        synthetic = result.data
        seconds = time.perf_counter() - begin
        finish(synthetic[columns], seconds, ["dpkit", "numpy", "scipy", "pandas"])
    """,
    "opendp": """
        import opendp.prelude as dp
        import polars as pl
        dp.enable_features("contrib")
        # opendp 0.16.0 splits budgets with `prior` (the next float below), which float
        # rounding can still overshoot ("insufficient budget for query", opendp#2789);
        # x * (1 - 1e-12) asks each step for slightly less: the same or a stricter bound.
        import opendp.extras.mbi._aim as _aim, opendp.extras.mbi._mst as _mst
        import opendp.extras.mbi._table as _table
        for _module in (_aim, _mst, _table):
            _module.prior = lambda x: x * (1 - 1e-12)
        data = pl.from_pandas(frame).lazy()
        keys = {c: list(range(k)) for c, k in zip(columns, sizes)}
        algorithm = dp.mbi.AIM() if method == "aim" else dp.mbi.MST()
        np.random.seed(seed)  # only the sampler's jitter; OpenDP's noise is not seedable
        begin = time.perf_counter()
        context = dp.Context.compositor(
            data=data,
            privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=dp.loss_of(rho=rho),
            split_evenly_over=1,
        )
        table = context.query().contingency_table(keys=keys, algorithm=algorithm).release()
        synthetic = table.synthesize(rows=len(frame), method=sampler).to_pandas()
        seconds = time.perf_counter() - begin
        finish(synthetic[columns], seconds, ["opendp", "mbi", "jax", "polars", "numpy"])
    """,
    "smartnoise": """
        from snsynth import Synthesizer
        from snsynth.transform import BinTransformer, TableTransformer
        import mbi
        _draw = mbi.MarkovRandomField.synthetic_data
        # snsynth's sample() takes no method: set Private-PGM's default to `sampler`.
        mbi.MarkovRandomField.synthetic_data = lambda self, rows=None, method=sampler: _draw(
            self, rows, method
        )
        np.random.seed(seed)
        options = {"degree": 3, "max_cells": 10**15} if method == "aim" else {}
        synth = Synthesizer.create(method, epsilon=epsilon, delta=delta, **options)
        transformer = TableTransformer(
            [BinTransformer(bins=k, lower=-0.5, upper=k - 0.5) for k in sizes]
        )
        begin = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            synth.fit(frame, transformer=transformer, preprocessor_eps=0.0)
            synthetic = synth.sample(len(frame))
        seconds = time.perf_counter() - begin
        finish(synthetic, seconds, ["smartnoise-synth", "mbi", "jax", "opendp", "numpy"])
    """,
}


def python_for(family: str) -> Path:
    if family == "dpkit":
        return Path(sys.executable)
    return VENVS / PEER_VENV[family] / "bin" / "python"


def availability(family: str) -> str:
    """Empty when the system can run, else why not."""
    python = python_for(family)
    if not python.exists():
        return f"{python} not found (see the docstring)"
    if family == "dpkit":
        probe = "import dpkit; dpkit.synthesize; dpkit.ApproxDP; dpkit.Random"
        done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if done.returncode != 0:
            return "not available (dpkit has no synthesize yet)"
    return ""


@dataclass
class Outcome:
    seconds: float = math.nan
    error: float = math.nan
    rows: int = 0
    versions: str = ""
    failure: str = ""


def run_one(
    table: Table,
    system: str,
    epsilon: float,
    seed: int,
    timeout: float,
    sampler: str,
    log: Callable[..., None],
) -> Outcome:
    family, method = system.split("-")
    work = table.folder / f"{system}_eps{epsilon:g}_seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    out, result, stderr = work / "synthetic.csv", work / "result.json", work / "stderr.log"
    for stale in (out, result):
        stale.unlink(missing_ok=True)
    code = textwrap.dedent(_PRELUDE) + textwrap.dedent(_WORKERS[family])
    rho = zcdp_rho(epsilon, DELTA)
    args = [str(table.csv), str(table.domain_json), method, repr(epsilon), repr(DELTA)]
    args += [repr(rho), str(seed), str(out), str(result), sampler]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONWARNINGS": "ignore"}
    with stderr.open("w") as errors:
        proc = subprocess.Popen(
            [str(python_for(family)), "-c", code, *args],
            stdout=errors,
            stderr=errors,
            env=env,
            start_new_session=True,  # its own process group, killed whole on timeout
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return Outcome(failure=f"did not finish in {timeout / 60:g} min")
    if proc.returncode != 0 or not result.exists():
        lines = stderr.read_text(errors="replace").splitlines()
        said = [line.strip() for line in lines if "Error" in line or "Exception(" in line]
        tail = (said or [line.strip() for line in lines if len(line.strip()) > 3])[-1:]
        return Outcome(failure=f"failed (exit {proc.returncode}): " + " ".join(tail)[-200:])
    answer = json.loads(result.read_text(encoding="utf-8"))
    synthetic = np.loadtxt(out, delimiter=",", dtype=np.int64, ndmin=2)
    begin = time.perf_counter()
    try:
        error = workload_error(table.codes, synthetic, table.sizes)
    except Exception as err:  # reported in the table
        return Outcome(failure=f"unusable output: {type(err).__name__}: {err}")
    log(f"    (error over the workload computed in {time.perf_counter() - begin:.1f} s)")
    return Outcome(float(answer["seconds"]), error, int(answer["rows"]), answer["versions"])


# --- running and reporting ------------------------------------------------------------------


@dataclass
class Record:
    system: str
    epsilon: float
    outcomes: list[Outcome] = field(default_factory=list)
    note: str = ""

    @property
    def done(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.failure]


def run_table(
    table: Table,
    systems: list[str],
    epsilons: list[float],
    seeds: int,
    timeout: float,
    sampler: str,
    log: Callable[..., None],
) -> tuple[list[Record], dict[str, str]]:
    table.write()
    log(f"\n== {table.name}: {len(table.codes):,} rows × {len(table.columns)} columns")
    missing = {s: availability(s.split("-")[0]) for s in systems}
    records = {(s, e): Record(s, e) for e in epsilons for s in systems}
    versions: dict[str, str] = {}
    stopped: dict[str, str] = {}  # system -> why it is not run again on this table
    for epsilon in epsilons:
        for seed in range(seeds):
            for system in systems:  # interleaved: every system at each (ε, seed)
                record = records[(system, epsilon)]
                why = missing[system] or stopped.get(system, "")
                if why:
                    record.note = why
                    continue
                log(f"  {system} ε={epsilon:g} seed={seed} ...")
                outcome = run_one(table, system, epsilon, seed, timeout, sampler, log)
                record.outcomes.append(outcome)
                if outcome.failure:
                    record.note = outcome.failure
                    stopped[system] = f"{outcome.failure} (at ε={epsilon:g}; not retried)"
                    log(f"    {outcome.failure}")
                else:
                    versions.setdefault(system.split("-")[0], outcome.versions)
                    log(f"    error {outcome.error:.4f}, {outcome.seconds:.1f} s")
    return list(records.values()), versions


def _fmt(value: float, digits: int = 3) -> str:
    return "" if math.isnan(value) else f"{value:.{digits}g}"


def summary(record: Record) -> tuple[float, float, float]:
    """(mean error, sd of error over seeds, mean seconds)."""
    done = record.done
    if not done:
        return math.nan, math.nan, math.nan
    errors = [o.error for o in done]
    sd = statistics.stdev(errors) if len(errors) > 1 else math.nan
    return statistics.fmean(errors), sd, statistics.fmean(o.seconds for o in done)


def tables(table: Table, records: list[Record], epsilons: list[float]) -> list[str]:
    out = [f"### {table.name}", "", table.note + ".", ""]
    for epsilon in epsilons:
        rows = [r for r in records if r.epsilon == epsilon]
        base = {r.system.split("-")[1]: summary(r) for r in rows if r.system.startswith("dpkit")}
        out += [
            f"ε = {epsilon:g}, δ = {DELTA:g} (`×`: ÷ dpkit's value for the same method):",
            "",
            "| system | method | error (mean ± sd) | × | time s (mean) | × | runs | note |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in rows:
            family, method = r.system.split("-")
            error, sd, seconds = summary(r)
            ref = base.get(method, (math.nan, math.nan, math.nan))
            shown = "" if math.isnan(error) else f"{error:.4f}"
            if not math.isnan(sd):
                shown += f" ± {sd:.4f}"
            cells = [
                family,
                method.upper(),
                shown,
                _fmt(error / ref[0]),
                _fmt(seconds),
                _fmt(seconds / ref[2]),
                str(len(r.done)),
                r.note,
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return out


# --- private domains: equal-width against quantile bins (dpkit only) ----------------------


def public_codes(frame, columns: tuple[str, ...]) -> np.ndarray:
    """A table's rows in the benchmark's public coding (``adult_table``'s rules)."""
    from dpkit.data import ADULT_NUMERIC_COLUMNS, ADULT_PUBLIC_BOUNDS

    bounds = {**ADULT_PUBLIC_BOUNDS, "fnlwgt": FNLWGT_BOUNDS}
    coded = []
    for name in columns:
        if name in ADULT_NUMERIC_COLUMNS:
            low, high = bounds[name]
            values = frame[name].astype("float64").to_numpy()
            codes = equal_width_codes(values, low, high + 1, min(MAX_BINS, high - low + 1))
            # A NULL (the NULL code, kept by dpkit's default) counts as outside the domain.
            coded.append(np.where(np.isnan(values), -1, codes))
        else:
            categories = (*ADULT_CATEGORIES[name], UNKNOWN)
            lookup = {c: i for i, c in enumerate(categories)}
            coded.append(np.array([lookup.get(v, -1) for v in frame[name]], np.int64))
    return np.column_stack(coded)


def private_domains(
    epsilons: list[float], seeds: int, log: Callable[..., None]
) -> tuple[list[str], str]:
    """MST on the raw Adult table with every numeric column's domain found privately
    (``dp.synth.PrivateBins``), equal-width against quantile bins, same seeds, in this
    process; scored on the public coding of ``adult_table`` (the same metric)."""
    import pandas as pd

    import dpkit as dp
    from dpkit.data import ADULT_NUMERIC_COLUMNS, load_adult

    table = adult_table()
    frame = pd.DataFrame(load_adult())[list(table.columns)]
    categories = {
        # Public, as in the main table (the documented lists plus "?"); only the numeric
        # columns' domains are found privately.
        c: dp.synth.Categories([*ADULT_CATEGORIES[c], UNKNOWN], nulls=False)
        for c in table.columns
        if c not in ADULT_NUMERIC_COLUMNS
    }
    found: dict[tuple[str, float], list[tuple[float, float]]] = {}
    for epsilon in epsilons:
        for seed in range(seeds):
            for edges in ("equal", "quantile"):
                domains = {
                    **categories,
                    **{
                        c: dp.synth.PrivateBins(edges=edges, nulls=False)
                        for c in ADULT_NUMERIC_COLUMNS
                    },
                }
                begin = time.perf_counter()
                result = dp.synthesize(
                    frame,
                    method="mst",
                    budget=dp.ApproxDP(epsilon, DELTA),
                    domains=domains,
                    rows=len(frame),
                    rng=dp.random.as_random(seed),
                )
                seconds = time.perf_counter() - begin
                codes = public_codes(result.data, table.columns)
                error = workload_error(table.codes, codes, table.sizes)
                found.setdefault((edges, epsilon), []).append((error, seconds))
                log(f"  {edges} ε={epsilon:g} seed={seed}: error {error:.4f}, {seconds:.1f} s")
    out = [
        "| ε | equal-width bins: error (mean ± sd) | quantile bins: error (mean ± sd) "
        "| quantile ÷ equal | time s (equal / quantile) |",
        "|---|---:|---:|---:|---:|",
    ]
    for epsilon in epsilons:
        cells = [f"{epsilon:g}"]
        means = []
        for edges in ("equal", "quantile"):
            errors = [e for e, _ in found[(edges, epsilon)]]
            sd = statistics.stdev(errors) if len(errors) > 1 else math.nan
            means.append(statistics.fmean(errors))
            cells.append(f"{means[-1]:.4f}" + ("" if math.isnan(sd) else f" ± {sd:.4f}"))
        cells.append(f"{means[1] / means[0]:.3f}")
        times = [statistics.fmean(t for _, t in found[(e, epsilon)]) for e in ("equal", "quantile")]
        cells.append(f"{times[0]:.1f} / {times[1]:.1f}")
        out.append("| " + " | ".join(cells) + " |")
    note = (
        f"dpkit MST on the raw Adult table ({len(frame):,} rows), δ = {DELTA:g}, {seeds} "
        "seeds (the same for both), categorical domains public (as in the main table), "
        "the six numeric columns' domains found privately inside the run's one charge "
        "(`dp.synth.PrivateBins(edges=..., nulls=False)`, 32 bins); the synthetic table "
        "is coded with the main table's public equal-width bins and scored with the same "
        "metric."
    )
    return out, note


def machine_load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    parser.add_argument("--seeds", type=int, default=3, help="seeds per (system, ε)")
    parser.add_argument("--quick", action="store_true", help="ε = 1 and one seed, no file")
    parser.add_argument("--no-adult", action="store_true", help="skip Adult (with --wide)")
    parser.add_argument("--wide", action="store_true", help="also the 86-column Caravan table")
    parser.add_argument("--wide-csv", help="path of Caravan.csv (default: from ISLP)")
    parser.add_argument("--wide-epsilons", default="1", help="ε values on the wide table")
    parser.add_argument("--wide-seeds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0, help="minutes for one run")
    parser.add_argument(
        "--peer-sampler",
        choices=("sample", "round"),
        default="sample",
        help="Private-PGM's way to draw rows for the peers (its default 'round' is flawed)",
    )
    parser.add_argument(
        "--private-domains",
        action="store_true",
        help="only dpkit MST with numeric domains found privately: equal-width vs quantile "
        "bins (no peers; appends its own section)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write the results")
    parser.add_argument("--append", action="store_true", help="append to the results file")
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    epsilons = [float(e) for e in args.epsilons.split(",")]
    if args.quick:
        epsilons, args.seeds, args.no_write = [1.0], 1, True

    def log(*parts: object) -> None:
        print(*parts, flush=True)

    load_before = machine_load()
    log(f"load: {load_before}")
    if args.private_domains:
        rows, note = private_domains(epsilons, args.seeds, log)
        command = "python benchmarks/synth_vs_peers.py " + " ".join(sys.argv[1:])
        section = [
            f"## Private domains: equal-width against quantile bins, run of "
            f"{datetime.now(tz=UTC):%Y-%m-%d %H:%M} UTC",
            "",
            f"{platform.platform()}; {os.cpu_count()} CPUs. Produced by `{command.strip()}`. "
            f"Load: before `{load_before}`; after `{machine_load()}`.",
            "",
            note,
            "",
            *rows,
            "",
        ]
        log("\n" + "\n".join(section))
        if not args.no_write:
            text = RESULTS.read_text(encoding="utf-8").rstrip("\n") + "\n\n"
            RESULTS.write_text(text + "\n".join(section), encoding="utf-8")
            log(f"\nappended to {RESULTS}")
        return
    timeout = args.timeout * 60
    sections: list[str] = []
    versions: dict[str, str] = {}
    if not args.no_adult:
        table = adult_table()
        records, found = run_table(
            table, systems, epsilons, args.seeds, timeout, args.peer_sampler, log
        )
        versions |= found
        sections += tables(table, records, epsilons)
    if args.wide:
        wide = caravan_table(find_caravan(args.wide_csv))
        wide_eps = [float(e) for e in args.wide_epsilons.split(",")]
        records, found = run_table(
            wide, systems, wide_eps, args.wide_seeds, timeout, args.peer_sampler, log
        )
        versions |= {k: v for k, v in found.items() if k not in versions}
        sections += tables(wide, records, wide_eps)
    load_after = machine_load()
    log("\n" + "\n".join(sections))

    command = "python benchmarks/synth_vs_peers.py " + " ".join(sys.argv[1:])
    lines = [
        f"## Run of {datetime.now(tz=UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"{platform.platform()}; {os.cpu_count()} CPUs. Produced by `{command.strip()}`; "
        f"timeout {args.timeout:g} min per run; peers draw rows with Private-PGM's "
        f"`{args.peer_sampler}`.",
        "",
        f"Load: before `{load_before}`; after `{load_after}`.",
        "",
        *sections,
        "Versions:",
        "",
        *(f"- {family}: {text}" for family, text in sorted(versions.items())),
        f"- runner: numpy {np.__version__}, python {sys.version.split()[0]}",
        "",
    ]
    if args.no_write:
        return
    header = [
        "# Private synthetic data: dpkit against OpenDP and SmartNoise (issue 31)",
        "",
        "Workload, metric, discretisation and how each system is called: see the docstring of "
        "`benchmarks/synth_vs_peers.py`. Error: mean over all 3-way marginals of the L1 "
        "distance between the normalised real and synthetic marginals (AIM's workload error; "
        "half of it is what Private-PGM's `aim.py` prints). Time: fit + sample, inside each "
        "system's own process.",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if args.append and RESULTS.exists():
        text = RESULTS.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join(lines)
    else:
        text = "\n".join(header + lines)
    RESULTS.write_text(text, encoding="utf-8")
    log(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
