"""Computing some rows of a batch: the part that reuse strategies share.

A strategy decides which frames of a batch to compute; :class:`RowComputer` copies those
rows into scratch slots and calls the stage function on them, ``split`` chunks at once on
threads of its own, so a costly function still uses every core while the strategy keeps
its state on one thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ...frames import Batch, FramePool


class RowComputer:
    """Computes chosen rows of batches, ``split`` chunks at once.

    Args:
        stage: the stage's name (thread names, slot holders).
        split: chunks computed at once.
    """

    def __init__(self, *, stage: str, split: int = 1) -> None:
        self.stage = stage
        self.split = split
        self._scratch: FramePool | None = None
        self._given: FramePool | None = None
        self._threads: ThreadPoolExecutor | None = None

    def use(self, pool: FramePool) -> None:
        """Copy rows into slots of ``pool`` (the scratch the run's plan made for the
        stage), where its frames are those the batches hold."""
        self._given = pool

    def compute(
        self, batch: Batch, rows: list[int], compute: Callable[[Batch], Any]
    ) -> dict[int, Any]:
        """Results of the given rows of ``batch``, by row; rows that failed for good (dead
        letters of ``compute``) are absent."""
        return self.compute_many([(batch, rows)], compute)[0]

    def compute_many(
        self, parts: list[tuple[Batch, list[int]]], compute: Callable[[Batch], Any]
    ) -> list[dict[int, Any]]:
        """Results of rows of several batches (one dict by row for each part), computed
        together: ``split`` chunks at once whichever batches the rows come from."""
        return self.start(parts, compute, inline=True)()

    def start(
        self,
        parts: list[tuple[Batch, list[int]]],
        compute: Callable[[Batch], Any],
        *,
        inline: bool = False,
    ) -> Callable[[], list[dict[int, Any]]]:
        """Start computing rows of several batches on the threads (``split`` chunks at
        once, whatever else is computing); a function that waits for the results (what
        :meth:`compute_many` returns) and raises what the function raised. ``inline``:
        a single chunk is computed now, on this thread."""
        items = [(k, row) for k, (_, rows) in enumerate(parts) for row in rows]
        if not items:
            return lambda: [{} for _ in parts]
        if self._scratch is None:
            pool, given = parts[0][0].pool, self._given
            fits = given is not None and given.spec == pool.spec
            if fits and given is not None and given.batch_size >= pool.batch_size:
                self._scratch = given
            else:  # frames the plan did not foresee
                self._scratch = FramePool(
                    pool.spec, batch_size=pool.batch_size, slots=self.split, name="reuse"
                )
        size = min(-(-len(items) // self.split), self._scratch.batch_size)
        chunks = [items[k : k + size] for k in range(0, len(items), size)]
        if inline and len(chunks) == 1:
            done = [self._chunk(parts, chunks[0], compute)]
            waits = [lambda: done[0]]
        else:
            if self._threads is None:
                name = f"hf-{self.stage}"
                self._threads = ThreadPoolExecutor(self.split, thread_name_prefix=name)
            threads = self._threads
            waits = [threads.submit(self._chunk, parts, c, compute).result for c in chunks]

        def results() -> list[dict[int, Any]]:
            out: list[dict[int, Any]] = [{} for _ in parts]
            for wait in waits:
                for (k, row), value in wait().items():
                    out[k][row] = value
            return out

        return results

    def _chunk(
        self,
        parts: list[tuple[Batch, list[int]]],
        items: list[tuple[int, int]],
        compute: Callable[[Batch], Any],
    ) -> dict[tuple[int, int], Any]:
        assert self._scratch is not None
        first = parts[items[0][0]][0]
        index = np.array([parts[k][0].index[row] for k, row in items], dtype=first.index.dtype)
        meta = {
            key: np.concatenate([parts[k][0].meta[key][row : row + 1] for k, row in items])
            for key in first.meta
        }
        slot = self._scratch.acquire(holder=self.stage)
        try:
            sub = Batch(first.seq, index, self._scratch, slot, meta)
            for j, (k, row) in enumerate(items):
                sub.frames[j] = parts[k][0].frames[row]
            out = compute(sub)
            # copies: a function that works in place returns views of the scratch slot
            by_id = {
                int(i): r.copy() if isinstance(r, np.ndarray) else r
                for i, r in zip(sub.index.tolist(), list(out), strict=True)
            }
        finally:
            self._scratch.release(slot)
        return {(k, row): by_id[int(i)] for (k, row), i in zip(items, index.tolist(), strict=True)
                if int(i) in by_id}  # fmt: skip

    def close(self) -> None:
        """Stop the threads (called at the end of a run)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None


ANSWER_OF = "answer_of"
"""The meta key a reuse strategy fills: for each frame, the index of the frame whose computed
answer it carries (its own index when it was computed)."""


def assemble(
    batch: Batch, values: dict[int, Any], *, frames_out: bool, origins: dict[int, int]
) -> Any:
    """The results of ``batch`` in row order from ``values`` (row -> result); rows without
    one failed for good and are dropped from the batch. Frames out are stacked into one
    array; per-frame values stay a list, whatever their shapes (boxes differ per frame).
    ``origins`` (row -> frame index) goes into ``batch.meta[ANSWER_OF]``."""
    batch.meta[ANSWER_OF] = np.array(
        [origins.get(j, -1) for j in range(batch.count)], dtype=np.int64
    )
    keep = [j for j in range(batch.count) if j in values]
    batch.keep(keep)
    out = [values[j] for j in keep]
    if not frames_out:
        return out
    return np.stack([np.asarray(v) for v in out]) if out else batch.frames
