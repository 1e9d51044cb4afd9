"""kill -9 of ``pack``, ``transcode`` and ``render`` at random moments (short form).

``benchmarks/kill_trials.py`` runs the same trials at 20+ moments per command; see it for
what each trial checks. Here: three moments per command on a 60-frame clip.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest


@pytest.mark.parametrize("command", ["pack", "transcode", "render"])
def test_kill_at_random_moments_leaves_nothing_or_a_resumable_result(
    command: str, tmp_path: Path, benchmark_module
) -> None:
    kill_trials = benchmark_module("kill_trials")
    seed = zlib.crc32(command.encode())
    tallies = kill_trials.trials(
        (command,), count=3, budget=120, seed=seed, frames=60, root=tmp_path, log=False
    )
    tally = tallies[command]
    assert tally.failures == []
    assert tally.trials == 3
