"""The group header's reference check: linear in the records, and still refuses cycles."""

from __future__ import annotations

import time

import pytest

from hyperframes.errors import StoreCorrupt
from hyperframes.hyper.codec import group_header as fmt

META = {"dtype": "|u1", "shape": [2, 2, 1], "base": 0, "layout": "chain", "tier": "lossless"}


def _header(refs: list[int]) -> bytes:
    """A group header whose frame ``i`` refers to ``refs[i]`` (-1: raw); no payload."""
    records = [
        fmt.Record("raw", -1, 0, 0) if ref == -1 else fmt.Record("delta", ref, 0, 0) for ref in refs
    ]
    return fmt.pack(META, records, b"")


def _timed_parse(data: bytes) -> tuple[fmt.Header, float]:
    start = time.perf_counter()
    head = fmt.parse_header(data)
    return head, time.perf_counter() - start


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_the_longest_allowed_chain_parses_quickly(order: str) -> None:
    """Every frame refers to its neighbour: one chain of 65,536 records. The old check walked
    every chain from its start (quadratic: about 90 s here)."""
    n = fmt.MAX_FRAMES
    refs = [-1, *range(n - 1)] if order == "forward" else [*range(1, n), -1]
    data = _header(refs)
    head, seconds = _timed_parse(data)
    assert head.count == n
    assert seconds < 5.0, f"parsing a {n}-record chain took {seconds:.2f} s"  # quadratic: 62 s
    deepest = n - 1 if order == "forward" else 0
    assert head.chain(deepest)[0] == (0 if order == "forward" else n - 1)
    assert len(head.chain(deepest)) == n


def test_a_cycle_at_the_end_of_a_long_chain_is_refused_quickly() -> None:
    n = fmt.MAX_FRAMES
    refs = [*range(1, n), 0]  # 0 -> 1 -> ... -> n-1 -> 0: no raw frame at all
    refs[n // 2] = -1  # except that one frame is raw, so the back half reaches it...
    refs[-1] = n - 2  # ...and the last two frames refer to each other
    start = time.perf_counter()
    with pytest.raises(StoreCorrupt, match="references form a cycle"):
        fmt.parse_header(_header(refs))
    assert time.perf_counter() - start < 5.0  # generous: a loaded 2-core machine


@pytest.mark.parametrize(
    ("refs", "first_bad"),
    [
        ([1, 0], 0),  # two frames referring to each other
        ([-1, 2, 3, 1], 1),  # a loop that frame 0 is not part of
        ([-1, 0, 3, 4, 2], 2),  # a loop reached after a good frame
        ([2, -1, 3, 4, 5, 3], 0),  # a tail leading into a loop: its first frame is named
    ],
)
def test_cycles_are_refused_naming_the_first_frame_on_one(refs: list[int], first_bad: int) -> None:
    with pytest.raises(StoreCorrupt, match=f"frame {first_bad}'s references form a cycle"):
        fmt.parse_header(_header(refs))


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        ([-1, 1], r"frame 1 \(delta\) has a bad ref 1"),  # a self-reference
        ([-1, 2], r"frame 1's ref must be an int in -1..1, got 2"),  # past the end
        ([-1, -2], r"frame 1's ref must be an int in -1..1, got -2"),
    ],
)
def test_bad_references_are_refused(refs: list[int], message: str) -> None:
    records = [fmt.Record("raw", -1, 0, 0), fmt.Record("delta", refs[1], 0, 0)]
    with pytest.raises(StoreCorrupt, match=message):
        fmt.parse_header(fmt.pack(META, records, b""))


def test_branching_references_all_resolve() -> None:
    refs = [-1, 0, 0, 1, 1, 2, 5, -1, 7, 8]  # a tree under frame 0 and a chain under 7
    head = fmt.parse_header(_header(refs))
    assert head.chain(6) == [0, 2, 5, 6] and head.chain(9) == [7, 8, 9]
