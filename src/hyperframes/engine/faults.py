"""Surviving failures without losing a frame: retries, per-frame fallback, dead letters.

A stage with a :class:`Retry` calls its function again on a failing batch (after
restoring the batch's input, which the failed call may have half-written), waiting
``backoff * 2**attempt`` seconds between tries. If the batch still fails and the run
allows failures, the frames are tried one by one: the good ones go on, each bad one
becomes a *dead letter* (stage, frame id, exception) in the run report. A run that
collects more dead letters than ``allow_failures`` stops with :class:`FramesFailed`.
No frame is ever delivered twice, and order is kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..errors import FramesFailed


@dataclass(frozen=True)
class Retry:
    """How a stage meets failure: ``Pipeline.map(fn, faults=Retry(2))``.

    Attributes:
        retries: extra tries of a failing batch (and of a failing frame in the fallback).
        backoff: seconds before the first retry; doubled each time.
    """

    retries: int = 2
    backoff: float = 0.05

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"retries must be a whole number >= 0, got {self.retries!r}")
        if not 0 <= self.backoff <= 60:
            raise ValueError(f"backoff must be between 0 and 60 seconds, got {self.backoff!r}")

    def delay(self, attempt: int) -> float:
        return float(self.backoff * 2**attempt)


class DeadLetters:
    """The frames that failed for good, shared by every stage of a run (thread-safe).

    Args:
        allowed: how many may fail before the run stops; 0 means the first failure
            stops the run with the stage's own exception.
    """

    def __init__(self, allowed: int) -> None:
        if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 0:
            raise ValueError(f"allow_failures must be a whole number >= 0, got {allowed!r}")
        self.allowed = allowed
        self._items: list[tuple[str, int, BaseException]] = []
        self._lock = threading.Lock()

    @property
    def isolating(self) -> bool:
        """Whether failing batches are split into frames (only when failures are allowed)."""
        return self.allowed > 0

    def add(self, stage: str, frame: int, exc: BaseException) -> None:
        with self._lock:
            self._items.append((stage, frame, exc))
            count = len(self._items)
            items = list(self._items)
        if count > self.allowed:
            shown = ", ".join(f"frame {f} in {s}: {e!r}" for s, f, e in items[:3])
            raise FramesFailed(
                f"{count} frames failed, more than allow_failures={self.allowed} "
                f"({shown}{', ...' if count > 3 else ''}); fix the stage or allow more failures",
                items,
            ) from exc

    def snapshot(self) -> list[dict[str, object]]:
        with self._lock:
            return [
                {"stage": s, "frame": f, "error": f"{type(e).__name__}: {e}"}
                for s, f, e in self._items
            ]
