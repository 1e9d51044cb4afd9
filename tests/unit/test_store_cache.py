"""The cache tiers: byte bounds, the two policies, their counters."""

from __future__ import annotations

import random

import pytest

from hyperframes.store.cache import LRUCache, S3FIFOCache, TieredCache, make_cache


@pytest.mark.parametrize("policy", ["lru", "s3fifo"])
def test_bytes_stay_bounded_and_stats_count(policy: str) -> None:
    cache = make_cache(policy, 1000)  # type: ignore[arg-type]
    rng = random.Random(0)
    for _ in range(5000):
        key = rng.randrange(100)
        if cache.get(key) is None:
            cache.put(key, key, rng.randrange(1, 120))
        assert cache.stats().bytes <= 1000
    stats = cache.stats()
    assert stats.hits + stats.misses == 5000
    assert 0 < stats.hit_rate < 1
    assert stats.evictions > 0
    assert stats.entries == len(cache)


@pytest.mark.parametrize("policy", ["lru", "s3fifo"])
def test_a_value_larger_than_the_cache_is_not_kept(policy: str) -> None:
    cache = make_cache(policy, 10)  # type: ignore[arg-type]
    cache.put("big", b"x", 11)
    assert cache.get("big") is None
    assert cache.stats().bytes == 0


def test_lru_evicts_the_least_recently_used() -> None:
    cache: LRUCache[int] = LRUCache(3)
    for k in (1, 2, 3):
        cache.put(k, k, 1)
    assert cache.get(1) == 1
    cache.put(4, 4, 1)
    assert 2 not in cache
    assert all(k in cache for k in (1, 3, 4))


def test_s3fifo_resists_a_scan() -> None:
    """Keys used twice survive a long one-off scan that would flush an LRU."""
    s3: S3FIFOCache[int] = S3FIFOCache(100)
    lru: LRUCache[int] = LRUCache(100)
    for cache in (s3, lru):
        for k in range(50):
            cache.put(k, k, 1)
            cache.get(k)
        for k in range(1000, 1200):  # the scan
            cache.put(k, k, 1)
    assert sum(k in s3 for k in range(50)) == 50
    assert sum(k in lru for k in range(50)) == 0


def test_s3fifo_ghost_hit_goes_straight_to_main() -> None:
    cache: S3FIFOCache[int] = S3FIFOCache(20, small_fraction=0.1)
    for k in range(40):
        cache.put(k, k, 1)
    assert 19 not in cache
    cache.put(19, 19, 1)  # recently evicted from small: a ghost, so into main
    for k in range(100, 130):
        cache.put(k, k, 1)
    assert 19 in cache  # main outlives the one-off keys passing through small
    assert 100 not in cache


def test_unknown_policy_and_bad_capacity() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        make_cache("mru", 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        LRUCache(-1)


def test_tiered_cache_reports_both_tiers() -> None:
    tiers = TieredCache(hot_bytes=10, warm_bytes=10, policy="lru")
    tiers.hot.put(1, "frame", 4)
    assert tiers.hot.get(1) == "frame"
    assert tiers.warm.get(1) is None
    stats = tiers.stats()
    assert (stats["hot"].hits, stats["warm"].misses, stats["hot"].bytes) == (1, 1, 4)
    tiers.clear()
    assert tiers.stats()["hot"].bytes == 0
