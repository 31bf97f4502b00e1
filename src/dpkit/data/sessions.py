"""A synthetic but realistic person-level data set: a year of web/app sessions.

Each row is one visit (a *session*) of one user to a shop's website or app, and a
user has many rows -- from one to several hundred -- so the privacy unit is the
user (``user_id``), not the row. This is the shape DP analytics exists for, and the
shape where per-person contribution bounding matters.

The bundled file ``web_sessions.csv.gz`` (read by :func:`load_web_sessions`, located
by :func:`web_sessions_path`) is exactly ``make_web_sessions()`` with the defaults
(3,000 users, seed 2024) written by :func:`web_sessions_csv`; a test regenerates it
and compares. Nobody's data are in it: every value comes from the process below.

Columns
-------
====================  =========  =========================================================
``user_id``           int64      1 .. ``n_people``; the privacy unit
``started_at``        timestamp  session start, to the second, within calendar year 2024
``country``           string     the user's country (ISO 3166 alpha-2), skewed
``device``            string     ``mobile`` / ``desktop`` / ``tablet``
``duration_minutes``  float64    one decimal, in [0.1, 240]: lognormal, heavy tail
``pages``             int64      pages viewed, >= 1
``amount_spent``      float64    purchase in the session, with cents; most sessions
                                 buy nothing (0.0), purchases are lognormal
``age``               int64      the user's age in [16, 90], repeated on each row
====================  =========  =========================================================

Generating process
------------------
Per user ``i`` (independently):

1. ``country`` from the fixed, skewed distribution :data:`WEB_SESSIONS_COUNTRY_WEIGHTS`
   (the United States about a third, a long tail of small countries).
2. ``age = clip(round(exp(N(log 34, 0.33^2))), 16, 90)``: right-skewed, median 34.
3. A preferred device (mobile 0.58, desktop 0.32, tablet 0.10); each session uses
   it with probability 0.8 and otherwise a device drawn from the same weights.
4. Activity: the number of sessions is ``min(1 + floor(exp(N(log 9, 1.1^2))), 400)``,
   so the median user has about 10 sessions, the mean is near 17, and a few
   heavy users have hundreds (the long tail contribution bounding must cut).
5. Engagement: a user-level duration multiplier ``exp(N(0, 0.4^2))``.
6. Buying: 20% of users are *buyers* who purchase in a session with probability
   0.18; the others with probability 0.01.
7. A first-seen day uniform over the year, drawn as the minimum of two uniform days
   (earlier sign-ups are more common, as for a service that grows slowly).

Per session of user ``i``:

8. Day uniform between the user's first-seen day and 31 December 2024; hour of day
   from the diurnal weights :data:`_HOUR_WEIGHTS` (low at night, peak in the
   evening); minute and second uniform.
9. ``duration_minutes = clip(multiplier * exp(N(log m_device, 1.0^2)), 0.1, 240)`` rounded
   to 0.1, with median ``m_device`` = 5 (mobile), 9 (desktop), 7 (tablet) minutes;
   240 minutes is the session timeout.
10. ``pages = 1 + G`` where ``G`` is geometric (failures before a success) with mean
    ``1.2 * duration_minutes ** 0.6``: longer sessions see more pages.
11. ``amount_spent``: with the user's purchase probability, ``exp(N(log 28, 1.1^2))``
    rounded to cents (a heavy tail: a few purchases in the thousands); else 0.0.

Randomness comes from :func:`dpkit.random.as_random` seeded with ``seed`` (a
ChaCha20 stream, identical on every platform), turned into uniforms and then into
each distribution by its inverse CDF, so the output depends only on the seed and
the parameters. The seeded generator is insecure by design: this is public
synthetic data, not a privacy mechanism.

Examples
--------
>>> from dpkit.data import load_web_sessions
>>> sessions = load_web_sessions()
>>> len(sessions["user_id"]) > 10 * 3_000
True
>>> sorted(sessions)[:3]
['age', 'amount_spent', 'country']
"""

from __future__ import annotations

import csv
import gzip
import io
import warnings
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit import _validation as check
from dpkit.errors import DataError, InsecureRandomWarning
from dpkit.random import Random, as_random

__all__ = [
    "WEB_SESSIONS_COLUMNS",
    "WEB_SESSIONS_COUNTRY_WEIGHTS",
    "WEB_SESSIONS_DEVICES",
    "WEB_SESSIONS_PUBLIC_BOUNDS",
    "load_web_sessions",
    "make_web_sessions",
    "web_sessions_csv",
    "web_sessions_path",
]

WEB_SESSIONS_FILE: Final = "web_sessions.csv.gz"
DEFAULT_PEOPLE: Final = 3_000
DEFAULT_SEED: Final = 2024

#: Column names, in file order.
WEB_SESSIONS_COLUMNS: Final[tuple[str, ...]] = (
    "user_id",
    "started_at",
    "country",
    "device",
    "duration_minutes",
    "pages",
    "amount_spent",
    "age",
)

#: The distribution of users' countries (weights sum to 1).
WEB_SESSIONS_COUNTRY_WEIGHTS: Final = MappingProxyType(
    {
        "US": 0.33,
        "IN": 0.11,
        "GB": 0.08,
        "DE": 0.07,
        "BR": 0.06,
        "FR": 0.05,
        "CA": 0.045,
        "JP": 0.04,
        "MX": 0.035,
        "AU": 0.03,
        "ES": 0.03,
        "IT": 0.025,
        "NL": 0.02,
        "PL": 0.015,
        "SE": 0.012,
        "NG": 0.011,
        "KR": 0.01,
        "ZA": 0.008,
        "IE": 0.006,
        "NZ": 0.004,
    }
)

#: The devices, with the share of users who prefer each.
WEB_SESSIONS_DEVICES: Final = MappingProxyType({"mobile": 0.58, "desktop": 0.32, "tablet": 0.10})

# Public bounds (inclusive), fixed by the generating process above, not computed
# from the rows: clipping to them costs no privacy budget. user_id is the privacy
# unit; started_at lies in calendar year 2024.
WEB_SESSIONS_PUBLIC_BOUNDS: Final = MappingProxyType(
    {
        "duration_minutes": (0.0, 240.0),
        "pages": (1, 1_000),
        "amount_spent": (0.0, 10_000.0),
        "age": (16, 90),
    }
)
"""Public bounds ``(low, high)`` for the numeric columns of :func:`make_web_sessions`.

They follow from the documented generating process (the 240-minute timeout, the age
range, round upper ends for pages and purchases), never from the data. Read-only.
"""

_YEAR_START: Final = np.datetime64("2024-01-01T00:00:00", "s")
_DAYS: Final = 366  # 2024 is a leap year
_MAX_SESSIONS: Final = 400
# Relative frequency of session starts by hour of day (0..23): quiet at night,
# a morning rise, a lunch bump and an evening peak.
_HOUR_WEIGHTS: Final = np.array(
    [2, 1, 1, 1, 1, 2, 3, 5, 7, 8, 8, 9, 10, 9, 8, 8, 9, 10, 12, 14, 15, 13, 9, 5], dtype=float
)
_DEVICE_MEDIAN_MIN: Final = {"mobile": 5.0, "desktop": 9.0, "tablet": 7.0}


class _Uniforms:
    """Uniforms in (0, 1) from a dpkit ChaCha20 stream, identical on every platform."""

    def __init__(self, seed: int) -> None:
        with warnings.catch_warnings():
            # Public synthetic data: a seeded (insecure) stream is exactly what is wanted.
            warnings.simplefilter("ignore", InsecureRandomWarning)
            self._rng: Random = as_random(seed)

    def __call__(self, n: int) -> npt.NDArray[np.float64]:
        # The top 53 bits, centred in their cell: never exactly 0 or 1.
        bits = self._rng.uint64(n) >> np.uint64(11)
        return (bits.astype(np.float64) + 0.5) * 2.0**-53

    def inverse_normal(self, n: int) -> npt.NDArray[np.float64]:
        return np.asarray(ndtri(self(n)), dtype=np.float64)

    def choice(self, weights: npt.ArrayLike, n: int) -> npt.NDArray[np.int64]:
        cdf = np.cumsum(np.asarray(weights, dtype=float))
        cdf /= cdf[-1]
        index = np.searchsorted(cdf, self(n), side="right")
        return np.minimum(index, len(cdf) - 1).astype(np.int64)


def make_web_sessions(
    n_people: int = DEFAULT_PEOPLE, *, seed: int = DEFAULT_SEED
) -> dict[str, npt.NDArray[Any]]:
    """Generate the web-sessions data set (see the module docstring for the process).

    Parameters
    ----------
    n_people:
        Number of users (>= 1). Rows average about 17 per user.
    seed:
        Seed (int >= 0); the same ``(n_people, seed)`` gives the same data everywhere.

    Returns
    -------
    dict
        One NumPy array per column of :data:`WEB_SESSIONS_COLUMNS`, sorted by
        ``user_id`` then ``started_at``: ``user_id``, ``pages`` and ``age`` int64,
        ``started_at`` ``datetime64[s]``, ``country`` and ``device`` unicode,
        ``duration_minutes`` and ``amount_spent`` float64.

    Notes
    -----
    Synthetic public data: no privacy guarantee is needed or given. Analyses of it
    should still treat ``user_id`` as the privacy unit, as they would for real data.
    """
    n_people = check.check_count(n_people, "n_people", "make_web_sessions")
    seed = check.check_count(seed, "seed", "make_web_sessions", minimum=0)
    draw = _Uniforms(seed)
    countries = np.array(list(WEB_SESSIONS_COUNTRY_WEIGHTS), dtype=np.str_)
    devices = np.array(list(WEB_SESSIONS_DEVICES), dtype=np.str_)
    device_weights = np.array(list(WEB_SESSIONS_DEVICES.values()))

    # Per user (steps 1-7).
    country = countries[draw.choice(list(WEB_SESSIONS_COUNTRY_WEIGHTS.values()), n_people)]
    age = np.clip(np.rint(np.exp(np.log(34.0) + 0.33 * draw.inverse_normal(n_people))), 16, 90)
    preferred = draw.choice(device_weights, n_people)
    activity = np.floor(np.exp(np.log(9.0) + 1.1 * draw.inverse_normal(n_people)))
    n_sessions = np.minimum(1 + activity, _MAX_SESSIONS).astype(np.int64)
    multiplier = np.exp(0.4 * draw.inverse_normal(n_people))
    buy_rate = np.where(draw(n_people) < 0.2, 0.18, 0.01)
    first_day = np.minimum(
        draw.choice(np.ones(_DAYS), n_people), draw.choice(np.ones(_DAYS), n_people)
    )

    # Per session (steps 8-11): expand the user-level values to one entry per row.
    rows = int(n_sessions.sum())
    owner = np.repeat(np.arange(n_people), n_sessions)
    span = _DAYS - first_day[owner]
    day = first_day[owner] + np.floor(draw(rows) * span).astype(np.int64)
    hour = draw.choice(_HOUR_WEIGHTS, rows)
    second_of_hour = np.floor(draw(rows) * 3600).astype(np.int64)
    offset = day * 86_400 + hour * 3600 + second_of_hour
    started_at = _YEAR_START + offset.astype("timedelta64[s]")

    switch = draw(rows) >= 0.8
    device_index = np.where(switch, draw.choice(device_weights, rows), preferred[owner])
    median = np.array([_DEVICE_MEDIAN_MIN[str(d)] for d in devices])[device_index]
    raw_duration = multiplier[owner] * np.exp(np.log(median) + 1.0 * draw.inverse_normal(rows))
    duration = np.round(np.clip(raw_duration, 0.1, 240.0), 1)

    mean_extra_pages = 1.2 * duration**0.6
    stop = 1.0 / (1.0 + mean_extra_pages)  # geometric success probability
    pages = 1 + np.floor(np.log(draw(rows)) / np.log1p(-stop)).astype(np.int64)

    buys = draw(rows) < buy_rate[owner]
    price = np.round(np.exp(np.log(28.0) + 1.1 * draw.inverse_normal(rows)), 2)
    amount = np.where(buys, np.maximum(price, 0.01), 0.0)

    order = np.lexsort((offset, owner))
    return {
        "user_id": (owner + 1).astype(np.int64)[order],
        "started_at": started_at[order],
        "country": country[owner][order],
        "device": devices[device_index][order],
        "duration_minutes": duration[order],
        "pages": pages[order],
        "amount_spent": amount[order],
        "age": age.astype(np.int64)[owner][order],
    }


def web_sessions_csv(data: dict[str, npt.NDArray[Any]]) -> str:
    """The CSV text (header, ``\\n`` line ends) for a :func:`make_web_sessions` result.

    Timestamps are written as ``YYYY-MM-DD HH:MM:SS`` (read as TIMESTAMP by DuckDB),
    floats with a fixed number of decimals, so the text is byte-for-byte reproducible.
    """
    missing = [c for c in WEB_SESSIONS_COLUMNS if c not in data]
    if missing:
        raise DataError(f"web_sessions_csv needs the columns {missing}; got {sorted(data)}.")
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(WEB_SESSIONS_COLUMNS)
    started = np.datetime_as_string(data["started_at"].astype("datetime64[s]"), unit="s")
    columns = [
        data["user_id"].tolist(),
        [s.replace("T", " ") for s in started.tolist()],
        data["country"].tolist(),
        data["device"].tolist(),
        [f"{v:.1f}" for v in data["duration_minutes"].tolist()],
        data["pages"].tolist(),
        [f"{v:.2f}" for v in data["amount_spent"].tolist()],
        data["age"].tolist(),
    ]
    writer.writerows(zip(*columns, strict=True))
    return out.getvalue()


def web_sessions_path() -> AbstractContextManager[Path]:
    """A context manager giving a filesystem path to the bundled ``web_sessions.csv.gz``.

    Use it to hand the file to an engine that reads paths (DuckDB reads gzipped CSV
    directly)::

        with web_sessions_path() as path:
            session = dp.Session.from_path(path, privacy_unit="user_id", ...)

    For an ordinary installation this is the file inside the package; for a zipped
    one, a temporary copy that is removed on exit.
    """
    return resources.as_file(resources.files("dpkit.data").joinpath(WEB_SESSIONS_FILE))


def load_web_sessions() -> dict[str, npt.NDArray[Any]]:
    """Load the bundled web-sessions data (3,000 users, about 50,000 sessions).

    Returns
    -------
    dict
        One NumPy array per column of :data:`WEB_SESSIONS_COLUMNS`, typed as
        :func:`make_web_sessions` returns them. Every call returns new arrays.

    Notes
    -----
    Synthetic, public data, described in the module docstring; it equals
    ``make_web_sessions()`` with the default arguments.
    """
    raw = resources.files("dpkit.data").joinpath(WEB_SESSIONS_FILE).read_bytes()
    reader = csv.reader(io.StringIO(gzip.decompress(raw).decode("ascii"), newline=""))
    header = tuple(next(reader))
    if header != WEB_SESSIONS_COLUMNS:  # pragma: no cover - guards a corrupted install
        raise DataError(f"{WEB_SESSIONS_FILE} has an unexpected header; reinstall dpkit.")
    columns = list(zip(*reader, strict=True))
    user_id, started_at, country, device, duration, pages, amount, age = columns
    return {
        "user_id": np.array(user_id, dtype=np.int64),
        "started_at": np.array([s.replace(" ", "T") for s in started_at], dtype="datetime64[s]"),
        "country": np.array(country, dtype=np.str_),
        "device": np.array(device, dtype=np.str_),
        "duration_minutes": np.array(duration, dtype=np.float64),
        "pages": np.array(pages, dtype=np.int64),
        "amount_spent": np.array(amount, dtype=np.float64),
        "age": np.array(age, dtype=np.int64),
    }


def _write_bundled_file(path: Path) -> None:
    """Regenerate the bundled file (``python -m dpkit.data.sessions PATH``)."""
    text = web_sessions_csv(make_web_sessions())
    # mtime=0 keeps the gzip header free of the build time.
    path.write_bytes(gzip.compress(text.encode("ascii"), compresslevel=9, mtime=0))


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    import sys

    _write_bundled_file(
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name(WEB_SESSIONS_FILE)
    )
