"""The API reference (docs/api) builds from the docstrings with every warning an error
and every cross-reference resolved (``sphinx-build -W -n``).

Sphinx is in the ``docs`` extra; where it is not installed the test is skipped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_builds_without_a_warning(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-n",
            "-q",
            "-b",
            "html",
            str(ROOT / "docs" / "api"),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    assert (tmp_path / "html" / "index.html").exists()
