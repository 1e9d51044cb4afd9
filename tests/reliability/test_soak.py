"""Soak (short form of ``benchmarks/soak.py``): flat RSS, no fd, thread or /dev/shm growth."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_fifty_thousand_frames_through_three_stages_with_flat_resources(benchmark_module):
    soak = benchmark_module("soak")
    result = soak.soak(50_000, batch_size=64, workers=2, executor="threads", log=False)
    assert result["frames"] == 50_000 and result["checked_frames"] > 0
    failed = [what for what, ok in result["held"].items() if not ok]
    assert failed == [], (failed, result["rss_growth"], result["before"], result["after"])


@pytest.mark.slow
def test_soak_with_process_workers():
    """As a script, so that the worker processes can import its stage functions."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "soak.py"
    done = subprocess.run(
        [sys.executable, str(script), "--frames", "100000", "--executor", "processes"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "NOT HELD" not in done.stdout
