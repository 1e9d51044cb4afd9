"""hyperframes: flat-memory, every-core pipelines for very long frame sequences.

Example:
    >>> import numpy as np, hyperframes as hf
    >>> frames = np.zeros((256, 72, 128, 3), np.uint8)
    >>> report = hf.Pipeline.from_frames(frames).map(np.bitwise_not, workers=2).run()
    >>> report.frames
    256
"""

from ._version import __version__
from .analysis import Analysis, analyze
from .engine.dag import TaskGraph
from .engine.report import RunReport, StageReport
from .engine.runner import Progress
from .errors import (
    CorruptFrame,
    CycleError,
    FrameError,
    FramesFailed,
    HyperframesError,
    MediaError,
    PoolExhausted,
    StageError,
    StoreCorrupt,
    StoreError,
)
from .frames import Batch, FramePool, FrameSpec
from .io.base import Chunk, Sink, Source
from .io.images import ImageSequenceSink, ImageSequenceSource
from .io.video import VideoSource
from .io.video_sink import VideoSink
from .pipeline import Pipeline
from .store import FrameStore, StoreSink

__all__ = [
    "Analysis",
    "Batch",
    "Chunk",
    "CorruptFrame",
    "CycleError",
    "FrameError",
    "FramePool",
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
    "RunReport",
    "Sink",
    "Source",
    "StageError",
    "StageReport",
    "StoreCorrupt",
    "StoreError",
    "StoreSink",
    "TaskGraph",
    "VideoSink",
    "VideoSource",
    "__version__",
    "analyze",
]
