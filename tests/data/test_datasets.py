"""dpkit.data: the bundled UCI Adult data loads offline, whole and unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit.data import (
    ADULT_CATEGORICAL_COLUMNS,
    ADULT_COLUMNS,
    ADULT_NUMERIC_COLUMNS,
    ADULT_PUBLIC_BOUNDS,
    load_adult,
)

EXPECTED_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)


@pytest.fixture(scope="module")
def adult() -> dict[str, np.ndarray]:
    return load_adult()


def test_columns_and_row_count(adult: dict[str, np.ndarray]) -> None:
    assert tuple(adult) == EXPECTED_COLUMNS == ADULT_COLUMNS
    assert set(ADULT_NUMERIC_COLUMNS) | set(ADULT_CATEGORICAL_COLUMNS) == set(ADULT_COLUMNS)
    assert {len(values) for values in adult.values()} == {32_561}


def test_dtypes(adult: dict[str, np.ndarray]) -> None:
    for name in ADULT_NUMERIC_COLUMNS:
        assert adult[name].dtype == np.int64, name
    for name in ADULT_CATEGORICAL_COLUMNS:
        assert adult[name].dtype.kind == "U", name


def test_values_match_the_published_description(adult: dict[str, np.ndarray]) -> None:
    # adult.names: 32,561 training rows, 30,162 without unknowns; 7,841 earn >50K.
    assert np.count_nonzero(adult["income"] == ">50K") == 7_841
    assert set(adult["income"]) == {">50K", "<=50K"}
    assert set(adult["sex"]) == {"Female", "Male"}
    complete = np.ones(32_561, dtype=bool)
    for name in ADULT_CATEGORICAL_COLUMNS:
        complete &= adult[name] != "?"
    assert np.count_nonzero(complete) == 30_162
    # The first record, as in the original file.
    first = {name: adult[name][0].item() for name in ADULT_COLUMNS}
    assert first == {
        "age": 39,
        "workclass": "State-gov",
        "fnlwgt": 77516,
        "education": "Bachelors",
        "education_num": 13,
        "marital_status": "Never-married",
        "occupation": "Adm-clerical",
        "relationship": "Not-in-family",
        "race": "White",
        "sex": "Male",
        "capital_gain": 2174,
        "capital_loss": 0,
        "hours_per_week": 40,
        "native_country": "United-States",
        "income": "<=50K",
    }


def test_no_stray_whitespace(adult: dict[str, np.ndarray]) -> None:
    for name in ADULT_CATEGORICAL_COLUMNS:
        values = adult[name]
        assert np.all(np.char.strip(values) == values), name
        assert np.all(np.char.str_len(values) > 0), name


def test_each_call_returns_fresh_arrays(adult: dict[str, np.ndarray]) -> None:
    again = load_adult()
    again["age"][0] = -1
    assert load_adult()["age"][0] == 39
    assert adult["age"][0] == 39


def test_public_bounds_are_well_formed() -> None:
    assert set(ADULT_PUBLIC_BOUNDS) <= set(ADULT_NUMERIC_COLUMNS)
    assert "fnlwgt" not in ADULT_PUBLIC_BOUNDS  # a survey weight, deliberately unbounded
    for name, (low, high) in ADULT_PUBLIC_BOUNDS.items():
        assert isinstance(low, int) and isinstance(high, int), name
        assert low < high, name
    with pytest.raises(TypeError):
        ADULT_PUBLIC_BOUNDS["age"] = (0, 1)  # type: ignore[index]
