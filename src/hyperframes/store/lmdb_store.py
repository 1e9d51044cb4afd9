"""``FrameStore``: random access by frame index into a hyperframe store on LMDB.

Opening validates the header, the state and every row of the group table; reading a
frame validates its group's header and checks the decoded frame against its checksum, so
a damaged store raises :class:`~hyperframes.errors.StoreCorrupt` naming the frame, never
returns a wrong one (:meth:`FrameStore.verify` checks every record's own checksum too).
Records are decoded where they lie in LMDB's map, never copied.
Reads go through the tiered cache (``cache.py``); sequential access reads the next
hyperframe ahead on a background thread.

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
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from ..errors import StoreCorrupt, StoreError
from ..frames import FrameSpec
from ..hyper import decode_frame, decode_group
from ..hyper.codec import group_header as group_format
from ..io.base import CacheTier
from ..io.formats import sample_dtype
from ..io.layouts import to_rgb
from . import _env
from . import format as fmt
from .access import Decode, StoreThreads, decodes_group, keep_freed_blocks, read_ahead_group
from .cache import DEFAULT_POLICY, CacheStats, Policy, TieredCache
from .checks import checked_frame, checked_group, checked_record, corrupt
from .info import StoreInfo
from .table import GroupTable, read_rows
from .writer import StoreWriter


class FrameStore:
    """A store opened for reading (see the module docstring).

    Args:
        path: the store folder.
        hot_bytes: capacity of the decoded-frame tier.
        warm_bytes: capacity of the group-header tier: a group's header, parsed and
            validated when a frame of it is read, is kept there for the next (counted by
            its bytes in the store). Records are decoded where they lie in LMDB's map,
            which the operating system caches; they are never copied.
        policy: the tiers' replacement policy, ``"s3fifo"`` (default) or ``"lru"``.
        decode: on a miss, ``"group"`` decodes the whole hyperframe and caches every frame
            of it (neighbours come almost free); ``"frame"`` decodes only the frame asked
            for (and the records it depends on); ``"auto"`` (default) decodes the whole
            group when the access moves locally (by 1..:data:`~.access.READ_AHEAD_REACH` frames
            from the last one: playback, scrubbing) and the group has at most
            :data:`~.access.GROUP_DECODE_MAX` frames, else only the frame (a random frame of a
            50-frame 720p group costs 10-25 ms alone, about 0.4 s with its group).
            With either ``"group"`` or ``"auto"``, a group is decoded whole (and read
            ahead) only when the hot tier can hold it; otherwise frame by frame.
        read_ahead: read the next hyperframe in the background during sequential access.
        pix_fmt: for a store of a video's native planes, ``"rgb24"`` (default) converts each
            frame to ``(H, W, 3)`` RGB as :class:`~hyperframes.io.video.VideoSource` does
            (``"rgb48"``: uint16, the samples of a 10-bit video kept); ``"native"`` or the
            layout's name (``"yuv420p"``...) gives the planes exactly as decoded. Other
            stores give their frames as stored either way.

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
        self._threads = StoreThreads()
        self._handles = _env.acquire(self.path, writable=False)
        self._cold_lock = threading.Lock()
        self._cold_reads = 0
        self._last: int | None = None
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
        keep_freed_blocks(16 * self.header.spec.nbytes)  # (a frame's records, on each thread)

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
            return FrameSpec((layout.height, layout.width, 3), sample_dtype(self._rgb))
        return self.header.spec

    def _delivery(self, pix_fmt: str) -> str | None:
        """The RGB frames are converted to on the way out (``"rgb24"``, ``"rgb48"``), if
        any."""
        layout = self.header.layout
        allowed = {"rgb24", "rgb48", "native"} | ({layout.name} if layout else set())
        if pix_fmt not in allowed:
            raise ValueError(
                f"pix_fmt must be one of {sorted(allowed)} for this store "
                f"({layout.name if layout else 'frames stored as they came'}), got {pix_fmt!r}"
            )
        return pix_fmt if layout is not None and pix_fmt in ("rgb24", "rgb48") else None

    def _out(self, frame: np.ndarray) -> np.ndarray:
        """A stored frame as this store gives it."""
        layout = self.header.layout
        if not self._rgb or layout is None:
            return frame
        rgb = to_rgb(frame, layout, self.header.pixels or {}, self._rgb)
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
            self._threads.wait(g)
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
                frames = self._load_group(g)[0][i - first : hi - first]
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
        """Every frame in order (:meth:`frames`)."""
        return self.frames()

    def frames(self, start: int = 0, stop: int | None = None) -> Generator[np.ndarray, None, None]:
        """Frames ``start..stop-1`` in order (:meth:`runs`, frame by frame).

        Raises:
            IndexError: the range is not within ``0..len(store)``.
        """
        return (frame for run in self.runs(start, stop) for frame in run)

    def runs(self, start: int = 0, stop: int | None = None) -> Generator[np.ndarray, None, None]:
        """Frames ``start..stop-1`` in order, a hyperframe's at a time (read-only arrays of
        consecutive frames), each hyperframe decoded once and the next one while this one's
        frames are used (two decoded hyperframes at most are held).

        Raises:
            IndexError: the range is not within ``0..len(store)``.
        """
        n = len(self)
        stop = n if stop is None else stop
        if not 0 <= start <= stop <= n:
            raise IndexError(f"range {start}..{stop} is not within 0..{n} (half-open)")
        return self._runs(start, stop)

    def _runs(self, start: int, stop: int) -> Generator[np.ndarray, None, None]:
        if start == stop:
            return
        first, last = self.groups.group_of(start), self.groups.group_of(stop - 1)
        pool = ThreadPoolExecutor(1, thread_name_prefix="hf-store-iter")
        try:
            ahead = pool.submit(self.group, first)
            for g in range(first, last + 1):
                frames = ahead.result()
                if g < last:
                    ahead = pool.submit(self.group, g + 1)
                a, b = self.groups.span(g)
                yield frames[max(a, start) - a : min(b, stop) - a]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def verify(self) -> list[int]:
        """Check every record and every frame checksum; returns the ids of bad frames."""
        bad: list[int] = []
        for g in range(len(self.groups)):
            first, stop = self.groups.span(g)
            try:
                self._load_group(g, hashed=True)
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

    def close(self) -> None:
        if not self._threads.close():
            return
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
        """A read transaction, for a ``with`` block (a map another process grew is adopted
        once no read of this process is open: :class:`~._env.ReadGate`)."""
        if self._threads.closed:
            raise StoreError(f"store {str(self.path)!r} is closed")
        return self._handles.gate.read(self._handles.env)

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

    @contextmanager
    def _record(self, g: int, *, keep: bool = False, hashed: bool = False) -> Iterator[
        tuple[bytes | memoryview, group_format.Header]
    ]:  # fmt: skip
        """Group ``g``'s record, in place in LMDB's map (no copy; valid inside the ``with``
        block), and its parsed header: the warm tier's where ``keep`` and it holds one,
        else parsed now (and kept there when ``keep``). ``hashed``: check the record's
        own checksum too (every decoded frame is checked against its own either way)."""
        known = self.cache.warm.get(g) if keep else None
        with self._begin() as txn:
            raw = txn.get(fmt.group_key(g), db=self._handles.records)
            with self._cold_lock:
                self._cold_reads += 1
            record = checked_record(
                raw, g, self.groups, self.header.spec, hashed=hashed, header=known
            )  # fmt: skip
            if keep and known is None:
                self.cache.warm.put(g, record[1], record[1].payload_start)
            yield record

    def _load_group(
        self,
        g: int,
        *,
        hashed: bool = False,
        out: np.ndarray | None = None,
        frames: range | None = None,
        alone: bool = False,
    ) -> tuple[np.ndarray, range]:
        """Group ``g``'s frames (``frames`` of them: indices within it) as stored, decoded
        into ``out`` where given, and checked; and which of the group's frames they are.
        ``alone``: ``frames`` only where they decode from their own records, else every
        frame of the group into an array of its own (the record is read once either way)."""
        first, stop = self.groups.span(g)
        part = range(stop - first) if frames is None else frames
        try:
            with self._record(g, hashed=hashed) as (data, header):
                if alone and not header.within(part):
                    part, out = range(stop - first), None
                pool = self._threads.bands()
                decoded = decode_group(data, header=header, pool=pool, out=out, frames=part)
        except StoreCorrupt as exc:
            raise corrupt(
                f"group {g} (frames {first}..{stop - 1}): {exc}", range(first, stop)
            ) from None
        return checked_group(decoded[:], g, self.groups, self.header.spec, part), part

    def group(
        self, g: int, out: np.ndarray | None = None, *, frames: range | None = None
    ) -> np.ndarray:
        """The frames of group ``g`` (a hyperframe: ``groups.span(g)``) as this store gives
        them, each checked: decoded straight into ``out`` where given (an array of their
        shape: a run's slot, say), else into a new, read-only array. ``frames``: those of
        its frames alone (a range of indices within it; the frames they refer to are
        decoded too, and left out).

        Raises:
            StoreCorrupt: the group's record or a frame does not check out.
            ValueError: ``frames`` is not within the group.
        """
        decoded, _ = self._load_group(g, out=None if self._rgb else out, frames=frames)
        return self._given(decoded, out)

    def part(self, g: int, frames: range, out: np.ndarray) -> tuple[np.ndarray, range]:
        """Frames ``frames`` of group ``g`` into ``out`` (their shape) where they decode from
        their own records (frames coded alone: a simulation's, say), else every frame of
        the group into a new, read-only array; and which of the group's frames were
        decoded. The group's record is read once either way (:class:`StoreSource` reads a
        hyperframe that spans two batches so).

        Raises:
            StoreCorrupt: the group's record or a frame does not check out.
        """
        decoded, which = self._load_group(
            g, out=None if self._rgb else out, frames=frames, alone=True
        )
        return self._given(decoded, out if which == frames else None), which

    def _given(self, decoded: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Decoded frames as this store gives them: as stored (decoded into ``out`` already,
        where it was given), or RGB from planes, into ``out`` where given."""
        if not self._rgb:
            return decoded
        if out is None:
            out = np.stack([self._out(frame) for frame in decoded])
            out.flags.writeable = False
            return out
        for j, frame in enumerate(decoded):
            out[j] = self._out(frame)
        return out

    def _fits(self, g: int) -> bool:
        """Whether the hot tier can hold group ``g`` decoded."""
        first, stop = self.groups.span(g)
        return (stop - first) * self.header.spec.nbytes <= self.cache.hot.capacity

    def _miss(self, i: int, g: int) -> np.ndarray:
        first, stop = self.groups.span(g)
        if not (self._fits(g) and decodes_group(self.decode, i, self._last, stop - first)):
            try:
                with self._record(g, keep=True) as (data, header):
                    pool = self._threads.bands()
                    frame = decode_frame(data, i - first, header=header, pool=pool)
            except StoreCorrupt as exc:
                raise corrupt(f"frame {i} (group {g}): {exc}", [i]) from None
            frame = checked_frame(frame, i, g, self.groups, self.header.spec)
            self.cache.hot.put(i, frame, frame.nbytes)
            return frame
        return self._fill_hot(g)[i - first]

    def _fill_hot(self, g: int, *, ahead: bool = False) -> list[np.ndarray]:
        first, _ = self.groups.span(g)
        out = []
        for j, decoded in enumerate(self._load_group(g)[0]):
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
        self._threads.read_ahead(g, lambda: self._fill_hot(g, ahead=True))
