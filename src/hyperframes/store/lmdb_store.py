"""``FrameStore``: random access by frame index into a hyperframe store on LMDB.

Opening validates the header, the state and every row of the group table; reading a
frame checks its record's checksum and then the decoded frame's, so a damaged store
raises :class:`~hyperframes.errors.StoreCorrupt` naming the frame, never returns a
wrong one. Reads go through the tiered cache (``cache.py``); sequential access
reads the next hyperframe ahead on a background thread.

Example:
    >>> with FrameStore("clip.hfs") as store:  # doctest: +SKIP
    ...     frame = store[1234]
    ...     clip = store[100:200]          # (100, H, W, C), half-open
    ...     last = store[-1]

A store of a video's native planes (``pack`` of a video keeps the decoder's yuv420p, 4:2:2,
4:4:4, gray or 10-bit planes bit-exact) gives RGB by default, converted exactly as
:class:`~hyperframes.io.video.VideoSource` converts; ``pix_fmt="native"`` (or the layout's
own name, e.g. ``"yuv420p"``) gives the planes as stored (see
:class:`~hyperframes.io.layouts.Layout`).

Note:
    Frames come back read-only (they may be shared with the cache); copy one before
    writing to it. Another process may append to a store while it is open here; call
    :meth:`FrameStore.refresh` to see the groups it has committed since.

Longer than 300 lines: FrameStore's read path: cache tiers, decode policy and read-ahead
decide together what one read costs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import lmdb
import numpy as np

from ..engine.watch import CacheTier
from ..errors import StoreCorrupt, StoreError
from ..frames import FrameSpec, describe_shape
from ..hyper import decode_frame, decode_group
from ..hyper import group_header as group_format
from ..io.layouts import to_rgb
from . import _env
from . import format as fmt
from .cache import DEFAULT_POLICY, CacheStats, Policy, TieredCache
from .info import StoreInfo
from .table import GroupTable, read_rows
from .writer import StoreWriter

Decode = Literal["auto", "group", "frame"]
READ_AHEAD_REACH = 8
"""An access within this many frames of the previous one is a local move (playback or
scrubbing), not a jump."""

BAND_THREADS = 4
"""Most threads a store decodes the bands of a frame on (fewer on fewer cores)."""


def is_local_move(frame: int, last: int | None) -> bool:
    """Whether an access to ``frame`` after one to ``last`` moves by 1..READ_AHEAD_REACH."""
    return last is not None and 0 < abs(frame - last) <= READ_AHEAD_REACH


GROUP_DECODE_MAX = 16
"""``decode="auto"`` decodes whole groups of up to this many frames (a 50-frame 720p group
takes about 0.4 s: longer ones are read frame by frame, each 10-25 ms)."""


def decodes_group(decode: Decode, frame: int, last: int | None, length: int) -> bool:
    """Whether a miss on ``frame`` (after an access to ``last``) decodes its whole group of
    ``length`` frames."""
    if decode == "group":
        return True
    return decode == "auto" and length <= GROUP_DECODE_MAX and is_local_move(frame, last)


def read_ahead_group(frame: int, last: int | None, group: int, groups: int) -> int | None:
    """The group to read ahead after an access to ``frame`` (in ``group``), or ``None``.

    Moving forward (``0 < frame - last <= READ_AHEAD_REACH``) reads the next group;
    moving back by as much reads the previous one.
    """
    if last is None or not is_local_move(frame, last):
        return None
    target = group + 1 if frame > last else group - 1
    return target if 0 <= target < groups else None


class FrameStore:
    """A store opened for reading (see the module docstring).

    Args:
        path: the store folder.
        hot_bytes: capacity of the decoded-frame tier.
        warm_bytes: capacity of the compressed-record tier.
        policy: the tiers' replacement policy, ``"s3fifo"`` (default) or ``"lru"``.
        decode: on a miss, ``"group"`` decodes the whole hyperframe and caches every frame
            of it (neighbours come almost free); ``"frame"`` decodes only the frame asked
            for (and the records it depends on); ``"auto"`` (default) decodes the whole
            group when the access moves locally (by 1..:data:`READ_AHEAD_REACH` frames
            from the last one: playback, scrubbing) and the group has at most
            :data:`GROUP_DECODE_MAX` frames, else only the frame (a random frame of a
            50-frame 720p group costs 10-25 ms alone, about 0.4 s with its group).
            With either ``"group"`` or ``"auto"``, a group is decoded whole (and read
            ahead) only when the hot tier can hold it; otherwise frame by frame.
        read_ahead: read the next hyperframe in the background during sequential access.
        pix_fmt: for a store of a video's native planes, ``"rgb24"`` (default) converts
            each frame to ``(H, W, 3)`` RGB as :class:`~hyperframes.io.video.VideoSource`
            does; ``"native"`` or the layout's name (``"yuv420p"``...) gives the planes
            exactly as decoded. Other stores give their frames as stored either way.

    Raises:
        StoreError: not a store, a store of another format version, or already open for
            writing in this process.
        StoreCorrupt: any field of the header, state or group table fails validation.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        hot_bytes: int = 256 << 20,
        warm_bytes: int = 64 << 20,
        policy: Policy = DEFAULT_POLICY,
        decode: Decode = "auto",
        read_ahead: bool = True,
        pix_fmt: str = "rgb24",
    ) -> None:
        if decode not in ("auto", "group", "frame"):
            raise ValueError(f"decode must be 'auto', 'group' or 'frame', got {decode!r}")
        self.path = Path(path)
        self.cache = TieredCache(hot_bytes=hot_bytes, warm_bytes=warm_bytes, policy=policy)
        self.decode, self.read_ahead = decode, read_ahead
        # guards _closed, _inflight, _pool and _bands: the caller's threads and the
        # read-ahead thread all reach them
        self._threads_lock = threading.Lock()
        self._handles = _env.acquire(self.path, writable=False)
        self._closed = False
        self._cold_lock = threading.Lock()
        self._cold_reads = 0
        self._last: int | None = None
        self._inflight: dict[int, Future[list[np.ndarray]]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._bands: ThreadPoolExecutor | None = None  # decodes the bands of a frame at once
        self._bands_pid = os.getpid()
        try:
            with self._begin() as txn:
                self.header = fmt.parse_header(txn.get(fmt.HEADER_KEY))
                self.state = fmt.parse_state(txn.get(fmt.STATE_KEY))
                self._handles.require()
                self._rgb = self._delivery(pix_fmt)
                self.groups = GroupTable.empty()
                self._load(txn, self.state)
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], spec: FrameSpec, info: dict[str, Any] | None = None,
        **options: Any,
    ) -> StoreWriter:  # fmt: skip
        """A :class:`~hyperframes.store.writer.StoreWriter` for a new store (see its options)."""
        return StoreWriter(path, spec, info, **options)

    # -- what the store holds ------------------------------------------------------------

    @property
    def spec(self) -> FrameSpec:
        """The frames as this store gives them (RGB for native planes, unless ``pix_fmt``)."""
        layout = self.header.layout
        if self._rgb and layout is not None:
            return FrameSpec((layout.height, layout.width, 3), np.uint8)
        return self.header.spec

    def _delivery(self, pix_fmt: str) -> bool:
        """Whether frames are converted to RGB on the way out."""
        layout = self.header.layout
        allowed = {"rgb24", "native"} | ({layout.name} if layout else set())
        if pix_fmt not in allowed:
            raise ValueError(
                f"pix_fmt must be one of {sorted(allowed)} for this store "
                f"({layout.name if layout else 'frames stored as they came'}), got {pix_fmt!r}"
            )
        return layout is not None and pix_fmt == "rgb24"

    def _out(self, frame: np.ndarray) -> np.ndarray:
        """A stored frame as this store gives it."""
        layout = self.header.layout
        if not self._rgb or layout is None:
            return frame
        rgb = to_rgb(frame, layout, self.header.pixels or {})
        rgb.flags.writeable = False
        return rgb

    @property
    def info(self) -> StoreInfo:
        """Source metadata: fps, time base, per-frame timestamps, spec."""
        return StoreInfo.of(self.header, self.state, self.groups.pts)

    @property
    def complete(self) -> bool:
        """Whether the pack that wrote the store finished (else it can be resumed)."""
        return self.state.complete

    def __len__(self) -> int:
        return self.groups.frames

    def refresh(self) -> int:
        """See groups committed since opening (by another process); returns the new frames."""
        before = len(self)
        with self._begin() as txn:
            state = fmt.parse_state(txn.get(fmt.STATE_KEY))
            if state.groups < len(self.groups):
                raise StoreError(f"store {str(self.path)!r} shrank while open; reopen it")
            self._load(txn, state)
        _env.check_size(self._handles.env, self.path)
        return len(self) - before

    # -- reading -------------------------------------------------------------------------

    def get_frame_at(self, index: int) -> np.ndarray:
        """The frame at ``index`` (negative counts from the end), read-only.

        Raises:
            IndexError: ``index`` is outside the store; the message gives the valid range.
            StoreCorrupt: the frame's record or checksum does not check out.
        """
        i = self._index(index)
        g = self.groups.group_of(i)
        if not self.cache.hot.peek(i):
            self._await_read_ahead(g)
        frame = self.cache.hot.get(i)
        if frame is None:
            frame = self._miss(i, g)
        ahead = read_ahead_group(i, self._last, g, len(self.groups)) if self.read_ahead else None
        self._last = i
        if ahead is not None:
            self._prefetch(ahead)
        return self._out(frame)

    def get_frames_in_range(self, start: int, stop: int) -> np.ndarray:
        """Frames ``start..stop-1`` as one new ``(stop - start, *shape)`` array.

        Raises:
            IndexError: the range is not within ``0..len(store)``.
        """
        n = len(self)
        if not 0 <= start <= stop <= n:
            raise IndexError(f"range {start}..{stop} is not within 0..{n} (half-open)")
        out = np.empty((stop - start, *self.spec.shape), self.spec.dtype)
        i = start
        while i < stop:
            g = self.groups.group_of(i)
            first, end = self.groups.span(g)
            hi = min(stop, end)
            if hi - i == 1:
                out[i - start] = self.get_frame_at(i)
            else:
                frames = self._load_group(g)[i - first : hi - first]
                for j, frame in enumerate(frames):
                    out[i - start + j] = self._out(frame)
            i = hi
        return out

    def __getitem__(self, key: int | slice) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1:
                return self.get_frames_in_range(start, max(start, stop))
            picks = range(start, stop, step)
            out = np.empty((len(picks), *self.spec.shape), self.spec.dtype)
            for j, i in enumerate(picks):
                out[j] = self.get_frame_at(i)
            return out
        return self.get_frame_at(key)

    def __iter__(self) -> Iterator[np.ndarray]:
        """Every frame in order; the next hyperframe decodes while this one is used."""
        pool = ThreadPoolExecutor(1, thread_name_prefix="hf-store-iter")
        try:
            count = len(self.groups)
            ahead = pool.submit(self._load_group, 0) if count else None
            for g in range(count):
                assert ahead is not None
                frames = ahead.result()
                ahead = pool.submit(self._load_group, g + 1) if g + 1 < count else None
                for frame in frames:
                    yield self._out(frame)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def verify(self) -> list[int]:
        """Check every record and every frame checksum; returns the ids of bad frames."""
        bad: list[int] = []
        for g in range(len(self.groups)):
            first, stop = self.groups.span(g)
            try:
                self._load_group(g, cached=False)
            except StoreCorrupt as exc:
                ids = getattr(exc, "frames", None) or range(first, stop)
                bad.extend(int(i) for i in ids)
        return bad

    def cache_stats(self) -> dict[str, CacheStats]:
        """Hits, misses and bytes of the hot and warm tiers, and the cold tier's reads."""
        stats = self.cache.stats()
        size = os.path.getsize(self.path / _env.DATA_FILE)
        stats["cold"] = CacheStats(hits=self._cold_reads, bytes=size, capacity_bytes=size)
        return stats

    def cache_tiers(self) -> tuple[CacheTier, ...]:
        """:meth:`cache_stats` as a run's figures: hot, warm, cold (what a
        :class:`~hyperframes.store.source.StoreSource` reports to monitors)."""
        return tuple(stats.tier(name) for name, stats in self.cache_stats().items())

    # -- lifecycle -----------------------------------------------------------------------

    def _band_pool(self) -> ThreadPoolExecutor:
        """The threads that decode the bands of one frame in parallel: this store's own,
        started on first use and shut down by :meth:`close` (anew in a forked child,
        where the parent's threads do not exist)."""
        with self._threads_lock:  # the read-ahead thread and the caller's may both ask
            if self._bands is None or self._bands_pid != os.getpid():
                self._bands_pid = os.getpid()
                threads = min(BAND_THREADS, os.cpu_count() or 1)
                self._bands = ThreadPoolExecutor(threads, thread_name_prefix="hf-store-bands")
            return self._bands

    def close(self) -> None:
        with self._threads_lock:
            if self._closed:
                return
            self._closed = True  # no read-ahead starts from now on
            ahead, self._pool = self._pool, None
            self._inflight.clear()
        if ahead is not None:  # outside the lock: a running read-ahead may need it
            ahead.shutdown(wait=True, cancel_futures=True)
        with self._threads_lock:
            bands, self._bands = self._bands, None
        if bands is not None:
            bands.shutdown(wait=True, cancel_futures=True)
        self.cache.clear()
        _env.release(self.path)

    def __enter__(self) -> FrameStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"FrameStore({str(self.path)!r}, frames={len(self)}, groups={len(self.groups)}, "
            f"spec={self.spec!r}, tier={self.header.tier!r}, complete={self.complete})"
        )

    # -- internals -----------------------------------------------------------------------

    def _begin(self) -> Any:
        if self._closed:
            raise StoreError(f"store {str(self.path)!r} is closed")
        env = self._handles.env
        try:
            return env.begin(buffers=True)
        except lmdb.MapResizedError:
            env.set_mapsize(0)  # another process grew the map: adopt its size
            return env.begin(buffers=True)

    def _load(self, txn: Any, state: fmt.StoreState) -> None:
        have = len(self.groups)
        rows = read_rows(
            txn, self._handles.table, self._handles.records,
            start=have, stop=state.groups, first=self.groups.frames,
        )  # fmt: skip
        table = self.groups.extended(rows)
        if table.frames != state.frames:
            raise StoreCorrupt(
                f"state says {state.frames} frames but the group table holds {table.frames}"
            )
        self.groups, self.state = table, state

    def _index(self, index: int) -> int:
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"frame index must be an int or a slice, got {index!r}")
        n = len(self)
        i = int(index) + n if index < 0 else int(index)
        if not 0 <= i < n:
            valid = f"0..{n - 1} (or -{n}..-1)" if n else "none: the store is empty"
            raise IndexError(f"frame {int(index)} is out of range; valid indices: {valid}")
        return i

    def _record(self, g: int, *, cached: bool = True) -> tuple[bytes, group_format.Header]:
        """Group ``g``'s record and its parsed header (kept together in the warm tier)."""
        if cached:
            held = self.cache.warm.get(g)
            if held is not None:
                return held
        with self._cold_lock, self._begin() as txn:
            raw = txn.get(fmt.group_key(g), db=self._handles.records)
            data = None if raw is None else bytes(raw)
            self._cold_reads += 1
        first, stop = self.groups.span(g)
        where, span = f"group {g} (frames {first}..{stop - 1})", range(first, stop)
        if data is None or len(data) != int(self.groups.record_bytes[g]):
            raise _corrupt(
                f"the record of {where} is missing or the wrong size", range(first, stop)
            )
        if fmt.checksum(data) != int(self.groups.record_hashes[g]):
            raise _corrupt(f"the record of {where} fails its checksum", span)
        record = data, self._checked_header(data, where, span)
        if cached:
            self.cache.warm.put(g, record, len(data))
        return record

    def _checked_header(self, data: bytes, where: str, span: range) -> group_format.Header:
        """The record's own header, refused if it disagrees with the table and the store
        header before decoding: its sizes decide what decoding allocates."""
        try:
            head = group_format.parse_header(data)
        except StoreCorrupt as exc:
            raise _corrupt(f"the record of {where}: {exc}", span) from None
        spec = self.header.spec
        if (head.count, head.shape, head.dtype) != (len(span), spec.shape, spec.dtype):
            got = f"{head.count} frames of {describe_shape(head.shape, head.dtype)}"
            raise _corrupt(
                f"the record of {where} holds {got}, but the header says "
                f"{spec.describe()} and the table {len(span)} frames", span,
            )  # fmt: skip
        return head

    def _check(self, frame: np.ndarray, i: int, g: int) -> np.ndarray:
        spec = self.header.spec
        if frame.shape != spec.shape or frame.dtype != spec.dtype:
            raise _corrupt(
                f"frame {i} (group {g}) decodes to "
                f"{describe_shape(frame.shape, frame.dtype)}, but the header says "
                f"{spec.describe()}", [i],
            )  # fmt: skip
        if fmt.checksum(frame) != int(self.groups.checksums[i]):
            raise _corrupt(f"frame {i} (group {g}) fails its checksum", [i])
        frame.flags.writeable = False
        return frame

    def _load_group(self, g: int, *, cached: bool = True) -> np.ndarray:
        first, stop = self.groups.span(g)
        data, header = self._record(g, cached=cached)
        try:
            frames = decode_group(data, header=header, pool=self._band_pool())
        except StoreCorrupt as exc:
            raise _corrupt(
                f"group {g} (frames {first}..{stop - 1}): {exc}", range(first, stop)
            ) from None
        if len(frames) != stop - first:
            raise _corrupt(
                f"group {g} decodes to {len(frames)} frames; the table says {stop - first}",
                range(first, stop),
            )  # fmt: skip
        spec = self.header.spec
        if frames.shape[1:] != spec.shape or frames.dtype != spec.dtype:
            got = describe_shape(frames.shape[1:], frames.dtype)
            raise _corrupt(
                f"group {g} decodes to frames of {got}, but the header says "
                f"{spec.describe()}", range(first, stop),
            )  # fmt: skip
        bad = [first + j for j in range(len(frames)) if not self._ok(frames[j], first + j)]
        if bad:
            raise _corrupt(f"frames {bad} (group {g}) fail their checksums", bad)
        frames.flags.writeable = False
        return frames

    def _ok(self, frame: np.ndarray, i: int) -> bool:
        return fmt.checksum(frame) == int(self.groups.checksums[i])

    def _fits(self, g: int) -> bool:
        """Whether the hot tier can hold group ``g`` decoded."""
        first, stop = self.groups.span(g)
        return (stop - first) * self.header.spec.nbytes <= self.cache.hot.capacity

    def _miss(self, i: int, g: int) -> np.ndarray:
        first, stop = self.groups.span(g)
        if not (self._fits(g) and decodes_group(self.decode, i, self._last, stop - first)):
            try:
                data, header = self._record(g)
                frame = decode_frame(data, i - first, header=header, pool=self._band_pool())
            except StoreCorrupt as exc:
                raise _corrupt(f"frame {i} (group {g}): {exc}", [i]) from None
            frame = self._check(frame, i, g)
            self.cache.hot.put(i, frame, frame.nbytes)
            return frame
        return self._fill_hot(g)[i - first]

    def _fill_hot(self, g: int, *, ahead: bool = False) -> list[np.ndarray]:
        first, _ = self.groups.span(g)
        out = []
        for j, decoded in enumerate(self._load_group(g)):
            frame = decoded.copy()  # own memory, so the byte count is honest
            frame.flags.writeable = False
            self.cache.hot.put(first + j, frame, frame.nbytes, expected=ahead)
            out.append(frame)
        return out

    def _prefetch(self, g: int) -> None:
        """Start reading group ``g`` ahead on the read-ahead thread (at most two at once)."""
        first, _ = self.groups.span(g)
        if self.cache.hot.peek(first) or not self._fits(g):
            return
        with self._threads_lock:
            for done in [k for k, f in self._inflight.items() if f.done()]:
                del self._inflight[done]  # a failed one included: it is never re-raised
            if self._closed or g in self._inflight or len(self._inflight) >= 2:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="hf-store-ahead")
            self._inflight[g] = self._pool.submit(self._fill_hot, g, ahead=True)

    def _await_read_ahead(self, g: int) -> None:
        """Wait for the read-ahead of group ``g`` if one was started (then the access is a hit).

        A read-ahead that failed is forgotten, not re-raised: the caller goes on to read
        the group itself, which raises the group's own error if it really is damaged (a
        read-ahead can also fail for reasons of its own, or be cancelled by :meth:`close`).
        """
        with self._threads_lock:
            pending = self._inflight.get(g)
        if pending is None:
            return
        try:
            pending.result()
        except Exception:
            with self._threads_lock:
                if self._inflight.get(g) is pending:
                    del self._inflight[g]


def _corrupt(message: str, frames: range | list[int]) -> StoreCorrupt:
    """A :class:`StoreCorrupt` whose ``frames`` attribute lists the damaged frame ids."""
    advice = "; the store is damaged: run verify, then re-pack or restore"
    exc = StoreCorrupt(message if message.endswith(advice) else message + advice)
    exc.frames = list(frames)  # type: ignore[attr-defined]
    return exc
