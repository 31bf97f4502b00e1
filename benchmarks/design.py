"""Optimal noise by LP (dpkit.design) against the textbook noises; counterexamples; speed.

Run: ``python benchmarks/design.py`` (about 5 minutes on 2 cores). Writes
``benchmarks/results/design.md`` and the PNGs ``design_comparison.png``,
``design_asymmetric.png``, ``design_l1_l2.png``.

1. Comparison (issue 18, item 3): expected loss of Laplace (ε-DP), analytic Gaussian,
   truncated Laplace, staircase (the optimal ε-DP noise) and the designed noise
   (upper bound = the released distribution's exact loss; lower bound on the optimum),
   for ε in {0.1, 0.5, 1, 2, 3}, δ in {1e-6, 1e-3, 0.1, 0.3}, ℓ1 and ℓ2, Δf = 1.
   The grid is β = 1/k with k chosen so the support holds at most ~1,200 intervals.
2. Counterexamples of Selvi, Liu & Wiesemann's appendix (seed 003): a non-monotone
   optimum (the appendix's ε = 3, δ = 0.3 example is not reproduced; one at Δf = 10,
   ε = 1, δ = 0.4, β = 0.25 is proven by the bounds), an
   asymmetric optimum (asymmetric loss, ε = 1, δ = 0.2, β = 0.05), ℓ1 versus ℓ2
   shapes (Δf = 10, β = 0.5, ε = 1, δ = 0.4).
3. Speed: ~1,000 and ~10,000 intervals (Δf = 1, ε = 1, δ = 0.1 and 1e-6, ℓ1 and ℓ2),
   each in a fresh process, with its peak resident memory.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from dpkit.design import baselines, design_noise, noise_lower_bound

RESULTS = Path(__file__).parent / "results"
EPSILONS = (0.1, 0.5, 1.0, 2.0, 3.0)
DELTAS = (1e-6, 1e-3, 0.1, 0.3)


def _grid(epsilon: float, delta: float) -> tuple[float, float]:
    """(beta, support): support 1.5x the truncated-Laplace bound plus Δf."""
    bound = math.log1p(math.expm1(epsilon) / (2 * delta)) / epsilon
    support = 1.5 * bound + 1.0
    k = max(1, min(20, int(600 / support)))
    return 1.0 / k, support


def comparison() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for loss in ("l1", "l2"):
        for epsilon in EPSILONS:
            for delta in DELTAS:
                beta, support = _grid(epsilon, delta)
                start = time.perf_counter()
                design = design_noise(
                    epsilon=epsilon, delta=delta, loss=loss, granularity=beta, support=support
                )
                seconds = time.perf_counter() - start
                rows.append(
                    {
                        "loss": loss,
                        "epsilon": epsilon,
                        "delta": delta,
                        "beta": beta,
                        "intervals": design.weights.size,
                        "laplace": baselines.laplace_loss(epsilon=epsilon, loss=loss),
                        "gaussian": baselines.gaussian_loss(
                            epsilon=epsilon, delta=delta, loss=loss
                        ),
                        "truncated": baselines.truncated_laplace_loss(
                            epsilon=epsilon, delta=delta, loss=loss
                        ),
                        "staircase": baselines.staircase_loss(epsilon=epsilon, loss=loss),
                        "upper": design.upper_bound,
                        "lower": design.lower_bound,
                        "achieved": design.achieved_delta,
                        "seconds": seconds,
                    }
                )
                print(rows[-1], flush=True)
    return rows


def comparison_table(rows: list[dict[str, object]]) -> str:
    head = (
        "| loss | ε | δ | β | Laplace | Gaussian | trunc. Laplace | staircase | "
        "**designed** | lower bound | best textbook / designed | seconds |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        best = min(float(r[k]) for k in ("laplace", "gaussian", "truncated", "staircase"))  # type: ignore[arg-type]
        lines.append(
            f"| {r['loss']} | {r['epsilon']:g} | {r['delta']:g} | {r['beta']:.3g} | "
            f"{r['laplace']:.4g} | {r['gaussian']:.4g} | {r['truncated']:.4g} | "
            f"{r['staircase']:.4g} | **{r['upper']:.4g}** | {r['lower']:.4g} | "
            f"{best / float(r['upper']):.3f} | {r['seconds']:.1f} |"  # type: ignore[arg-type]
        )
    return head + "\n".join(lines) + "\n"


def comparison_plot(rows: list[dict[str, object]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(DELTAS), figsize=(16, 7), sharex=True)
    names = {
        "laplace": "Laplace",
        "gaussian": "analytic Gaussian",
        "truncated": "truncated Laplace",
        "staircase": "staircase",
        "upper": "designed (LP)",
    }
    for i, loss in enumerate(("l1", "l2")):
        for j, delta in enumerate(DELTAS):
            ax = axes[i, j]
            cell = [r for r in rows if r["loss"] == loss and r["delta"] == delta]
            eps = [float(r["epsilon"]) for r in cell]  # type: ignore[arg-type]
            for key, label in names.items():
                ax.plot(eps, [float(r[key]) for r in cell], marker="o", label=label)  # type: ignore[arg-type]
            ax.set_yscale("log")
            ax.set_title(f"{loss}, δ = {delta:g}")
            ax.set_xlabel("ε")
    axes[0, 0].set_ylabel("expected loss")
    axes[1, 0].set_ylabel("expected loss")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "design_comparison.png", dpi=110)
    plt.close(fig)


def counterexamples() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    # (i) monotone noise. Seed 003 claims that at eps = 3, delta = 0.3, l1, beta = 0.02
    # every monotone noise has loss >= 0.1830 while a non-monotone one reaches 0.1705.
    setting = {"epsilon": 3.0, "delta": 0.3, "granularity": 0.02, "support": 3.0}
    free = design_noise(**setting, lower_bound=False)
    mono = design_noise(**setting, monotone=True, symmetric=True)
    out.append(
        "**Monotone noise, the appendix's example** (ε = 3, δ = 0.3, ℓ1, β = 0.02, support "
        f"[-3, 3)): unconstrained design {free.upper_bound:.4f} (paper: 0.1705 on its "
        "support); the best symmetric noise with density non-increasing in |x| reaches "
        f"{mono.upper_bound:.4f} (exactly re-checked: δ achieved {mono.achieved_delta:.7f}); "
        f"lower bound for every such noise {mono.lower_bound:.4f}. The appendix states "
        "that no monotone noise does better than 0.1830; the exactly verified monotone "
        "design above contradicts that (monotone = unimodal at 0, as here). Monotonicity "
        f"costs at most {100 * (mono.upper_bound / free.upper_bound - 1):.1f}% here.\n"
    )
    # A non-monotone optimum that the bounds do prove (the paper's Figures 4-5 regime).
    setting = {"epsilon": 1.0, "delta": 0.4, "sensitivity": 10.0, "granularity": 0.25}
    free = design_noise(**setting, support=30.0, lower_bound=False)
    floor = noise_lower_bound(**setting, support=30.0, monotone=True)
    out.append(
        "**A non-monotone optimum** (Δf = 10, ε = 1, δ = 0.4, ℓ1, β = 0.25): every noise "
        f"with density non-increasing in |x| has loss >= {floor:.4f} (lower bound, any "
        f"support), while the unconstrained design reaches {free.upper_bound:.4f} "
        f"(exactly re-checked, δ achieved {free.achieved_delta:.7f}): the optimum is not "
        "monotone (its shape: design_l1_l2.png).\n"
    )

    def asymmetric(x: np.ndarray) -> np.ndarray:
        return np.abs(x) + (x > 0) * np.abs(x)

    # (ii) asymmetric optimum: seed 003 Figure 1
    sym = design_noise(epsilon=1.0, delta=0.2, granularity=0.05, support=4.0)
    asym = design_noise(epsilon=1.0, delta=0.2, loss=asymmetric, granularity=0.05, support=4.0)
    mid = (asym.edges[:-1] + asym.edges[1:]) / 2
    out.append(
        "**Asymmetric optimum** (Δf = 1, β = 0.05, ε = 1, δ = 0.2): ℓ1 loss "
        f"{sym.upper_bound:.4f} (mean {float(sym.weights @ mid):+.4f}); asymmetric loss "
        f"|x| + 1[x>0]|x|: {asym.upper_bound:.4f} (lower bound {asym.lower_bound:.4f}), "
        f"mean {float(asym.weights @ mid):+.4f}, mass on x > 0: "
        f"{float(asym.weights[asym.edges[:-1] >= 0].sum()):.3f}. See design_asymmetric.png.\n"
    )
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sym.plot(ax, color="tab:red", label="c(x) = |x|")
    asym.plot(ax, fill=False, color="tab:blue", label="c(x) = |x| + 1[x>0]|x|")
    ax.set_xlim(-2.5, 2.5)
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "design_asymmetric.png", dpi=110)
    plt.close(fig)

    # (iii) l1 versus l2 shapes: seed 003 Figure 2
    l1 = design_noise(epsilon=1.0, delta=0.4, sensitivity=10.0, granularity=0.5, support=40.0)
    l2 = design_noise(
        epsilon=1.0, delta=0.4, sensitivity=10.0, loss="l2", granularity=0.5, support=40.0
    )
    out.append(
        "**ℓ1 versus ℓ2 shapes** (Δf = 10, β = 0.5, ε = 1, δ = 0.4): ℓ1 design "
        f"{l1.upper_bound:.3f} [lower {l1.lower_bound:.3f}], ℓ2 design {l2.upper_bound:.3f} "
        f"[lower {l2.lower_bound:.3f}]; intervals with mass > 1e-6: ℓ1 "
        f"{int((l1.weights > 1e-6).sum())}, ℓ2 {int((l2.weights > 1e-6).sum())}. "
        "See design_l1_l2.png.\n"
    )
    fig, ax = plt.subplots(figsize=(7, 3.5))
    l1.plot(ax, color="tab:red", label="ℓ1")
    l2.plot(ax, fill=False, color="tab:blue", label="ℓ2")
    ax.set_xlim(-25, 25)
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "design_l1_l2.png", dpi=110)
    plt.close(fig)
    return "\n".join(out)


_SPEED = """
import resource, time
from dpkit.design import _core, design_noise
from dpkit.design._losses import make_loss
from dpkit.design.noise_design import _problem
setting = dict(epsilon=1.0, delta={delta}, granularity={beta}, support={support}, loss="{loss}")
start = time.perf_counter()
d = design_noise(**setting, lower_bound=False)
design = time.perf_counter() - start
start = time.perf_counter()
d = design_noise(**setting)
both = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
grid = _core.check_grid(1.0, {delta}, 1.0, {beta}, {support}, "bench")
slacks = _problem(grid, make_loss("{loss}", "bench"), lower=False, symmetric=False,
                  monotone=False, owner="bench").slack_count()
print(d.weights.size, slacks, design, both, rss, d.upper_bound, d.lower_bound)
"""

#: (delta, granularity, support): ~1,000 and ~10,000 intervals at a moderate and a
#: small delta (the support must hold the tail: ~ln(1/delta) / epsilon at delta 1e-6).
_SPEED_CASES = [
    (0.1, 0.05, 25.0),
    (1e-6, 0.05, 25.0),
    (0.1, 0.05, 250.0),
    (1e-6, 0.05, 250.0),
    (0.1, 0.01, 50.0),
    (1e-6, 0.01, 50.0),
]


def speed() -> str:
    lines = [
        "ε = 1, Δf = 1. Seconds for the design alone (LP, exact re-check, repairs) and with "
        "the lower-bound LP too; each case in a fresh process (peak RSS covers both).\n",
        "| loss | δ | β | intervals | slacks of the full LP | design (s) | with lower bound (s) "
        "| peak RSS (MiB) | loss | lower bound |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for loss in ("l1", "l2"):
        for delta, beta, support in _SPEED_CASES:
            code = _SPEED.format(delta=delta, beta=beta, support=support, loss=loss)
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            size, slacks, design, both, rss, upper, lower = done.stdout.split()[-7:]
            lines.append(
                f"| {loss} | {delta:g} | {beta:g} | {size} | {slacks} | {float(design):.2f} "
                f"| {float(both):.2f} | {float(rss):.0f} | {float(upper):.4f} "
                f"| {float(lower):.4f} |"
            )
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    RESULTS.mkdir(exist_ok=True)
    timing = speed()
    print(timing, flush=True)
    examples = counterexamples()
    print(examples, flush=True)
    rows = comparison()
    comparison_plot(rows)
    text = (
        "# dpkit.design: optimal noise by LP (issue 18)\n\n"
        "Produced by `python benchmarks/design.py`. Losses are exact expectations "
        "(closed forms for the textbook noises; the designed noise's exact masses). "
        "Δf = 1 unless stated.\n\n"
        "## Speed (2-core machine)\n\n" + timing + "\n"
        "## Counterexamples (seed 003 appendix)\n\n" + examples + "\n"
        "## Comparison\n\n![comparison](design_comparison.png)\n\n" + comparison_table(rows)
    )
    (RESULTS / "design.md").write_text(text)


if __name__ == "__main__":
    main()
