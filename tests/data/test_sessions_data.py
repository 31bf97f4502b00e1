"""dpkit.data.sessions: the bundled web-sessions data is what its generator makes,
and the generator follows its documented process."""

from __future__ import annotations

import gzip
import math
from importlib import resources

import numpy as np
import pytest
from scipy import stats

from dpkit.data import (
    WEB_SESSIONS_COLUMNS,
    WEB_SESSIONS_COUNTRY_WEIGHTS,
    WEB_SESSIONS_DEVICES,
    WEB_SESSIONS_PUBLIC_BOUNDS,
    load_web_sessions,
    make_web_sessions,
    web_sessions_csv,
    web_sessions_path,
)
from dpkit.errors import DataError, InvalidParameter

# Two-sided false-failure rate of each distribution check below.
ALPHA = 1e-6
Z = stats.norm.isf(ALPHA / 2)  # about 4.89


@pytest.fixture(scope="module")
def bundled() -> dict[str, np.ndarray]:
    return load_web_sessions()


def test_bundled_file_is_the_generator_output() -> None:
    # Compare the text, not the gzip bytes: compressors differ between zlib builds.
    raw = resources.files("dpkit.data").joinpath("web_sessions.csv.gz").read_bytes()
    assert len(raw) < 2_000_000
    assert gzip.decompress(raw).decode("ascii") == web_sessions_csv(make_web_sessions())


def test_load_matches_make(bundled: dict[str, np.ndarray]) -> None:
    made = make_web_sessions()
    assert tuple(bundled) == tuple(made) == WEB_SESSIONS_COLUMNS
    for name in WEB_SESSIONS_COLUMNS:
        assert bundled[name].dtype == made[name].dtype, name
        np.testing.assert_array_equal(bundled[name], made[name], err_msg=name)


def test_shape_and_types(bundled: dict[str, np.ndarray]) -> None:
    n = len(bundled["user_id"])
    assert 40_000 < n < 60_000
    assert {len(v) for v in bundled.values()} == {n}
    assert bundled["started_at"].dtype == np.dtype("datetime64[s]")
    assert bundled["country"].dtype.kind == bundled["device"].dtype.kind == "U"
    # Sorted by user, then time.
    key = np.lexsort((bundled["started_at"], bundled["user_id"]))
    np.testing.assert_array_equal(key, np.arange(n))


def test_many_rows_per_person(bundled: dict[str, np.ndarray]) -> None:
    _, per_user = np.unique(bundled["user_id"], return_counts=True)
    assert len(per_user) == 3_000 and per_user.min() >= 1
    assert np.median(per_user) >= 5
    assert per_user.max() >= 200  # the long tail that contribution bounding must cut
    assert np.mean(per_user > 10) > 0.3


def test_values_within_public_bounds(bundled: dict[str, np.ndarray]) -> None:
    for name, (low, high) in WEB_SESSIONS_PUBLIC_BOUNDS.items():
        assert bundled[name].min() >= low and bundled[name].max() <= high, name
    assert set(bundled["country"]) <= set(WEB_SESSIONS_COUNTRY_WEIGHTS)
    assert set(bundled["device"]) == set(WEB_SESSIONS_DEVICES)
    assert bundled["started_at"].min() >= np.datetime64("2024-01-01T00:00:00")
    assert bundled["started_at"].max() < np.datetime64("2025-01-01T00:00:00")
    assert np.mean(bundled["amount_spent"] == 0.0) > 0.9  # most sessions buy nothing


def test_per_user_columns_are_constant_per_user(bundled: dict[str, np.ndarray]) -> None:
    users = bundled["user_id"]
    first = np.r_[True, users[1:] != users[:-1]]
    starts = np.flatnonzero(first)
    for name in ("age", "country"):
        values = bundled[name]
        np.testing.assert_array_equal(
            values, np.repeat(values[starts], np.diff(np.r_[starts, len(users)]))
        )


def test_same_seed_same_data_other_seed_other_data() -> None:
    a, b, c = (
        make_web_sessions(50, seed=1),
        make_web_sessions(50, seed=1),
        make_web_sessions(50, seed=2),
    )
    for name in WEB_SESSIONS_COLUMNS:
        np.testing.assert_array_equal(a[name], b[name])
    assert any(
        a[name].shape != c[name].shape or not np.array_equal(a[name], c[name])
        for name in WEB_SESSIONS_COLUMNS
    )


def _proportion_z(hits: int, n: int, p: float) -> float:
    return (hits - n * p) / math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("seed", [11, 12], ids=["seed-11", "seed-12"])
def test_country_share_follows_documented_weight(seed: int) -> None:
    # 20,000 users: US share is Binomial(20000, 0.33)/20000. |z| <= Z fails with rate ALPHA.
    # Power: a US weight off by 10% (0.30 or 0.363) would give |z| near 9 on average.
    n = 20_000
    data = make_web_sessions(n, seed=seed)
    users = data["user_id"]
    first = np.r_[True, users[1:] != users[:-1]]
    us = int(np.count_nonzero(data["country"][first] == "US"))
    assert abs(_proportion_z(us, n, WEB_SESSIONS_COUNTRY_WEIGHTS["US"])) <= Z
    assert abs(_proportion_z(us, n, 0.30)) > Z and abs(_proportion_z(us, n, 0.363)) > Z


@pytest.mark.parametrize("seed", [21, 22], ids=["seed-21", "seed-22"])
def test_sessions_per_user_follow_documented_lognormal(seed: int) -> None:
    # Documented: sessions = min(1 + floor(exp(N(log 9, 1.1^2))), 400), so
    # P(sessions <= 10) = P(exp(N) < 10) = Phi((log 10 - log 9) / 1.1) exactly.
    n = 20_000
    data = make_web_sessions(n, seed=seed)
    _, per_user = np.unique(data["user_id"], return_counts=True)
    p = stats.norm.cdf((math.log(10) - math.log(9)) / 1.1)
    hits = int(np.count_nonzero(per_user <= 10))
    assert abs(_proportion_z(hits, n, p)) <= Z
    # Power: with a median of 7 instead of 9 (sigma unchanged) the check fails.
    p_wrong = stats.norm.cdf((math.log(10) - math.log(7)) / 1.1)
    assert abs(_proportion_z(hits, n, p_wrong)) > Z


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"n_people": 0}, "n_people"), ({"n_people": 2.5}, "n_people"), ({"seed": -1}, "seed")],
    ids=["zero-people", "float-people", "negative-seed"],
)
def test_bad_arguments(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        make_web_sessions(**kwargs)  # type: ignore[arg-type]


def test_csv_needs_every_column() -> None:
    data = make_web_sessions(3, seed=0)
    del data["age"]
    with pytest.raises(DataError, match="age"):
        web_sessions_csv(data)


def test_path_is_a_readable_gzipped_csv() -> None:
    with web_sessions_path() as path:
        assert path.is_file() and path.name == "web_sessions.csv.gz"
        with gzip.open(path, "rt", encoding="ascii") as handle:
            assert handle.readline().rstrip("\n").split(",") == list(WEB_SESSIONS_COLUMNS)
