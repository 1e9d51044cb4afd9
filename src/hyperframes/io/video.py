"""Video files in through PyAV (FFmpeg): :class:`VideoSource`
(:class:`~hyperframes.io.video_sink.VideoSink` writes; the pixel formats and checks video
and image I/O share are in :mod:`~hyperframes.io.formats`).

The source decodes straight into the pool slots the engine hands over and stamps
every frame with its presentation time (``meta["pts"]``, seconds), so variable
frame rate survives a round trip.

Example:
    >>> source = VideoSource("in.mp4", pix_fmt="rgb24", start=100, stop=400)  # doctest: +SKIP
    >>> opencv_colour = VideoSource("in.mp4", colour="fast")  # doctest: +SKIP

RGB is FFmpeg's own by default (``colour="ffmpeg"``): pixel for pixel what PyAV, torchcodec
and OpenCV's FFmpeg backend give, from one swscale context kept from frame to frame.
``colour="fast"`` converts BT.601 4:2:0 input with OpenCV instead, within 1-3 levels of
it: faster for the conversion alone, about as fast in a whole decode. A stream whose frame
size changes part-way is an error unless ``size=(W, H)`` resizes every frame. Both are
done in :mod:`~hyperframes.io.convert`, which says how.

Longer than 300 lines: VideoSource's seeking, rate, corruption policy, conversions and
size changes interact frame by frame.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import av
import av.container
import av.video.stream
import numpy as np

from ..errors import CorruptFrame, MediaError
from .base import Chunk, Footprint, Source
from .convert import FrameConverter, turned
from .decoder_memory import (
    auto_threads,
    decoding,
    frame_bytes,
    sampled_decoding,
    threads_within,
    workers_within,
)
from .formats import CHANNELS, OnCorrupt, PixFmt
from .frame_table import Seek, scan
from .layouts import TAGS, Layout, native_layout
from .probe import (
    damaged_message,
    display_rotation,
    iso_damage,
    open_video,
    stream_facts,
)
from .sampling import Sampling, Timeline
from .sparse import Job, SparseDecoder, plan_jobs
from .streams import streams_named

Rotation = Literal["apply", "keep"]
Colour = Literal["fast", "ffmpeg"]

#: Below this start frame, decoding forward from the first frame is cheaper than a seek.
SEEK_MIN_FRAMES = 64


def _check_size(size: tuple[int, int]) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in size)
    except (TypeError, ValueError):
        raise ValueError(f"size must be (width, height), e.g. (1280, 720), got {size!r}") from None
    if width < 1 or height < 1:
        raise ValueError(f"size must be positive, got {size!r}; e.g. (1280, 720)")
    return width, height


def _check_choice(name: str, value: str, allowed: tuple[str, ...] | frozenset[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")


class _Untrusted(Exception):
    """The frames after a seek are not the ones the packets promised: decode from the top."""


class VideoSource(Source):
    """Frames of the first video stream of a file, decoded with PyAV.

    Args:
        path: the video file.
        pix_fmt: ``"rgb24"`` gives ``(H, W, 3)`` frames, ``"gray"`` ``(H, W, 1)``,
            ``"rgba"`` ``(H, W, 4)``, all ``uint8``; ``"rgb48"`` and ``"rgba64"`` the same
            in ``uint16`` (a stream of more than 8 bits a sample, kept); ``"yuv420p"``
            gives the decoded planes with no colour conversion (see :func:`i420_spec`), the
            fast path for jobs that end in a yuv420p encoder; ``"native"`` gives the
            decoder's own planes (any layout of :data:`~hyperframes.io.layouts.NATIVE`:
            4:2:0, 4:2:2, 4:4:4, gray, 10-bit) bit-exact, laid out as
            :class:`~hyperframes.io.layouts.Layout` says (``info["layout"]`` names it); a
            stream in another format is refused.
        start: first frame index to produce (frames are numbered from 0 in presentation
            order).
        stop: one past the last frame index to produce; ``None`` reads to the end.
        on_corrupt: ``"fail"`` raises :class:`CorruptFrame` at the first frame that cannot
            be decoded; ``"skip"`` leaves it out (its index is missing from the chunk's
            ``index``) and lists it in :attr:`skipped`.
        threads: ``True`` lets FFmpeg decode with frame and slice threads, ``False``
            decodes on one thread, an ``int`` sets the thread count.
        size: ``(width, height)`` to resize every frame to (area averaging: OpenCV
            ``INTER_AREA``, or swscale's for ``"yuv420p"`` at other than whole ratios); by
            default frames keep the stream's size, and a frame of another size (the size
            changed part-way through the stream) raises :class:`MediaError`.
        colour: how yuv420p becomes ``"rgb24"`` or ``"rgba"``: ``"ffmpeg"`` (the
            default) uses FFmpeg's swscale for every frame, exactly as
            ``frame.to_ndarray(format="rgb24")`` does; ``"fast"`` uses OpenCV for BT.601
            input (0-2 levels from FFmpeg's result on nearly every pixel, about 1 on
            average, up to 16 below video black; see :mod:`~hyperframes.io.convert`).
        rotation: what to do with a rotation tag (the display matrix phones write):
            ``"apply"`` turns every frame upright, as players show it (``spec`` and
            ``size`` are then the upright frame's); ``"keep"`` gives the frames as coded
            and puts the angle in ``info["rotation"]``, which
            :class:`~hyperframes.io.video_sink.VideoSink` writes back. By default RGB,
            gray and RGBA frames are turned, planes (``"yuv420p"``, ``"native"``) kept:
            planes cannot be turned.
        step: give every ``step``-th frame from ``start`` (indices ``start``,
            ``start + step``, ...).
        keyframes: give only the key frames in ``[start, stop)``, with their indices and
            times.
        fps: give one frame per ``1 / fps`` seconds from ``start``'s time, the frame
            played at each instant (the last one stamped at or before it; right on a
            variable frame rate; a frame shown longer than ``1 / fps`` comes again).
        at: give the frames played at these times (seconds, as ``meta["pts"]`` counts
            them), in this order, repeats kept; a time outside the frames is refused.
            Not with ``start``/``stop``.
        num_frames: give this many frames spread evenly (by index) over
            ``[start, stop)``, the first and last among them; all of them where the
            range holds fewer (:meth:`notes` says so).
        workers: decoders working side by side on a sampled read (one per group of
            pictures); ``None``: one per core.

        With a sampling (``step``, ``keyframes``, ``fps``, ``at``, ``num_frames``) the
        packets are numbered first (read, not decoded) and only what the wanted frames
        need is decoded: each from the key frame before it, frames nothing refers to
        skipped, no frame converted unless it is given (:mod:`~hyperframes.io.sparse`).
        With ``fps`` or ``at`` a frame may come more than once and ``at`` may go back, so
        the chunks' ``index`` counts the samples (0, 1, 2, ...),
        ``meta["input_frame"]`` holds each frame's index in the video and ``meta["at"]``
        the time asked for.

    Attributes:
        skipped: indices of the frames left out with ``on_corrupt="skip"``.

    Raises:
        MediaError: the file is missing, not a video, truncated or empty; when reading, a
            frame whose size differs from the stream's and no ``size`` was given.

    Note:
        Frame *i* is the *i*-th frame the decoder gives, whatever the timestamps say.
        ``start`` beyond :data:`SEEK_MIN_FRAMES` seeks to the keyframe before it, found by
        reading the packets up to it (:mod:`~hyperframes.io.frame_table`, no decoding), and
        every frame decoded from there to ``start`` must carry the timestamp the packets
        promised; where the timestamps cannot number the frames (missing, repeated, going
        backwards) or a frame does not match, it decodes from the first frame instead.
        :meth:`notes` says which it did.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pix_fmt: PixFmt = "rgb24",
        start: int = 0,
        stop: int | None = None,
        on_corrupt: OnCorrupt = "fail",
        threads: bool | int = True,
        size: tuple[int, int] | None = None,
        colour: Colour = "ffmpeg",
        rotation: Rotation | None = None,
        step: int = 1,
        keyframes: bool = False,
        fps: float | str | Fraction | None = None,
        at: Iterable[float | str | Fraction] | None = None,
        num_frames: int | None = None,
        workers: int | None = None,
    ) -> None:
        _check_choice("pix_fmt", pix_fmt, (*CHANNELS, "yuv420p", "native"))
        sampling = Sampling.of(step=step, keyframes=keyframes, fps=fps, at=at,
                               num_frames=num_frames)  # fmt: skip
        _check_choice("colour", colour, ("fast", "ffmpeg"))
        _check_choice("on_corrupt", on_corrupt, ("fail", "skip"))
        _check_choice("rotation", rotation or "keep", ("apply", "keep"))
        if start < 0 or (stop is not None and stop < start):
            raise ValueError(f"need 0 <= start <= stop, got start={start}, stop={stop}")
        if sampling.at is not None and (start or stop is not None):
            raise ValueError("at= names its frames by time; drop start and stop")
        self.sampling = sampling
        self.workers = max(1, workers or len(os.sched_getaffinity(0)))
        self.path = Path(path)
        self.pix_fmt: PixFmt = pix_fmt
        self.start, self.stop = int(start), stop
        self.on_corrupt: OnCorrupt = on_corrupt
        self.threads = threads
        self.size = None if size is None else _check_size(size)
        self.colour: Colour = colour
        self.skipped: list[int] = []
        container, stream = open_video(self.path)
        try:
            facts = stream_facts(container, stream)
            tags = {key: int(getattr(stream.codec_context, key)) for key in TAGS}
            # where to seek for `start`, or why decoding from the first frame is needed
            self._seek: Seek | str | None = None
            # a sampling: the frames wanted, and the jobs decoding them (None: from the top)
            self._wanted: np.ndarray | None = None
            self._jobs: list[Job] | None = None
            self._pts: np.ndarray | None = None
            self._keyframes: np.ndarray | None = None
            self._instants = np.zeros(0)  # fps, at: the time each sample was asked for
            self._first = 0  # the count of the first sample listed (resume_from, restrict)
            self._time_base = Fraction(1)
            self._decodes = 0  # frames the sampled read's decoders gave
            self._restarts = 0  # its jobs decoded from the first frame (a seek landed past)
            if sampling.sparse:
                self._sample(container, stream)
                container.seek(0, backward=True)
            elif self.start >= SEEK_MIN_FRAMES:
                self._seek = scan(container, stream, until=self.start).seek_to(self.start)
                container.seek(0, backward=True)
            angle = display_rotation(container, stream)
            others = streams_named(container, stream)
        except av.FFmpegError as exc:
            raise MediaError(f"{str(self.path)!r} is damaged ({exc}); re-encode it") from exc
        finally:
            container.close()
        self._facts = facts
        stream_size = (facts["width"], facts["height"])
        planes = pix_fmt in ("native", "yuv420p")
        if (rotation or ("keep" if planes else "apply")) == "apply" and angle:
            if planes:
                raise ValueError(
                    f"{str(self.path)!r} is tagged to be shown turned {angle} degrees, and "
                    f"pix_fmt={pix_fmt!r} planes cannot be turned; pass rotation='keep' "
                    "(the tag travels to the output) or pix_fmt='rgb24'"
                )
            turns, angle = angle // 90, 0
        else:
            turns = 0
        out_size = self.size or turned(stream_size, turns)
        native: Layout | None = None
        if pix_fmt == "native":
            native = native_layout(facts["pix_fmt"], *stream_size)
            if native is None or size is not None:
                raise ValueError(
                    f"{str(self.path)!r} decodes to {facts['pix_fmt']}, which pix_fmt='native' "
                    "does not keep as planes (or size= was given, which planes cannot take); "
                    "pass pix_fmt='rgb24' or 'yuv420p'"
                )
        self._frames_in = FrameConverter(
            self.path, pix_fmt, colour, native=native, stream_size=stream_size,
            out_size=out_size, turns=turns, resizes=self.size is not None,
        )  # fmt: skip
        self.spec = self._frames_in.layout(*out_size)
        total = facts["frames"]
        if total is not None and not facts["frames_estimated"] and self.start >= max(total, 1):
            raise ValueError(
                f"start={self.start} is past the last frame of {str(self.path)!r} "
                f"({total} frames); pass a start below {total}"
            )
        end = total if stop is None else (stop if total is None else min(stop, total))
        self.step = sampling.every
        self.length = None if end is None else -(-max(0, end - self.start) // self.step)
        if self._wanted is not None:
            self.length = len(self._wanted)
        self.info = {
            key: facts[key]
            for key in ("path", "fps", "rate", "time_base", "codec", "width", "height", "frames")
        }
        if others:  # what the frames leave behind (a store records it: unpack names it)
            self.info["other_streams"] = others
        if self.step > 1 and facts.get("rate"):  # every step-th frame: a slower rate
            self.info.update(rate=str(Fraction(facts["rate"]) / self.step),
                             fps=facts["fps"] / self.step)  # fmt: skip
        if sampling.fps is not None:  # frames at the rate asked for
            self.info.update(rate=str(sampling.fps), fps=float(sampling.fps))
        self.info.update(
            source_pix_fmt=facts["pix_fmt"],
            frames_estimated=facts["frames_estimated"],
            rotation=angle,
        )
        if pix_fmt in ("native", "yuv420p"):  # planes: a store keeps them, with their tags
            self.info.update(tags, layout=native.name if native else "yuv420p")
        self._thread_cap: int | None = None  # what the run's plan holds (use_memory)
        self._worker_cap: int | None = None  # the same for a sampled read's decoders
        self._container: av.container.InputContainer | None = None
        self._frames: Iterator[tuple[int, int, av.VideoFrame]] | None = None
        self._decoder: SparseDecoder | None = None
        self._after = -1  # resume_from: the samples up to this one are left out
        self._seen = 0
        self._last_time: float | None = None

    def footprint(self) -> Footprint:
        """The decoder's frames (and a frame of RGB at the stream's size where frames are
        resized after their conversion), on one thread and on the threads it would take
        (:mod:`.decoder_memory`)."""
        facts = self._facts
        if self._jobs is not None:  # a sampled read: a decoder a worker, frames in flight
            return sampled_decoding(facts["width"], facts["height"], facts["pix_fmt"],
                                    resized=self.size, pix_fmt=self.pix_fmt,
                                    workers=self.workers)  # fmt: skip
        return decoding(facts["width"], facts["height"], facts["pix_fmt"], resized=self.size,
                        pix_fmt=self.pix_fmt, threads=self.threads)  # fmt: skip

    def use_memory(self, nbytes: int) -> None:
        """Decode on as many threads as ``nbytes`` holds (FFmpeg's own count at most); a
        sampled read, on as many workers."""
        facts = self._facts
        frame, scratch = frame_bytes(facts["width"], facts["height"], facts["pix_fmt"],
                                      self.size, self.pix_fmt)  # fmt: skip
        if self._jobs is not None:
            decoded = facts["width"] * facts["height"] * 3 // 2
            self._worker_cap = workers_within(nbytes, frame, decoded, most=self.workers,
                                              scratch=scratch)  # fmt: skip
        if self.threads is True:
            most = auto_threads()
            fit = threads_within(nbytes, frame, most=most, scratch=scratch)
            self._thread_cap = fit if fit < most else None

    def open(self) -> None:
        """Open the decoder (also done by the first :meth:`read_into`)."""
        if self._container is not None:
            return
        container, stream = open_video(self.path)
        threads = self._thread_cap or self.threads
        if threads:
            stream.thread_type = "AUTO"
            if not isinstance(threads, bool):
                stream.codec_context.thread_count = int(threads)
        self._container, self._seen, self.skipped = container, 0, []
        self._decodes = self._restarts = 0
        self._last_time = None
        if self._jobs is not None:
            self._frames = self._sparse()
        elif self._wanted is not None:
            self._frames = self._from_top(container, stream, self._wanted)
        else:
            self._frames = ((n, n, f) for n, f in self._in_range(container, stream))

    def read_into(self, out: np.ndarray) -> Chunk:
        """Decode up to ``len(out)`` frames into ``out``; ``meta["pts"]`` holds seconds."""
        if out.shape[1:] != self.spec.shape or out.dtype != self.spec.dtype:
            raise ValueError(f"out must hold frames of {self.spec.describe()}, got {out.shape}")
        self.open()
        assert self._frames is not None
        index = np.empty(len(out), dtype=np.int64)
        numbers = np.empty(len(out), dtype=np.int64)
        pts = np.empty(len(out), dtype=np.float64)
        count = 0
        while count < len(out) and (item := next(self._frames, None)) is not None:
            sample, number, frame = item
            if sample <= self._after:
                continue
            self._frames_in.convert(frame, number, out[count], seen=self._seen)
            index[count], numbers[count] = sample, number
            if self._pts is not None:  # (a frame decoded by a worker: the table's time)
                pts[count] = float(int(self._pts[number]) * self._time_base)
            else:
                pts[count] = self._seconds(frame, number)
            count += 1
        meta: dict[str, np.ndarray] = {"pts": pts[:count]}
        if self.sampling.numbers_samples:
            meta["input_frame"] = numbers[:count]
            meta["at"] = self._instants[index[:count]]
        return Chunk(index[:count], meta)

    def resume_from(self, sample: int) -> None:
        """Leave out what comes before ``sample`` (a chunk ``index``): a run that wrote
        them goes on from there, over the same sampling."""
        if not self.sampling.sparse:
            raise ValueError("resume_from takes a sampled read; pass start= instead")
        if self._wanted is None:  # every step-th frame from the top: left out as read
            self._after = int(sample) - 1
            return
        if self.sampling.numbers_samples:
            position = int(sample) - self._first
        else:
            position = int(np.searchsorted(self._wanted, sample))
        self._keep(max(position, 0), len(self._wanted))

    def restrict(self, first: int, stop: int) -> None:
        """Give only the samples ``first`` to ``stop - 1`` of this read, in its order (a
        worker's share of it); their ids stay as the whole read gives them.

        Raises:
            ValueError: a read whose frames cannot be listed ahead (``step`` over
                timestamps that cannot number the frames).
        """
        if self._wanted is None:
            container, stream = open_video(self.path)
            try:
                self._sample(container, stream)
            finally:
                container.close()
        if self._wanted is None:
            raise ValueError(f"{str(self.path)!r}: its frames cannot be listed ahead, so the "
                             "read cannot be shared out; pass fps= or num_frames=")  # fmt: skip
        self._keep(first, stop)

    def _keep(self, first: int, stop: int) -> None:
        """Give only the listed samples ``first`` to ``stop - 1``."""
        assert self._wanted is not None
        if self.sampling.numbers_samples:
            self._first += first
        self._wanted = self._wanted[first:stop]
        self.length = len(self._wanted)
        if self._jobs is not None and self._keyframes is not None:
            self._jobs = plan_jobs(self._wanted, self._keyframes)

    def close(self) -> None:
        """Close the file; a later :meth:`read_into` starts again from ``start``."""
        if self._decoder is not None:
            self._decoder.close()
            self._decodes += self._decoder.decoded
            self._restarts += self._decoder.from_top
        if self._container is not None:
            self._container.close()
        self._container, self._frames, self._decoder = None, None, None

    def _in_range(
        self, container: av.container.InputContainer, stream: av.video.stream.VideoStream
    ) -> Iterator[tuple[int, av.VideoFrame]]:
        """The decoded frames with indices in ``[start, stop)``, with their indices."""
        seek = self._seek
        if isinstance(seek, Seek):
            container.seek(seek.pts, stream=stream, backward=True)
            try:
                yield from self._window(self._decoded(container, stream, seek))
            except _Untrusted:
                self._seek = "a frame decoded after the seek was not the one its packet promised"
                container.seek(0, backward=True)
                yield from self._window(self._decoded(container, stream, None))
        else:
            yield from self._window(self._decoded(container, stream, None))
        self._check_truncated(stream)
        if self._seen == 0 and not self.skipped and self.start == 0 and self.stop != 0:
            why = iso_damage(self.path)
            if why is not None:
                raise MediaError(damaged_message(self.path, why))
            raise MediaError(
                f"{str(self.path)!r} has no decodable video frames; check it with ffprobe"
            )

    def _sample(
        self, container: av.container.InputContainer, stream: av.video.stream.VideoStream
    ) -> None:
        """The frames the sampling wants, from the packets' numbering; where the
        timestamps cannot number the frames, from a first pass decoding them all."""
        sampling, base = self.sampling, Fraction(stream.time_base or Fraction(1, 1))
        until = None if sampling.at is not None or self.stop is None else self.stop
        table = scan(container, stream, until=until)
        if table.untrusted is None and len(table.pts):
            timeline = Timeline(table.pts, base, table.keyframes)
            self._wanted = sampling.pick(timeline, self.start, self.stop)
            self._instants = sampling.instants(timeline, self.start, self.stop)
            self._jobs, self._pts = plan_jobs(self._wanted, table.keyframes), table.pts
            self._keyframes, self._time_base = table.keyframes, base
            return
        self._seek = f"the packets cannot number the frames ({table.untrusted or 'none'})"
        if sampling.keyframes:
            raise MediaError(f"{str(self.path)!r}: keyframes cannot be numbered, {table.untrusted}")
        if sampling.every > 1:
            return  # every step-th frame from the top: no list needed
        container.seek(0, backward=True)
        pts = [frame.pts if frame.pts is not None else -1
               for _, frame in self._decoded(container, stream, None)]  # fmt: skip
        if not pts:
            raise MediaError(f"{str(self.path)!r} has no decodable video frames")
        timeline = Timeline(np.asarray(pts, np.int64), base)
        self._wanted = sampling.pick(timeline, self.start, self.stop)
        self._instants = sampling.instants(timeline, self.start, self.stop)

    def _sparse(self) -> Iterator[tuple[int, int, av.VideoFrame]]:
        """The wanted frames, decoded job by job (:mod:`~hyperframes.io.sparse`)."""
        assert self._jobs is not None and self._pts is not None
        facts = self._facts
        self._decoder = SparseDecoder(
            self.path, self._pts, self._jobs, workers=self._worker_cap or self.workers,
            on_corrupt=self._corrupt,
            first=self._first, frame_bytes=facts["width"] * facts["height"] * 3 // 2,
        )  # fmt: skip
        numbered = self.sampling.numbers_samples
        for sample, number, frame in self._decoder.frames():
            self._seen += 1
            yield (sample if numbered else number), number, frame

    def _from_top(
        self,
        container: av.container.InputContainer,
        stream: av.video.stream.VideoStream,
        wanted: np.ndarray,
    ) -> Iterator[tuple[int, int, av.VideoFrame]]:
        """The wanted frames decoding from the first frame, again wherever the order
        goes back (timestamps that cannot number the frames)."""
        numbered = self.sampling.numbers_samples
        backs = np.flatnonzero(np.diff(wanted) < 0) + 1  # where the order goes back
        for run in np.split(np.arange(len(wanted)), backs) if len(wanted) else []:
            container.seek(0, backward=True)
            left = iter(run.tolist())
            sample = next(left)
            for number, frame in self._decoded(container, stream, None):
                self._decodes += 1
                while sample >= 0 and wanted[sample] <= number:
                    if wanted[sample] == number:  # (one passed was left out as corrupt)
                        self._seen += 1
                        yield (self._first + sample if numbered else number), number, frame
                    sample = next(left, -1)
                if sample < 0:
                    break
            while sample >= 0:  # the frames ran out before these
                self._corrupt(int(wanted[sample]), "the decoder gave no frame for it")
                sample = next(left, -1)

    def notes(self) -> dict[str, Any]:
        """``seek``: how ``start`` was reached (absent for a start near the top); with a
        sampling, ``sampling`` (what was asked), ``decoded`` (frames the decoders gave)
        and ``kept``; ``fewer``: why fewer frames came than asked for."""
        notes: dict[str, Any] = {}
        if isinstance(self._seek, Seek):
            notes["seek"] = f"to the keyframe at frame {self._seek.index}, checked frame by frame"
        elif self._seek is not None:
            notes["seek"] = f"none: decoded from the first frame, because {self._seek}"
        if self.sampling.sparse:
            notes["sampling"] = self.sampling.describe()
            if self._jobs is not None or self._wanted is not None:
                notes["decoded"] = self._decodes + (self._decoder.decoded if self._decoder else 0)
            if self._restarts:
                notes["seek"] = (f"{self._restarts} groups of pictures decoded from the first "
                                 "frame: the seek to their key frame landed past it")  # fmt: skip
            notes["kept"] = self._seen
            asked = self.sampling.num_frames
            if asked is not None and self._wanted is not None and len(self._wanted) < asked:
                notes["fewer"] = (f"{len(self._wanted)} of the {asked} frames asked for: the "
                                  "range holds no more")  # fmt: skip
        return notes

    def _check_truncated(self, stream: av.video.stream.VideoStream) -> None:
        """Raise when decoding ended well before the duration the file declares."""
        duration, fps = self._facts["duration"], self._facts["fps"]
        if self.on_corrupt == "skip" or not duration or not fps or self._last_time is None:
            return
        declared_end = self._facts["start_time"] + duration
        if self._last_time < declared_end - max(0.1 * duration, 2 / fps):
            raise MediaError(
                f"{str(self.path)!r} ends at {self._last_time:.3f} s but declares "
                f"{declared_end:.3f} s; the file looks truncated: pass on_corrupt='skip' "
                "(--on-corrupt skip) to read what is there"
            )

    def _window(
        self, frames: Iterator[tuple[int, av.VideoFrame]]
    ) -> Iterator[tuple[int, av.VideoFrame]]:
        for number, frame in frames:
            if self.stop is not None and number >= self.stop:
                self._last_time = None  # stopped on purpose: not a truncation
                return
            if number < self.start:
                continue
            self._last_time = frame.time
            if (number - self.start) % self.step == 0:
                self._seen += 1
                yield number, frame

    def _decoded(
        self,
        container: av.container.InputContainer,
        stream: av.video.stream.VideoStream,
        seek: Seek | None,
    ) -> Iterator[tuple[int, av.VideoFrame]]:
        """Every frame from the current position, numbered from 0, or after ``seek`` from
        its keyframe, whose timestamp and those of the frames up to ``start`` must be the
        ones ``seek`` expects (else :class:`_Untrusted`)."""
        number: int | None = None if seek else 0  # None: before the keyframe
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.FFmpegError as exc:
                raise MediaError(
                    f"{str(self.path)!r} cannot be read past frame {number} ({exc}); "
                    f"the file is truncated or damaged: pass stop={number} or re-encode it"
                ) from exc
            try:
                frames = packet.decode()
            except av.FFmpegError as exc:
                if number is not None:
                    self._corrupt(number, str(exc))
                    number += 1
                continue
            for frame in frames:
                if number is None:  # after the seek: frames presented before its keyframe
                    assert seek is not None
                    if frame.pts is not None and frame.pts < seek.pts:
                        continue
                    number = seek.index
                if (
                    seek
                    and number <= self.start
                    and frame.pts != seek.expected[number - seek.index]
                ):
                    raise _Untrusted
                if frame.is_corrupt:
                    self._corrupt(number, "the decoder flagged it corrupt")
                else:
                    yield number, frame
                number += 1

    def _corrupt(self, number: int, why: str) -> None:
        if number < self.start or (self.stop is not None and number >= self.stop):
            return
        if self.on_corrupt == "skip":
            self.skipped.append(number)
            return
        raise CorruptFrame(
            f"frame {number} of {str(self.path)!r} cannot be decoded ({why}); "
            "pass on_corrupt='skip' (--on-corrupt skip) to leave damaged frames out",
            frame=number,
        )

    def _seconds(self, frame: av.VideoFrame, number: int) -> float:
        if frame.time is not None:
            return float(frame.time)
        return self._facts["start_time"] + number / (self._facts["fps"] or 1.0)

    def __repr__(self) -> str:
        return (
            f"VideoSource({str(self.path)!r}, spec={self.spec!r}, length={self.length}, "
            f"start={self.start}, stop={self.stop})"
        )
