"""Frames a stage with an accuracy target computes while it goes on taking batches.

``hyper.reuse.target`` starts what each batch's arrival calls for as one *wave* (its planned
frames, the frames refining asks for, the next verification samples) on the threads of
``hyper.reuse._rows``, and waits for every wave at once when it decides again: what it decides
depends on the answers only, never on which call ended first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ...frames import Batch
from ._held import HeldFrames
from ._rows import RowComputer


class Sample(NamedTuple):
    """A shared frame chosen for verification."""

    weight: float  # in the estimate: the inverse of its odds of being chosen, times RATE
    shared: Any  # the answer it would have shared
    guess: float  # the share of its stretch that hidden() guessed wrong


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
        self.flying: set[int] = set()  # frames computing, by position

    def start(
        self,
        held: HeldFrames,
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
            self.flying.update(frames)
        return len(frames)

    def wait(self) -> tuple[dict[int, Any], list[int], list[tuple[Sample, Any]]]:
        """Wait for every wave started: the answers by position (the samples' too; a frame
        that failed for good has none), the frames planned, and each sample computed with
        its answer. Raises what the function raised."""
        answers: dict[int, Any] = {}
        planned: list[int] = []
        samples: list[tuple[Sample, Any]] = []
        waves, self.started = self.started, []
        for wave in waves:
            got = wave.answers()
            self.flying.difference_update(wave.frames)
            answers.update(got)
            planned += wave.planned
            samples += [(s, got[i]) for i, s in wave.samples.items() if i in got]
        return answers, planned, samples

    def __bool__(self) -> bool:
        return bool(self.started)
