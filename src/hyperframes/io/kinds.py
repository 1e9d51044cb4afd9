"""Kinds of input besides videos and image sequences, which a job over many inputs reads as
it reads those (``hyperframes map FOLDER ...``, :class:`~.video_files.VideoFiles`).

A kind says which paths it holds, opens one as a :class:`~.base.Source`, turns a range in
seconds into frames, and says what reading it will hold before it is opened. A layer
above this one registers its kind (:func:`register`; ``hyperframes.store`` registers the
store when imported); a job takes the kinds registered when it is made, and hands them to
the process that reads its files.

Example:
    >>> kind_of("clip.mp4", tuple(registered())) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .base import Footprint


class InputKind:
    """One kind of input: subclass it and :func:`register` an instance (picklable: a job
    hands it to its reader process)."""

    def holds(self, path: str) -> bool:
        """Whether ``path`` is an input of this kind."""
        raise NotImplementedError

    def open(self, path: str, *, start: int, stop: int | None, **options: Any) -> Any:
        """Frames ``start..stop-1`` of ``path``, read with a video's ``options`` (``size``,
        ``pix_fmt``...; an option that does not apply is refused with a ``ValueError``):
        a :class:`~.base.Source` with a video's ``start`` (the first frame it reads) and
        ``sampling`` (the frames it chooses: :class:`~.sampling.Sampling`)."""
        raise NotImplementedError

    def frames(self, path: str, start: Any, stop: Any) -> tuple[int, int | None]:
        """``start`` and ``stop`` (frame indices or :class:`~.positions.Seconds`) as frame
        indices of ``path``."""
        raise NotImplementedError

    def footprint(self, path: str, *, size: Any, pix_fmt: str) -> Footprint:
        """What reading ``path`` will hold besides the run's pool (before it is opened)."""
        return Footprint("decoder")


_KINDS: list[InputKind] = []


def register(kind: InputKind) -> None:
    """Read inputs of ``kind`` in the jobs made from now on (once: a second instance of
    the same class is not added)."""
    if not any(type(k) is type(kind) for k in _KINDS):
        _KINDS.append(kind)


def registered() -> list[InputKind]:
    """The kinds registered so far."""
    return list(_KINDS)


def kind_of(path: str | os.PathLike[str], kinds: Iterable[InputKind]) -> InputKind | None:
    """The first of ``kinds`` that holds ``path`` (``None``: a video or images)."""
    text = os.fspath(path)
    return next((kind for kind in kinds if kind.holds(text)), None)
