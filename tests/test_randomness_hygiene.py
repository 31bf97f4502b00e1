"""Noise is drawn only through dpkit.noise: no NumPy or stdlib float samplers in src/.

DESIGN.md: "Noise is drawn only through dpkit.noise, never by calling NumPy's float
samplers inside mechanisms." A textbook ``x + rng.laplace(b)`` is exactly the
floating-point leak (Mironov 2012) that dpkit's samplers exist to avoid, so this test
fails as soon as one appears anywhere in the library.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import dpkit

SOURCE = Path(dpkit.__file__).parent
# dpkit/random.py turns NumPy seeds into dpkit generators and never samples with them.
ALLOWED = {SOURCE / "random.py"}
# Post-processing, not noise: drawing synthetic rows (and values inside a bin) from a
# model fitted to released measurements, with dpkit.random.post_processing_generator.
ALLOWED |= {SOURCE / "synth" / "_sampling.py", SOURCE / "synth" / "_columns.py"}
SAMPLER_CALL = re.compile(
    r"\b(\w+)\.(laplace|normal|standard_normal|exponential|gumbel|uniform|random)\("
)
# Owners whose method of a sampler's name is not a sampler: Candidate.uniform(...) is
# LT19's candidate drawn uniformly from a set (dpkit.selection), not float noise.
DPKIT_OWNERS = {"noise", "dp", "dpkit", "_exact", "Candidate"}
FORBIDDEN = [
    re.compile(r"\bnp\.random\.(?!SeedSequence\b|Generator\b)"),
    re.compile(r"\bnumpy\.random\.(?!SeedSequence\b|Generator\b)"),
    re.compile(r"^\s*import random\b|^\s*from random import", re.MULTILINE),
    re.compile(r"\bdefault_rng\("),
]


def code_only(text: str) -> str:
    """The source with strings and comments blanked out (docstrings cite the leak)."""
    lines = text.splitlines(keepends=True)
    kept = [list(line) for line in lines]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            (row0, col0), (row1, col1) = token.start, token.end
            for row in range(row0, row1 + 1):
                line = kept[row - 1]
                start = col0 if row == row0 else 0
                stop = col1 if row == row1 else len(line) - 1
                for col in range(start, max(start, stop)):
                    if line[col] != "\n":
                        line[col] = " "
    return "".join("".join(line) for line in kept)


def offences(text: str) -> list[str]:
    code = code_only(text)
    found = [m.group(0) for pattern in FORBIDDEN for m in pattern.finditer(code)]
    found += [m.group(0) for m in SAMPLER_CALL.finditer(code) if m.group(1) not in DPKIT_OWNERS]
    return found


def test_no_float_noise_outside_dpkit_noise() -> None:
    offenders = [
        f"{path.relative_to(SOURCE)}: {offence}"
        for path in sorted(SOURCE.rglob("*.py"))
        if path not in ALLOWED
        for offence in offences(path.read_text())
    ]
    assert not offenders, "float noise outside dpkit.noise:\n" + "\n".join(offenders)


def test_the_hygiene_check_catches_a_textbook_laplace() -> None:
    assert offences("value = x + rng.laplace(scale)\n")
    assert offences("value = x + np.random.laplace(scale)\n")
    assert offences("import random\n")
    assert not offences('"""x + rng.laplace(b) leaks."""\nvalue = noise.laplace(x, scale=b)\n')
