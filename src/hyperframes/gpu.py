"""Map stages that run a torch function on the GPU (the ``[gpu]`` extra): :func:`torch_stage`.

On CUDA each engine worker thread keeps pinned host buffers and two CUDA streams of its
own: a batch is copied into pinned memory, uploaded on the copy stream, computed on the
compute stream, and downloaded on the copy stream again, all asynchronously. With two or
more workers one batch uploads while another computes, so decoding, copies and compute
overlap. Without CUDA the same function runs on the CPU over the batch, no copy in.

torch is imported lazily (:func:`~hyperframes.io.tensors.import_torch`, which a loop's
tensors use too).

Example:
    >>> def invert(x):  # doctest: +SKIP
    ...     return 1.0 - x
    >>> pipeline.map(torch_stage(invert), workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from .io.tensors import Layout, import_torch

Input = Literal["float32", "uint8"]
Returns = Literal["frames", "answers"]


class TorchStage:
    """A map-stage function that runs ``fn`` on torch tensors (see :func:`torch_stage`)."""

    def __init__(
        self,
        fn: Callable[[Any], Any],
        *,
        device: str | None,
        layout: Layout,
        input: Input,
        returns: Returns = "frames",
    ) -> None:
        if layout not in ("NHWC", "NCHW"):
            raise ValueError(f"layout must be 'NHWC' or 'NCHW', got {layout!r}")
        if input not in ("float32", "uint8"):
            raise ValueError(f"input must be 'float32' or 'uint8', got {input!r}")
        if returns not in ("frames", "answers"):
            raise ValueError(f"returns must be 'frames' or 'answers', got {returns!r}")
        self.fn, self.device, self.layout, self.input = fn, device, layout, input
        self.returns = returns
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_local"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        torch = import_torch()
        device = torch.device(self.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        with torch.inference_mode():
            if self.returns == "answers":  # as fn gives them, on the host
                x = torch.from_numpy(frames).to(device, non_blocking=device.type == "cuda")
                answers: np.ndarray = self.fn(self._prepare(torch, x)).detach().cpu().numpy()
                return answers
            if device.type == "cuda":
                result, owned = self._on_cuda(torch, device, frames), False
            else:
                y = self.fn(self._prepare(torch, torch.from_numpy(frames)))
                result, owned = self._result(torch, y, frames).numpy(), True
        if result.shape == frames.shape and result.dtype == frames.dtype:
            np.copyto(frames, result)  # lands in the pool slot: no further copy by the engine
            return frames
        return result if owned else result.copy()

    def _prepare(self, torch: Any, x: Any) -> Any:
        """uint8 NHWC frames as the tensor ``fn`` expects."""
        if self.input == "float32":
            x = x.float().div_(255) if x.dtype == torch.uint8 else x.float()
        if self.layout == "NCHW" and x.ndim == 4:
            x = x.permute(0, 3, 1, 2)
        return x

    def _result(self, torch: Any, y: Any, frames: np.ndarray) -> Any:
        """``fn``'s tensor back in NHWC, and in uint8 when the frames were uint8.

        Raises:
            ValueError: ``fn`` did not return a batch of frames (an answer per frame, say).
        """
        if y.ndim < 3 or y.shape[0] != len(frames):  # frames: (N, H, W) or (N, H, W, C)
            name = self.__name__
            raise ValueError(
                f"torch_stage({name}) makes frames, and {name} returned a tensor of shape "
                f"{tuple(y.shape)}, not {len(frames)} frames; for an answer per frame "
                f"(logits, boxes) pass returns='answers' and map(..., into='a name')"
            )
        if self.layout == "NCHW" and y.ndim == 4:
            y = y.permute(0, 2, 3, 1)
        if frames.dtype == np.uint8 and y.is_floating_point():
            scale = 255 if self.input == "float32" else 1
            y = y.mul(scale).round_().clamp_(0, 255).to(torch.uint8)
        return y.contiguous()

    def _on_cuda(self, torch: Any, device: Any, frames: np.ndarray) -> np.ndarray:
        state = self._state(torch, device, frames)
        staged = state["host_in"][: len(frames)]
        staged.copy_(torch.from_numpy(frames))
        with torch.cuda.stream(state["copy"]):
            on_device = staged.to(device, non_blocking=True)
            uploaded = torch.cuda.Event()
            uploaded.record()
        with torch.cuda.stream(state["compute"]):
            state["compute"].wait_event(uploaded)
            y = self._result(torch, self.fn(self._prepare(torch, on_device)), frames)
            computed = torch.cuda.Event()
            computed.record()
        with torch.cuda.stream(state["copy"]):
            state["copy"].wait_event(computed)
            out = state.get("host_out")
            if out is None or out.shape != y.shape or out.dtype != y.dtype:
                out = state["host_out"] = torch.empty(y.shape, dtype=y.dtype, pin_memory=True)
            out.copy_(y, non_blocking=True)
            downloaded = torch.cuda.Event()
            downloaded.record()
        y.record_stream(state["copy"])
        downloaded.synchronize()
        result: np.ndarray = out.numpy()
        return result

    def _state(self, torch: Any, device: Any, frames: np.ndarray) -> dict[str, Any]:
        state: dict[str, Any] | None = getattr(self._local, "state", None)
        host_in = None if state is None else state["host_in"]
        if state is None or host_in is None or len(host_in) < len(frames):
            state = {
                "host_in": torch.from_numpy(np.empty_like(frames)).pin_memory(),
                "copy": torch.cuda.Stream(device),
                "compute": torch.cuda.Stream(device),
            }
            self._local.state = state
        return state

    def __repr__(self) -> str:
        return f"torch_stage({self.__name__}, device={self.device!r}, layout={self.layout!r})"


def torch_stage(
    fn: Callable[[Any], Any],
    *,
    device: str | None = None,
    layout: Layout = "NCHW",
    input: Input = "float32",
    returns: Returns = "frames",
) -> TorchStage:
    """Turn ``fn(tensor) -> tensor`` into a map-stage function over batches of frames.

    Args:
        fn: takes a ``(N, C, H, W)`` (or ``(N, H, W, C)``) tensor on ``device`` and returns
            one with the same batch size, in the same layout.
        device: ``"cuda"``, ``"cuda:1"``, ``"cpu"``; by default CUDA when available.
        layout: the layout ``fn`` takes and returns: ``"NCHW"`` (torch models) or
            ``"NHWC"`` (the frames' own).
        input: ``"float32"`` gives ``fn`` uint8 frames as floats in 0..1 (and turns a float
            result in 0..1 back into uint8 frames); ``"uint8"`` gives them as they are (a
            float result is then rounded and clamped to 0..255).
        returns: ``"frames"``: ``fn`` returns a batch of frames (anything else is refused
            in one line); ``"answers"``: one answer per frame (logits, embeddings), handed
            on as ``fn`` gives them, as a numpy array, for ``map(..., into="name")``.

    Returns:
        A callable for ``Pipeline.map``; results of the input's shape and dtype are
        written back into the batch (in place).

    Note:
        Use ``workers=2`` or more on the stage so one batch's copies overlap another's
        compute; each worker thread has its own pinned buffers and streams.
    """
    if not callable(fn):
        raise TypeError(f"torch_stage needs a callable, got {type(fn).__name__}")
    return TorchStage(fn, device=device, layout=layout, input=input, returns=returns)
