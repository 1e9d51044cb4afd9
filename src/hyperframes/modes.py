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

import warnings
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

LEGACY = ("reuse_psnr", "reuse_mse", "verify_every", "reuse_target", "agree", "retries", "backoff")
"""``Pipeline.map``'s keywords before these objects (0.4): they still work, with a
:class:`DeprecationWarning`, until 0.6."""


def from_legacy(
    reuse: Reuse | str | None, faults: Retry | None, legacy: dict[str, Any]
) -> tuple[Reuse | None, Retry | None]:
    """``reuse`` and ``faults`` from ``map``'s old keywords (``reuse="base"``,
    ``reuse_psnr=``, ``reuse_target=``, ``agree=``, ``retries=``...), each named in a
    :class:`DeprecationWarning` with what to write instead.

    Raises:
        TypeError: a keyword ``map`` never took.
        ValueError: old and new ways mixed, or options that do not combine.
    """
    unknown = sorted(set(legacy) - set(LEGACY))
    if unknown:
        raise TypeError(f"map() got an unexpected keyword argument {unknown[0]!r}")
    if not legacy and not isinstance(reuse, str):
        return reuse, faults
    said = ", ".join(
        f"{k}={v!r}"
        for k, v in [("reuse", reuse), *legacy.items()]
        if isinstance(v, str) or k != "reuse"
    )
    if isinstance(reuse, str) and reuse not in ("none", "base"):
        raise ValueError(f"reuse must be a ReuseByHyperframe or a ReuseTarget, got {reuse!r}")
    agree = legacy.pop("agree", None)
    base = {k: legacy.pop(k) for k in ("reuse_psnr", "reuse_mse", "verify_every") if k in legacy}
    target = legacy.pop("reuse_target", None)
    if reuse == "base":
        if target is not None:
            raise ValueError("reuse_target= chooses the frames to compute itself; it does not "
                             "combine with reuse='base'")  # fmt: skip
        new: Reuse | None = ReuseByHyperframe(
            base.get("reuse_psnr"), base.get("reuse_mse"), base.get("verify_every"), agree
        )
        instead = "reuse=ReuseByHyperframe(psnr=, mse=, verify_every=, agree=)"
    elif base:
        raise ValueError("reuse_psnr=, reuse_mse= and verify_every= need reuse='base'")
    elif target is not None:
        new, instead = ReuseTarget(target, agree), "reuse=ReuseTarget(target, agree=)"
    elif agree is not None:
        raise ValueError("agree= needs reuse_target= (or reuse='base' with verify_every=)")
    else:
        new, instead = (None if isinstance(reuse, str) else reuse), "reuse=None"
    if "retries" in legacy or "backoff" in legacy:
        if faults is not None:
            raise ValueError("give faults=Retry(...) or retries=/backoff=, not both")
        retries, backoff = legacy.pop("retries", 0), legacy.pop("backoff", 0.05)
        faults = Retry(retries, backoff) if retries else None
        instead += ", faults=Retry(retries, backoff)"
    warnings.warn(
        f"map({said}) is deprecated; pass {instead} (from hyperframes; the old keywords go in 0.6)",
        DeprecationWarning,
        stacklevel=3,
    )
    return new, faults


__all__ = ["Agree", "Retry", "Reuse", "ReuseByHyperframe", "ReuseTarget"]
