"""Video files in and out through PyAV (FFmpeg): :class:`VideoSource` and :class:`VideoSink`.

The source decodes straight into the pool slots the engine hands over and stamps
every frame with its presentation time (``meta["pts"]``, seconds), so variable
frame rate survives a round trip. The sink encodes into a hidden temporary file
next to the output and renames it into place only when the run succeeded.

Example:
    >>> source = VideoSource("in.mp4", pix_fmt="rgb24", start=100, stop=400)  # doctest: +SKIP
    >>> sink = VideoSink("out.mkv", codec="ffv1")  # doctest: +SKIP

Note:
    Colour conversion can cost more than decoding. For ``yuv420p`` input tagged BT.601
    or untagged (what swscale also treats as BT.601), the 4:2:0 planes are converted with
    ``cv2.cvtColor(COLOR_YUV2RGB_I420)``, measured 1.3-1.6x faster than
    ``to_ndarray(format="rgb24")`` on 720p H.264 (``benchmarks/video_parts.py``). Both use
    the BT.601 limited-range matrix; they differ only in rounding and chroma upsampling
    (OpenCV: nearest, swscale: bilinear): up to 5 levels at sharp colour edges, under
    1 on average. Other inputs (BT.709-tagged, full-range ``yuvj420p``, 4:2:2, 4:4:4,
    odd sizes) and ``pix_fmt="gray"`` go through swscale.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import av
import av.container
import av.video.stream
import cv2
import numpy as np

from ..engine.frames import FrameSpec
from ..errors import CorruptFrame, FrameError, MediaError
from .base import Chunk, Sink, Source
from .probe import open_video, stream_facts, vfr_suspected

PixFmt = Literal["rgb24", "gray", "rgba", "yuv420p"]
OnCorrupt = Literal["fail", "skip"]

CHANNELS: dict[str, int] = {"gray": 1, "rgb24": 3, "rgba": 4}
_I420_TO = {"rgb24": cv2.COLOR_YUV2RGB_I420, "rgba": cv2.COLOR_YUV2RGBA_I420}
#: AVColorSpace values swscale converts with the BT.601 matrix: unspecified, BT470BG, SMPTE170M.
_BT601 = frozenset({2, 5, 6})
#: Below this start frame, decoding forward from the first frame is cheaper than a seek.
SEEK_MIN_FRAMES = 64

ENCODERS = ("libx264", "libx265", "ffv1", "libvpx-vp9", "mpeg4")
_CRF_CODECS = frozenset({"libx264", "libx265", "libvpx-vp9"})
_PRESET_CODECS = frozenset({"libx264", "libx265"})
_FFV1_FORMATS = {1: "gray", 3: "bgr0", 4: "bgra"}


def i420_spec(width: int, height: int) -> FrameSpec:
    """The spec of yuv420p frames as PyAV lays them out: the Y plane (``height`` rows), then
    the U and V planes (``height / 4`` rows each), all ``width`` wide, in one uint8 array.

    Raises:
        ValueError: an odd width or height, which yuv420p cannot hold.
    """
    if width % 2 or height % 2:
        raise ValueError(
            f"yuv420p frames need an even width and height, got {width}x{height}; "
            "read them as rgb24 instead"
        )
    return FrameSpec((height * 3 // 2, width), np.uint8)


def frame_format(spec: FrameSpec) -> str:
    """The PyAV pixel format of frames of ``spec`` (``gray``, ``rgb24`` or ``rgba``).

    Raises:
        FrameError: the spec is not ``uint8`` ``(H, W)`` or ``(H, W, 1|3|4)``.
    """
    channels = 1 if len(spec.shape) == 2 else spec.shape[-1]
    if spec.dtype != np.uint8 or len(spec.shape) not in (2, 3) or channels not in (1, 3, 4):
        raise FrameError(
            f"frames must be uint8 (H, W) or (H, W, 1|3|4) to write as video or images, "
            f"got {spec.describe()}; convert with a map stage first"
        )
    return {1: "gray", 3: "rgb24", 4: "rgba"}[channels]


def check_frames(frames: np.ndarray, spec: FrameSpec, where: str) -> None:
    """Raise :class:`FrameError` unless ``frames`` is a batch of frames of ``spec``."""
    if frames.shape[1:] != spec.shape or frames.dtype != spec.dtype:
        got = f"{'x'.join(map(str, frames.shape[1:]))} {frames.dtype}"
        raise FrameError(
            f"{where} was opened for frames of {spec.describe()}, got {got}; "
            "every frame of one output must have the same shape and dtype"
        )


def _check_choice(name: str, value: str, allowed: tuple[str, ...] | frozenset[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")


class _Overshoot(Exception):
    """A seek landed after ``start``: frame indices cannot be derived; decode from the top."""


class VideoSource(Source):
    """Frames of the first video stream of a file, decoded with PyAV.

    Args:
        path: the video file.
        pix_fmt: ``"rgb24"`` gives ``(H, W, 3)`` frames, ``"gray"`` ``(H, W, 1)``,
            ``"rgba"`` ``(H, W, 4)``, all ``uint8``; ``"yuv420p"`` gives the decoded planes
            with no colour conversion (see :func:`i420_spec`), the fast path for jobs that
            end in a yuv420p encoder.
        start: first frame index to produce (frames are numbered from 0 in presentation
            order).
        stop: one past the last frame index to produce; ``None`` reads to the end.
        on_corrupt: ``"fail"`` raises :class:`CorruptFrame` at the first frame that cannot
            be decoded; ``"skip"`` leaves it out (its index is missing from the chunk's
            ``index``) and lists it in :attr:`skipped`.
        threads: ``True`` lets FFmpeg decode with frame and slice threads, ``False``
            decodes on one thread, an ``int`` sets the thread count.

    Attributes:
        skipped: indices of the frames left out with ``on_corrupt="skip"``.

    Raises:
        MediaError: the file is missing, not a video, truncated or empty.

    Note:
        ``start`` beyond :data:`SEEK_MIN_FRAMES` on a constant-rate stream seeks to the
        keyframe before it and decodes forward; frame indices are then derived from
        timestamps. Variable-rate streams are decoded from the first frame, because their
        timestamps do not give frame indices.
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
    ) -> None:
        _check_choice("pix_fmt", pix_fmt, (*CHANNELS, "yuv420p"))
        _check_choice("on_corrupt", on_corrupt, ("fail", "skip"))
        if start < 0 or (stop is not None and stop < start):
            raise ValueError(f"need 0 <= start <= stop, got start={start}, stop={stop}")
        self.path = Path(path)
        self.pix_fmt: PixFmt = pix_fmt
        self.start, self.stop = int(start), stop
        self.on_corrupt: OnCorrupt = on_corrupt
        self.threads = threads
        self.skipped: list[int] = []
        container, stream = open_video(self.path)
        try:
            facts = stream_facts(container, stream)
            self._vfr = self.start >= SEEK_MIN_FRAMES and vfr_suspected(container, stream)
        except av.FFmpegError as exc:
            raise MediaError(f"{str(self.path)!r} is damaged ({exc}); re-encode it") from exc
        finally:
            container.close()
        self._facts = facts
        if pix_fmt == "yuv420p":
            self.spec = i420_spec(facts["width"], facts["height"])
        else:
            self.spec = FrameSpec((facts["height"], facts["width"], CHANNELS[pix_fmt]))
        total = facts["frames"]
        if total is not None and not facts["frames_estimated"] and self.start >= max(total, 1):
            raise ValueError(
                f"start={self.start} is past the last frame of {str(self.path)!r} "
                f"({total} frames); pass a start below {total}"
            )
        end = total if stop is None else (stop if total is None else min(stop, total))
        self.length = None if end is None else max(0, end - self.start)
        self.info = {
            key: facts[key]
            for key in ("path", "fps", "rate", "time_base", "codec", "width", "height", "frames")
        }
        self.info.update(
            source_pix_fmt=facts["pix_fmt"], frames_estimated=facts["frames_estimated"]
        )
        self._container: av.container.InputContainer | None = None
        self._frames: Iterator[tuple[int, av.VideoFrame]] | None = None
        self._seen = 0
        self._last_time: float | None = None

    def open(self) -> None:
        """Open the decoder (also done by the first :meth:`read_into`)."""
        if self._container is not None:
            return
        container, stream = open_video(self.path)
        if self.threads:
            stream.thread_type = "AUTO"
            if not isinstance(self.threads, bool):
                stream.codec_context.thread_count = int(self.threads)
        self._container, self._seen, self.skipped = container, 0, []
        self._last_time = None
        self._frames = self._in_range(container, stream)

    def read_into(self, out: np.ndarray) -> Chunk:
        """Decode up to ``len(out)`` frames into ``out``; ``meta["pts"]`` holds seconds."""
        if out.shape[1:] != self.spec.shape or out.dtype != self.spec.dtype:
            raise ValueError(f"out must hold frames of {self.spec.describe()}, got {out.shape}")
        self.open()
        assert self._frames is not None
        index = np.empty(len(out), dtype=np.int64)
        pts = np.empty(len(out), dtype=np.float64)
        count = 0
        while count < len(out) and (item := next(self._frames, None)) is not None:
            number, frame = item
            self._convert(frame, out[count])
            index[count] = number
            pts[count] = self._seconds(frame, number)
            count += 1
        return Chunk(index[:count], {"pts": pts[:count]})

    def close(self) -> None:
        """Close the file; a later :meth:`read_into` starts again from ``start``."""
        if self._container is not None:
            self._container.close()
        self._container, self._frames = None, None

    def _in_range(
        self, container: av.container.InputContainer, stream: av.video.stream.VideoStream
    ) -> Iterator[tuple[int, av.VideoFrame]]:
        """The decoded frames with indices in ``[start, stop)``, with their indices."""
        first: int | None = 0
        if self.start >= SEEK_MIN_FRAMES and not self._vfr and self._facts["fps"]:
            t0, fps = self._facts["start_time"], self._facts["fps"]
            target = t0 + (self.start - 0.5) / fps
            container.seek(int(target / stream.time_base), stream=stream, backward=True)
            first = None
        try:
            yield from self._window(self._decoded(container, stream, first))
        except _Overshoot:
            container.seek(0, backward=True)
            yield from self._window(self._decoded(container, stream, 0))
        self._check_truncated(stream)
        if self._seen == 0 and not self.skipped and self.start == 0 and self.stop != 0:
            raise MediaError(
                f"{str(self.path)!r} has no decodable video frames; check it with ffprobe"
            )

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
            if number >= self.start:
                self._seen += 1
                self._last_time = frame.time
                yield number, frame

    def _decoded(
        self,
        container: av.container.InputContainer,
        stream: av.video.stream.VideoStream,
        first: int | None,
    ) -> Iterator[tuple[int, av.VideoFrame]]:
        """Every frame from the current position, numbered from ``first``.

        ``first=None`` (after a seek) numbers frames from the first one's timestamp and
        raises :class:`_Overshoot` when the seek landed after ``start``.
        """
        number = first
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
                if number is None:
                    number = self._index_of(frame)
                if frame.is_corrupt:
                    self._corrupt(number, "the decoder flagged it corrupt")
                else:
                    yield number, frame
                number += 1

    def _index_of(self, frame: av.VideoFrame) -> int:
        """The index of the first frame after a seek, from its timestamp (constant rate)."""
        if frame.time is None:
            raise _Overshoot
        number = round((frame.time - self._facts["start_time"]) * self._facts["fps"])
        if number > self.start:
            raise _Overshoot
        return int(number)

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

    def _convert(self, frame: av.VideoFrame, dst: np.ndarray) -> None:
        """Write ``frame`` into ``dst`` in :attr:`pix_fmt`."""
        if self.pix_fmt == "yuv420p":  # planes as decoded: no colour conversion at all
            planes = frame.to_ndarray() if frame.format.name == "yuv420p" else None
            dst[...] = planes if planes is not None else frame.to_ndarray(format="yuv420p")
            return
        code = _I420_TO.get(self.pix_fmt)
        if (
            code is not None
            and frame.format.name == "yuv420p"
            and frame.colorspace in _BT601
            and frame.width % 2 == 0
            and frame.height % 2 == 0
            and dst.flags.c_contiguous
        ):
            cv2.cvtColor(frame.to_ndarray(), code, dst=dst)
        else:
            dst[...] = frame.to_ndarray(format=self.pix_fmt).reshape(dst.shape)

    def _seconds(self, frame: av.VideoFrame, number: int) -> float:
        if frame.time is not None:
            return float(frame.time)
        return self._facts["start_time"] + number / (self._facts["fps"] or 1.0)

    def __repr__(self) -> str:
        return (
            f"VideoSource({str(self.path)!r}, spec={self.spec!r}, length={self.length}, "
            f"start={self.start}, stop={self.stop})"
        )


class VideoSink(Sink):
    """Encodes frames into a video file with PyAV, committed atomically.

    Frames go to a hidden temporary file in the output's folder (``.name.partial.ext``,
    keeping the extension so FFmpeg picks the same muxer) that :meth:`close` renames over
    the output when the run succeeded and removes when it failed.

    Args:
        path: the output file; its extension chooses the container (``.mp4``, ``.mkv``...).
        codec: one of :data:`ENCODERS` that this FFmpeg build has.
        crf: constant-quality level (libx264, libx265, libvpx-vp9); lower is better.
        preset: speed preset (libx264, libx265), e.g. ``"ultrafast"``, ``"veryfast"``.
        pix_fmt: the encoded pixel format; by default ``gray``/``bgr0``/``bgra`` for ffv1
            (lossless) and ``yuv420p`` for the others.
        fps: frame rate when frames carry no ``"pts"``; defaults to the source's rate
            (``info["rate"]``), else 30.
        overwrite: replace an existing output; otherwise an existing output is an error
            raised here, before any work.
        options: more encoder options (FFmpeg names, string values); they win over the above.
        input_pix_fmt: ``"yuv420p"`` when the frames are yuv420p planes
            (``VideoSource(pix_fmt="yuv420p")``, see :func:`i420_spec`); by default the
            frames' shape says rgb24, gray or rgba.

    Raises:
        ValueError: unknown or unavailable codec, or an option the codec does not take.
        FileExistsError: the output exists and ``overwrite`` is false.
        FileNotFoundError: the output's folder does not exist.
        PermissionError: the output's folder is not writable.

    Note:
        Frames that carry ``meta["pts"]`` keep those timestamps, relative to the first
        frame, in the source's time base when known (variable frame rate survives);
        otherwise frame ``n`` is shown at ``n / fps``. Subsampled formats such as
        ``yuv420p`` need an even width and height; odd sizes are refused with a
        message rather than silently padded or cropped.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        codec: str = "libx264",
        crf: int | None = None,
        preset: str | None = None,
        pix_fmt: str | None = None,
        fps: float | Fraction | str | None = None,
        overwrite: bool = False,
        options: dict[str, str] | None = None,
        input_pix_fmt: Literal["yuv420p"] | None = None,
    ) -> None:
        available = [name for name in ENCODERS if name in av.codecs_available]
        if codec not in available:
            raise ValueError(f"codec must be one of {available} (available here), got {codec!r}")
        if crf is not None and codec not in _CRF_CODECS:
            raise ValueError(f"{codec} takes no crf; pass options= with its own quality setting")
        if preset is not None and codec not in _PRESET_CODECS:
            raise ValueError(f"{codec} takes no preset; presets apply to {sorted(_PRESET_CODECS)}")
        formats = {fmt.name for fmt in av.Codec(codec, "w").video_formats or ()}
        if pix_fmt is not None and pix_fmt not in formats:
            raise ValueError(
                f"{codec} cannot encode pix_fmt {pix_fmt!r}; use one of {sorted(formats)}"
            )
        self.path = Path(path)
        _check_writable(self.path, overwrite=overwrite)
        self.codec, self.pix_fmt, self.fps = codec, pix_fmt, fps
        self.input_pix_fmt = input_pix_fmt
        self.options = _encoder_options(codec, crf, preset) | dict(options or {})
        self.temp = self.path.with_name(f".{self.path.stem}.partial{self.path.suffix}")
        self.frames_written = 0
        self._container: av.container.OutputContainer | None = None
        self._stream: av.video.stream.VideoStream | None = None
        self._spec: FrameSpec | None = None
        self._format = "rgb24"
        self._source_base: Fraction | None = None
        self._time_base = Fraction(1, 30)
        self._use_pts: bool | None = None
        self._origin = 0.0
        self._last_pts = -1

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Create the temporary file and the encoder for frames of ``spec``."""
        if self.input_pix_fmt == "yuv420p":
            self._format = "yuv420p"
            width, height = spec.shape[1], spec.shape[0] * 2 // 3
            if spec != i420_spec(width, height):
                raise FrameError(f"yuv420p frames need the shape of i420_spec(), got {spec}")
            pix_fmt = self.pix_fmt or "yuv420p"
        else:
            self._format = frame_format(spec)
            height, width = spec.shape[:2]
            channels = CHANNELS[self._format]
            default = _FFV1_FORMATS[channels] if self.codec == "ffv1" else "yuv420p"
            pix_fmt = self.pix_fmt or default
        if (width % 2 or height % 2) and _subsampled(pix_fmt):
            raise ValueError(
                f"{self.codec} with pix_fmt {pix_fmt} needs an even width and height, got "
                f"{width}x{height}; resize to an even size or pass pix_fmt='yuv444p'"
            )
        rate = _fraction(self.fps or info.get("rate") or info.get("fps") or 30)
        self._time_base = 1 / rate
        if info.get("time_base"):
            self._source_base = _fraction(info["time_base"])
        try:
            self._container = av.open(str(self.temp), mode="w")
        except (av.FFmpegError, ValueError) as exc:
            raise MediaError(
                f"cannot write a video named {str(self.path)!r} ({exc}); "
                "use an extension FFmpeg knows, such as .mp4 or .mkv"
            ) from exc
        try:
            stream = self._container.add_stream(self.codec, rate=rate)
            assert isinstance(stream, av.video.stream.VideoStream)
            stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
            options: dict[str, object] = dict(self.options)
            stream.options = options
        except (av.FFmpegError, ValueError) as exc:
            self.close(ok=False)
            raise MediaError(f"cannot set up {self.codec} for {str(self.path)!r}: {exc}") from exc
        self._stream, self._spec = stream, spec

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        """Encode one batch; timestamps come from ``meta["pts"]`` when present."""
        if self._container is None or self._stream is None or self._spec is None:
            raise RuntimeError("VideoSink.write called before open() or after close()")
        check_frames(frames, self._spec, f"video sink {str(self.path)!r}")
        pts = meta.get("pts")
        if self._use_pts is None:
            self._start_clock(pts)
        try:
            for number, frame in enumerate(frames):
                plane = frame[..., 0] if self._format == "gray" and frame.ndim == 3 else frame
                video_frame = av.VideoFrame.from_ndarray(plane, format=self._format)
                video_frame.time_base = self._time_base
                video_frame.pts = self._next_pts(None if pts is None else float(pts[number]))
                self._container.mux(self._stream.encode(video_frame))
        except av.FFmpegError as exc:
            raise MediaError(
                f"encoding {str(self.path)!r} with {self.codec} failed: {exc}"
            ) from exc
        self.frames_written += len(frames)

    def close(self, *, ok: bool) -> str | None:
        """Finish the file and rename it into place (``ok=True``), or remove it.

        Returns:
            The output path, or ``None`` after ``ok=False``.

        Raises:
            MediaError: ``ok=True`` but no frame was written, or the encoder failed to flush.
        """
        container, stream = self._container, self._stream
        self._container = self._stream = None
        try:
            if ok and container is not None and stream is not None and self.frames_written:
                container.mux(stream.encode(None))
                container.close()
                container = None
                os.replace(self.temp, self.path)
                return str(self.path)
            if ok:
                raise MediaError(
                    f"no frames were written to {str(self.path)!r}; the input was empty"
                )
            return None
        except av.FFmpegError as exc:
            raise MediaError(f"finishing {str(self.path)!r} failed: {exc}") from exc
        finally:
            if container is not None:
                with contextlib.suppress(av.FFmpegError):  # the file is removed anyway
                    container.close()
            self.temp.unlink(missing_ok=True)

    def _start_clock(self, pts: np.ndarray | None) -> None:
        """Fix the time base at the first batch: the source's when frames carry pts."""
        assert self._stream is not None
        self._use_pts = pts is not None and len(pts) > 0
        if self._use_pts:
            assert pts is not None
            base = self._source_base
            if base is None or (self.codec == "mpeg4" and base.denominator > 65535):
                base = Fraction(1, 60000 if self.codec == "mpeg4" else 90000)
            self._time_base, self._origin = base, float(pts[0])
        self._stream.codec_context.time_base = self._time_base

    def _next_pts(self, seconds: float | None) -> int:
        if seconds is None or not self._use_pts:
            value = self._last_pts + 1
        else:
            value = max(round((seconds - self._origin) / self._time_base), self._last_pts + 1)
        self._last_pts = value
        return value

    def __repr__(self) -> str:
        return f"VideoSink({str(self.path)!r}, codec={self.codec!r}, options={self.options})"


def _check_writable(path: Path, *, overwrite: bool) -> None:
    """Raise the right ``OSError`` now, before any work, if ``path`` cannot be written."""
    folder = path.parent
    if path.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder; name a file to write")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{str(path)!r} exists; pass overwrite=True or choose another name")
    if not folder.is_dir():
        raise FileNotFoundError(f"folder {str(folder)!r} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"folder {str(folder)!r} is not writable; choose another folder")


def _encoder_options(codec: str, crf: int | None, preset: str | None) -> dict[str, str]:
    options: dict[str, str] = {}
    if crf is not None:
        options["crf"] = str(crf)
        if codec == "libvpx-vp9":
            options["b"] = "0"  # constant quality needs the bit rate unset
    if preset is not None:
        options["preset"] = preset
    if codec == "libx265":
        options["x265-params"] = "log-level=error"
    return options


def _subsampled(pix_fmt: str) -> bool:
    """Whether ``pix_fmt`` stores chroma at a lower resolution than luma."""
    return any(c.width < 2 or c.height < 2 for c in av.VideoFormat(pix_fmt, 2, 2).components)


def _fraction(value: float | Fraction | str) -> Fraction:
    """A rate or time base as a fraction: ``"30000/1001"``, ``29.97``, ``Fraction(1, 25)``."""
    try:
        result = (
            Fraction(value)
            if isinstance(value, str)
            else Fraction(value).limit_denominator(1_000_000)
        )
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"a rate must be a positive number or 'a/b', got {value!r}") from exc
    if result <= 0:
        raise ValueError(f"a rate must be a positive number or 'a/b', got {value!r}")
    return result
