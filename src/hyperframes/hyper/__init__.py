"""Hyperframes: grouping similar adjacent frames, the base+delta codec, and quality.

Example:
    >>> from hyperframes.hyper import group_frames, encode_group, decode_frame
    >>> spans = group_frames(frames, threshold=1e-3, min_len=2, max_len=60)
    >>> group = encode_group(frames[spans[0].start : spans[0].stop])
    >>> first = decode_frame(group.data, 0)
"""

from __future__ import annotations

from ..choices import Tier
from .codec.coder import (
    BasePosition,
    EncodedGroup,
    GroupInfo,
    Layout,
    decode_frame,
    decode_group,
    encode_group,
    read_group_info,
)
from .distance import DistanceKind, frame_mse, frame_sse, luma_proxy
from .grouping.grouper import Grouper, GroupingOptions, Rule, Span, group_frames
from .quality import mse, psnr

__all__ = [
    "BasePosition",
    "DistanceKind",
    "EncodedGroup",
    "GroupInfo",
    "Grouper",
    "GroupingOptions",
    "Layout",
    "Rule",
    "Span",
    "Tier",
    "decode_frame",
    "decode_group",
    "encode_group",
    "frame_mse",
    "frame_sse",
    "group_frames",
    "luma_proxy",
    "mse",
    "psnr",
    "read_group_info",
]
