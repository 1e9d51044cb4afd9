"""Which frame is which, from the packets alone: frame numbers a seek can be checked against.

Frame *i* of a video is the *i*-th frame its decoder gives. A seek goes by timestamp, so it
lands on a known frame only where the timestamps number the frames: every packet carries one,
no two are equal, and no packet is presented before the keyframe that came two keyframes
earlier (B-frames and the leading pictures of an open GOP stay within that). Then frame *i*
is the packet with the *i*-th smallest timestamp, and a keyframe's index is known without
decoding anything. :func:`scan` reads packets up to a frame (about 5 us a packet) and either
returns that numbering or says why the timestamps cannot give it: a stream whose rate changes
part-way, or whose timestamps go backwards (two MPEG-TS files joined), is numbered by
decoding from the first frame instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import av
import numpy as np


@dataclass(frozen=True)
class Seek:
    """Where to seek to reach a frame, and what the frames from there must carry.

    Attributes:
        pts: the keyframe's timestamp (stream time base), where the seek goes.
        index: the keyframe's frame index.
        expected: the timestamps of frames ``index .. target``, in order: the frames decoded
            after the seek must carry exactly these, or the seek is not trusted.
    """

    pts: int
    index: int
    expected: tuple[int, ...]


@dataclass(frozen=True)
class FrameTable:
    """The frames' timestamps in presentation order, as far as the scan went.

    Attributes:
        pts: timestamps of frames ``0 .. len(pts) - 1`` (stream time base), ascending.
        keyframes: the indices of the keyframes among them.
        untrusted: why the timestamps cannot number the frames (``None`` when they can).
    """

    pts: np.ndarray
    keyframes: np.ndarray
    untrusted: str | None = None

    def seek_to(self, frame: int) -> Seek | str:
        """How to seek to ``frame``, or why it cannot be done by timestamp."""
        if self.untrusted is not None:
            return self.untrusted
        if frame >= len(self.pts):
            return f"frame {frame} lies past the frames the packets number ({len(self.pts)})"
        before = self.keyframes[self.keyframes <= frame]
        if not len(before):
            return f"no keyframe is flagged before frame {frame}"
        key = int(before[-1])
        expected = tuple(int(p) for p in self.pts[key : frame + 1])
        return Seek(pts=expected[0], index=key, expected=expected)


def scan(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    *,
    until: int | None = None,
) -> FrameTable:
    """Number the frames of ``stream`` from its packets (no decoding), from the first packet.

    Args:
        container: an open container, at its start (it is read; seek back to reuse it).
        stream: its video stream.
        until: stop once frames ``0 .. until`` are numbered for good; ``None`` reads to the
            end.
    """
    stamps: list[int] = []
    keys: list[int] = []
    newest = older = None  # the latest keyframe's timestamp, and the one's before it
    settled, pending = 0, []  # frames numbered for good; stamps above the settled bound
    why = None
    for packet in container.demux(stream):
        if packet.size == 0 or packet.is_discard:  # flush packets, frames never shown
            continue
        pts = packet.pts
        if pts is None:
            why = f"packet {len(stamps)} has no timestamp"
            break
        if (older is not None and pts <= older) or (packet.is_keyframe and newest is not None
                                                    and pts <= newest):  # fmt: skip
            why = f"timestamps go backwards at packet {len(stamps)}"
            break
        if packet.is_keyframe:
            older, newest = newest, pts
            keys.append(pts)
            if older is not None:  # no later packet is presented before `older`
                settled += sum(1 for p in pending if p <= older)
                pending = [p for p in pending if p > older]
                if until is not None and settled > until:
                    break
        stamps.append(pts)
        pending.append(pts)
    else:  # the end: every frame is numbered
        settled = len(stamps)
    ordered = np.sort(np.asarray(stamps, dtype=np.int64))[:settled]
    if why is None and len(ordered) > 1 and not (np.diff(ordered) > 0).all():
        why = "two packets carry the same timestamp"
    keyframes = np.searchsorted(ordered, np.asarray(keys, dtype=np.int64))
    keyframes = keyframes[keyframes < len(ordered)]
    if why is not None:
        why = f"its timestamps cannot number the frames ({why})"
    return FrameTable(ordered, keyframes, why)
