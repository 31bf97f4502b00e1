"""Auditing: statistical lower bounds on a mechanism's epsilon.

An audit never proves a mechanism private: it finds evidence that it is *not* as
private as claimed, when its lower bound on epsilon (valid at a stated confidence)
exceeds the claim.

* :func:`audit` -- black-box auditing on a neighbouring pair with threshold,
  histogram or trained-classifier attacks and exact Clopper-Pearson bounds
  (Kairouz, Oh & Viswanath 2015; DP-Sniper, Bichsel et al. 2021).
* :func:`sniper_audit` -- DP-Sniper (Bichsel et al. 2021): a trained classifier, a
  threshold chosen for power with randomized tie-breaking, a search over candidate
  neighbouring pairs, and a final estimate on fresh samples.
* :func:`one_run_epsilon`, :func:`one_run_audit`, :func:`audit_gaussian_sum_one_run`,
  :func:`audit_dpsgd_one_run` -- auditing with one run (Steinke, Nasr & Jagielski 2023),
  white-box and on a DP-SGD training run.
* :func:`reachability_attack`, :func:`reachable_from`, :func:`textbook_laplace` --
  Mironov's (2012) floating-point attack on the textbook Laplace mechanism.
* :func:`float_sum_neighbours`, :func:`naive_clamped_sum`, :func:`float_sum_gap` --
  the floating-point summation attack (Casacuberta, Shoemate, Vadhan & Wagaman 2022)
  against a naive clamped sum, and the Session's exact integer sums as the control.
* ``dpkit.audit.bounds`` -- Clopper-Pearson bounds and the epsilon bound from
  a test's error rates.
"""

from dpkit.audit.blackbox import AuditOutputs, AuditResult, audit
from dpkit.audit.bounds import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
)
from dpkit.audit.dpsgd import DPSGDAuditResult, audit_dpsgd_one_run
from dpkit.audit.float_attack import (
    ReachabilityResult,
    reachability_attack,
    reachable_from,
    reachable_on_grid,
    textbook_laplace,
    textbook_laplace_from_uniform,
)
from dpkit.audit.one_run import (
    OneRunResult,
    audit_gaussian_sum_one_run,
    guesses,
    one_run_audit,
    one_run_epsilon,
    p_value,
)
from dpkit.audit.sniper import (
    SniperResult,
    logistic_classifier,
    neighbouring_patterns,
    sniper_audit,
)
from dpkit.audit.sum_attack import (
    FloatSumGap,
    float_sum_gap,
    float_sum_neighbours,
    float_sum_sensitivity,
    naive_clamped_sum,
    session_sum_mechanism,
)

__all__ = [
    "AuditOutputs",
    "AuditResult",
    "DPSGDAuditResult",
    "FloatSumGap",
    "OneRunResult",
    "ReachabilityResult",
    "SniperResult",
    "audit",
    "audit_dpsgd_one_run",
    "audit_gaussian_sum_one_run",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "float_sum_gap",
    "float_sum_neighbours",
    "float_sum_sensitivity",
    "guesses",
    "logistic_classifier",
    "naive_clamped_sum",
    "neighbouring_patterns",
    "one_run_audit",
    "one_run_epsilon",
    "p_value",
    "reachability_attack",
    "reachable_from",
    "reachable_on_grid",
    "session_sum_mechanism",
    "sniper_audit",
    "textbook_laplace",
    "textbook_laplace_from_uniform",
]
