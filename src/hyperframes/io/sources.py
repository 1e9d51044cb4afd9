"""The source of one input, whatever it is: a video file (:class:`~.video.VideoSource`) or
a sequence of images (:class:`~.images.ImageSequenceSource`: a folder of images, a printf
pattern such as ``frames/frame_%04d.png``, or a glob such as ``'frames/*.png'``).

Every command that reads one input opens it here, so each takes both.

Example:
    >>> source = open_input("frames/frame_%04d.png", rate=24)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

from .formats import OnCorrupt, PixFmt
from .inputs import is_image_sequence

if TYPE_CHECKING:
    from .images import ImagePixFmt, ImageSequenceSource
    from .video import VideoSource

KEEPS = ("yuv420p", "native")
"""The pixel formats that ask for the input as it is stored: an image sequence's frames are
then read as the files hold them (gray, RGB or RGBA; 8 or 16 bits)."""

SAMPLINGS = ("keyframes", "fps", "at", "num_frames")
"""The options that choose frames, which an image sequence takes too."""


def open_input(
    path: str | os.PathLike[str],
    *,
    pix_fmt: PixFmt = "rgb24",
    start: int = 0,
    stop: int | None = None,
    size: tuple[int, int] | None = None,
    step: int = 1,
    on_corrupt: OnCorrupt = "fail",
    rate: Fraction | float | str | None = None,
    **video: Any,
) -> VideoSource | ImageSequenceSource:
    """The frames of ``path``: a video file, or an image sequence read at ``rate`` frames
    a second (25 when not given). ``video`` holds :class:`~.video.VideoSource`'s own
    options (``rotation``, ``threads``, ``colour``) and the sampling (``keyframes``, ``fps``,
    ``at``, ``num_frames``), which an image sequence takes too.

    An image sequence asked for ``yuv420p`` or ``native`` frames (a video's planes) gives
    its frames as the files hold them: the sequence has no planes to keep.

    One image file is read as a sequence of one image, unless it is one of a numbered
    sequence: then reading it alone is more likely a slip than the wish, and it is refused
    with the sequence's pattern (``start``/``stop`` read some images of a sequence).

    Raises:
        ValueError: ``rate`` for a video (which has its own), one image of a sequence, or
            what the source raises.
    """
    if is_image_sequence(path):
        if os.path.isfile(path):
            _refuse_one_of_many(path)
        from .images import ImageSequenceSource

        as_held = "auto" if pix_fmt in KEEPS else pix_fmt
        sampling = {key: video[key] for key in SAMPLINGS if key in video}
        return ImageSequenceSource(
            path, pix_fmt=cast("ImagePixFmt", as_held), start=start, stop=stop,
            size=size, step=step, on_corrupt=on_corrupt, rate=rate, **sampling,
        )  # fmt: skip
    if rate is not None:
        raise ValueError(
            f"{os.fspath(path)!r} is a video, with a frame rate of its own; drop rate= "
            "(an image sequence's rate)"
        )
    from .video import VideoSource

    return VideoSource(
        path, pix_fmt=pix_fmt, start=start, stop=stop, size=size, step=step,
        on_corrupt=on_corrupt, **video,
    )  # fmt: skip


def _refuse_one_of_many(path: str | os.PathLike[str]) -> None:
    """Raise where the image at ``path`` is one of a numbered sequence in its folder."""
    from pathlib import Path

    from .image_names import list_images, naming_of

    image = Path(path)
    naming = naming_of([image])
    if not naming:
        return
    siblings = list_images(image.parent / naming["pattern"])
    if len(siblings) > 1:
        pattern = image.parent / naming["pattern"]
        raise ValueError(
            f"{str(image)!r} is one image of the sequence {str(pattern)!r} "
            f"({len(siblings)} images); name that pattern or the folder to read them all "
            "(start= and stop= read some)"
        )
