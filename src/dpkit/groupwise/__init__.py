"""Group-wise privacy: two-stage noise and its numerical analysis.

* :class:`TwoStageNoise` -- Algorithm 1 of Pujol & Desfontaines (2023): Gaussian counts,
  then Gaussian noise of s.d. ``r |X|``. Proven: rho-zCDP (nothing more).
* :class:`BucketedNoise` -- an alternative with a proven per-group guarantee that
  improves with the group's size: noise calibrated per size bucket, the bucket picked
  from a truncated-Laplace count (bucketing cost accounted for).
* ``dpkit.groupwise.analysis`` -- its output density (a Gaussian scale mixture) by
  quadrature, Renyi divergences between neighbouring counts and the per-group
  "effective rho" curve: numerical evidence, not a guarantee; never used by accounting.
"""

from dpkit.groupwise import analysis
from dpkit.groupwise.bucketed import BucketedNoise, bucketed_noise
from dpkit.groupwise.two_stage import TwoStageNoise, two_stage_noise

__all__ = ["BucketedNoise", "TwoStageNoise", "analysis", "bucketed_noise", "two_stage_noise"]
