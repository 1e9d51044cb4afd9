"""Frames a stage with an accuracy target computes while it goes on taking batches.

``hyper.reuse.target`` starts what each batch's arrival calls for as one *wave* (its
planned frames, the frames refining asks for, the next verification samples) on the
threads of ``_rows``, and waits for every wave at once when the policy decides again:
what it decides depends on the answers only, never on which call ended first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ...frames import Batch
from ._held import HeldBatches
from ._rows import RowComputer
from .policy import Sample


class Wave(NamedTuple):
    """Frames computing on the threads, and what they were started for."""

    answers: Callable[[], dict[int, Any]]  # waits for them
    frames: list[int]
    planned: list[int]
    samples: dict[int, Sample]


class Waves:
    """The waves started and not yet waited for (not thread-safe: the stage's one thread
    uses it)."""

    def __init__(self) -> None:
        self.started: list[Wave] = []

    def start(
        self,
        held: HeldBatches,
        rows: RowComputer,
        compute: Callable[[Batch], Any],
        *,
        planned: Sequence[int],
        refined: Sequence[int],
        samples: dict[int, Sample],
    ) -> int:
        """Start computing frames of the batches ``held`` as one wave; how many."""
        frames = [*planned, *refined, *samples]
        if frames:
            answers = held.start(frames, rows, compute)
            self.started.append(Wave(answers, frames, list(planned), samples))
        return len(frames)

    def wait(self) -> tuple[dict[int, Any], list[int], list[int], list[tuple[Sample, Any]]]:
        """Wait for every wave started: the answers by position (the samples' too; a frame
        that failed for good has none), the frames computed, those planned, and each
        sample computed with its answer. Raises what the function raised."""
        answers: dict[int, Any] = {}
        frames: list[int] = []
        planned: list[int] = []
        samples: list[tuple[Sample, Any]] = []
        waves, self.started = self.started, []
        for wave in waves:
            got = wave.answers()
            frames += wave.frames
            answers.update(got)
            planned += wave.planned
            samples += [(s, got[i]) for i, s in wave.samples.items() if i in got]
        return answers, frames, planned, samples

    def __bool__(self) -> bool:
        return bool(self.started)
