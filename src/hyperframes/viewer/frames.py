"""``FrameServer``: frames of one store, encoded for the page, with per-tier figures.

Every frame comes from :class:`~hyperframes.store.FrameStore` random access, so it goes
through the store's tiered cache (hot decoded frames, warm group headers, cold LMDB
reads) and its read-ahead, which follows the direction the user scrubs in. The
server records which tier served each frame and how long the fetch and the encoding
took, for the live figures on the page.

Example:
    >>> server = FrameServer(FrameStore("clip.hfs"))  # doctest: +SKIP
    >>> served = server.get(42, fmt="png")  # doctest: +SKIP
    >>> served.tier, len(served.data)  # doctest: +SKIP
    ('cold', 1432210)
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Literal

import cv2
import numpy as np

from ..errors import FrameError
from ..store import FrameStore

ImageFormat = Literal["jpeg", "png"]
FORMATS: tuple[ImageFormat, ...] = ("jpeg", "png")
MEDIA_TYPES: dict[ImageFormat, str] = {"jpeg": "image/jpeg", "png": "image/png"}
Tier = Literal["hot", "warm", "cold"]

JPEG_QUALITY = 90
PNG_COMPRESSION = 1
"""zlib level 1: a 720p frame encodes in a few milliseconds and stays lossless."""
RECENT = 200
"""How many recent requests the timing figures (mean, p95) cover."""


@dataclass(frozen=True)
class ServedFrame:
    """One encoded frame and how it was served.

    Attributes:
        index: the frame index.
        data: the encoded image.
        media_type: ``image/jpeg`` or ``image/png``.
        tier: the cache tier that held the frame: ``hot`` (decoded), ``warm`` (its
            group's header known; decoded from its records in LMDB's map) or ``cold``
            (its group's header read from LMDB as well).
        timestamp: the frame's presentation time in seconds, or ``None``.
        fetch_ms: time to get the frame from the store.
        encode_ms: time to encode it.
    """

    index: int
    data: bytes
    media_type: str
    tier: Tier
    timestamp: float | None
    fetch_ms: float
    encode_ms: float

    def __repr__(self) -> str:
        return (
            f"ServedFrame(index={self.index}, {self.media_type}, {len(self.data)} bytes, "
            f"tier={self.tier!r})"
        )


class EncodeError(FrameError):
    """A frame that cannot be shown as an image (its shape, or the encoder refused it)."""


def to_display(frame: np.ndarray) -> np.ndarray:
    """``frame`` as 8-bit BGR, BGRA or gray, ready for ``cv2.imencode``.

    RGB(A) becomes BGR(A); ``uint16`` is scaled by 1/257 and float frames (0..1) by 255.

    Raises:
        EncodeError: a frame that is not ``(H, W)`` or ``(H, W, C)`` with 1, 3 or 4 channels.
    """
    channels = frame.shape[2] if frame.ndim == 3 else 1
    if frame.ndim not in (2, 3) or channels not in (1, 3, 4) or 0 in frame.shape:
        raise EncodeError(
            f"the viewer shows frames of shape (H, W) or (H, W, C) with C in 1, 3, 4; "
            f"got a {frame.shape} frame"
        )
    if frame.dtype == np.uint16:
        frame = (frame // 257).astype(np.uint8)
    elif frame.dtype.kind == "f":
        frame = (np.clip(frame, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    elif frame.dtype != np.uint8:
        frame = np.clip(frame, 0, 255).astype(np.uint8)
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[..., 0]
    if frame.ndim == 3 and frame.shape[2] == 3:
        return cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
    if frame.ndim == 3 and frame.shape[2] == 4:
        return cv2.cvtColor(frame, cv2.COLOR_RGBA2BGRA)
    return np.ascontiguousarray(frame)


def encode(frame: np.ndarray, fmt: ImageFormat) -> bytes:
    """``frame`` (RGB, RGBA or gray) as JPEG or lossless PNG bytes.

    Raises:
        ValueError: an unknown format.
        EncodeError: a frame of a shape no image has, or one the encoder refuses (JPEG
            stops at 65,500 pixels a side).
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    image = to_display(frame)
    try:
        if fmt == "jpeg":
            if image.ndim == 3 and image.shape[2] == 4:
                image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
            ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        else:
            params = [cv2.IMWRITE_PNG_COMPRESSION, PNG_COMPRESSION]
            ok, buf = cv2.imencode(".png", image, params)
    except cv2.error:
        ok = False
    if not ok:
        hint = "; try png" if fmt == "jpeg" else ""
        raise EncodeError(f"cannot encode a {frame.shape} {frame.dtype} frame as {fmt}{hint}")
    return buf.tobytes()


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by nearest rank; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class FrameServer:
    """Serves the frames of an open store and keeps the figures the page shows.

    Requests are serialised (the store's read-ahead tracks one reader's position);
    encoding runs outside the lock.

    Args:
        store: an open store; the server does not close it.
    """

    def __init__(self, store: FrameStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._figures = threading.Lock()
        self._served: Counter[str] = Counter()
        self._recent_tiers: deque[str] = deque(maxlen=48)
        self._fetch_ms: deque[float] = deque(maxlen=RECENT)
        self._encode_ms: deque[float] = deque(maxlen=RECENT)
        self._timestamps = store.info.timestamps
        self._fps = store.info.fps

    def __len__(self) -> int:
        return len(self.store)

    def timestamp(self, index: int) -> float | None:
        """Frame ``index``'s presentation time: the stored one, else ``index / fps``."""
        if 0 <= index < len(self._timestamps):
            value = float(self._timestamps[index])
            if math.isfinite(value):
                return value
        return index / self._fps if self._fps else None

    def get(self, index: int, *, fmt: ImageFormat) -> ServedFrame:
        """Frame ``index`` encoded as ``fmt``.

        Raises:
            TypeError: ``index`` is not an int.
            IndexError: ``index`` is outside ``0..len(store) - 1``.
            ValueError: an unknown format.
            EncodeError: the frame cannot be shown as an image.
            StoreCorrupt: the frame's record is damaged.
        """
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"a frame index is an int, got {type(index).__name__}")
        index = int(index)
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
        n = len(self.store)
        if not 0 <= index < n:
            raise IndexError(f"frame {index} is out of range; valid indices: 0..{n - 1}")
        hot = self.store.cache.hot
        with self._lock:
            hits = hot.stats().hits
            warm = self.store.cache.warm.peek(self.store.groups.group_of(index))
            start = time.perf_counter()
            frame = self.store[index]
            fetched = time.perf_counter()
            tier: Tier = "hot" if hot.stats().hits > hits else "warm" if warm else "cold"
        data = encode(frame, fmt)
        done = time.perf_counter()
        served = ServedFrame(
            index, data, MEDIA_TYPES[fmt], tier, self.timestamp(index),
            (fetched - start) * 1e3, (done - fetched) * 1e3,
        )  # fmt: skip
        with self._figures:
            self._served[tier] += 1
            self._recent_tiers.append(tier)
            self._fetch_ms.append(served.fetch_ms)
            self._encode_ms.append(served.encode_ms)
        return served

    def stats(self) -> dict[str, Any]:
        """JSON-ready figures: the store's tiers and what this server served.

        Keys: ``tiers`` (``hot`` and ``warm``: hits, misses, hit_rate, bytes,
        capacity_bytes, entries, evictions; ``cold``: reads and file bytes), ``served``
        (frames per tier), ``recent`` (tiers of the last frames, oldest first),
        ``fetch_ms`` and ``encode_ms`` (last, mean, p95 over the last requests).
        """
        tiers = self.store.cache_stats()
        cold = tiers.pop("cold")
        out: dict[str, Any] = {name: s.to_dict() for name, s in tiers.items()}
        out["cold"] = {"reads": cold.hits, "bytes": cold.bytes}
        with self._figures:
            fetch, enc = list(self._fetch_ms), list(self._encode_ms)
            served = {t: self._served.get(t, 0) for t in ("hot", "warm", "cold")}
            recent = list(self._recent_tiers)
        return {
            "tiers": out,
            "served": served,
            "requests": sum(served.values()),
            "recent": recent,
            "fetch_ms": _summary(fetch),
            "encode_ms": _summary(enc),
        }


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "last": round(values[-1], 3) if values else 0.0,
        "mean": round(sum(values) / len(values), 3) if values else 0.0,
        "p95": round(percentile(values, 95), 3),
    }
