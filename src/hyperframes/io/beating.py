"""Many inputs read with a pulse that a watcher in another process can see (:mod:`.pulse`):
the file timeout of a job over many inputs spread over processes (``map INPUTS
--executor processes``). :class:`BeatingFiles` is a :class:`~.video_files.VideoFiles`
that tells its reads in a beat, and which input of the job each is at; the process reads
its own files, with no reader process between it and them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import Chunk, Footprint
from .file_reader import header_footprint
from .pulse import BEGUN, BUSY, POSITION
from .video_files import VideoFiles


class BeatingFiles(VideoFiles):
    """:class:`~.video_files.VideoFiles` whose reads are told in ``beat`` (``None``: not
    told): ``positions`` are the inputs' positions in the job (what ``beat`` says), and
    ``fault_after`` the count of failed first inputs that stops the run (``None``: a
    run not at the job's start, where the failed inputs are not the job's first; see
    :data:`~.video_files.FAULT_AFTER`)."""

    def __init__(
        self, inputs: list[Any], *, positions: list[int], beat: np.ndarray | None,
        fault_after: int | None, **options: Any,
    ) -> None:  # fmt: skip
        self._beat, self._positions, self._depth = beat, positions, 0
        with self._busy():
            super().__init__(inputs, **options)
        self._fault_after = fault_after

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        beat = self._beat
        if beat is not None:
            self._depth += 1
            beat[BUSY] = 1
        try:
            yield
        finally:
            if beat is not None:
                self._depth -= 1
                if not self._depth:
                    beat[BUSY] = 0

    def _at_input(self, k: int) -> None:
        if self._beat is not None:
            self._beat[POSITION] = self._positions[k]
            self._beat[BEGUN] += 1

    def _headers(self, later: list[int]) -> list[Footprint]:
        """One header after the other, each told (the process has a core of its own)."""
        size, pix_fmt = self._options["size"], self._options["pix_fmt"]
        found = []
        for k in later:
            with self._busy():
                self._at_input(k)
                found.append(header_footprint(self.inputs[k], size=size, pix_fmt=pix_fmt))
        return found

    def read_into(self, out: np.ndarray) -> Chunk:
        if self._beat is not None:
            self._beat[BEGUN] += 1
        with self._busy():
            return super().read_into(out)
