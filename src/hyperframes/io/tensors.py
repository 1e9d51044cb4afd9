"""Batches as torch tensors for a loop of the user's (:class:`Tensors`), and the one place
torch is imported from (:func:`import_torch`: lazily, with the ``[gpu]`` extra).

Example:
    >>> Tensors(dtype="uint8").layout
    'NCHW'
"""

from __future__ import annotations

from dataclasses import dataclass
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
        if self.dtype != "uint8":
            top = float(np.iinfo(frames.dtype).max) if frames.dtype.kind in "ui" else 1.0
            x = x.to(getattr(torch, self.dtype), memory_format=torch.contiguous_format)
            x = x.div_(top)
        if self.pin_memory:
            if not torch.cuda.is_available():
                raise ValueError("pin_memory needs CUDA, which this torch does not have; drop it")
            x = x.pin_memory()
        if self.device != "cpu":
            x = x.to(self.device, non_blocking=self.pin_memory)
        return x
