"""The choices a map stage takes, as objects: how it shares answers between similar
frames (:class:`ReuseByHyperframe`, :class:`ReuseTarget`) and how it meets failure
(:class:`Retry`).

Each is frozen and checks its values when made, so a wrong one fails where it is written,
not when the run starts; ``Pipeline.map(fn, reuse=..., faults=...)`` takes them, and the
command line builds them from its flags.

Example:
    >>> ReuseTarget(0.95, agree="boxes")
    ReuseTarget(target=0.95, agree='boxes')
    >>> ReuseByHyperframe(psnr=45).bound
    3.1622776601683795e-05
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .engine.faults import Retry

Agree = str | Callable[[Any, Any], float] | None
"""How two answers compare (``hyperframes.hyper.reuse.agree``): ``"equal"``, ``"boxes"``
(``"boxes:0.7"``), ``"count"``, ``"psnr"`` (``"psnr:35"``) or ``(a, b) -> float`` in [0, 1]."""


@dataclass(frozen=True)
class ReuseByHyperframe:
    """Run the function once per hyperframe (``.group()`` must come before the stage) and
    share its answer with the members within a bound of the base.

    Args:
        psnr: the bound as a PSNR in dB between member and base (40 when neither is given).
        mse: the bound as an MSE of pixels in 0..1, instead of ``psnr``.
        verify_every: compute every k-th shared answer anyway and report the error.
        agree: how a shared answer is scored against the computed one, with ``verify_every``.
    """

    psnr: float | None = None
    mse: float | None = None
    verify_every: int | None = None
    agree: Agree = None

    def __post_init__(self) -> None:
        if self.psnr is not None and self.mse is not None:
            raise ValueError("give psnr= or mse=, not both")
        if self.mse is not None and not 0 <= self.mse <= 1:
            raise ValueError(f"mse must be in [0, 1] (pixels in 0..1), got {self.mse}")
        if self.psnr is not None and not 0 < self.psnr <= 200:
            raise ValueError(f"psnr must be in (0, 200] dB, got {self.psnr}; try 40")
        every = self.verify_every
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, int) or every < 1
        ):
            raise ValueError(f"verify_every must be a whole number >= 1, got {every!r}")
        if self.agree is not None and every is None:
            raise ValueError("agree= scores the verified frames: it needs verify_every=")

    @property
    def bound(self) -> float:
        """The largest member-to-base MSE (pixels in 0..1) that may share the base's answer."""
        if self.mse is not None:
            return float(self.mse)
        return float(10 ** (-(40.0 if self.psnr is None else self.psnr) / 10))


@dataclass(frozen=True)
class ReuseTarget:
    """Share answers between similar frames while the output's answers agree with the
    function's own on ``target`` of the frames (e.g. ``0.95``), measured on a sample the
    stage computes anyway (``hyperframes.hyper.reuse.target``). Needs no ``.group()``.

    Args:
        target: the share of frames whose answer must agree, in (0, 1).
        agree: how two answers compare (``"equal"`` for values, ``"psnr"`` for frames, by
            default).
    """

    target: float
    agree: Agree = None

    def __post_init__(self) -> None:
        t = self.target
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < 1:
            raise ValueError(
                f"the reuse target must be a number in (0, 1), the share of frames whose "
                f"answer must agree with the function's own, got {t!r}; try 0.95"
            )


Reuse = ReuseByHyperframe | ReuseTarget
"""How a map stage shares answers between similar frames."""

REMOVED = {
    "reuse_psnr": "reuse=ReuseByHyperframe(psnr=)",
    "reuse_mse": "reuse=ReuseByHyperframe(mse=)",
    "verify_every": "reuse=ReuseByHyperframe(verify_every=)",
    "reuse_target": "reuse=ReuseTarget(target)",
    "agree": "reuse=ReuseTarget(target, agree=) or ReuseByHyperframe(agree=)",
    "retries": "faults=Retry(retries, backoff)",
    "backoff": "faults=Retry(retries, backoff)",
}
"""``Pipeline.map``'s keywords before these objects (0.4), removed in 0.8 as 0.5 said,
each with what to write instead."""


def refuse_removed(reuse: object, keywords: dict[str, Any]) -> None:
    """Refuse ``map``'s removed keywords and a ``reuse`` that is not a mode object, naming
    what to write instead.

    Raises:
        TypeError: a keyword ``map`` no longer takes (or never took), or ``reuse="base"``.
    """
    for name in keywords:
        if name not in REMOVED:
            raise TypeError(f"map() got an unexpected keyword argument {name!r}")
        raise TypeError(f"map({name}=) was removed in 0.8; pass {REMOVED[name]} (from hyperframes)")
    if reuse is not None and not isinstance(reuse, ReuseByHyperframe | ReuseTarget):
        raise TypeError(
            f"reuse must be a ReuseByHyperframe or a ReuseTarget, got {reuse!r}; "
            "reuse='base' is now reuse=ReuseByHyperframe(psnr=40)"
        )


__all__ = ["Agree", "Retry", "Reuse", "ReuseByHyperframe", "ReuseTarget"]
