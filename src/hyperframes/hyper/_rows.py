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

from ..frames import Batch, FramePool


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
        self._threads: ThreadPoolExecutor | None = None

    def compute(
        self, batch: Batch, rows: list[int], compute: Callable[[Batch], Any]
    ) -> dict[int, Any]:
        """Results of the given rows of ``batch``, by row; rows that failed for good (dead
        letters of ``compute``) are absent."""
        if not rows:
            return {}
        if self._scratch is None:
            pool = batch.pool
            self._scratch = FramePool(
                pool.spec, batch_size=pool.batch_size, slots=self.split, name="reuse"
            )
        size = -(-len(rows) // self.split)
        chunks = [rows[k : k + size] for k in range(0, len(rows), size)]
        if len(chunks) == 1:
            return self._chunk(batch, chunks[0], compute)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.split, thread_name_prefix=f"hf-{self.stage}")
        out: dict[int, Any] = {}
        for part in self._threads.map(lambda c: self._chunk(batch, c, compute), chunks):
            out.update(part)
        return out

    def _chunk(
        self, batch: Batch, rows: list[int], compute: Callable[[Batch], Any]
    ) -> dict[int, Any]:
        assert self._scratch is not None
        slot = self._scratch.acquire(holder=self.stage)
        try:
            sub = Batch(
                batch.seq,
                batch.index[rows],
                self._scratch,
                slot,
                {k: v[rows] for k, v in batch.meta.items()},
            )
            sub.frames[:] = batch.frames[rows]
            out = compute(sub)
            # copies: a function that works in place returns views of the scratch slot
            by_id = {
                int(i): r.copy() if isinstance(r, np.ndarray) else r
                for i, r in zip(sub.index.tolist(), list(out), strict=True)
            }
        finally:
            self._scratch.release(slot)
        return {j: by_id[int(batch.index[j])] for j in rows if int(batch.index[j]) in by_id}

    def close(self) -> None:
        """Stop the threads (called at the end of a run)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None


def assemble(batch: Batch, values: dict[int, Any], *, frames_out: bool) -> Any:
    """The results of ``batch`` in row order from ``values`` (row -> result); rows without
    one failed for good and are dropped from the batch. Frames out are stacked into one
    array; per-frame values stay a list, whatever their shapes (boxes differ per frame)."""
    keep = [j for j in range(batch.count) if j in values]
    batch.keep(keep)
    out = [values[j] for j in keep]
    if not frames_out:
        return out
    return np.stack([np.asarray(v) for v in out]) if out else batch.frames
