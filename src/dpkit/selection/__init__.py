"""Private selection: pick the best candidate, or the first query above a threshold.

* :class:`ExponentialMechanism` / :func:`exponential` -- candidate ``i`` with
  probability proportional to ``exp(epsilon s_i / (2 sensitivity))``;
* :class:`ReportNoisyMax` / :func:`report_noisy_max` -- the argmax of the scores plus
  Gumbel (= the exponential mechanism), exponential (= permute-and-flip) or Laplace
  noise;
* :class:`PermuteAndFlip` / :func:`permute_and_flip` -- McKenna & Sheldon's mechanism,
  never worse than the exponential mechanism;
* :class:`SparseVector` / :func:`sparse_vector` -- AboveThreshold, offline or online
  (:meth:`SparseVector.stream`), halting at the first or the ``max_positives``-th
  "above" answer;
* :class:`PartitionSelection` -- Google's partition-selection strategies (truncated
  geometric, Laplace and Gaussian thresholding): keep probabilities and thresholds;
* :func:`random_stopping` / :func:`thresholding` -- the best of a random number of runs
  of a private :class:`Candidate`, or the first run reaching a target score (Liu &
  Talwar 2019), the number of runs geometric or any of Papernot & Steinke's laws
  (``repetitions=``: truncated negative binomial, logarithmic, Poisson), the release's
  event a :class:`~dpkit.accounting.RepeatAndSelectEvent`;
  :func:`random_stopping_event` / :func:`thresholding_event` give their cost without
  running them; their releases are :class:`SelectionRelease` objects, whose
  ``alternatives`` lists other valid :class:`Statement` s (a capped run's composition).

Each takes ``monotonic=True`` for scores that move in one direction between
neighbours (counts), which halves the noise. Every release is a
:class:`~dpkit.mechanisms.Release` whose value is an index (or None), with
``error=None``, its privacy event and its guarantee. The selection is computed on
real numbers from lazily refined random bits, so the sampled distribution is exactly
the one each docstring states: no floating-point rounding breaks ties or leaks scores.
"""

from dpkit.selection.binary_search import noisy_binary_search
from dpkit.selection.exponential import ExponentialMechanism, exponential
from dpkit.selection.noisy_max import (
    PermuteAndFlip,
    ReportNoisyMax,
    permute_and_flip,
    report_noisy_max,
)
from dpkit.selection.partition_selection import PartitionSelection, laplace_partition_delta
from dpkit.selection.private_candidates import (
    Candidate,
    Selected,
    SelectionRelease,
    Statement,
    random_stopping,
    random_stopping_event,
    thresholding,
    thresholding_event,
)
from dpkit.selection.sparse_vector import SparseVector, SparseVectorStream, sparse_vector
from dpkit.selection.tree import select_by_tree
from dpkit.selection.tuning import TuneResult, tune

__all__ = [
    "Candidate",
    "ExponentialMechanism",
    "PartitionSelection",
    "PermuteAndFlip",
    "ReportNoisyMax",
    "Selected",
    "SelectionRelease",
    "SparseVector",
    "SparseVectorStream",
    "Statement",
    "TuneResult",
    "exponential",
    "laplace_partition_delta",
    "noisy_binary_search",
    "permute_and_flip",
    "random_stopping",
    "random_stopping_event",
    "report_noisy_max",
    "select_by_tree",
    "sparse_vector",
    "thresholding",
    "thresholding_event",
    "tune",
]
