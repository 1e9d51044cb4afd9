"""What a stage's stream or strategy tells of its run, typed.

A grouping stage, a reuse stage and a stage with an accuracy target each report their
figures as a frozen dataclass of their own. Monitors and the Prometheus exporter read
their attributes (``figures.reused``, ``figures.hyperframes``), not string keys; the run
report, JSON and pages read them as a mapping (:meth:`StageFigures.as_dict`), so
``report.extra["group"]["hyperframes"]`` keeps working. A stage of the user's may still
report a plain mapping: its numbers flow through generically.

Example:
    >>> figures = GroupingFigures(frames=40, hyperframes=10, mean_length=4.0,
    ...                           merge_rate=0.75, max_length=6)
    >>> figures.hyperframes, figures["merge_rate"], dict(figures)["frames"]
    (10, 0.75, 40)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal


@dataclass(frozen=True)
class StageFigures(Mapping[str, Any]):
    """The figures of one stage: typed attributes, and a read-only mapping of them."""

    def as_dict(self) -> dict[str, Any]:
        """The figures by name, as the run report and JSON show them."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


@dataclass(frozen=True)
class GroupingFigures(StageFigures):
    """A grouping stage's hyperframes: how many, how long, how many frames merged."""

    frames: int
    hyperframes: int
    mean_length: float
    merge_rate: float
    max_length: int


@dataclass(frozen=True)
class ReuseFigures(StageFigures):
    """A stage that shares results: frames computed (every call, verification included)
    and reused, their share saved, and the frames verified."""

    computed: int
    reused: int
    calls_saved: float
    verified: int


@dataclass(frozen=True)
class BoundFigures(ReuseFigures):
    """``ReuseByHyperframe``: results shared within a bound on the input's pixels.

    With verification, the error measured on verified frames: for frames out,
    ``verify_psnr_min`` (the worst; ``None`` when exact) and ``psnr_mean_recent``; for
    per-frame values, ``verify_agreement`` and ``verify_mismatch_rate``. Only the pair
    that applies is shown in the mapping, and only once a frame was verified.
    """

    reuse_bound_mse: float
    checks: Literal["frames", "values"] = "frames"
    verify_agreement: float | None = None
    verify_mismatch_rate: float | None = None
    verify_psnr_min: float | None = None
    psnr_mean_recent: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("computed", "reused", "calls_saved")}
        out |= {"reuse_bound_mse": self.reuse_bound_mse, "verified": self.verified}
        if self.verified and self.checks == "values":
            out |= {"verify_agreement": self.verify_agreement,
                    "verify_mismatch_rate": self.verify_mismatch_rate}  # fmt: skip
        elif self.verified:
            out |= {"verify_psnr_min": self.verify_psnr_min,
                    "psnr_mean_recent": self.psnr_mean_recent}  # fmt: skip
        return out


@dataclass(frozen=True)
class TargetFigures(ReuseFigures):
    """``ReuseTarget``: calls, the agreement of shared answers as sampled, the estimated
    agreement of the output and its one-sided 95 % lower bound, and the current rule
    (``span``: frames one answer may serve; ``threshold``: how far a frame may move)."""

    frames: int
    calls: int
    refined: int
    target: float
    agreement_shared: float | None
    agreement: float | None
    agreement_bound: float | None
    span: int
    threshold: float

    def as_dict(self) -> dict[str, Any]:
        out = {"frames": self.frames, "calls": self.calls}
        return out | super().as_dict()


def shortfall(figures: Mapping[str, Any]) -> str | None:
    """What to tell a user whose stage with an accuracy target measured less agreement
    than it was asked for (``None`` when it did not, or has no target)."""
    target, agreement = figures.get("target"), figures.get("agreement")
    if not isinstance(target, float) or not isinstance(agreement, float) or agreement >= target:
        return None
    return (
        f"the output agrees {agreement:.3f} with the function's own answers as sampled "
        f"(95 % bound {figures.get('agreement_bound')}), under the target {target}: its "
        "answers change where frames look alike; ask for less, or compute every frame"
    )


def merged_targets(parts: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The figures of each stage with an accuracy target over runs of parts of one input
    (the segments of a chunked run), as one run's: counts summed, the agreements weighted
    by frames (the sample's by frames verified; the bound is the frames' mean of the parts'
    bounds), the rule as the last part left it. Stages without a target are left out."""
    counts = ("frames", "calls", "computed", "reused", "verified", "refined")
    ours = {*counts, "target", "agreement_shared", "agreement", "agreement_bound"}
    merged: dict[str, dict[str, Any]] = {}
    names = [name for part in parts for name, f in part.items() if ours <= f.keys()]
    for name in dict.fromkeys(names):
        runs = [part[name] for part in parts if name in part]
        out = dict(runs[-1])
        for key in counts:
            out[key] = sum(int(f[key]) for f in runs)
        out["calls_saved"] = round(out["reused"] / out["frames"], 4) if out["frames"] else 0.0
        for key, by in (("agreement_shared", "verified"), ("agreement", "frames"),
                        ("agreement_bound", "frames")):  # fmt: skip
            known = [(f[key], f[by]) for f in runs if f[key] is not None and f[by]]
            total = sum(w for _, w in known)
            out[key] = round(sum(v * w for v, w in known) / total, 4) if total else None
        merged[name] = out
    return merged


def figures_dict(figures: Mapping[str, Any]) -> dict[str, Any]:
    """A stage's figures as a plain dict (typed or a mapping of the user's)."""
    return figures.as_dict() if isinstance(figures, StageFigures) else dict(figures)
