"""hyperframes: flat-memory, every-core pipelines for very long frame sequences.

Example:
    >>> import numpy as np, hyperframes as hf
    >>> frames = np.zeros((256, 72, 128, 3), np.uint8)
    >>> report = hf.Pipeline.from_frames(frames).map(np.bitwise_not, workers=2).run()
    >>> report.frames
    256
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__
from .errors import (
    CorruptFrame,
    FrameError,
    FramesFailed,
    HyperframesError,
    MediaError,
    PoolExhausted,
    StageError,
    StoreCorrupt,
    StoreError,
)

if _TYPE_CHECKING:
    from .analysis import Analysis, analyze
    from .chunked import render_chunked, run_chunked
    from .engine.report import RunReport, StageReport
    from .engine.stage import Strategy, Stream
    from .engine.watch import Progress
    from .frames import FrameSpec
    from .io.base import Chunk, Footprint, Sink, Source
    from .io.carry import Carry
    from .io.dataset import VideoDataset
    from .io.image_sink import ImageSequenceSink
    from .io.images import ImageSequenceSource
    from .io.results import ResultsSink
    from .io.tensors import Tensors
    from .io.video import VideoSource
    from .io.video_files import VideoFiles
    from .io.video_sink import VideoSink
    from .modes import Retry, ReuseByHyperframe, ReuseTarget
    from .pipeline import Pipeline
    from .store import FrameStore, StoreSink
    from .transcoding import transcode

#: The public names imported on first use (``hf.Pipeline``, ``from hyperframes import
#: analyze``), so that ``import hyperframes`` and a command that needs a few parts do not
#: import them all (analysis, the store, image I/O: about 0.1 s).
_LAZY = {
    "Analysis": ".analysis",
    "analyze": ".analysis",
    "RunReport": ".engine.report",
    "StageReport": ".engine.report",
    "Progress": ".engine.watch",
    "Stream": ".engine.stage",
    "Strategy": ".engine.stage",
    "FrameSpec": ".frames",
    "Tensors": ".io.tensors",
    "Chunk": ".io.base",
    "Footprint": ".io.base",
    "Sink": ".io.base",
    "Carry": ".io.carry",
    "VideoDataset": ".io.dataset",
    "Source": ".io.base",
    "ImageSequenceSink": ".io.image_sink",
    "ImageSequenceSource": ".io.images",
    "ResultsSink": ".io.results",
    "VideoSource": ".io.video",
    "VideoFiles": ".io.video_files",
    "VideoSink": ".io.video_sink",
    "Pipeline": ".pipeline",
    "Retry": ".modes",
    "ReuseByHyperframe": ".modes",
    "ReuseTarget": ".modes",
    "FrameStore": ".store",
    "StoreSink": ".store",
    "run_chunked": ".chunked",
    "render_chunked": ".chunked",
    "transcode": ".transcoding",
}


_KINDS_FOR = {"VideoFiles": ".store"}
"""Names whose objects read the input kinds a package registers (:mod:`.io.kinds`), with the
package imported beside them: ``hf.VideoFiles("stores/")`` reads a folder of stores."""


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _KINDS_FOR:
        _importlib.import_module(_KINDS_FOR[name], __name__)
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(globals().keys() | _LAZY.keys())


__all__ = [
    "Analysis",
    "Carry",
    "Chunk",
    "CorruptFrame",
    "Footprint",
    "FrameError",
    "FrameSpec",
    "FrameStore",
    "FramesFailed",
    "HyperframesError",
    "ImageSequenceSink",
    "ImageSequenceSource",
    "MediaError",
    "Pipeline",
    "PoolExhausted",
    "Progress",
    "ResultsSink",
    "Retry",
    "ReuseByHyperframe",
    "ReuseTarget",
    "RunReport",
    "Sink",
    "Source",
    "StageError",
    "StageReport",
    "StoreCorrupt",
    "StoreError",
    "StoreSink",
    "Strategy",
    "Stream",
    "Tensors",
    "VideoDataset",
    "VideoFiles",
    "VideoSink",
    "VideoSource",
    "__version__",
    "analyze",
    "render_chunked",
    "run_chunked",
    "transcode",
]
