"""Optimal noise by linear programming (Selvi, Liu & Wiesemann's DRO formulation).

* :func:`design_noise`: the (epsilon, delta)-DP additive noise with the smallest
  expected loss (l1, l2 or your own), as a mixture of uniforms on a grid, with an
  upper and a lower bound on the optimal loss, an exact re-check of the guarantee and
  a floating-point-safe sampler (a :class:`NoiseDesign` is a dpkit mechanism);
* :func:`design_data_dependent_noise`: one distribution per cell of the query range;
* :func:`noise_lower_bound`: the lower bound alone (also for delta = 0);
* ``dpkit.design.baselines``: expected losses of Laplace, analytic Gaussian,
  truncated Laplace and staircase noise, for comparisons.

See ``docs/design.md``.
"""

from dpkit.design import baselines
from dpkit.design.data_dependent import DataDependentDesign, design_data_dependent_noise
from dpkit.design.noise_design import NoiseDesign, design_noise, noise_lower_bound

__all__ = [
    "DataDependentDesign",
    "NoiseDesign",
    "baselines",
    "design_data_dependent_noise",
    "design_noise",
    "noise_lower_bound",
]
