"""Batches as torch tensors for a loop of the user's (:class:`Tensors`), and the one place
torch is imported from (:func:`import_torch`: lazily, with the ``[gpu]`` extra).

Example:
    >>> Tensors(dtype="uint8").layout
    'NCHW'
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

INSTALL = "pip install 'hyperframes-engine[gpu]'"

Layout = Literal["NHWC", "NCHW"]
DTYPES = ("uint8", "float32", "float16", "bfloat16")
"""The dtypes :class:`Tensors` gives: ``uint8`` as the frames are, a float type scaled to
0..1."""


def import_torch() -> Any:
    """The ``torch`` module, or an ImportError that says how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"this needs torch ({exc}); install it with: {INSTALL}") from exc
    return torch


@dataclass(frozen=True)
class Tensors:
    """Batches as torch tensors, for ``Pipeline.iter_batches(tensors=Tensors(...))``.

    Args:
        layout: ``"NCHW"`` (torch models) or ``"NHWC"`` (the frames' own).
        dtype: ``"uint8"``: the frames' values, no copy (a view of the batch, which the
            loop then owns as it owns the array); ``"float32"``, ``"float16"`` or
            ``"bfloat16"``: scaled to 0..1, one copy, contiguous in ``layout``.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
        pin_memory: copy through pinned memory, so the copy to a CUDA ``device`` does not
            block the loop (it overlaps the loop's work on the batch before).

    Example:
        >>> for ids, x in pipeline.iter_batches(tensors=Tensors(device="cuda")):  # doctest: +SKIP
        ...     logits = model(x)
    """

    layout: Layout = "NCHW"
    dtype: str = "float32"
    device: str = "cpu"
    pin_memory: bool = False
    _made: _Made = field(default_factory=lambda: _Made(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.layout not in ("NHWC", "NCHW"):
            raise ValueError(f"layout must be 'NHWC' or 'NCHW', got {self.layout!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    @property
    def views(self) -> bool:
        """Whether its tensors are views of the batch (``uint8`` on the CPU, not pinned):
        the loop then holds the batch's slot as long as it keeps them; else it is given
        tensors of its own and the slot goes back as soon as they are made."""
        return self.dtype == "uint8" and self.device == "cpu" and not self.pin_memory

    def of(self, frames: np.ndarray) -> Any:
        """The tensor of a batch of ``frames`` (``(N, H, W, C)``)."""
        torch = import_torch()
        x = torch.from_numpy(frames)  # no copy: the tensor keeps the batch
        if self.layout == "NCHW" and x.ndim == 4:
            x = x.permute(0, 3, 1, 2)
        return self._finished(torch, x)

    def __call__(self, batch: Any) -> Any:
        """``batch`` as these tensors: a numpy batch ``(N, H, W, C)`` as :meth:`of` takes
        it, or a torch tensor already in ``layout``, such as the frames of a
        :class:`~hyperframes.io.dataset.VideoDataset`'s batch from a ``DataLoader``
        (channels first), made float in a tensor reused as :meth:`of` reuses them.

        Example:
            >>> to_float = Tensors()  # doctest: +SKIP
            >>> for batch in DataLoader(dataset, batch_size=None, num_workers=2):  # doctest: +SKIP
            ...     x = to_float(batch["frames"])
        """
        if isinstance(batch, np.ndarray):
            return self.of(batch)
        return self._finished(import_torch(), batch)

    def _finished(self, torch: Any, x: Any) -> Any:
        """``x`` in this dtype (scaled to 0..1 where it is float), then pinned and moved."""
        if self.dtype != "uint8":  # (always a copy: the loop owns it, not the batch's slot)
            top = 1.0 if x.is_floating_point() else float(torch.iinfo(x.dtype).max)
            out = self._made.take(torch, tuple(x.shape), getattr(torch, self.dtype))
            x = out.copy_(x).div_(top)[:]  # (a view: the loop's hold on it is counted)
        if self.pin_memory:
            if not torch.cuda.is_available():
                raise ValueError("pin_memory needs CUDA, which this torch does not have; drop it")
            x = x.pin_memory()
        if self.device != "cpu":
            x = x.to(self.device, non_blocking=self.pin_memory)
        return x


class _Made:
    """The float tensors :meth:`Tensors.of` made, taken again for a later batch of the same
    shape once nothing outside holds them: no tensor, view or array of the loop's refers
    to their memory any more (the count torch keeps of its users says so). A loop that
    keeps its batches gets new ones; one that lets each go reuses a few, and is spared
    the page faults of a fresh block of memory a batch (4.2 of 4.9 ms a 1080p frame's
    conversion, measured). Where torch does not tell the count, each batch is new."""

    MOST = 4  # tensors kept for reuse

    def __init__(self) -> None:
        self._tensors: list[Any] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Made, ())  # (a copy elsewhere starts with none)

    def take(self, torch: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        users = getattr(torch._C, "_storage_Use_Count", None)
        if users is None:
            return torch.empty(shape, dtype=dtype)
        with self._lock:  # 2 users of a free one: the tensor here, and the count's own
            free = [m for m in self._tensors if users(m.untyped_storage()._cdata) == 2]
            for made in free:
                if made.shape == shape and made.dtype == dtype:
                    return made
            let_go = {id(m) for m in free}  # (of another shape: their memory goes back first)
            self._tensors = [m for m in self._tensors if id(m) not in let_go]
            made = torch.empty(shape, dtype=dtype)
            self._tensors = [*self._tensors, made][-self.MOST :]
            return made
