"""design_data_dependent_noise: exact re-check across neighbouring cells, bounds, errors."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
from dpkit.design import design_data_dependent_noise, design_noise

from .conftest import max_divergence

SETTING = {"epsilon": 1.0, "delta": 0.2, "sensitivity": 1.0, "granularity": 0.25, "support": 3.0}


@pytest.fixture(scope="module")
def uniform_cells():
    return design_data_dependent_noise(**SETTING, cells=np.arange(0.0, 2.01, 0.25))


def _counts(design, k):
    return [int(c) for c in design._parts[k].counts]


def test_guarantee_rechecked_across_neighbouring_cells(uniform_cells):
    design = uniform_cells
    assert design.achieved_delta <= 0.2
    # answers in cells k and m can be neighbours when the cells are within Δf = 1;
    # re-check every such pair with all shifts |phi| <= Δf on a 2x finer grid (a
    # superset of the shifts the pair can realise: a stronger check than needed)
    worst = 0
    cells, refine = np.rint(design.cells / 0.25).astype(int), 2
    for k in range(cells.size - 1):
        for m in range(cells.size - 1):
            # shifts phi = (answer in m) - (answer in k), |phi| <= Δf = 4 intervals
            lo = max(cells[m] - cells[k + 1], -4) * refine
            hi = min(cells[m + 1] - cells[k], 4) * refine
            if lo <= hi:
                a, b = _counts(design, k), _counts(design, m)
                worst = max(worst, max_divergence(a, b, 4, 1.0, refine, (lo, hi)))
    assert 0 < worst <= 0.2


def test_beats_data_independent_and_brackets(uniform_cells):
    independent = design_noise(**SETTING)
    # every data-independent distribution is feasible here, so the optimum is no worse
    assert uniform_cells.objective <= independent.upper_bound + 1e-6
    assert uniform_cells.lower_bound <= uniform_cells.objective
    assert uniform_cells.objective < 0.9 * independent.upper_bound  # and here clearly better
    assert uniform_cells.expected_losses.shape == (8,)


def test_power_a_pair_too_far_apart_is_rejected(uniform_cells):
    # the first and last cells are 1.75 apart (> Δf): nothing ties them, and their
    # divergence at a small shift far exceeds delta -- the checker is not vacuous
    first, last = _counts(uniform_cells, 0), _counts(uniform_cells, 7)
    assert max_divergence(first, last, 1, 1.0, 1) > 0.26


def test_non_uniform_partition_weights_and_instance_bounds():
    cells = [-4.0, -1.0, -0.5, 0.0, 0.5, 1.0, 4.0]  # fine near 0, coarse tails (seed 003)
    weights = [0.05, 0.2, 0.25, 0.25, 0.2, 0.05]
    free = design_data_dependent_noise(**SETTING, cells=cells, weights=weights)
    capped = design_data_dependent_noise(**SETTING, cells=cells, weights=weights, max_loss=0.75)
    assert free.achieved_delta <= 0.2 and capped.achieved_delta <= 0.2
    assert np.all(capped.expected_losses <= 0.75 + 1e-9)
    assert capped.objective >= free.objective - 1e-9
    assert list(free.cell_of([-10.0, -0.7, 0.0, 0.99, 4.0, 50.0])) == [0, 1, 3, 4, 5, 5]


def test_release_uses_the_cell_of_the_clamped_answer(uniform_cells):
    out = uniform_cells.release(np.array([0.1, 1.9, 100.0]), rng=3)
    assert out.event == dp.accounting.events.RepeatedEvent(uniform_cells.event, 3)
    assert np.all(np.abs(out.value - np.clip([0.1, 1.9, 100.0], 0, 2)) <= 3.0 + 1e-9)
    assert out.error is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cells": [0.0]}, "cells"),
        ({"cells": [1.0, 0.0]}, "cells"),
        ({"cells": [0.0, 0.3]}, "multiples"),
        ({"cells": [0.0, np.nan]}, "cells"),
        ({"cells": [0.0, 1.0], "weights": [1.0, 2.0]}, "weights"),
        ({"cells": [0.0, 1.0], "weights": [-1.0]}, "weights"),
        ({"cells": [0.0, 1.0], "max_loss": 0.0}, "max_loss"),
        ({"cells": [0.0, 1.0], "max_memory": 1000}, "GiB"),
        ({"cells": [0.0, 1.0], "delta": 0.0}, "never pure"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(dp.errors.InvalidParameter, match=match):
        design_data_dependent_noise(**(SETTING | kwargs))


def test_infeasible_instance_bound():
    with pytest.raises(dp.errors.InvalidParameter, match="infeasible"):
        design_data_dependent_noise(**SETTING, cells=[0.0, 1.0], max_loss=0.01)


def test_plots(uniform_cells, coarse_design):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = coarse_design.plot()
    assert ax.get_xlabel() == "noise x"
    ax = uniform_cells.plot()
    assert len(ax.patches) == 8  # one step curve per cell
    plt.close("all")
