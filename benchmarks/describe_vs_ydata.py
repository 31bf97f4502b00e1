"""``dpkit describe`` against ydata-profiling's minimal report: time, HTML size, page length.

Workload (issue 28, "peer comparison"): real tables shipped inside PyPI packages, each
profiled by both in one run:

* ``digits``: scikit-learn ``load_digits``, 1,797 x 65 (64 pixel columns 0-16);
* ``breast_cancer``: scikit-learn, 569 x 31;
* ``star98``: statsmodels, 303 x 22;
* ``anes96``: statsmodels, 944 x 11;
* ``nhefs``: causaldata, 1,629 x 67 (five categorical columns, as strings), when
  causaldata is installed (else skipped, with a note).

The first four come from ``tests/realdata/_small_tables.py`` (the tables of the real-data
tests); every table is loaded once, in dpkit's interpreter, and written to Parquet so
that both sides profile the same values.

Cases:

* **dpkit**: ``describe(Session.from_pandas(df, budget=ApproxDP(1, 1e-6), rng=seed))``
  then ``dpkit.report.render_html`` (plots on), in this process.
* **ydata** (the baseline): ``ProfileReport(df, minimal=True, progress_bar=False)`` and
  ``.to_file(path)`` (HTML), in ydata-profiling's own interpreter (below).

Measured for each table: wall time of the profile plus the HTML file (median of
``--repeat`` rounds; each round runs every table by dpkit, then by ydata, each side after
an untimed warm-up run on a small table, so that neither pays imports or first-call
compilation; data loading excluded; dpkit uses the same seed every round, so its work
and report are the same each time), the report's
size in bytes, and its rendered length in px: ``document.body.scrollHeight`` once the
page has loaded and its scripts have run, in headless Chromium at a 1280 px wide
viewport. Ratios are dpkit ÷ ydata (below 1: dpkit's is faster, smaller, shorter).

ydata-profiling's environment
-----------------------------
ydata-profiling 4.18 pins pandas < 3, NumPy < 2.4, SciPy < 1.17 and Matplotlib <= 3.10,
all older than dpkit's venv has, so it lives in a venv of its own, outside the
repository (the dpkit venv is left as it is), as the peers of bench_session_peers.py do::

    python3.11 -m venv /tmp/peer-venvs/ydata
    /tmp/peer-venvs/ydata/bin/pip install 'ydata-profiling==4.18.*' pyarrow

``--ydata-python`` (default ``$PEER_VENVS/ydata/bin/python``, ``PEER_VENVS`` defaulting
to ``/tmp/peer-venvs``) names its interpreter; it reads the Parquet files this script
writes. ydata's usage analytics are switched off (``YDATA_PROFILING_NO_ANALYTICS``).
Chromium is Debian's ``chromium`` package (as for tests/report/test_report_chromium.py).

Usage::

    python benchmarks/describe_vs_ydata.py [--repeat 1] [--only digits nhefs] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType

import pandas as pd

import dpkit as dp
from dpkit.analytics.describe import describe
from dpkit.report import render_html

BUDGET = dp.ApproxDP(1.0, 1e-6)
WIDTH = 1280  # px, the viewport width at which page length is measured
PEER_VENVS = Path(os.environ.get("PEER_VENVS", "/tmp/peer-venvs"))


@cache
def _small_tables() -> ModuleType:
    path = Path(__file__).parents[1] / "tests" / "realdata" / "_small_tables.py"
    spec = importlib.util.spec_from_file_location("_small_tables", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nhefs() -> pd.DataFrame:
    from causaldata import nhefs

    return _small_tables().as_given(nhefs.load_pandas().data)


def tables() -> dict[str, Callable[[], pd.DataFrame]]:
    """Name -> loader, in the order of the report (the widest first)."""
    small = _small_tables()
    out: dict[str, Callable[[], pd.DataFrame]] = {"digits": small.digits}
    if importlib.util.find_spec("causaldata") is not None:
        out["nhefs"] = _nhefs
    out.update(breast_cancer=small.breast_cancer, star98=small.star98, anes96=small.anes96)
    return out


# ydata-profiling's side, run by its own interpreter: argv[1] is a JSON job
# {"warmup": parquet, "tables": {name: parquet}, "out": folder}; it prints
# {"version": ..., "times": {name: seconds}} as JSON on its last line.
YDATA_SCRIPT = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import pandas as pd
from ydata_profiling import ProfileReport
import ydata_profiling

job = json.loads(sys.argv[1])

def profile(frame, path, title):
    start = time.perf_counter()
    ProfileReport(frame, minimal=True, progress_bar=False, title=title).to_file(path)
    return time.perf_counter() - start

profile(pd.read_parquet(job["warmup"]), job["out"] + "/warmup-ydata.html", "warm-up")
times = {}
for name, parquet in job["tables"].items():
    frame = pd.read_parquet(parquet)
    path = job["out"] + f"/{name}-ydata.html"
    times[name] = profile(frame, path, name)
print(json.dumps({"version": ydata_profiling.__version__, "times": times}))
"""


def run_ydata(
    python: Path, parquets: dict[str, Path], warmup: Path, out: Path
) -> tuple[str, dict[str, float]]:
    """ydata-profiling's version and its seconds per table (YDATA_SCRIPT in ``python``)."""
    job = {
        "warmup": str(warmup),
        "tables": {name: str(path) for name, path in parquets.items()},
        "out": str(out),
    }
    env = {**os.environ, "YDATA_PROFILING_NO_ANALYTICS": "True"}
    result = subprocess.run(
        [str(python), "-c", YDATA_SCRIPT, json.dumps(job)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"ydata-profiling failed:\n{result.stderr[-4000:]}")
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    return answer["version"], answer["times"]


def run_dpkit(frame: pd.DataFrame, name: str, path: Path, seed: int) -> float:
    """Seconds for dpkit's summary of ``frame`` and its HTML report at ``path``."""
    with warnings.catch_warnings():
        # Seeded, so that the report (and its length) can be reproduced.
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        start = time.perf_counter()
        session = dp.Session.from_pandas(frame, budget=BUDGET, rng=seed)
        summary = describe(session, source=name)
        render_html(summary, path)
        return time.perf_counter() - start


# Appended to a copy of the report: after the load event and a pause (the page's own
# scripts run first), it writes the measured heights into a <meta> that --dump-dom shows.
_PROBE = (
    "<script>window.addEventListener('load',function(){setTimeout(function(){"
    "var m=document.createElement('meta');m.id='bench-height';"
    "m.setAttribute('content',[document.body.scrollHeight,"
    "document.documentElement.scrollHeight,window.innerWidth].join(' '));"
    "document.head.appendChild(m);},1000);});</script>"
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("headless Chromium is needed (Debian: apt-get install -y chromium)")


def page_length(report: Path, scratch: Path) -> tuple[int, int, int]:
    """(body.scrollHeight, documentElement.scrollHeight, viewport width) in px of
    ``report`` drawn by headless Chromium at WIDTH px wide."""
    probe = scratch / f"probe-{report.name}"
    probe.write_bytes(report.read_bytes() + _PROBE.encode())
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={scratch / 'chromium-profile'}",
        f"--window-size={WIDTH},1000",
        "--virtual-time-budget=20000",  # let load handlers and timers run before the dump
        "--dump-dom",
        probe.as_uri(),
    ]
    dom = subprocess.run(command, capture_output=True, timeout=180, check=True).stdout
    match = re.search(rb'id="bench-height" content="(\d+) (\d+) (\d+)"', dom)
    if not match:
        raise RuntimeError(f"{report.name}: the page did not report its height")
    body, document, width = (int(g) for g in match.groups())
    return body, document, width


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="timed rounds (see above)")
    parser.add_argument("--only", nargs="*", default=None, help="table names to run")
    parser.add_argument("--seed", type=int, default=2028, help="dpkit's generator seed")
    parser.add_argument(
        "--ydata-python", type=Path, default=PEER_VENVS / "ydata" / "bin" / "python"
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the reports here")
    args = parser.parse_args()
    unknown = set(args.only or ()) - set(tables())
    if unknown or args.repeat < 1:
        parser.error(f"--repeat must be >= 1; tables are {list(tables())} (got {args.only})")
    if not args.ydata_python.exists():
        raise SystemExit(f"{args.ydata_python} not found: see 'ydata-profiling's environment'")
    out = args.keep or Path(tempfile.mkdtemp(prefix="dpkit-bench-ydata-"))
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    try:
        loaders = tables()
        notes = [] if "nhefs" in loaders else ["nhefs skipped: causaldata is not installed"]
        frames = {}
        for name, load in loaders.items():
            if args.only and name not in args.only:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the loaders' own deprecation warnings
                frames[name] = load()
        parquets = {}
        for name, frame in frames.items():
            parquets[name] = out / f"{name}.parquet"
            frame.to_parquet(parquets[name])
        warmup = out / "warmup.parquet"
        next(iter(frames.values())).head(200).iloc[:, :8].to_parquet(warmup)

        # Rounds alternate the two sides (all tables by dpkit, in this process, then all
        # by ydata, in one child process), so that a change of load on the machine
        # falls on both; each side warms up once per round, untimed.
        dpkit_times: dict[str, list[float]] = {name: [] for name in frames}
        ydata_times: dict[str, list[float]] = {name: [] for name in frames}
        for _ in range(args.repeat):
            run_dpkit(pd.read_parquet(warmup), "warm-up", out / "warmup-dpkit.html", args.seed)
            for name in frames:
                report = out / f"{name}-dpkit.html"
                dpkit_times[name].append(
                    run_dpkit(pd.read_parquet(parquets[name]), name, report, args.seed)
                )
            version, times = run_ydata(args.ydata_python, parquets, warmup, out)
            for name, seconds in times.items():
                ydata_times[name].append(seconds)

        rows = []
        for name, frame in frames.items():
            reports = {side: out / f"{name}-{side}.html" for side in ("dpkit", "ydata")}
            sizes = {side: path.stat().st_size for side, path in reports.items()}
            lengths = {side: page_length(path, out) for side, path in reports.items()}
            seconds = {
                "dpkit": statistics.median(dpkit_times[name]),
                "ydata": statistics.median(ydata_times[name]),
            }
            rows.append((name, frame.shape, seconds, sizes, lengths))
            for side, (body, document, width) in lengths.items():
                if body != document or width != WIDTH:
                    notes.append(
                        f"{name} {side}: body.scrollHeight {body} px, documentElement"
                        f" {document} px, viewport {width} px wide"
                    )
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)

    print(
        f"dpkit {dp.__version__} ({Path(dp.__file__).parent}) describe + render_html,"
        f" ApproxDP(1, 1e-6), seed {args.seed};"
        f" ydata-profiling {version} minimal=True + to_file (HTML); median of {args.repeat}"
        f" rounds after a warm-up; page length = document.body.scrollHeight at {WIDTH} px in"
        " headless Chromium. Ratios: dpkit ÷ ydata. Load average (1 min) at the start"
        f" {load_before:.1f}, at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs."
    )
    print()
    print(
        "| table | rows x cols | dpkit s | ydata s | time ÷ ydata | dpkit bytes | ydata bytes"
        " | size ÷ ydata | dpkit px | ydata px | length ÷ ydata |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (n, k), seconds, sizes, lengths in rows:
        d_px, y_px = lengths["dpkit"][0], lengths["ydata"][0]
        print(
            f"| {name} | {n:,} x {k} | {seconds['dpkit']:.2f} | {seconds['ydata']:.2f}"
            f" | {seconds['dpkit'] / seconds['ydata']:.2f} | {sizes['dpkit']:,}"
            f" | {sizes['ydata']:,} | {sizes['dpkit'] / sizes['ydata']:.2f}"
            f" | {d_px:,} | {y_px:,} | {d_px / y_px:.2f} |"
        )
    for note in notes:
        print(f"\nNote: {note}")
    if args.keep is not None:
        print(f"\nReports kept in {args.keep}")


if __name__ == "__main__":
    sys.exit(main())
