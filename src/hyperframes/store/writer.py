"""Writing a store: groups encoded on a few threads, committed in order, one per transaction.

Every group is committed in its own LMDB transaction together with its group-table
entry and the new state, so the store on disk is always a valid prefix of the
sequence: a killed writer leaves whole groups only, and ``resume=True`` continues
after the last one. Records are only ever appended (LMDB does not defragment large
values, so the store never rewrites one).

Example:
    >>> with StoreWriter("clip.hfs", FrameSpec((72, 128, 3)), {"fps": 25.0}) as writer:
    ...     writer.write_group(frames[0:4])  # doctest: +SKIP

Longer than 300 lines: the writer's life (prepare, lock, encode, commit, close) is one.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import math
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import lmdb
import numpy as np

from .._version import __version__
from ..choices import INTRAS, TIERS, Intra, Tier, check_gop, check_intra
from ..errors import StoreError
from ..frames import FrameSpec
from ..hyper import decode_group, encode_group
from ..io.fingerprint import source_differences, with_fingerprint
from ..io.publish import check_output, lock_exclusive
from . import _env
from . import format as fmt

WORKERS = 2  # encoding threads of a writer by default
WRITER_LOCK = "writer.lock"
_STORE_FILES = frozenset({"data.mdb", "lock.mdb", WRITER_LOCK})


@dataclass(frozen=True)
class _Encoded:
    data: bytes
    entry: fmt.GroupEntry
    psnr_min: float


class StoreWriter:
    """Appends hyperframes to a new store, or to a partial one with ``resume=True``.

    Args:
        path: the store folder.
        spec: shape and dtype of every frame.
        info: the source's facts (JSON scalars are kept: fps, rate, time_base, ...).
            When it names a native ``layout`` whose frames have ``spec`` (as
            ``VideoSource(pix_fmt="native" or "yuv420p")`` does), the store records the
            layout and colour tags (``header.pixels``), codes the planes apart, and
            :class:`~hyperframes.store.FrameStore` gives RGB by default.
        tier: the codec tier, ``"lossless"`` (default), ``"psnr"`` or ``"keyframe"``.
        psnr: the PSNR target in dB for ``tier="psnr"``.
        level: zstd level, 1..22.
        intra: how frames stored whole are coded: ``"gradient"`` (default, fast),
            ``"webp"`` (lossless WebP, RGB: 16-25 % smaller, 7-20x slower to pack),
            ``"ffv1"`` (a video's planes: FFV1 keyframes where smaller than the gradient)
            or ``"x264"`` (a video's planes, the size mode: each group as lossless H.264);
            see ``docs/measured.md`` for what each costs.
        gop: with ``intra="x264"``, frames from one keyframe to the next (default 32).
        grouping: the grouping options, recorded in the header.
        workers: encoding threads (zstd releases the GIL).
        pending_bytes: the most bytes of queued groups' frames the writer holds while they
            are encoded (at least one group is always accepted); by default up to
            ``2 * workers`` groups, whatever their size.
        resume: continue a partial store with the same settings.
        overwrite: replace an existing store at ``path``.

    Raises:
        FileExistsError: ``path`` exists and neither ``resume`` nor ``overwrite`` is set.
        StoreError: resuming a store written with other settings, or one another process
            is writing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        spec: FrameSpec,
        info: dict[str, Any] | None = None,
        *,
        tier: Tier = "lossless",
        psnr: float | None = None,
        level: int = 3,
        intra: Intra = "gradient",
        gop: int | None = None,
        grouping: dict[str, Any] | None = None,
        workers: int = WORKERS,
        pending_bytes: int | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {sorted(TIERS)}, got {tier!r}")
        if (tier == "psnr") != (psnr is not None):
            raise ValueError("pass psnr= exactly when tier='psnr' (e.g. tier='psnr', psnr=45)")
        if intra not in INTRAS:
            raise ValueError(f"intra must be one of {', '.join(INTRAS)}, got {intra!r}")
        gop = check_gop(gop, intra)
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if resume and overwrite:
            raise ValueError(
                "pass either resume=True (continue the store) or overwrite=True (replace it), "
                "not both"
            )
        self.path = Path(path)
        info = with_fingerprint(dict(info or {}))  # a resumed pack checks the input is the same
        pixels = fmt.pixels_of(spec, info)
        check_intra(intra, planes=pixels is not None)
        self.header = fmt.StoreHeader(
            spec, fmt.json_safe(info), tier, psnr, level, grouping, __version__,
            version=fmt.version_for(spec, tier, pixels), intra=intra, pixels=pixels, gop=gop,
        )  # fmt: skip
        self._lock_fd: int | None = None
        self._prepare(resume=resume, overwrite=overwrite)  # takes the writer lock
        try:
            self._handles = _env.acquire(self.path, writable=True, create=True)
        except BaseException:
            self._unlock()
            raise
        self._env = self._handles.env
        try:
            self.state = self._start(resume=resume)
        except BaseException:
            self._unlock()
            _env.release(self.path)
            raise
        self.resumed_from = self.state.frames
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="hf-store-encode")
        self._pending: collections.deque[tuple[Future[_Encoded], int]] = collections.deque()
        self._limit = 2 * workers
        self._held_limit = pending_bytes
        self._held = 0  # bytes of frames in self._pending
        self._next_first = self.state.frames
        self._closed = False

    # -- public --------------------------------------------------------------------------

    @property
    def frames(self) -> int:
        """Frames committed or queued so far (the next group starts here)."""
        return self._next_first

    def write_group(self, frames: np.ndarray, *, pts: np.ndarray | None = None) -> None:
        """Queue one hyperframe. ``frames`` is owned by the writer from now on (no copy).

        Raises:
            FrameError: frames of another spec (raised when its group is committed).
            ValueError: an empty group or one longer than the codec allows.
        """
        if self._closed:
            raise RuntimeError("this StoreWriter is closed")
        spec = self.header.spec
        if frames.shape[1:] != spec.shape or frames.dtype != spec.dtype:
            raise ValueError(
                f"the store holds frames of {spec.describe()}, got {frames.shape[1:]} "
                f"{frames.dtype}"
            )
        count = len(frames)
        if not 1 <= count <= fmt.MAX_GROUP_FRAMES:
            raise ValueError(f"a group has 1..{fmt.MAX_GROUP_FRAMES} frames, got {count}")
        times = np.full(count, np.nan) if pts is None else np.asarray(pts, np.float64)
        if times.shape != (count,):
            raise ValueError(f"pts must have one value per frame, got shape {times.shape}")
        while self._pending and (
            len(self._pending) >= self._limit
            or (self._held_limit is not None and self._held + frames.nbytes > self._held_limit)
        ):
            self._commit_first()
        first, self._next_first = self._next_first, self._next_first + count
        self._pending.append((self._pool.submit(self._encode, frames, times, first), frames.nbytes))
        self._held += frames.nbytes

    def flush(self) -> None:
        """Commit every queued group, in order.

        A group leaves the queue only once it is committed, so an interruption (Ctrl-C
        while waiting for an encoder, a failed commit) loses no group: :meth:`close`
        commits it and those after it, or none of them.
        """
        while self._pending:
            self._commit_first()

    def _commit_first(self) -> None:
        """Commit the oldest queued group; it leaves the queue only once committed."""
        future, nbytes = self._pending[0]
        self._commit(future.result())
        self._pending.popleft()
        self._held -= nbytes

    def close(self, *, complete: bool = True) -> fmt.StoreState:
        """Commit what is queued and close; ``complete=False`` keeps the store resumable.

        After a failure (``complete=False``) the groups already encoded are still
        committed, in order, so a resume redoes as little as possible.
        """
        if self._closed:
            return self.state
        try:
            try:
                self.flush()
            except Exception:
                # A failed encode or commit: the groups before it are committed and the
                # store ends there (a later group never lands after a missing one).
                if complete:
                    raise
            if complete:
                self.state = self._put_state(
                    fmt.StoreState(**{**self.state.__dict__, "complete": True})
                )
        finally:
            self._closed = True
            for future, _ in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)
            self._unlock()
            _env.release(self.path)
        return self.state

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(complete=kind is None)

    # -- internals -----------------------------------------------------------------------

    def _prepare(self, *, resume: bool, overwrite: bool) -> None:
        """Check what is at ``path``, take the writer lock, then clear it for ``overwrite``.

        The lock is taken before anything is removed, so a second writer (``overwrite``
        included) is refused while the first runs instead of deleting its store.
        """
        path = self.path
        check_output(path, folder=True)  # no link, a writable parent, not inside a store
        if not path.exists():
            if not path.parent.is_dir():
                raise FileNotFoundError(f"folder {str(path.parent)!r} does not exist")
            path.mkdir()
        elif not path.is_dir():
            raise FileExistsError(
                f"{str(path)!r} exists and is not a store folder; choose a new path "
                "(--overwrite replaces a store, never another file)"
            )
        names = {p.name for p in path.iterdir()}
        if not names <= _STORE_FILES:
            raise FileExistsError(
                f"{str(path)!r} is a folder that holds other files; choose a new path"
            )
        if names - {WRITER_LOCK} and not (resume or overwrite):
            raise FileExistsError(
                f"store {str(path)!r} exists; pass resume=True to continue it or "
                "overwrite=True to replace it"
            )
        self._lock_writer()
        if overwrite and names - {WRITER_LOCK}:
            if _env.is_open(path):
                self._unlock()
                raise StoreError(f"store {str(path)!r} is open in this process; close it first")
            for name in (_env.DATA_FILE, _env.LOCK_FILE):
                with contextlib.suppress(FileNotFoundError):
                    (path / name).unlink()

    def _lock_writer(self) -> None:
        try:
            fd = lock_exclusive(self.path / WRITER_LOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StoreError(
                    f"{str(self.path / WRITER_LOCK)!r} is a symbolic link; a store's files "
                    "must be regular files"
                ) from None
            raise
        if fd is None:
            raise StoreError(
                f"another process is writing store {str(self.path)!r}; wait for it to finish"
            )
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def _start(self, *, resume: bool) -> fmt.StoreState:
        with self._env.begin() as txn:
            raw_header = txn.get(fmt.HEADER_KEY)
            raw_state = txn.get(fmt.STATE_KEY)
        if raw_header is None:  # new, or killed before the first commit
            state = fmt.StoreState()
            with self._env.begin(write=True) as txn:
                txn.put(fmt.HEADER_KEY, fmt.dump_json(self.header.to_json()))
                txn.put(fmt.STATE_KEY, fmt.dump_state(state))
            return state
        if not resume:  # pragma: no cover - _prepare refused it
            raise FileExistsError(f"store {str(self.path)!r} exists")
        existing = fmt.parse_header(raw_header)
        if not existing.same_encoding(self.header):
            raise StoreError(
                f"store {str(self.path)!r} was packed with other settings "
                f"({_settings(existing)}) than this resume ({_settings(self.header)}); "
                "resume with the same settings or pack again with overwrite"
            )
        differs = source_differences(existing.source, self.header.source)
        if differs:
            raise StoreError(
                f"store {str(self.path)!r} was packed from another input ({differs}); resume "
                "from the same input, or pack this one into a new store"
            )
        if existing.version < self.header.version == fmt.SURFACE_VERSION:  # (its new groups)
            existing = dataclasses.replace(existing, version=self.header.version)
            with self._env.begin(write=True) as txn:
                txn.put(fmt.HEADER_KEY, fmt.dump_json(existing.to_json()))
        self.header = existing
        return fmt.parse_state(raw_state)

    def _encode(self, frames: np.ndarray, pts: np.ndarray, first: int) -> _Encoded:
        h = self.header
        if h.tier == "psnr":
            assert h.psnr is not None
            group = encode_group(frames, tier="psnr", psnr=h.psnr, level=h.level)
        else:
            tier, intra = cast(Tier, h.tier), cast(Intra, h.intra)  # validated on parse
            layout = h.layout
            planes = None if layout is None else layout.plane_shapes
            pix_fmt = None if layout is None else layout.name
            group = encode_group(
                frames, tier=tier, level=h.level, intra=intra, planes=planes, pix_fmt=pix_fmt,
                gop=h.gop,
            )  # fmt: skip
        exact = group.tier == "lossless"
        decoded = frames if exact else decode_group(group.data)
        sums = tuple(fmt.checksum(frame) for frame in decoded)
        entry = fmt.GroupEntry(
            first, len(frames), len(group.data), fmt.checksum(group.data), sums,
            tuple(pts.tolist()),
        )  # fmt: skip
        return _Encoded(group.data, entry, group.psnr_min)

    def _commit(self, item: _Encoded) -> None:
        state = self.state
        if item.entry.first != state.frames:  # never commit a group after a missing one
            raise StoreError(
                f"group of frames {item.entry.first}..{item.entry.stop - 1} does not follow the "
                f"{state.frames} frames committed to store {str(self.path)!r}"
            )
        group = state.groups
        low = state.psnr_min
        if math.isfinite(item.psnr_min):
            low = item.psnr_min if low is None else min(low, item.psnr_min)
        new = fmt.StoreState(
            group + 1, state.frames + item.entry.count, state.stored_bytes + len(item.data),
            False, low,
        )  # fmt: skip
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    current = fmt.parse_state(txn.get(fmt.STATE_KEY))
                    if current.groups != group:
                        raise StoreError(
                            f"store {str(self.path)!r} changed under this writer (it holds "
                            f"{current.groups} groups, expected {group}); another writer?"
                        )
                    key = fmt.group_key(group)
                    txn.put(key, item.data, append=True, db=self._handles.records)
                    txn.put(key, fmt.pack_entry(item.entry), append=True, db=self._handles.table)
                    txn.put(fmt.STATE_KEY, fmt.dump_state(new))
                break
            except lmdb.MapFullError:
                # doubles, within 1 TiB and the disk's free space; past that OSError(ENOSPC)
                _env.grow_map(self._env, self.path, need=len(item.data))
            except lmdb.Error as exc:
                raise _env.write_error(self.path, exc, len(item.data)) from exc
        self.state = new

    def _put_state(self, state: fmt.StoreState) -> fmt.StoreState:
        with self._env.begin(write=True) as txn:
            txn.put(fmt.STATE_KEY, fmt.dump_state(state))
        return state

    def __repr__(self) -> str:
        return f"StoreWriter({str(self.path)!r}, frames={self.frames}, state={self.state})"


def _settings(h: fmt.StoreHeader) -> str:
    return (
        f"{h.spec.describe()}, tier={h.tier}, psnr={h.psnr}, level={h.level}, "
        f"intra={h.intra}, {h.grouping}"
    )
