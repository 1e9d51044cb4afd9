"""The tiered cache in front of a store: hot decoded frames, warm group headers.

- **hot**: decoded frames keyed by frame id, bounded in bytes.
- **warm**: hyperframe headers (parsed, validated) by group id, bounded by their bytes
  (records are decoded where they lie in LMDB's map: a copy cost more than it saved).
- **cold**: LMDB's memory map; the store counts its reads (see ``FrameStore.cache_stats``).

Each tier is a :class:`ByteCache` with a replacement policy: ``"lru"`` or ``"s3fifo"``
(S3-FIFO: a small probationary FIFO, a main FIFO with re-insertion of entries used since
they were queued, and a ghost list of keys recently evicted from the small queue).
Decoding a frame's hyperframe yields its neighbours cheaply, so the store puts a whole
decoded group into the hot tier; S3-FIFO keeps those neighbours from pushing out frames
used again and again. Measured in ``benchmarks/cache_policies.py``, which chose it.

Example:
    >>> cache = make_cache("s3fifo", capacity_bytes=1 << 20)
    >>> cache.put(7, b"x" * 100, 100)
    >>> cache.get(7)[:3], cache.stats().hits
    (b'xxx', 1)
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ..io.base import CacheTier

Policy = Literal["lru", "s3fifo"]
POLICIES: tuple[Policy, ...] = ("lru", "s3fifo")
DEFAULT_POLICY: Policy = "s3fifo"

V = TypeVar("V")


@dataclass(frozen=True)
class CacheStats:
    """One tier's counters: lookups that hit or missed, what it holds, what it evicted."""

    hits: int = 0
    misses: int = 0
    bytes: int = 0
    capacity_bytes: int = 0
    entries: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": round(self.hit_rate, 6),
            "bytes": self.bytes,
            "capacity_bytes": self.capacity_bytes,
            "entries": self.entries,
            "evictions": self.evictions,
        }

    def tier(self, name: str) -> CacheTier:
        """These counters as the tier ``name`` of a run's figures (what monitors show)."""
        return CacheTier(
            name, self.hits, self.misses, self.bytes, self.capacity_bytes, self.entries,
            self.evictions,
        )  # fmt: skip


class ByteCache(Generic[V]):
    """A thread-safe key -> value cache bounded by the sum of the values' sizes.

    Subclasses implement the policy in ``_touch``, ``_insert`` and ``_evict_one``.
    A value larger than the whole capacity is not stored.
    """

    def __init__(self, capacity_bytes: int) -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int):
            raise TypeError(f"capacity_bytes must be an int, got {capacity_bytes!r}")
        if capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be >= 0, got {capacity_bytes}")
        self.capacity = capacity_bytes
        self._values: dict[Any, tuple[V, int]] = {}
        self._lock = threading.Lock()
        self._used = self._hits = self._misses = self._evictions = 0

    def get(self, key: Any) -> V | None:
        """The value of ``key`` (counted as a hit), or ``None`` (counted as a miss)."""
        with self._lock:
            item = self._values.get(key)
            if item is None:
                self._misses += 1
                return None
            self._hits += 1
            self._touch(key)
            return item[0]

    def peek(self, key: Any) -> bool:
        """Whether ``key`` is held, without counting or touching it."""
        with self._lock:
            return key in self._values

    def put(self, key: Any, value: V, nbytes: int, *, expected: bool = False) -> None:
        """Hold ``value`` (of ``nbytes``), evicting by the policy to make room.

        ``expected=True`` marks a value read ahead, about to be used: S3-FIFO then treats
        it as used once, so it is not dropped from the small queue before its turn.
        """
        if nbytes > self.capacity:
            return
        with self._lock:
            if key in self._values:
                self._used += nbytes - self._values[key][1]
                self._values[key] = (value, nbytes)
                self._touch(key)
            else:
                self._values[key] = (value, nbytes)
                self._used += nbytes
                self._insert(key)
                if expected:
                    self._touch(key)
            while self._used > self.capacity:
                victim = self._evict_one()
                _, size = self._values.pop(victim)
                self._used -= size
                self._evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._used = 0
            self._reset()

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self._hits, self._misses, self._used, self.capacity, len(self._values),
                self._evictions,
            )  # fmt: skip

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: Any) -> bool:
        return self.peek(key)

    # policy hooks, called under the lock
    def _touch(self, key: Any) -> None:
        raise NotImplementedError

    def _insert(self, key: Any) -> None:
        raise NotImplementedError

    def _evict_one(self) -> Any:
        raise NotImplementedError

    def _reset(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity_bytes={self.capacity}, bytes={self._used}, "
            f"entries={len(self._values)})"
        )


class LRUCache(ByteCache[V]):
    """Least recently used goes first."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._order: OrderedDict[Any, None] = OrderedDict()

    def _touch(self, key: Any) -> None:
        self._order.move_to_end(key)

    def _insert(self, key: Any) -> None:
        self._order[key] = None

    def _evict_one(self) -> Any:
        key, _ = self._order.popitem(last=False)
        return key

    def _reset(self) -> None:
        self._order.clear()


class S3FIFOCache(ByteCache[V]):
    """S3-FIFO: new keys enter a small FIFO (``small_fraction`` of the bytes); a key used
    again before it leaves moves to the main FIFO, otherwise it is dropped and remembered
    in a ghost list. A key found in the ghost list goes straight to main. Main re-queues
    keys used since they were queued (frequency capped at 3) instead of evicting them.
    """

    def __init__(self, capacity_bytes: int, *, small_fraction: float = 0.1) -> None:
        super().__init__(capacity_bytes)
        if not 0 < small_fraction < 1:
            raise ValueError(f"small_fraction must be in (0, 1), got {small_fraction}")
        self.small_fraction = small_fraction
        self._small: deque[Any] = deque()
        self._main: deque[Any] = deque()
        self._where: dict[Any, bool] = {}  # key -> in small
        self._freq: dict[Any, int] = {}
        self._small_bytes = 0
        self._ghost: OrderedDict[Any, None] = OrderedDict()

    def _touch(self, key: Any) -> None:
        self._freq[key] = min(self._freq.get(key, 0) + 1, 3)

    def _insert(self, key: Any) -> None:
        self._freq[key] = 0
        if key in self._ghost:
            del self._ghost[key]
            self._main.append(key)
            self._where[key] = False
        else:
            self._small.append(key)
            self._where[key] = True
            self._small_bytes += self._values[key][1]

    def _evict_one(self) -> Any:
        while True:
            if self._small and (
                self._small_bytes > self.small_fraction * self.capacity or not self._main
            ):
                key = self._small.popleft()
                self._small_bytes -= self._values[key][1]
                if self._freq[key] > 0:
                    self._freq[key] = 0
                    self._main.append(key)
                    self._where[key] = False
                    continue
                self._remember(key)
                return self._forget(key)
            key = self._main.popleft()
            if self._freq[key] > 0:
                self._freq[key] -= 1
                self._main.append(key)
                continue
            return self._forget(key)

    def _remember(self, key: Any) -> None:
        self._ghost[key] = None
        limit = max(len(self._main), 16)
        while len(self._ghost) > limit:
            self._ghost.popitem(last=False)

    def _forget(self, key: Any) -> Any:
        del self._where[key]
        del self._freq[key]
        return key

    def _reset(self) -> None:
        self._small.clear()
        self._main.clear()
        self._where.clear()
        self._freq.clear()
        self._ghost.clear()
        self._small_bytes = 0


def make_cache(policy: Policy, capacity_bytes: int) -> ByteCache[Any]:
    """A cache of ``policy`` (``"lru"`` or ``"s3fifo"``) holding up to ``capacity_bytes``.

    Raises:
        ValueError: an unknown policy.
    """
    if policy == "lru":
        return LRUCache(capacity_bytes)
    if policy == "s3fifo":
        return S3FIFOCache(capacity_bytes)
    raise ValueError(f"policy must be one of {list(POLICIES)}, got {policy!r}")


class TieredCache:
    """The hot (decoded frames) and warm (group headers) tiers of one store.

    Args:
        hot_bytes: the hot tier's capacity.
        warm_bytes: the warm tier's capacity.
        policy: the replacement policy of both tiers.
    """

    def __init__(self, *, hot_bytes: int, warm_bytes: int, policy: Policy = DEFAULT_POLICY) -> None:
        self.policy = policy
        self.hot: ByteCache[Any] = make_cache(policy, hot_bytes)
        self.warm: ByteCache[Any] = make_cache(policy, warm_bytes)

    def stats(self) -> dict[str, CacheStats]:
        return {"hot": self.hot.stats(), "warm": self.warm.stats()}

    def clear(self) -> None:
        self.hot.clear()
        self.warm.clear()

    def __repr__(self) -> str:
        return f"TieredCache(policy={self.policy!r}, hot={self.hot!r}, warm={self.warm!r})"
