"""The hyperframe codec: one group of frames to bytes and back, with random access
(``coder``); the byte layout it writes (``group_header``); the ways frames are coded
(the private modules: pixels, records, lossless, lossy, planes through FFV1 or x264)."""

from .coder import (
    BasePosition,
    EncodedGroup,
    GroupInfo,
    Layout,
    decode_frame,
    decode_group,
    encode_group,
    read_group_info,
)
from .group_header import surface_frames

__all__ = [
    "BasePosition",
    "EncodedGroup",
    "GroupInfo",
    "Layout",
    "decode_frame",
    "decode_group",
    "encode_group",
    "read_group_info",
    "surface_frames",
]
