"""How two answers of a stage function compare: a score in [0, 1] (1 = the same answer).

Accuracy-targeted reuse (``map(fn, reuse=ReuseTarget(0.95, agree=...))``) measures the answers it
shares against answers it computes anyway with one of these:

* ``"equal"``: 1 when the two values are equal (arrays element-wise), else 0.
* ``"count"``: 1 when the two hold as many items (boxes, labels), else 0.
* ``"boxes"``: the F1 score of two sets of boxes, each an ``(N, 4+)`` array or a sequence of
  ``(x0, y0, x1, y1, ...)``; a box matches at IoU >= 0.5 (``"boxes:0.7"`` for another IoU),
  greedily by IoU; two empty sets agree (1.0). Extra columns (scores, classes) are ignored.
* ``"psnr"``: for frames out, 1 when the PSNR of the two (pixels normalised to 0..1) is at
  least 40 dB (``"psnr:35"`` for another threshold), else 0.
* any callable ``(a, b) -> float`` in [0, 1].

Example:
    >>> f1 = agreement("boxes")
    >>> f1([(0, 0, 10, 10)], [(1, 0, 11, 10), (50, 50, 60, 60)])
    0.6666666666666666
    >>> agreement("count")([1, 2], [3, 4]), agreement("equal")(3, 4)
    (1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Agreement = Callable[[Any, Any], float]
KINDS = ("equal", "count", "boxes", "psnr")


def agreement(agree: str | Agreement | None, *, frames: bool = False) -> Agreement:
    """The agreement function that ``agree`` names (see the module docstring).

    Args:
        agree: a kind (``"boxes:0.7"`` and ``"psnr:35"`` carry a parameter), a callable, or
            ``None`` for the default: ``"psnr"`` when the stage returns frames, else
            ``"equal"``.
        frames: whether the stage returns frames (not per-frame values).

    Raises:
        ValueError: an unknown kind or a parameter out of range.
        TypeError: neither a string nor a callable.
    """
    if agree is None:
        agree = "psnr" if frames else "equal"
    if callable(agree):
        return InRange(agree)
    if not isinstance(agree, str):
        raise TypeError(f"agree must be one of {KINDS} or a callable, got {type(agree).__name__}")
    kind, _, arg = agree.partition(":")
    if kind not in KINDS or (arg and kind not in ("boxes", "psnr")):
        raise ValueError(
            f"agree must be one of {', '.join(KINDS)} (boxes:IOU and psnr:DB take a value) "
            f"or a callable (a, b) -> float in [0, 1], got {agree!r}; try 'boxes' for detections"
        )
    if kind == "equal":
        return equal
    if kind == "count":
        return count
    try:
        value = float(arg) if arg else (0.5 if kind == "boxes" else 40.0)
    except ValueError:
        raise ValueError(f"agree={agree!r}: {arg!r} is not a number; try '{kind}'") from None
    if kind == "boxes":
        if not 0 < value <= 1:
            raise ValueError(f"agree={agree!r}: the IoU must be in (0, 1], e.g. 'boxes:0.5'")
        return BoxF1(value)
    if not 0 < value <= 200:
        raise ValueError(f"agree={agree!r}: the PSNR must be in (0, 200] dB, e.g. 'psnr:40'")
    return PsnrAtLeast(value)


class InRange:
    """A user's agreement function, its scores checked: a float in [0, 1] or a ValueError."""

    def __init__(self, agree: Agreement) -> None:
        self.agree = agree

    def __call__(self, a: Any, b: Any) -> float:
        score = float(self.agree(a, b))
        if not 0 <= score <= 1:
            raise ValueError(f"agree= returned {score}; an agreement must be in [0, 1]")
        return score


def equal(a: Any, b: Any) -> float:
    """1.0 when ``a`` and ``b`` are equal (arrays: same shape and elements), else 0.0."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return float(np.array_equal(np.asarray(a), np.asarray(b)))
    try:
        same = a == b
        return float(bool(same))
    except Exception:  # values whose == is ambiguous (e.g. lists of arrays)
        return float(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))


def count(a: Any, b: Any) -> float:
    """1.0 when ``a`` and ``b`` hold as many items (numbers compare as counts), else 0.0."""
    return float(_count_of(a) == _count_of(b))


def _count_of(value: Any) -> int:
    if isinstance(value, int | np.integer):
        return int(value)
    return len(value)


class BoxF1:
    """F1 of two sets of boxes matched greedily at IoU >= ``iou`` (both empty: 1.0)."""

    def __init__(self, iou: float = 0.5) -> None:
        self.iou = iou

    def __call__(self, a: Any, b: Any) -> float:
        x, y = boxes_of(a), boxes_of(b)
        if not len(x) and not len(y):
            return 1.0
        if not len(x) or not len(y):
            return 0.0
        overlap = iou_matrix(x, y)
        matched = 0
        while overlap.size:
            i, j = np.unravel_index(int(np.argmax(overlap)), overlap.shape)
            if overlap[i, j] < self.iou:
                break
            matched += 1
            overlap[i, :] = -1.0
            overlap[:, j] = -1.0
        return 2 * matched / (len(x) + len(y))

    def __repr__(self) -> str:
        return f"boxes:{self.iou:g}"


def boxes_of(value: Any) -> np.ndarray:
    """``value`` as an ``(N, 4)`` float array of ``(x0, y0, x1, y1)`` (extra columns dropped).

    Raises:
        ValueError: the value is not a set of boxes.
    """
    arr = np.asarray(value, dtype=np.float64)
    if arr.size == 0:
        return np.zeros((0, 4))
    if arr.ndim != 2 or arr.shape[1] < 4:
        raise ValueError(
            f"agree='boxes' needs per-frame (N, 4) boxes (x0, y0, x1, y1, ...), got an array "
            f"of shape {arr.shape}; use agree='equal' or a callable for other values"
        )
    return arr[:, :4]


def iou_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Intersection over union of every box of ``x`` with every box of ``y``."""
    lo = np.maximum(x[:, None, :2], y[None, :, :2])
    hi = np.minimum(x[:, None, 2:], y[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(axis=2)
    area_x = np.clip(x[:, 2:] - x[:, :2], 0, None).prod(axis=1)
    area_y = np.clip(y[:, 2:] - y[:, :2], 0, None).prod(axis=1)
    union = area_x[:, None] + area_y[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


class PsnrAtLeast:
    """1.0 when two frames (or batches of them) are within ``db`` dB PSNR, else 0.0."""

    def __init__(self, db: float = 40.0) -> None:
        self.db = db
        self._bound = 10 ** (-db / 10)

    def __call__(self, a: Any, b: Any) -> float:
        from ..distance import frame_mse

        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape or x.dtype != y.dtype:
            return 0.0
        return float(frame_mse(x, y) <= self._bound)

    def __repr__(self) -> str:
        return f"psnr:{self.db:g}"
