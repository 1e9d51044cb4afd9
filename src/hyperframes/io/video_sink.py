"""Video files out through PyAV (FFmpeg): :class:`VideoSink`.

The sink encodes into a hidden temporary file next to the output and renames it into
place only when the run succeeded, so a failed or interrupted run leaves no half-written
video.

Example:
    >>> sink = VideoSink("out.mkv", codec="ffv1")  # doctest: +SKIP

Longer than 300 lines: the sink's three inputs (RGB or gray frames, I420 views, a video's
native planes) share its encoder set-up, timestamps and atomic commit.
"""

from __future__ import annotations

import contextlib
import os
from fractions import Fraction
from pathlib import Path
from typing import Any, TypedDict

import av
import av.container
import av.video.stream
import numpy as np

from ..errors import FrameError, MediaError
from ..frames import FrameSpec
from .base import Sink
from .carry import Carry
from .formats import check_frames, frame_format, i420_spec, rate_of
from .layouts import NATIVE, Layout, encodable_twin, layout_for, tags_in
from .publish import check_output, publish, temp_beside
from .tracks import Carrier

ENCODERS = ("libx264", "libx265", "ffv1", "libvpx-vp9", "mpeg4")
_CRF_CODECS = frozenset({"libx264", "libx265", "libvpx-vp9"})
_PRESET_CODECS = frozenset({"libx264", "libx265"})
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
           "veryslow", "placebo")  # fmt: skip
"""x264's and x265's speed presets, fastest first."""
CRF_RANGE = {"libx264": (0, 51), "libx265": (0, 51), "libvpx-vp9": (0, 63)}
"""The constant-quality values each encoder takes (lower is better)."""
_FFV1_FORMATS = {1: "gray", 3: "bgr0", 4: "bgra"}
_FFV1_DEEP = {1: "gray16le", 3: "gbrp16le", 4: "gbrap16le"}  # all 16 bits, lossless
#: Encoders that run their own threads and choose slices over frame threads when told
#: ``thread_type="SLICE"``, PyAV's default; FFmpeg's default (``"AUTO"``) gets frame threads.
_FRAME_THREADED = frozenset({"libx264"})
#: Encoders that copy their input in ``encode`` (x264): given views, not per-frame copies.
_COPIES_INPUT = frozenset({"libx264"})


class EncoderOptions(TypedDict, total=False):
    """The encoder's options, as :class:`VideoSink` takes them (a chunked run hands them to
    each segment's sink)."""

    codec: str
    crf: int | None
    preset: str | None
    pix_fmt: str | None
    options: dict[str, str] | None
    input_pix_fmt: str | None


class VideoSink(Sink):
    """Encodes frames into a video file with PyAV, committed atomically.

    Frames go to a hidden temporary file of the run's own in the output's folder
    (``.name.partial-PID-TOKEN.ext``,
    keeping the extension so FFmpeg picks the same muxer) that :meth:`close` flushes to
    disk and renames over the output when the run succeeded, and removes when it failed.

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
        input_pix_fmt: the frames are a video's planes, written as they are (no colour
            conversion; the colour tags come from the source's ``info``): ``"yuv420p"``
            for :func:`i420_spec` frames (``VideoSource(pix_fmt="yuv420p")``), a native
            layout's name (:data:`~hyperframes.io.layouts.NATIVE`) for frames of that
            layout, or ``"native"`` for the layout ``info["layout"]`` names
            (``VideoSource(pix_fmt="native")``, ``StoreSource(pix_fmt="native")``); the
            encoder gets that pixel format unless ``pix_fmt`` says another. By default
            the frames' shape says rgb24, gray or rgba.
        carry: what goes along with the frames (:class:`~.carry.Carry`): the sound,
            subtitles, attachments, metadata and chapters of the video the run reads
            (``info["path"]``), or of ``carry.source``, in step with the frames' times
            (:class:`~.tracks.Carrier`); ``notes()["streams"]`` says what became of each
            stream. ``None``: the video alone.

    Raises:
        ValueError: unknown or unavailable codec, or an option the codec does not take.
        FileExistsError: the output exists and ``overwrite`` is false.
        FileNotFoundError: the output's folder does not exist.
        PermissionError: the output's folder is not writable.

    Note:
        Frames that carry ``meta["pts"]`` keep those timestamps, relative to the first
        frame, in the source's time base when known (variable frame rate survives);
        otherwise frame ``n`` is shown at ``n / fps``. Subsampled formats such as
        ``yuv420p`` need an even width and height (except with ffv1, which codes odd
        sizes); odd sizes are refused with a message rather than silently padded or
        cropped.

        libx264 threads as the ``ffmpeg`` command does (``thread_type`` slice+frame,
        ``threads`` auto): frame threads, 1.5 per core, and a lookahead thread, so the
        x264 settings match ``ffmpeg -c:v libx264`` with the same crf and preset. PyAV's
        own default, slices (``threads=2 slices=2`` on 2 cores), made files about 1 %
        larger at the same crf and ran as fast: on 2 busy cores the two were within 4 %
        of each other in most runs at 720p and 1080p, while two very noisy 1080p runs
        favoured slices by 17-30 % (``benchmarks/transcode.py``). x264 cuts each frame
        into one slice per thread, so slices cost more bytes on more cores. Pass
        ``options={"thread_type": "slice"}`` for slices (less latency) or
        ``options={"threads": "N"}`` for another count.
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
        input_pix_fmt: str | None = None,
        carry: Carry | None = None,
    ) -> None:
        available = [name for name in ENCODERS if name in av.codecs_available]
        if codec not in available:
            raise ValueError(f"codec must be one of {available} (available here), got {codec!r}")
        if crf is not None and codec not in _CRF_CODECS:
            raise ValueError(f"{codec} takes no crf; pass options= with its own quality setting")
        if preset is not None and codec not in _PRESET_CODECS:
            raise ValueError(f"{codec} takes no preset; presets apply to {sorted(_PRESET_CODECS)}")
        if preset is not None and preset not in PRESETS:
            raise ValueError(f"preset={preset!r} is not one of {codec}'s: {', '.join(PRESETS)}")
        low, high = CRF_RANGE.get(codec, (0, 0))
        if crf is not None and not low <= crf <= high:
            raise ValueError(f"crf={crf} is outside {codec}'s range; pass {low} to {high}")
        formats = _formats(codec)
        if pix_fmt is not None and pix_fmt not in formats:
            raise ValueError(
                f"{codec} cannot encode pix_fmt {pix_fmt!r}; use one of {sorted(formats)}"
            )
        if input_pix_fmt not in (None, "native", *NATIVE):
            raise ValueError(
                f"input_pix_fmt must be 'native' or one of {sorted(NATIVE)}, got {input_pix_fmt!r}"
            )
        self.path = Path(os.path.abspath(path))  # user code may change the working folder
        check_output(self.path, overwrite=overwrite)
        self.codec, self.pix_fmt, self.fps = codec, pix_fmt, fps
        self.input_pix_fmt = input_pix_fmt
        self.options = _encoder_options(codec, crf, preset) | dict(options or {})
        self.temp = temp_beside(self.path)
        self.frames_written = 0
        self._container: av.container.OutputContainer | None = None
        self._stream: av.video.stream.VideoStream | None = None
        self._spec: FrameSpec | None = None
        self._format = "rgb24"
        self._layout: Layout | None = None  # frames of planes, not I420 views
        self._tags: dict[str, int] = {}
        self._source_base: Fraction | None = None
        self._time_base = Fraction(1, 30)
        self._use_pts: bool | None = None
        self._origin = 0.0
        self._last_pts = -1
        self._frame_seconds = 1 / 30
        self._step = 0  # between the last two timestamps
        self.retimed = 0  # frames whose timestamp went backwards or repeated
        self.carry = carry
        self._carrier: Carrier | None = None

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Create the temporary file and the encoder for frames of ``spec``."""
        if self.input_pix_fmt == "yuv420p" and len(spec.shape) == 2:
            self._format = "yuv420p"
            width, height = spec.shape[1], spec.shape[0] * 2 // 3
            if spec != i420_spec(width, height):
                raise FrameError(f"yuv420p frames need the shape of i420_spec(), got {spec}")
            pix_fmt = self.pix_fmt or "yuv420p"
            self._tags = tags_in(info)
        elif self.input_pix_fmt is not None:
            self._layout, pix_fmt = self._open_planes(spec, info)
            width, height = self._layout.width, self._layout.height
        else:
            self._format = frame_format(spec)
            height, width = spec.shape[:2]
            channels = 1 if len(spec.shape) == 2 else spec.shape[-1]
            deep = spec.dtype == np.uint16
            lossless = _FFV1_DEEP if deep else _FFV1_FORMATS
            pix_fmt = self.pix_fmt or (lossless[channels] if self.codec == "ffv1" else "yuv420p")
            if self.pix_fmt is None:  # a format the user chose may drop what it drops
                self._check_kept(pix_fmt, alpha=channels == 4, deep=deep)
        if (width % 2 or height % 2) and _subsampled(pix_fmt) and self.codec != "ffv1":
            raise ValueError(
                f"{self.codec} with pix_fmt {pix_fmt} needs an even width and height, got "
                f"{width}x{height}; resize to an even size or pass pix_fmt='yuv444p'"
            )
        rate = rate_of(self.fps or info.get("rate") or info.get("fps") or 30)
        self._time_base, self._frame_seconds = 1 / rate, float(1 / rate)
        if info.get("time_base"):
            self._source_base = rate_of(info["time_base"])
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
            if self.codec in _FRAME_THREADED:
                stream.codec_context.thread_type = "AUTO"
            for key, value in self._tags.items():  # planes' colour tags, into the stream
                setattr(stream.codec_context, key, value)
            if info.get("rotation"):  # the source's rotation tag, kept (VideoSource notes)
                stream.set_display_rotation(int(info["rotation"]))
            options: dict[str, object] = dict(self.options)
            stream.options = options
        except (av.FFmpegError, ValueError) as exc:
            self.close(ok=False)
            raise MediaError(f"cannot set up {self.codec} for {str(self.path)!r}: {exc}") from exc
        self._stream, self._spec = stream, spec
        source = self.carry and (self.carry.source or info.get("path"))
        if self.carry is not None and source:
            try:
                self._carrier = Carrier(self.carry, str(source), self._container,
                                        self.path.suffix, stream)  # fmt: skip
            except (av.FFmpegError, OSError) as exc:
                self.close(ok=False)
                raise MediaError(f"cannot read the streams of {str(source)!r}: {exc}") from exc

    def _check_kept(self, pix_fmt: str, *, alpha: bool, deep: bool) -> None:
        """Refuse frames whose alpha or 16 bits ``pix_fmt`` would drop unasked."""
        components = av.VideoFormat(pix_fmt, 2, 2).components
        lost = [what for what, lose in (
            ("alpha", alpha and not any(c.is_alpha for c in components)),
            ("16 bits a sample", deep and components[0].bits < 16),
        ) if lose]  # fmt: skip
        if lost:
            them = "them" if deep else "it"
            raise ValueError(
                f"the frames have {' and '.join(lost)}, which {self.codec} in {pix_fmt} "
                f"cannot hold; write .mkv with codec ffv1 (--codec ffv1) or .png images to "
                f"keep {them}, or pass pix_fmt (--pix-fmt {pix_fmt}) to leave {them} out"
            )

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
                video_frame = self._frame_of(plane)
                video_frame.time_base = self._time_base
                video_frame.pts = self._next_pts(None if pts is None else float(pts[number]))
                self._container.mux(self._stream.encode(video_frame))
            if self._carrier is not None:  # the other streams up to the last frame written
                self._carrier.until(self._origin + float(self._last_pts * self._time_base))
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
                if self._carrier is not None:  # the other streams up to the last frame's end
                    step = self._step or round(self._frame_seconds / self._time_base)
                    self._carrier.finish(
                        self._origin + float((self._last_pts + step) * self._time_base)
                    )
                container.close()
                container = None
                publish(self.temp, self.path)
                return str(self.path)
            if ok:
                raise MediaError(
                    f"no frames were written to {str(self.path)!r}; the input was empty"
                )
            return None
        except av.FFmpegError as exc:
            raise MediaError(f"finishing {str(self.path)!r} failed: {exc}") from exc
        finally:
            if self._carrier is not None:
                self._carrier.close()
            if container is not None:
                with contextlib.suppress(av.FFmpegError):  # the file is removed anyway
                    container.close()
            self.temp.unlink(missing_ok=True)

    def _open_planes(self, spec: FrameSpec, info: dict[str, Any]) -> tuple[Layout, str]:
        """Set up for frames of a native layout: the layout the encoder gets its planes in
        and the pixel format to encode."""
        name = info.get("layout") if self.input_pix_fmt == "native" else self.input_pix_fmt
        layout = layout_for(name, spec, info) if isinstance(name, str) else None
        if layout is None:
            raise FrameError(
                f"frames of shape {spec.shape} {spec.dtype} are not {name or 'native'} planes "
                f"of a {info.get('width')}x{info.get('height')} video; pass input_pix_fmt=None "
                "for RGB frames"
            )
        twin = encodable_twin(layout.name, _formats(self.codec))
        if twin is None and self.pix_fmt is None:
            raise ValueError(
                f"{self.codec} cannot encode {layout.name} planes; use codec 'ffv1' (it takes "
                "every native layout) or pass pix_fmt= to convert"
            )
        self._tags = tags_in(info)
        if twin is not None and twin != layout.name:  # yuvj planes as yuv, tagged full range
            self._tags.setdefault("color_range", 2)
        planes = Layout.of(twin or layout.name, layout.width, layout.height)
        return planes, self.pix_fmt or planes.name

    def _frame_of(self, plane: np.ndarray) -> av.VideoFrame:
        """A view of ``plane`` for encoders that copy their input at once, else a copy (the
        batch's slot is reused, and other encoders may keep a frame after ``encode``)."""
        if self._layout is not None:
            return self._layout.to_frame(plane, self._tags)
        if self.codec in _COPIES_INPUT and plane.flags.c_contiguous:
            return av.VideoFrame.from_numpy_buffer(plane, format=self._format)
        return av.VideoFrame.from_ndarray(plane, format=self._format)

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
            if self._carrier is not None:
                self._carrier.start(self._origin)
        elif self._carrier is not None and self.carry and not self.carry.source:
            raise MediaError(
                "the frames carry no times, so the input's other streams cannot be kept in "
                "step with them; pass carry=None"
            )
        self._stream.codec_context.time_base = self._time_base

    def _next_pts(self, seconds: float | None) -> int:
        """The frame's timestamp in the stream's time base: the source's, relative to the
        first frame; where it goes backwards or repeats (two files joined), the frame is
        shown one step after the last (the step between the two frames before), and the
        frames after it keep their spacing."""
        if seconds is None or not self._use_pts:
            value = self._last_pts + 1
        else:
            value = round((seconds - self._origin) / self._time_base)
            if value <= self._last_pts and self._last_pts >= 0:
                step = self._step or max(1, round(self._frame_seconds / self._time_base))
                self._origin -= float((self._last_pts + step - value) * self._time_base)
                value = self._last_pts + step
                self.retimed += 1
        self._step = value - self._last_pts if self._last_pts >= 0 else 0
        self._last_pts = value
        return value

    def notes(self) -> dict[str, Any]:
        """``retimed_frames``: how many frames got a new timestamp because theirs went
        backwards or repeated; ``streams``: what became of the input's other streams
        (with ``carry``, :meth:`~.tracks.Carrier.described`)."""
        notes: dict[str, Any] = {"retimed_frames": self.retimed} if self.retimed else {}
        described = self._carrier.described() if self._carrier is not None else {}
        if described:
            notes["streams"] = described
        return notes

    def __repr__(self) -> str:
        return f"VideoSink({str(self.path)!r}, codec={self.codec!r}, options={self.options})"


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


def encodes_planes(codec: str, layout: str | None, width: int, height: int) -> bool:
    """Whether ``VideoSink(codec=codec, input_pix_fmt=layout)`` writes ``width x height``
    frames of that native layout as they are: the encoder takes the layout (or its ``yuv``
    twin) at that size (odd sizes of subsampled planes: ffv1 only)."""
    if layout not in NATIVE or codec not in av.codecs_available:
        return False
    twin = encodable_twin(layout, _formats(codec))
    odd = bool(width % 2 or height % 2)
    return twin is not None and (codec == "ffv1" or not (odd and _subsampled(twin)))


def _formats(codec: str) -> set[str]:
    return {fmt.name for fmt in av.Codec(codec, "w").video_formats or ()}


def _subsampled(pix_fmt: str) -> bool:
    """Whether ``pix_fmt`` stores chroma at a lower resolution than luma."""
    return any(c.width < 2 or c.height < 2 for c in av.VideoFormat(pix_fmt, 2, 2).components)
