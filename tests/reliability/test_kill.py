"""kill -9 of whole commands mid-run, at random moments after their first output (short form).

``benchmarks/kill_trials.py`` runs the same trials many times per command; see it for what
each trial checks. Every trial must land mid-run (a run that finished before the signal
is tried again with a shorter delay) and its rerun (``pack --resume``) must equal an
uninterrupted run. Here: one SIGKILL per command on a 720-frame clip (on shorter ones the
image unpack finished before the kill could land); ``slow``: every signal twice per
command, and two full disks. ``test_interrupt.py`` checks single trials in more detail.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest


@pytest.mark.slow  # 40 s: make test-slow (CI runs it after make test)
def test_kill_9_mid_run_leaves_an_output_that_resumes_or_reruns_equal(
    tmp_path: Path, benchmark_module
) -> None:
    kill_trials = benchmark_module("kill_trials")
    tallies = kill_trials.trials(
        kill_trials.COMMANDS, count=1, signals=(signal.SIGKILL,), seed=9, frames=720,
        root=tmp_path, log=False,
    )  # fmt: skip
    assert set(tallies) == set(kill_trials.COMMANDS)
    for command, tally in tallies.items():
        assert tally.failures == [], command
        assert tally.trials == tally.midway == tally.equal == 1, (command, tally)


@pytest.mark.slow
def test_every_signal_and_a_full_disk_mid_run(tmp_path: Path, benchmark_module) -> None:
    kill_trials = benchmark_module("kill_trials")
    tallies = kill_trials.trials(
        kill_trials.COMMANDS, count=8, enospc=2, seed=10, frames=240, root=tmp_path, log=False,
        budget=1800,
    )  # fmt: skip
    for command, tally in tallies.items():
        assert tally.failures == [], command
        assert tally.trials == tally.midway, (command, tally)
        assert tally.equal == tally.trials, (command, tally)
        if "ENOSPC" not in command:
            assert tally.trials == 8, (command, tally)
